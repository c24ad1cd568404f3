//! The peripheral (server) role: answers setup controls, runs the key exchange, reassembles and
//! decrypts requests, and sends responses, stream items and ERROR controls.
//!
//! | file | holds |
//! |---|---|
//! | `config.rs` | [`PeripheralConfig`] |
//! | `event.rs` | [`PeripheralEvent`] and the records events are made of |
//! | `setup.rs` | the controls a peripheral answers (TIMEOUT, CAPABILITIES) and the key exchange |
//! | `calls.rs` | requests checked and handed out, responses, streams both ways, ERROR replies |
//! | `streams.rs` | the streams extension: credits both ways, a bidirectional stream's items |
//! | this file | the [`Peripheral`] type, its accessors, and the sans-IO inputs and outputs |

mod calls;
mod config;
mod event;
mod setup;
mod streams;

pub use config::PeripheralConfig;
pub use event::{PeripheralCloseReason, PeripheralEvent};

use rand_core::CryptoRngCore;

use super::endpoint::{Endpoint, MsgRef, ReassemblyDeadline, TidSet};
use super::outbox::STEP2_CONTROL_PAYLOAD;
use super::{ConfigError, EventQueueFull, check_att_mtu, check_large_limit};
use crate::Instant;
use crate::buf::Buffer;
use crate::crypto::CryptoProvider;
use crate::wire::capabilities::{Capabilities, CapabilityFlags, LargeLimits};
use crate::wire::command::MAX_DATA_LEN;
use crate::wire::container::ContainerKind;
use crate::wire::error_code::ErrorCode;
use event::Record;
use setup::Kx;

/// The peripheral (server) side of one bleRPC connection. See the [module docs](super).
///
/// `A` holds reassembled requests, `O` queued responses; `SLOTS` bounds the requests reassembled
/// at once. A no-alloc peripheral for a 32 KB MCU is
/// `Peripheral<RustCrypto, Rng, ArrayBuf<12288>, ArrayBuf<N>, 1>`.
pub struct Peripheral<P: CryptoProvider, R, A: Buffer, O: Buffer, const SLOTS: usize> {
    config: PeripheralConfig,
    provider: P,
    rng: R,
    identity: Option<P::Identity>,
    kx: Kx<P>,
    /// Reassembly, outbox, controls (up to the 133-byte step 2) and events.
    ep: Endpoint<A, O, Record, SLOTS, STEP2_CONTROL_PAYLOAD>,
    /// What this connection counted since the application last took the counts (the
    /// reassembly drops are the endpoint's).
    counters: crate::connection::Counters,
    /// Requests handed to the application and not answered yet.
    pending: TidSet,
    /// The request tid of the active peripheral→central stream and the items sent so far.
    stream: Option<(u8, u32)>,
    /// The cancel extension is in force (the central announced it and so did we).
    cancel: bool,
    /// The deadline extension is in force (the central announced it and so did we).
    deadline: bool,
    /// The streams extension is in force (the central announced it and so did we).
    streams: bool,
    /// The credited stream (the streams extension): its open request's tid and the items the
    /// central accepts now.
    credit: Option<(u8, u32)>,
    /// The central→peripheral half of the open bidirectional stream.
    bidi: Option<streams::BidiIn>,
    closed: bool,
    /// Until the connection is established: when it must be (armed by [`Peripheral::open`]).
    setup_deadline: Option<Instant>,
    /// A CAPABILITIES request or a request arrived (what establishes a plaintext connection).
    set_up: bool,
    /// Key-exchange step 1 containers received.
    kx_attempts: u8,
    /// Data containers refused before the session existed.
    refused_before_session: u16,
    /// The reassembly budget in force for the next input (see
    /// [`Peripheral::set_reassembly_budget`]).
    reassembly_budget: usize,
}

impl<P, R, A, O, const SLOTS: usize> Peripheral<P, R, A, O, SLOTS>
where
    P: CryptoProvider,
    P::Identity: Clone,
    R: CryptoRngCore,
    A: Buffer + Default,
    O: Buffer + Default,
{
    /// Creates the peripheral side of a connection that has just been established. With an
    /// `identity`, encryption is offered in CAPABILITIES; `require_encryption` without one is a
    /// configuration error.
    pub fn new(
        config: PeripheralConfig,
        provider: P,
        identity: Option<P::Identity>,
        rng: R,
    ) -> Result<Self, ConfigError> {
        check_att_mtu(config.att_mtu)?;
        if config.require_encryption && identity.is_none() {
            return Err(ConfigError::IdentityRequired);
        }
        if config.max_request_len == 0 {
            return Err(ConfigError::Limit {
                field: "max_request_len",
            });
        }
        if config.max_key_exchange_attempts == 0 {
            return Err(ConfigError::Limit {
                field: "max_key_exchange_attempts",
            });
        }
        if config.max_pending_requests == 0 || config.max_pending_requests > 256 {
            return Err(ConfigError::Limit {
                field: "max_pending_requests",
            });
        }
        check_large_limit(
            config.large_messages,
            config.max_request_len,
            "max_request_len",
        )?;
        check_large_limit(
            config.large_messages,
            config.max_response_len,
            "max_response_len",
        )?;
        let kx = if identity.is_some() {
            Kx::AwaitStep1
        } else {
            Kx::Unavailable
        };
        Ok(Peripheral {
            ep: Endpoint::new(
                Self::assembler_config(&config, false, false),
                config.max_outbox_bytes,
            ),
            config,
            provider,
            rng,
            identity,
            kx,
            counters: crate::connection::Counters::default(),
            pending: TidSet::default(),
            stream: None,
            cancel: false,
            deadline: false,
            streams: false,
            credit: None,
            bidi: None,
            closed: false,
            setup_deadline: None,
            set_up: false,
            kx_attempts: 0,
            refused_before_session: 0,
            reassembly_budget: config.max_reassembly_bytes.max(config.max_request_len),
        })
    }

    /// Starts the connection's clock: from `now` the central has
    /// [`PeripheralConfig::setup_timeout`] to establish it (see [`Peripheral::is_established`]).
    /// Call it once, when the link comes up; without it there is no setup deadline.
    pub fn open(&mut self, now: Instant) {
        if !self.is_established() {
            self.setup_deadline = self.config.setup_timeout.map(|t| now + t);
        }
    }

    /// Sets the reassembly budget for the inputs that follow to `bytes` (never above
    /// [`PeripheralConfig::max_reassembly_bytes`], or `max_request_len` if larger): a runtime that shares one budget among its
    /// connections sets each connection's share, what it holds
    /// ([`Peripheral::reassembly_claimed`]) plus what is free, before each input.
    pub fn set_reassembly_budget(&mut self, bytes: usize) {
        let most = self
            .config
            .max_reassembly_bytes
            .max(self.config.max_request_len);
        self.reassembly_budget = bytes.min(most);
    }

    /// The announced lengths of the partial requests together (what the reassembly budget
    /// counts).
    pub fn reassembly_claimed(&self) -> usize {
        self.ep.assembler.claimed()
    }

    // ----- accessors -------------------------------------------------------------------------

    /// The configuration in force.
    pub fn config(&self) -> &PeripheralConfig {
        &self.config
    }
    /// `true` once the connection has proven itself: the key exchange has completed where
    /// encryption is required; otherwise once a CAPABILITIES request or a request arrived. A
    /// runtime evicts connections not yet established first.
    pub fn is_established(&self) -> bool {
        if self.config.require_encryption {
            self.kx.is_established()
        } else {
            self.set_up || self.kx.is_established()
        }
    }
    /// `true` once the connection is closed (locally, or by the peripheral for cause: see
    /// [`PeripheralEvent::Closed`]).
    pub fn is_closed(&self) -> bool {
        self.closed
    }
    /// The longest container the peripheral accepts now: `att_mtu - 3`, or
    /// [`MAX_LONG_CONTAINER_LEN`](crate::wire::container::MAX_LONG_CONTAINER_LEN) while the
    /// long-container extension is in force, but only once the session exists where encryption
    /// is required (a stranger gets small containers only). A stream link reading containers
    /// can refuse longer ones before buffering them.
    pub fn max_input_container_len(&self) -> usize {
        let long = self.ep.long && (self.kx.is_established() || !self.config.require_encryption);
        super::max_container_len(self.config.att_mtu, long)
    }
    /// `true` once the key exchange has completed, until the connection closes (closing drops
    /// the session and its keys).
    pub fn is_encrypted(&self) -> bool {
        self.kx.is_established()
    }
    /// The CAPABILITIES this peripheral advertises.
    pub fn capabilities(&self) -> Capabilities {
        let mut flags = if self.identity.is_some() {
            CapabilityFlags::ENCRYPTION_SUPPORTED
        } else {
            CapabilityFlags::EMPTY
        };
        if self.config.relay {
            flags = flags | CapabilityFlags::RELAY;
        }
        if self.config.diagnostics {
            flags = flags | CapabilityFlags::DIAGNOSTICS;
        }
        Capabilities {
            max_request: u16::try_from(self.config.max_request_len).unwrap_or(u16::MAX),
            max_response: u16::try_from(self.config.max_response_len).unwrap_or(u16::MAX),
            flags,
            large: None,
        }
    }
    /// `true` while the large-message extension is in force (a central announced it in its
    /// CAPABILITIES request and this peripheral agreed).
    pub fn large_messages(&self) -> bool {
        self.ep.large
    }
    /// `true` while the long-container extension is in force (a central announced it in its
    /// CAPABILITIES request and this peripheral agreed).
    pub fn long_containers(&self) -> bool {
        self.ep.long
    }
    /// The longest container [`Peripheral::poll_transmit`] can write: `att_mtu - 3`, or
    /// [`MAX_LONG_CONTAINER_LEN`](crate::wire::container::MAX_LONG_CONTAINER_LEN) when
    /// `long_containers` is configured. Size its output buffer to this.
    pub fn max_container_len(&self) -> usize {
        super::max_container_len(self.config.att_mtu, self.config.long_containers)
    }
    /// The output buffer [`Peripheral::poll_transmit`] needs for what is queued now: `att_mtu - 3`,
    /// or, while long containers are in force, enough for the longest container the queued data
    /// makes (at most [`Peripheral::max_container_len`]). Idle connections thus keep a small
    /// buffer; a shorter buffer only makes `poll_transmit` return `None`, losing nothing.
    pub fn transmit_len(&self) -> usize {
        self.ep.transmit_len(self.config.att_mtu)
    }
    /// The CAPABILITIES reply with the large-message extension: the `u16` fields saturated, the
    /// flag set and the `u32` limits: [`PeripheralConfig::max_request_len`], and
    /// [`PeripheralConfig::max_response_len`] capped by what the outbox can hold.
    pub fn capabilities_large(&self) -> Capabilities {
        let request = self.config.max_request_len;
        let response = self.max_response_wire(true, self.ep.long);
        let classic = self.capabilities();
        Capabilities {
            max_request: u16::try_from(request).unwrap_or(u16::MAX),
            max_response: u16::try_from(response).unwrap_or(u16::MAX),
            flags: classic.flags | CapabilityFlags::LARGE_MESSAGES,
            large: Some(LargeLimits {
                max_request: u32::try_from(request).unwrap_or(u32::MAX),
                max_response: u32::try_from(response).unwrap_or(u32::MAX),
            }),
        }
    }
    /// Requests handed to the application and not yet answered.
    pub fn pending_requests(&self) -> usize {
        self.pending.len()
    }
    /// Bytes the outbox can still take.
    pub fn outbox_free(&self) -> usize {
        self.ep.outbox.free()
    }
    /// `true` when nothing is waiting for the link.
    pub fn is_idle(&self) -> bool {
        self.ep.is_idle()
    }
    /// Warnings not queued because the event queue was nearly full.
    pub fn dropped_warnings(&self) -> u32 {
        self.ep.dropped_warnings()
    }

    /// Gives back the heap memory of buffers not in use. Buffers keep their capacity between
    /// messages (re-allocating per message is slower than the copies); a runtime calls this when
    /// the connection has been idle for a while, so an idle connection costs only its fixed
    /// state (see the crate docs' memory table).
    pub fn release_memory(&mut self) {
        self.ep.release_memory();
    }

    /// Changes the ATT MTU (after an MTU exchange).
    pub fn set_att_mtu(&mut self, att_mtu: usize) -> Result<(), ConfigError> {
        check_att_mtu(att_mtu)?;
        self.config.att_mtu = att_mtu;
        Ok(())
    }

    /// Closes the connection locally: queued output is dropped.
    pub fn close(&mut self, now: Instant) {
        let _ = now;
        self.closed = true;
        self.ep.clear(true);
        self.pending = TidSet::default();
        self.kx = Kx::Unavailable;
    }

    /// Closes the connection for cause: queued data is dropped, the priority controls (an
    /// ERROR explaining the close) stay queued for the link, and the runtime hears
    /// [`PeripheralEvent::Closed`].
    fn close_for(&mut self, reason: PeripheralCloseReason) {
        self.closed = true;
        self.ep.clear(false);
        self.pending = TidSet::default();
        self.kx = Kx::Unavailable;
        self.setup_deadline = None;
        self.push(Record::Closed(reason));
    }

    // ----- inputs ----------------------------------------------------------------------------

    /// Handles one PDU from the link. Returns [`EventQueueFull`] (and leaves the PDU unconsumed)
    /// when the caller has not drained [`Peripheral::poll_event`].
    pub fn handle_input(&mut self, now: Instant, pdu: &[u8]) -> Result<(), EventQueueFull> {
        if self.closed {
            return Ok(());
        }
        let Some(container) = self.ep.accept(pdu)? else {
            return Ok(());
        };
        match container.kind {
            ContainerKind::Control(cmd) => {
                self.handle_control(now, container.tid, cmd, container.payload)
            }
            _ if self.config.require_encryption && !self.kx.is_established() => {
                // No memory for strangers: before the session exists a request can only be
                // refused, so it is refused at its FIRST container, before a byte is buffered.
                self.refuse_before_session(&container);
            }
            _ => {
                if self.admit(&container) {
                    let deadline = ReassemblyDeadline {
                        timeout: self.config.reassembly_timeout,
                        min_rate: self.config.reassembly_min_rate,
                    };
                    match self.ep.feed(now, &container, deadline) {
                        Ok(None) => {}
                        Ok(Some(done)) => self.on_request(now, done),
                        Err(e) => self.on_assembly_error(e),
                    }
                    let held = u32::try_from(self.ep.assembler.claimed()).unwrap_or(u32::MAX);
                    let mark = &mut self.counters.reassembly_high_water;
                    *mark = (*mark).max(held);
                }
            }
        }
        Ok(())
    }

    /// Handles the passing of the instant returned by [`Peripheral::poll_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        if let Kx::AwaitStep3 { deadline, .. } = self.kx
            && deadline <= now
        {
            self.kx = Kx::AwaitStep1;
        }
        if self.setup_deadline.is_some_and(|d| d <= now) {
            if self.is_established() {
                self.setup_deadline = None;
            } else {
                self.close_for(PeripheralCloseReason::SetupTimeout);
                return;
            }
        }
        self.ep.expire_partials(now);
        self.grant_due(now);
    }

    // ----- outputs ---------------------------------------------------------------------------

    /// Writes the next PDU for the link into `out` (which must hold `att_mtu - 3` bytes).
    pub fn poll_transmit(&mut self, now: Instant, out: &mut [u8]) -> Option<usize> {
        let _ = now;
        // The outbox only grows between polls: its high-water mark is seen here.
        let queued = u32::try_from(self.ep.outbox.queued()).unwrap_or(u32::MAX);
        let mark = &mut self.counters.outbox_high_water;
        *mark = (*mark).max(queued);
        self.ep.poll_transmit(self.config.att_mtu, out)
    }

    /// What this connection counted since the last call (or since it was created): requests
    /// handed out, ERROR answers by code, messages dropped while reassembling, and the
    /// high-water marks of the outbox and the reassembly buffers over that time (the marks
    /// start again from what the buffers hold now). A runtime adds these up
    /// ([`Counters::add`](crate::connection::Counters::add)) for the diagnostics extension.
    pub fn take_counters(&mut self) -> crate::connection::Counters {
        let mut taken = self.counters;
        taken.reassembly_drops = core::mem::take(&mut self.ep.reassembly_drops);
        self.counters = crate::connection::Counters {
            outbox_high_water: u32::try_from(self.ep.outbox.queued()).unwrap_or(u32::MAX),
            reassembly_high_water: u32::try_from(self.ep.assembler.claimed()).unwrap_or(u32::MAX),
            ..crate::connection::Counters::default()
        };
        taken
    }

    /// Takes the buffer of the request the last [`Peripheral::poll_event`] returned, instead of
    /// leaving it to be released by the next call: the whole (decrypted) command and the range
    /// of its protobuf data in it. A runtime hands a long request to its handler this way
    /// without copying it; the assembler slot reserves a new buffer of the same size (see
    /// [`Assembler::take_message`](crate::assemble::Assembler::take_message)). `None` unless the
    /// last event was a request not yet taken.
    pub fn take_request(&mut self) -> Option<(A, core::ops::Range<usize>)> {
        self.ep.take_pending()
    }

    /// The next event, if any. Message bytes in the event stay valid until the next call.
    pub fn poll_event(&mut self) -> Option<PeripheralEvent<'_>> {
        let record = self.ep.next_record()?;
        Some(match record {
            Record::Request {
                tid,
                name_start,
                name_len,
                msg,
                deadline,
            } => {
                let (name, data) = self.name_and_data(name_start, name_len, msg);
                PeripheralEvent::Request {
                    tid,
                    name,
                    data,
                    deadline,
                }
            }
            Record::StreamItem {
                tid,
                stream,
                name_start,
                name_len,
                msg,
            } => {
                let (name, data) = self.name_and_data(name_start, name_len, msg);
                PeripheralEvent::StreamItem {
                    tid,
                    stream,
                    name,
                    data,
                }
            }
            Record::ItemsEnd { stream } => PeripheralEvent::ItemsEnd { stream },
            Record::Credit { stream } => PeripheralEvent::Credit { stream },
            Record::StreamEndC2P { tid } => PeripheralEvent::StreamEndC2P { tid },
            Record::Cancelled { tid } => PeripheralEvent::Cancelled { tid },
            Record::Secured => PeripheralEvent::Secured,
            Record::Warning(w) => PeripheralEvent::Warning(w),
            Record::Closed(reason) => PeripheralEvent::Closed(reason),
        })
    }

    /// When [`Peripheral::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        let kx = match self.kx {
            Kx::AwaitStep3 { deadline, .. } => Some(deadline),
            _ => None,
        };
        [
            kx,
            self.setup_deadline,
            self.ep.next_partial_deadline(),
            self.credit_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The command name (at `name_start`, `name_len` bytes) and the data of the request held
    /// at `msg` in its reassembly slot.
    fn name_and_data(&self, name_start: u32, name_len: u8, msg: MsgRef) -> (&str, &[u8]) {
        let all = self.ep.message(msg);
        let name_start = name_start as usize;
        let name = all
            .get(name_start..name_start + usize::from(name_len))
            .and_then(|n| core::str::from_utf8(n).ok())
            .unwrap_or("");
        (name, all.get(msg.range()).unwrap_or(&[]))
    }

    fn push(&mut self, record: Record) {
        // Only fails if the caller ignores EventQueueFull: the endpoint releases the slot, and
        // the central hears BUSY.
        if let Err(Record::Request { tid, .. }) = self.ep.push(record) {
            self.pending.remove(tid);
            self.send_error(tid, ErrorCode::Busy);
        }
    }

    fn warn(&mut self, warning: super::Warning) {
        self.ep.warn(warning);
    }
}

impl<P: CryptoProvider, R, A: Buffer, O: Buffer, const SLOTS: usize> core::fmt::Debug
    for Peripheral<P, R, A, O, SLOTS>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Peripheral")
            .field("encrypted", &self.kx.is_established())
            .field("next_tid", &self.ep.next_tid)
            .field("pending", &self.pending.len())
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

// Keep the data-length bound visible to readers of this module.
const _: () = assert!(MAX_DATA_LEN == 65_535);

#[cfg(test)]
pub(super) mod tests {
    //! A peripheral driven by hand with byte literals.
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use alloc::vec::Vec;

    use rand_chacha::ChaCha20Rng;
    use rand_chacha::rand_core::SeedableRng;

    use super::*;
    use crate::crypto::{IdentitySeed, RustCrypto};

    pub(crate) type TestPeripheral = Peripheral<RustCrypto, ChaCha20Rng, Vec<u8>, Vec<u8>, 4>;

    pub(crate) const T0: Instant = Instant::from_millis(1_000);

    /// A peripheral with an identity (encryption offered) when `identity`, configured by `tune`.
    pub(crate) fn peripheral(
        identity: bool,
        tune: impl FnOnce(&mut PeripheralConfig),
    ) -> TestPeripheral {
        let mut config = PeripheralConfig {
            require_encryption: identity,
            ..PeripheralConfig::default()
        };
        tune(&mut config);
        let identity = identity.then(|| {
            RustCrypto
                .load_identity(&IdentitySeed::from_bytes([7; 32]))
                .unwrap()
        });
        Peripheral::new(config, RustCrypto, identity, ChaCha20Rng::seed_from_u64(2)).unwrap()
    }

    /// Everything the peripheral wants to send now.
    pub(crate) fn sent(p: &mut TestPeripheral) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 512];
        while let Some(n) = p.poll_transmit(T0, &mut buf) {
            out.push(buf[..n].to_vec());
        }
        out
    }

    #[test]
    fn setup_controls_are_answered_in_order() {
        let mut p = peripheral(true, |_| {});
        // TIMEOUT request, then the 6-byte CAPABILITIES request, back to back.
        p.handle_input(T0, &[0x00, 0x00, 0xc4, 0x00]).unwrap();
        p.handle_input(T0, &[0x01, 0x00, 0xd0, 0x06, 0, 0, 0, 0, 0, 0])
            .unwrap();
        assert_eq!(
            sent(&mut p),
            [
                // TIMEOUT reply: 100 ms.
                alloc::vec![0x00, 0x00, 0xc4, 0x02, 0x64, 0x00],
                // CAPABILITIES: max_request 12,288, max_response 65,535 (the u16 field
                // saturated), flags ENCRYPTION_SUPPORTED.
                alloc::vec![0x01, 0x00, 0xd0, 0x06, 0x00, 0x30, 0xff, 0xff, 0x01, 0x00],
            ]
        );
        assert!(!p.large_messages() && !p.long_containers());
    }

    #[test]
    fn the_extensions_are_agreed_only_when_configured_and_announced() {
        let mut p = peripheral(false, |c| {
            c.large_messages = true;
            c.long_containers = true;
        });
        // Announced: flags LARGE_MESSAGES | LONG_CONTAINERS (0x0006).
        p.handle_input(T0, &[0x01, 0x00, 0xd0, 0x06, 0, 0, 0, 0, 0x06, 0x00])
            .unwrap();
        assert!(p.large_messages() && p.long_containers());
        let reply = sent(&mut p).remove(0);
        // The 14-byte reply: flags 0x0006, then the u32 limits.
        assert_eq!(&reply[..4], &[0x01, 0x00, 0xd0, 0x0e]);
        assert_eq!(&reply[8..10], &[0x06, 0x00]);
        assert_eq!(&reply[10..14], &12_288u32.to_le_bytes());
        // Asked again without: the classic reply, and neither extension in force.
        p.handle_input(T0, &[0x02, 0x00, 0xd0, 0x00]).unwrap();
        assert!(!p.large_messages() && !p.long_containers());
        assert_eq!(sent(&mut p)[0][3], 0x06);
    }

    #[test]
    fn a_key_exchange_out_of_order_is_refused_with_an_error() {
        let mut p = peripheral(true, |_| {});
        // Step 3 before step 1: ERROR KEY_EXCHANGE_FAILED (0x09) under the same tid.
        let mut step3 = alloc::vec![0x02, 0x00, 0xd8, 45, 0x03];
        step3.resize(4 + 45, 0);
        p.handle_input(T0, &step3).unwrap();
        assert_eq!(sent(&mut p), [alloc::vec![0x02, 0x00, 0xd4, 0x01, 0x09]]);
        assert!(!p.is_encrypted());
    }

    #[test]
    fn close_drops_everything_queued() {
        let mut p = peripheral(true, |_| {});
        p.handle_input(T0, &[0x00, 0x00, 0xc4, 0x00]).unwrap();
        p.close(T0);
        assert!(sent(&mut p).is_empty());
        assert!(p.is_idle());
        assert_eq!(p.poll_timeout(), None);
        // Input after close is ignored.
        p.handle_input(T0, &[0x00, 0x00, 0xc4, 0x00]).unwrap();
        assert!(sent(&mut p).is_empty());
    }
}
