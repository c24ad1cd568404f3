//! What both roles share: the plumbing between the link and a role's protocol logic.
//!
//! ```text
//!  handle_input(pdu) ──> accept ──> Container ──> role: control? ──> role's handlers
//!                                        └─ data ──> feed ──> Assembler (slots) + Partials (deadlines)
//!  role's replies ──> ControlQueue (setup, ERROR: never behind data) ─┐
//!  role's messages ──> enqueue ──> Outbox (sealed once, split lazily) ─┴─> poll_transmit(pdu)
//!  role's records ──> events Ring ──> next_record (releases the slot the last event borrowed)
//! ```
//!
//! An [`Endpoint`] owns the reassembly slots and the deadlines of partial transactions, the
//! outbox and the priority control queue, the event queue, the transaction-id counter and which
//! extensions are in force. [`Central`](super::Central) and [`Peripheral`](super::Peripheral)
//! each hold one and keep only their own state machines.

use core::ops::Range;
use core::time::Duration;

use super::events::{Ring, Warning};
use super::framing::{self, EnqueueError, Payload};
use super::outbox::{ControlQueue, Outbox};
use super::{EVENT_HEADROOM, EVENT_QUEUE_LEN, EventQueueFull};
use crate::Instant;
use crate::assemble::{AssembleError, Assembler, AssemblerConfig, Completed};
use crate::buf::Buffer;
use crate::crypto::Aead;
use crate::session::Session;
use crate::wire::command::CommandType;
use crate::wire::container::{Container, ContainerKind, ControlCmd};

/// A 256-bit set of transaction ids.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TidSet([u64; 4]);

impl TidSet {
    pub(crate) fn insert(&mut self, tid: u8) {
        if let Some(w) = self.0.get_mut(usize::from(tid >> 6)) {
            *w |= 1 << (tid & 63);
        }
    }
    pub(crate) fn remove(&mut self, tid: u8) -> bool {
        let had = self.contains(tid);
        if let Some(w) = self.0.get_mut(usize::from(tid >> 6)) {
            *w &= !(1 << (tid & 63));
        }
        had
    }
    pub(crate) fn contains(&self, tid: u8) -> bool {
        self.0
            .get(usize::from(tid >> 6))
            .is_some_and(|w| w & (1 << (tid & 63)) != 0)
    }
    pub(crate) fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }
}

/// How long a partial transaction may take: `timeout` from its FIRST container, plus the time
/// its announced length takes at `min_rate` bytes per second. The deadline runs from the FIRST
/// container and never moves, so a peer that trickles one container now and then cannot hold a
/// reassembly buffer forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReassemblyDeadline {
    pub(crate) timeout: Duration,
    /// Bytes per second a transaction must at least average (0: no allowance for length).
    pub(crate) min_rate: u32,
}

impl ReassemblyDeadline {
    /// The deadline of a transaction of `total` bytes whose FIRST container arrived at `now`.
    pub(crate) fn of(&self, now: Instant, total: usize) -> Instant {
        let allowance = match self.min_rate {
            0 => Duration::ZERO,
            rate => {
                let micros = (total as u64).saturating_mul(1_000_000) / u64::from(rate);
                Duration::from_micros(micros)
            }
        };
        now + self.timeout.saturating_add(allowance)
    }
}

/// The deadline of each partially reassembled transaction, so that a transaction abandoned
/// (or trickled) by the peer cannot hold a reassembly slot forever.
#[derive(Debug)]
pub(crate) struct Partials<const SLOTS: usize> {
    entries: [Option<(u8, Instant)>; SLOTS],
}

impl<const SLOTS: usize> Partials<SLOTS> {
    pub(crate) fn new() -> Self {
        Partials {
            entries: [None; SLOTS],
        }
    }
    /// Records that `tid` started (or restarted) and must complete by `deadline`.
    pub(crate) fn start(&mut self, tid: u8, deadline: Instant) {
        if let Some(e) = self
            .entries
            .iter_mut()
            .find(|e| matches!(e, Some((t, _)) if *t == tid))
        {
            *e = Some((tid, deadline));
        } else if let Some(e) = self.entries.iter_mut().find(|e| e.is_none()) {
            *e = Some((tid, deadline));
        }
    }
    pub(crate) fn remove(&mut self, tid: u8) {
        for e in self.entries.iter_mut() {
            if matches!(e, Some((t, _)) if *t == tid) {
                *e = None;
            }
        }
    }
    pub(crate) fn clear(&mut self) {
        self.entries = [None; SLOTS];
    }
    /// The earliest deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.entries.iter().flatten().map(|(_, t)| *t).min()
    }
    /// Removes and returns one transaction whose deadline has passed.
    pub(crate) fn pop_expired(&mut self, now: Instant) -> Option<u8> {
        let e = self
            .entries
            .iter_mut()
            .find(|e| matches!(e, Some((_, t)) if *t <= now))?;
        e.take().map(|(tid, _)| tid)
    }
}

/// A reference to a message (decrypted in place) in a reassembly slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MsgRef {
    pub(crate) done: Completed,
    /// Offset of the data in the slot (messages are at most 16 MiB, so `u32` suffices and keeps
    /// queued events small on an MCU).
    pub(crate) start: u32,
    pub(crate) len: u32,
}

impl MsgRef {
    pub(crate) fn new(done: Completed, start: usize, len: usize) -> Self {
        MsgRef {
            done,
            start: u32::try_from(start).unwrap_or(u32::MAX),
            len: u32::try_from(len).unwrap_or(0),
        }
    }
    pub(crate) fn range(&self) -> Range<usize> {
        let start = self.start as usize;
        start..start.saturating_add(self.len as usize)
    }
}

/// A role's queued event: `Copy`, small, and borrowing message bytes only by [`MsgRef`].
pub(crate) trait Record: Copy {
    /// The record that carries a warning.
    fn warning(warning: Warning) -> Self;
    /// The reassembled message the record refers to, if any.
    fn message(&self) -> Option<MsgRef>;
}

/// The plumbing both roles share (see the [module docs](self)). `CTRL` is the largest payload
/// the priority control queue holds (the peripheral's 133-byte step 2; the central's controls
/// are small).
#[derive(Debug)]
pub(crate) struct Endpoint<A: Buffer, O: Buffer, E: Record, const SLOTS: usize, const CTRL: usize> {
    pub(crate) assembler: Assembler<A, SLOTS>,
    pub(crate) partials: Partials<SLOTS>,
    pub(crate) outbox: Outbox<O>,
    pub(crate) controls: ControlQueue<CTRL>,
    events: Ring<E, EVENT_QUEUE_LEN>,
    /// The message the last event borrowed, released by the next `next_record`.
    pending_release: Option<MsgRef>,
    dropped_warnings: u32,
    /// Messages dropped while reassembling since the application last took the count.
    pub(crate) reassembly_drops: u32,
    /// The next transaction id this side sends under.
    pub(crate) next_tid: u8,
    /// The large-message extension is in force (both sides announced it).
    pub(crate) large: bool,
    /// The long-container extension is in force (both sides announced it).
    pub(crate) long: bool,
}

impl<A, O, E, const SLOTS: usize, const CTRL: usize> Endpoint<A, O, E, SLOTS, CTRL>
where
    A: Buffer + Default,
    O: Buffer + Default,
    E: Record,
{
    pub(crate) fn new(assembler: AssemblerConfig, max_outbox_bytes: usize) -> Self {
        Endpoint {
            assembler: Assembler::new(assembler),
            partials: Partials::new(),
            outbox: Outbox::new(max_outbox_bytes),
            controls: ControlQueue::new(),
            events: Ring::new(),
            pending_release: None,
            dropped_warnings: 0,
            reassembly_drops: 0,
            next_tid: 0,
            large: false,
            long: false,
        }
    }

    /// Takes the buffer of the message the last record referred to (see
    /// [`Assembler::take_message`]), instead of leaving it to be released by the next call.
    pub(crate) fn take_pending(&mut self) -> Option<(A, Range<usize>)> {
        let msg = self.pending_release.take()?;
        Some((self.assembler.take_message(msg.done), msg.range()))
    }

    // ----- transaction ids ------------------------------------------------------------------

    /// A fresh transaction id (wrapping after 255, as the reference's counter does).
    pub(crate) fn alloc_tid(&mut self) -> u8 {
        let tid = self.next_tid;
        self.next_tid = self.next_tid.wrapping_add(1);
        tid
    }

    // ----- input ----------------------------------------------------------------------------

    /// Parses one PDU. `Err` (nothing consumed) when the event queue lacks the headroom a PDU
    /// may need; `Ok(None)` for a PDU that is dropped with a warning (not a container, or of the
    /// undefined type); otherwise the container for the role to handle.
    pub(crate) fn accept<'p>(
        &mut self,
        pdu: &'p [u8],
    ) -> Result<Option<Container<'p>>, EventQueueFull> {
        if self.events.free() < EVENT_HEADROOM {
            return Err(EventQueueFull);
        }
        match Container::parse(pdu) {
            Ok(c) if c.kind == ContainerKind::Unknown => {
                self.warn(Warning::UnknownContainerType { tid: c.tid });
                Ok(None)
            }
            Ok(c) => Ok(Some(c)),
            Err(e) => {
                self.warn(Warning::MalformedContainer(e));
                Ok(None)
            }
        }
    }

    /// Feeds a FIRST, LARGE FIRST or SUBSEQUENT container to the assembler; a FIRST that
    /// starts a transaction sets its deadline (see [`ReassemblyDeadline`]).
    pub(crate) fn feed(
        &mut self,
        now: Instant,
        container: &Container<'_>,
        deadline: ReassemblyDeadline,
    ) -> Result<Option<Completed>, AssembleError> {
        let tid = container.tid;
        let fed = self.assembler.feed(container);
        match (&fed, container.kind.total_length()) {
            (Ok(None), Some(total)) => self.partials.start(tid, deadline.of(now, total)),
            (Ok(None), None) => {}
            (Ok(Some(_)) | Err(_), _) => self.partials.remove(tid),
        }
        fed
    }

    /// Drops transaction `tid` if it is being reassembled: its buffer goes back and its
    /// deadline with it (a stale deadline would later cut a new transaction under the tid).
    pub(crate) fn discard_partial(&mut self, tid: u8) {
        self.assembler.discard(tid);
        self.partials.remove(tid);
    }

    /// Drops every partial transaction past its deadline, with a warning each; the buffer of
    /// each goes back.
    pub(crate) fn expire_partials(&mut self, now: Instant) {
        while let Some(tid) = self.partials.pop_expired(now) {
            self.assembler.discard(tid);
            self.warn(Warning::ReassemblyTimeout { tid });
        }
    }

    /// The earliest reassembly deadline.
    pub(crate) fn next_partial_deadline(&self) -> Option<Instant> {
        self.partials.next_deadline()
    }

    /// Reassembly limits in force from now on (the extensions agreed at CAPABILITIES).
    pub(crate) fn set_assembler_config(&mut self, config: AssemblerConfig) {
        self.assembler.set_config(config);
    }

    // ----- events ---------------------------------------------------------------------------

    /// Free slots in the event queue.
    pub(crate) fn events_free(&self) -> usize {
        self.events.free()
    }

    /// Queues a record. If the queue is full (only if the caller ignores [`EventQueueFull`]),
    /// the message the record refers to is released, so no slot leaks, and the record comes
    /// back for the role to answer for (a peripheral refuses the request with BUSY).
    pub(crate) fn push(&mut self, record: E) -> Result<(), E> {
        self.events.push(record).inspect_err(|r| {
            if let Some(msg) = r.message() {
                self.assembler.release(msg.done);
            }
        })
    }

    /// Queues a warning while the queue has room for the events that matter more; counts it
    /// in `dropped_warnings` otherwise.
    pub(crate) fn warn(&mut self, warning: Warning) {
        if matches!(
            warning,
            Warning::Assembly(_)
                | Warning::ReassemblyTimeout { .. }
                | Warning::ReassemblyBudget { .. }
        ) {
            self.reassembly_drops = self.reassembly_drops.saturating_add(1);
        }
        if self.events.free() > EVENT_HEADROOM {
            let _ = self.push(E::warning(warning));
        } else {
            self.dropped_warnings = self.dropped_warnings.saturating_add(1);
        }
    }

    /// Warnings not queued because the event queue was nearly full.
    pub(crate) fn dropped_warnings(&self) -> u32 {
        self.dropped_warnings
    }

    /// The next record. The message the previous one referred to is released first; the one
    /// this record refers to stays valid until the next call.
    pub(crate) fn next_record(&mut self) -> Option<E> {
        if let Some(prev) = self.pending_release.take() {
            self.assembler.release(prev.done);
        }
        let record = self.events.pop()?;
        self.pending_release = record.message();
        Some(record)
    }

    /// The whole reassembled (decrypted) message `msg` lives in.
    pub(crate) fn message(&self, msg: MsgRef) -> &[u8] {
        self.assembler.message(msg.done)
    }

    /// The data `msg` refers to.
    pub(crate) fn data(&self, msg: MsgRef) -> &[u8] {
        self.message(msg).get(msg.range()).unwrap_or(&[])
    }

    // ----- output ---------------------------------------------------------------------------

    /// Queues a command (header and data, sealed when `session` is given) under `tid`.
    pub(crate) fn enqueue<S: Aead, F: FnOnce(&mut [u8])>(
        &mut self,
        session: Option<&mut Session<S>>,
        tid: u8,
        kind: CommandType,
        name: &str,
        payload: Payload<'_, F>,
    ) -> Result<(), EnqueueError> {
        framing::enqueue_command(
            &mut self.outbox,
            session,
            self.large,
            tid,
            kind,
            name,
            payload,
        )
    }

    /// Queues a command serialised by the caller, given as the parts it is made of (one, or
    /// four with a request's deadline inserted), sealed when `session` is given, under `tid`.
    pub(crate) fn enqueue_framed<S: Aead>(
        &mut self,
        session: Option<&mut Session<S>>,
        tid: u8,
        command: &[&[u8]],
    ) -> Result<(), EnqueueError> {
        framing::enqueue_framed(&mut self.outbox, session, tid, command)
    }

    /// Queues a control container ahead of all data. `Err` if the priority queue is full.
    pub(crate) fn send_control(
        &mut self,
        tid: u8,
        cmd: ControlCmd,
        payload: &[u8],
    ) -> Result<(), super::outbox::ControlQueueFull> {
        self.controls.push(tid, cmd, payload)
    }

    /// The next PDU: a priority control, else the next container of the outbox.
    pub(crate) fn poll_transmit(&mut self, att_mtu: usize, out: &mut [u8]) -> Option<usize> {
        if let Some(n) = self.controls.emit_next(out) {
            return Some(n);
        }
        self.outbox
            .poll_transmit(att_mtu, self.large, self.long, out)
    }

    /// The output buffer [`Endpoint::poll_transmit`] needs for what is queued now.
    pub(crate) fn transmit_len(&self, att_mtu: usize) -> usize {
        super::transmit_len(att_mtu, self.long, self.outbox.queued())
    }

    /// `true` when nothing waits for the link.
    pub(crate) fn is_idle(&self) -> bool {
        self.outbox.is_empty() && self.controls.len() == 0
    }

    // ----- memory ---------------------------------------------------------------------------

    /// Gives back the heap memory of free buffers (a message an event still borrows is not
    /// free).
    pub(crate) fn release_memory(&mut self) {
        self.assembler.release_memory();
        self.outbox.release_memory();
    }

    /// Drops every queued message, partial transaction and borrowed slot (on close). Priority
    /// controls stay unless `controls` is set.
    pub(crate) fn clear(&mut self, controls: bool) {
        self.outbox.clear();
        if controls {
            self.controls.clear();
        }
        self.assembler.reset();
        self.partials.clear();
        self.pending_release = None;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::crypto::RustCrypto;
    use crate::wire::WireError;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Rec {
        Msg(MsgRef),
        Warn(Warning),
    }

    impl Record for Rec {
        fn warning(warning: Warning) -> Self {
            Rec::Warn(warning)
        }
        fn message(&self) -> Option<MsgRef> {
            match self {
                Rec::Msg(m) => Some(*m),
                Rec::Warn(_) => None,
            }
        }
    }

    type Ep = Endpoint<alloc::vec::Vec<u8>, alloc::vec::Vec<u8>, Rec, 2, 16>;

    fn endpoint() -> Ep {
        Ep::new(
            AssemblerConfig {
                max_message_len: 64,
                max_in_flight: 2,
                large_messages: false,
                long_containers: false,
            },
            1024,
        )
    }

    const T0: Instant = Instant::from_millis(1_000);

    #[test]
    fn tid_sets_hold_every_value() {
        let mut s = TidSet::default();
        for tid in [0u8, 63, 64, 200, 255] {
            s.insert(tid);
        }
        assert_eq!(s.len(), 5);
        assert!(s.contains(64) && !s.contains(65));
        assert!(s.remove(255) && !s.remove(255));
        assert_eq!(s.len(), 4);
    }

    const TEN_S: ReassemblyDeadline = ReassemblyDeadline {
        timeout: Duration::from_secs(10),
        min_rate: 0,
    };

    #[test]
    fn partials_expire_at_the_deadline_their_first_container_set() {
        let mut p: Partials<2> = Partials::new();
        p.start(7, T0 + Duration::from_secs(10));
        p.start(9, T0 + Duration::from_secs(13));
        // A third transaction finds no free entry (the assembler refuses it first).
        p.start(11, T0);
        assert_eq!(p.next_deadline(), Some(T0 + Duration::from_secs(10)));
        // A restarted transaction takes its new deadline.
        p.start(7, T0 + Duration::from_secs(15));
        assert_eq!(p.next_deadline(), Some(T0 + Duration::from_secs(13)));
        assert_eq!(p.pop_expired(T0 + Duration::from_secs(13)), Some(9));
        assert_eq!(p.pop_expired(T0 + Duration::from_secs(13)), None);
        p.remove(7);
        assert_eq!(p.next_deadline(), None);
    }

    #[test]
    fn a_long_transaction_gets_time_for_its_length_at_the_minimum_rate() {
        let d = ReassemblyDeadline {
            timeout: Duration::from_secs(10),
            min_rate: 4096,
        };
        assert_eq!(d.of(T0, 0), T0 + Duration::from_secs(10));
        // 16 MiB at 4 KiB/s: 4,096 s more.
        assert_eq!(d.of(T0, 16 << 20), T0 + Duration::from_secs(10 + 4096));
        assert_eq!(TEN_S.of(T0, 16 << 20), T0 + Duration::from_secs(10));
    }

    #[test]
    fn a_pdu_that_is_no_container_is_a_warning() {
        let mut e = endpoint();
        // Too short for the 4-byte header.
        assert_eq!(e.accept(&[0x01, 0x00]), Ok(None));
        // Type bits 0b10: undefined.
        assert_eq!(e.accept(&[0x05, 0x00, 0x80, 0x00]), Ok(None));
        assert!(matches!(
            e.next_record(),
            Some(Rec::Warn(Warning::MalformedContainer(
                WireError::Truncated { .. }
            )))
        ));
        assert_eq!(
            e.next_record(),
            Some(Rec::Warn(Warning::UnknownContainerType { tid: 5 }))
        );
        assert_eq!(e.next_record(), None);
    }

    #[test]
    fn a_transaction_is_reassembled_and_its_slot_released_by_the_next_record() {
        let mut e = endpoint();
        // FIRST of tid 3: total 6 bytes, 4 in this container; then SUBSEQUENT seq 1 with 2.
        let first = [0x03, 0x00, 0x00, 0x06, 0x00, 0x04, b'a', b'b', b'c', b'd'];
        let c = e.accept(&first).unwrap().unwrap();
        assert_eq!(e.feed(T0, &c, TEN_S), Ok(None));
        assert_eq!(
            e.next_partial_deadline(),
            Some(T0 + Duration::from_secs(10))
        );
        let subsequent = [0x03, 0x01, 0x40, 0x02, b'e', b'f'];
        let c = e.accept(&subsequent).unwrap().unwrap();
        let done = e.feed(T0, &c, TEN_S).unwrap().unwrap();
        assert_eq!(e.next_partial_deadline(), None);
        let msg = MsgRef::new(done, 1, 4);
        e.push(Rec::Msg(msg)).unwrap();
        assert_eq!(e.next_record(), Some(Rec::Msg(msg)));
        assert_eq!(e.message(msg), b"abcdef");
        assert_eq!(e.data(msg), b"bcde");
        assert_eq!(e.assembler.in_flight(), 1);
        // The next poll releases the slot the record borrowed.
        assert_eq!(e.next_record(), None);
        assert_eq!(e.assembler.in_flight(), 0);
    }

    #[test]
    fn an_abandoned_transaction_expires_with_a_warning() {
        let mut e = endpoint();
        let first = [0x04, 0x00, 0x00, 0x06, 0x00, 0x02, 1, 2];
        let c = e.accept(&first).unwrap().unwrap();
        assert_eq!(e.feed(T0, &c, TEN_S), Ok(None));
        // Progress does not move the deadline: a SUBSEQUENT at 9 s, still expired at 10 s.
        let subsequent = [0x04, 0x01, 0x40, 0x02, 3, 4];
        let c = e.accept(&subsequent).unwrap().unwrap();
        assert_eq!(e.feed(T0 + Duration::from_secs(9), &c, TEN_S), Ok(None));
        e.expire_partials(T0 + Duration::from_secs(9));
        assert_eq!(e.assembler.in_flight(), 1);
        e.expire_partials(T0 + Duration::from_secs(10));
        assert_eq!(e.assembler.in_flight(), 0);
        assert_eq!(
            e.next_record(),
            Some(Rec::Warn(Warning::ReassemblyTimeout { tid: 4 }))
        );
    }

    #[test]
    fn a_full_event_queue_refuses_input_and_counts_warnings() {
        let mut e = endpoint();
        for _ in 0..EVENT_QUEUE_LEN - EVENT_HEADROOM {
            e.push(Rec::Warn(Warning::EventQueueFull)).unwrap();
        }
        // Warnings no longer fit, input waits.
        e.warn(Warning::EventQueueFull);
        assert_eq!(e.dropped_warnings(), 1);
        assert_eq!(
            e.accept(&[0, 0, 0xc4, 0]),
            Ok(Some(Container::control(0, ControlCmd::Timeout, &[])))
        );
        e.push(Rec::Warn(Warning::EventQueueFull)).unwrap();
        assert_eq!(e.accept(&[0, 0, 0xc4, 0]), Err(EventQueueFull));
    }

    #[test]
    fn controls_go_before_data_and_commands_are_framed_once() {
        let mut e = endpoint();
        let no_session: Option<&mut Session<<RustCrypto as crate::crypto::CryptoProvider>::Aead>> =
            None;
        e.enqueue(
            no_session,
            2,
            CommandType::Response,
            "echo",
            framing::bytes(b"\x0a\x02hi"),
        )
        .unwrap();
        e.send_control(9, ControlCmd::Error, &[0x05]).unwrap();
        assert!(!e.is_idle());
        let mut out = [0u8; 64];
        // ERROR control, tid 9: [tid][seq 0][CONTROL, cmd 5: 0xd4][payload_len 1][code].
        let n = e.poll_transmit(247, &mut out).unwrap();
        assert_eq!(&out[..n], &[0x09, 0x00, 0xd4, 0x01, 0x05]);
        // The response, one FIRST: [tid 2][seq 0][0x00][total_length 12 LE][payload_len 12],
        // then the command [RESPONSE 0x80][name_len 4]["echo"][data_len 4 LE][data].
        let n = e.poll_transmit(247, &mut out).unwrap();
        assert_eq!(
            &out[..n],
            &[
                0x02, 0x00, 0x00, 0x0c, 0x00, 0x0c, //
                0x80, 0x04, b'e', b'c', b'h', b'o', 0x04, 0x00, 0x0a, 0x02, b'h', b'i'
            ][..]
        );
        assert_eq!(e.poll_transmit(247, &mut out), None);
        assert!(e.is_idle());
    }
}
