//! The dissector: PDUs in, a [`Report`] out. No printing, no process exit.
//!
//! Per PDU: hex → [`Container::parse`] → MTU and split checks → either the CONTROL payload
//! (see `control.rs`) or the core's [`Assembler`]. A completed message is decrypted with the
//! session key if it can be, then parsed as a command (see `message.rs`).
//!
//! Decoding never stops early: a malformed PDU is recorded as an error and the next PDU is
//! decoded as usual. A malformed FIRST/SUBSEQUENT drops its transaction, as a receiver would.

use std::collections::BTreeMap;

use blerpc_proto::assemble::{AssembleError, Assembler, AssemblerConfig};
use blerpc_proto::split;
use blerpc_proto::wire::WireError;
use blerpc_proto::wire::container::{
    ATT_OVERHEAD, Container, ContainerKind, HEADER_LEN, MAX_CHUNK_LEN, MAX_LONG_CONTAINER_LEN,
};

use crate::input::{PduInput, parse_hex};
use crate::report::{
    ContainerReport, Diagnostic, Dir, IncompleteReport, Layer, PduReport, Report, SplitReport,
};

/// The default ATT MTU: what every reference central requests.
pub const DEFAULT_MTU: usize = 247;

/// Transactions the dissector can follow at once: one per possible tid.
const SLOTS: usize = 256;

/// What to dissect with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// ATT MTU the capture was taken at; containers must fit `mtu - 3` bytes (LONG containers,
    /// which only links without an ATT MTU carry, 16 KiB).
    pub mtu: usize,
    /// The direction every PDU travelled in; `None` infers it per PDU where it matters: an
    /// empty TIMEOUT is a request and any other a response, an empty or all-zero-limits 6-byte
    /// CAPABILITIES is a request and any other a response, and session frames are tried with
    /// both nonce directions.
    pub direction: Option<Dir>,
    /// The 16-byte session key, to decrypt session frames and check KX confirmations.
    pub key: Option<[u8; 16]>,
    /// Warnings make the report fail too ([`Report::ok`] is `false`).
    pub strict: bool,
}

impl Default for Options {
    /// ATT MTU 247 ([`DEFAULT_MTU`]), directions inferred, no key, not strict.
    fn default() -> Self {
        Options {
            mtu: DEFAULT_MTU,
            direction: None,
            key: None,
            strict: false,
        }
    }
}

/// Dissects `inputs` in order and returns everything found. Never fails: what does not decode is
/// reported in [`Report::errors`].
pub fn dissect(inputs: &[PduInput], opts: &Options) -> Report {
    let mut d = Dissector {
        opts,
        // A capture may hold large-message transactions (LARGE FIRST, seq wrapping) and LONG
        // containers: follow them whatever was negotiated; memory grows only with the bytes
        // actually captured.
        assembler: Box::new(Assembler::new(AssemblerConfig {
            max_message_len: split::MAX_LARGE_MESSAGE_LEN,
            max_in_flight: SLOTS,
            large_messages: true,
            long_containers: true,
        })),
        tracks: BTreeMap::new(),
        step1: None,
        last_counter: [None; 2],
        report: Report {
            ok: true,
            mtu: opts.mtu,
            direction: opts.direction,
            pdus: Vec::new(),
            messages: Vec::new(),
            incomplete: Vec::new(),
            errors: Vec::new(),
            warnings: Vec::new(),
        },
    };
    for (index, input) in inputs.iter().enumerate() {
        d.pdu(index, input);
    }
    d.finish()
}

/// A transaction being reassembled, as far as the report needs to know.
struct Track {
    total: usize,
    received: usize,
    /// The next seq (mod 256 in a LARGE FIRST transaction; 256 ends a classic one).
    next_seq: u16,
    /// Started by a LARGE FIRST container.
    large: bool,
    /// Started by a LONG container (long-container extension: 16 KiB containers, no MTU).
    long: bool,
    pdus: Vec<usize>,
}

/// A step 1 key seen earlier, for checking the step 2 signature.
pub(crate) struct SeenStep1 {
    pub(crate) pdu: usize,
    pub(crate) central_public: [u8; 32],
}

/// The state of one dissection: the core's assembler, what the report needs to know of each
/// transaction in progress, and the report being built.
pub(crate) struct Dissector<'o> {
    pub(crate) opts: &'o Options,
    assembler: Box<Assembler<Vec<u8>, SLOTS>>,
    tracks: BTreeMap<u8, Track>,
    pub(crate) step1: Option<SeenStep1>,
    /// Last decrypted counter per direction ([`Dir::index`]).
    pub(crate) last_counter: [Option<u32>; 2],
    pub(crate) report: Report,
}

/// Where a diagnostic points, before it gets its message.
#[derive(Clone, Copy, Default)]
pub(crate) struct At {
    pub(crate) pdu: Option<usize>,
    pub(crate) tid: Option<u8>,
    pub(crate) message: Option<usize>,
}

impl At {
    fn pdu(pdu: usize, tid: Option<u8>) -> Self {
        At {
            pdu: Some(pdu),
            tid,
            message: None,
        }
    }
}

pub(crate) fn diag(
    at: At,
    layer: Layer,
    field: Option<&str>,
    offset: Option<usize>,
    msg: String,
) -> Diagnostic {
    Diagnostic {
        pdu: at.pdu,
        tid: at.tid,
        message_index: at.message,
        layer,
        field: field.map(str::to_owned),
        offset,
        message: msg,
    }
}

/// Turns a core [`WireError`] into a diagnostic, moving its offset by `base` (the position of the
/// parsed buffer within the PDU or message) and naming the unit with `unit`.
pub(crate) fn wire_diag(
    at: At,
    layer: Layer,
    e: &WireError,
    base: usize,
    unit: &str,
) -> Diagnostic {
    // The error's `u32` numbers, widened back (lossless here).
    let wide = |n: u32| usize::try_from(n).unwrap_or(usize::MAX);
    let bytes = |n: u32| {
        if n == 1 {
            "1 byte".to_owned()
        } else {
            format!("{n} bytes")
        }
    };
    let place = |offset: u32| {
        if base == 0 {
            format!("at byte {offset}{unit}")
        } else {
            format!(
                "at byte {}{unit} (payload byte {offset})",
                wide(offset).saturating_add(base)
            )
        }
    };
    match *e {
        WireError::Truncated {
            field,
            offset,
            needed,
            available,
        } => diag(
            at,
            layer,
            Some(field),
            Some(wide(offset).saturating_add(base)),
            format!(
                "field `{field}` {} is truncated: needs {}, {available} available",
                place(offset),
                bytes(needed)
            ),
        ),
        WireError::InvalidValue {
            field,
            offset,
            value,
        } => diag(
            at,
            layer,
            Some(field),
            Some(wide(offset).saturating_add(base)),
            format!(
                "field `{field}` {} has invalid value {value:#x}",
                place(offset)
            ),
        ),
        WireError::TooLong { field, .. } => diag(at, layer, Some(field), None, e.to_string()),
        _ => diag(at, layer, None, None, e.to_string()),
    }
}

impl Dissector<'_> {
    pub(crate) fn error(&mut self, d: Diagnostic) {
        if let Some(pdu) = d.pdu
            && let Some(report) = self.report.pdus.get_mut(pdu)
            && report.error.is_none()
        {
            report.error = Some(d.clone());
        }
        self.report.errors.push(d);
    }

    pub(crate) fn warn(&mut self, d: Diagnostic) {
        self.report.warnings.push(d);
    }

    fn pdu(&mut self, index: usize, input: &PduInput) {
        self.report.pdus.push(PduReport {
            index,
            source: input.source.clone(),
            hex: String::new(),
            len: 0,
            container: None,
            split: None,
            control: None,
            completes_message: None,
            error: None,
        });
        let bytes = match parse_hex(&input.text) {
            Ok(bytes) => bytes,
            Err(e) => {
                let msg = format!("{}: {e}", input.source);
                self.error(diag(
                    At::pdu(index, None),
                    Layer::Hex,
                    None,
                    e.position(),
                    msg,
                ));
                return;
            }
        };
        if let Some(p) = self.report.pdus.get_mut(index) {
            p.hex = hex::encode(&bytes);
            p.len = bytes.len();
        }
        let c = match Container::parse(&bytes) {
            Ok(c) => c,
            Err(e) => {
                let d = wire_diag(At::pdu(index, None), Layer::Container, &e, 0, "");
                self.error(d);
                return;
            }
        };
        self.container(index, &bytes, &c);
    }

    fn container(&mut self, index: usize, bytes: &[u8], c: &Container<'_>) {
        let at = At::pdu(index, Some(c.tid));
        let payload_len = c.payload.len();
        let trailing = bytes.len().saturating_sub(c.emitted_len());
        let flags = bytes.get(2).copied().unwrap_or_default();
        if let Some(p) = self.report.pdus.get_mut(index) {
            p.container = Some(ContainerReport {
                tid: c.tid,
                seq: c.seq,
                kind: c.kind.as_str(),
                flags,
                control_cmd: match c.kind {
                    ContainerKind::Control(cmd) => Some(cmd.as_str()),
                    _ => None,
                },
                total_length: match c.kind {
                    ContainerKind::First { total_length } => Some(u32::from(total_length)),
                    ContainerKind::LargeFirst { total_length } => Some(total_length),
                    _ => None,
                },
                payload_len,
                payload_hex: hex::encode(c.payload),
                trailing,
            });
        }
        if trailing > 0 {
            self.warn(diag(
                at,
                Layer::Container,
                Some("payload"),
                Some(c.emitted_len()),
                format!("{trailing} bytes after the payload (receivers ignore them)"),
            ));
        }
        // Bits 1..0 the core ignores: those that differ from the flags this container is emitted
        // with (bit 0 of a FIRST is the LARGE FIRST marker, bit 1 of a LONG one its length).
        let reserved = (flags ^ c.flags()) & 0b11;
        if reserved != 0 {
            self.warn(diag(
                at,
                Layer::Container,
                Some("flags"),
                Some(2),
                format!("reserved flag bits 1..0 are {reserved:#04b}, should be 0 (ignored)"),
            ));
        }
        if c.seq != 0
            && matches!(
                c.kind,
                ContainerKind::First { .. }
                    | ContainerKind::LargeFirst { .. }
                    | ContainerKind::Control(_)
            )
        {
            self.warn(diag(
                at,
                Layer::Container,
                Some("seq"),
                Some(1),
                format!(
                    "seq is {} in a {} container, should be 0",
                    c.seq,
                    c.kind.as_str()
                ),
            ));
        }

        // A LONG container travels only on links without an ATT MTU (long-container extension).
        let max = if c.is_long() {
            MAX_LONG_CONTAINER_LEN
        } else {
            split::effective_mtu(self.opts.mtu)
        };
        let fits = bytes.len() <= max;
        if !fits {
            let why = if c.is_long() {
                format!("a LONG container has at most {max} bytes")
            } else {
                format!("ATT MTU {} allows {max} (MTU - 3)", self.opts.mtu)
            };
            self.warn(diag(
                at,
                Layer::Mtu,
                None,
                None,
                format!("container is {} bytes; {why}", bytes.len()),
            ));
        }
        let split = SplitReport {
            container_len: bytes.len(),
            max_container_len: max,
            long: c.is_long(),
            fits,
            position: None,
            containers: None,
            expected_chunk: None,
            received: None,
            total_length: None,
            sender_mtu_hint: None,
        };
        let split = match c.kind {
            ContainerKind::First { total_length } => {
                self.first(at, index, c, usize::from(total_length), false, split)
            }
            ContainerKind::LargeFirst { total_length } => {
                self.first(at, index, c, total_length as usize, true, split)
            }
            ContainerKind::Subsequent => self.subsequent(at, index, c, split),
            ContainerKind::Control(cmd) => {
                let control = self.control(at, cmd, c.payload);
                if let Some(p) = self.report.pdus.get_mut(index) {
                    p.control = control;
                }
                split
            }
            ContainerKind::Unknown => {
                self.warn(diag(
                    at,
                    Layer::Container,
                    Some("flags"),
                    Some(2),
                    "undefined container type 0b10; receivers ignore it".to_owned(),
                ));
                split
            }
        };
        if let Some(p) = self.report.pdus.get_mut(index) {
            p.split = Some(split);
        }
    }

    /// The number of containers a splitter at this MTU uses (or, `long`, a long-container
    /// splitter), or a warning if it cannot split it.
    fn containers_for(&mut self, at: At, total: usize, large: bool, long: bool) -> Option<usize> {
        let count = if long {
            long_container_count(total, large)
        } else if large {
            large_container_count(total, self.opts.mtu)
        } else {
            split::container_count(total, self.opts.mtu)
        };
        match count {
            Ok(n) => Some(n),
            Err(e) => {
                self.warn(diag(
                    at,
                    Layer::Mtu,
                    Some("total_length"),
                    Some(3),
                    format!("{e}: no splitter at ATT MTU {} sends this", self.opts.mtu),
                ));
                None
            }
        }
    }

    fn first(
        &mut self,
        at: At,
        index: usize,
        c: &Container<'_>,
        total: usize,
        large: bool,
        mut split: SplitReport,
    ) -> SplitReport {
        let tid = c.tid;
        let long = c.is_long();
        let cap = if long {
            MAX_LONG_CONTAINER_LEN - c.header_len()
        } else if large {
            split::large_first_chunk_capacity(self.opts.mtu)
        } else {
            split::first_chunk_capacity(self.opts.mtu)
        };
        if let Some(old) = self.tracks.remove(&tid) {
            self.warn(diag(
                at,
                Layer::Assembly,
                Some("tid"),
                Some(0),
                format!(
                    "FIRST restarts tid {tid:#04x}: the transaction in progress ({}/{} bytes, PDUs {}) is dropped",
                    old.received,
                    old.total,
                    list(&old.pdus)
                ),
            ));
        }
        split.position = Some(1);
        split.total_length = Some(total);
        split.containers = self.containers_for(at, total, large, long);
        let fits = self.check_chunk(at, c, &mut split, total, cap, || {
            format!("total_length is {total}: a FIRST container cannot carry more than the whole message")
        });
        if !fits {
            return split;
        }
        self.track_feed(
            at,
            index,
            c,
            Track {
                total,
                received: 0,
                next_seq: 0,
                large,
                long,
                pdus: Vec::new(),
            },
            split,
        )
    }

    fn subsequent(
        &mut self,
        at: At,
        index: usize,
        c: &Container<'_>,
        mut split: SplitReport,
    ) -> SplitReport {
        let tid = c.tid;
        split.position = Some(usize::from(c.seq) + 1);
        let Some(track) = self.tracks.remove(&tid) else {
            // The assembler reports UnknownTransaction; let it say so.
            return self.feed_untracked(at, c, split);
        };
        // Counted, not read from seq: a LARGE FIRST transaction's seq wraps.
        split.position = Some(track.pdus.len() + 1);
        split.total_length = Some(track.total);
        split.containers = if track.long {
            long_container_count(track.total, track.large).ok()
        } else if track.large {
            large_container_count(track.total, self.opts.mtu).ok()
        } else {
            split::container_count(track.total, self.opts.mtu).ok()
        };
        let remaining = track.total.saturating_sub(track.received);
        if u16::from(c.seq) == track.next_seq {
            let cap = if track.long {
                MAX_LONG_CONTAINER_LEN - HEADER_LEN - 1
            } else {
                split::subsequent_chunk_capacity(self.opts.mtu)
            };
            let fits = self.check_chunk(at, c, &mut split, remaining, cap, || {
                format!(
                    "only {remaining} of total_length {} remain: transaction {tid:#04x} dropped",
                    track.total
                )
            });
            if !fits {
                return split;
            }
        }
        self.track_feed(at, index, c, track, split)
    }

    /// Records the chunk a splitter puts in this container (at most `cap` of the `remaining`
    /// message bytes) and checks that the container carries no more than `remaining`; if it
    /// does, the transaction is dropped with an error on `payload_len` that `why` finishes, and
    /// the result is `false`.
    fn check_chunk(
        &mut self,
        at: At,
        c: &Container<'_>,
        split: &mut SplitReport,
        remaining: usize,
        cap: usize,
        why: impl FnOnce() -> String,
    ) -> bool {
        let chunk = c.payload.len();
        split.expected_chunk = Some(remaining.min(cap));
        split.sender_mtu_hint = mtu_hint(split, chunk, remaining, c.header_len());
        if chunk <= remaining {
            return true;
        }
        self.assembler.discard(c.tid);
        // `payload_len` is the header's last field: one byte, or two in a LONG container.
        let offset = c.header_len() - 1 - usize::from(c.is_long());
        self.error(diag(
            at,
            Layer::Container,
            Some("payload_len"),
            Some(offset),
            format!(
                "field `payload_len` at byte {offset} is {chunk} but {}",
                why()
            ),
        ));
        false
    }

    fn feed_untracked(&mut self, at: At, c: &Container<'_>, split: SplitReport) -> SplitReport {
        if let Err(e) = self.assembler.feed(c) {
            self.assemble_error(at, &e);
        }
        split
    }

    fn assemble_error(&mut self, at: At, e: &AssembleError) {
        match *e {
            AssembleError::SequenceGap { tid, expected, got } => self.error(diag(
                at,
                Layer::Assembly,
                Some("seq"),
                Some(1),
                format!(
                    "field `seq` at byte 1 is {got}, expected {expected}: transaction {tid:#04x} dropped"
                ),
            )),
            AssembleError::UnknownTransaction { tid, seq } => self.warn(diag(
                at,
                Layer::Assembly,
                Some("tid"),
                Some(0),
                format!(
                    "SUBSEQUENT seq {seq} for tid {tid:#04x}, which has no FIRST in the input (capture started mid-message?); ignored"
                ),
            )),
            _ => self.error(diag(at, Layer::Assembly, None, None, e.to_string())),
        }
    }

    /// Feeds a FIRST or SUBSEQUENT container to the core assembler and keeps `track` in step.
    fn track_feed(
        &mut self,
        at: At,
        index: usize,
        c: &Container<'_>,
        mut track: Track,
        mut split: SplitReport,
    ) -> SplitReport {
        match self.assembler.feed(c) {
            Err(e) => {
                self.assemble_error(at, &e);
                split
            }
            Ok(done) => {
                track.received = (track.received + c.payload.len()).min(track.total);
                track.next_seq = if track.large {
                    u16::from(c.seq.wrapping_add(1))
                } else {
                    u16::from(c.seq) + 1
                };
                track.pdus.push(index);
                split.received = Some(track.received);
                if let Some(done) = done {
                    let message = self.assembler.message(done).to_vec();
                    self.assembler.release(done);
                    self.message(c.tid, track.pdus, index, &message);
                } else {
                    self.tracks.insert(c.tid, track);
                }
                split
            }
        }
    }

    fn finish(mut self) -> Report {
        let tracks = std::mem::take(&mut self.tracks);
        for (tid, t) in tracks {
            let text = format!(
                "incomplete: {}/{} bytes, waiting for seq {} (PDUs {})",
                t.received,
                t.total,
                t.next_seq,
                list(&t.pdus)
            );
            let at = At {
                tid: Some(tid),
                ..At::default()
            };
            self.warn(diag(at, Layer::Assembly, None, None, text));
            self.report.incomplete.push(IncompleteReport {
                tid,
                received: t.received,
                total_length: t.total,
                next_seq: t.next_seq,
                pdus: t.pdus,
            });
        }
        let r = &mut self.report;
        r.ok = r.errors.is_empty() && (!self.opts.strict || r.warnings.is_empty());
        self.report
    }
}

/// The ATT MTU whose splitter fills a container with exactly `chunk` bytes, when `chunk` is not
/// what a splitter at the given MTU sends and is not the message's last chunk.
fn mtu_hint(split: &SplitReport, chunk: usize, remaining: usize, header: usize) -> Option<usize> {
    let mismatch = split.expected_chunk.is_some_and(|e| e != chunk);
    (mismatch && chunk < remaining && chunk < MAX_CHUNK_LEN && chunk > 0)
        .then(|| chunk + header + ATT_OVERHEAD)
}

/// Containers a large-message splitter at this MTU uses: classic when the message fits.
fn large_container_count(total: usize, mtu: usize) -> Result<usize, split::SplitError> {
    split::SplitCursor::new_large(0, total, mtu).map(|c| c.containers_left())
}

/// Containers a long-container splitter uses (16 KiB containers, whatever the MTU).
fn long_container_count(total: usize, large: bool) -> Result<usize, split::SplitError> {
    split::SplitCursor::new_long(0, total, large).map(|c| c.containers_left())
}

/// `#0, #1, #2`.
fn list(pdus: &[usize]) -> String {
    pdus.iter()
        .map(|i| format!("#{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}
