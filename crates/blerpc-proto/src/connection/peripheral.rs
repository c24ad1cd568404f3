//! The peripheral (server) role: answers setup controls, runs the key exchange, reassembles and
//! decrypts requests, and sends responses, stream items and ERROR controls.

use core::time::Duration;

use rand_core::CryptoRngCore;

use super::events::{Ring, Warning};
use super::outbox::{ControlQueue, Outbox, STEP2_CONTROL_PAYLOAD};
use super::{
    ConfigError, EVENT_HEADROOM, EVENT_QUEUE_LEN, EnqueueError, EventQueueFull,
    MIN_ATT_MTU_FOR_LARGE_MESSAGES, MsgRef, Partials, Payload, SendError, TidSet, bytes,
    check_att_mtu, check_large_limit, enqueue_command, wire_len,
};
use crate::Direction;
use crate::Instant;
use crate::assemble::{AssembleError, Assembler, AssemblerConfig, Completed};
use crate::buf::Buffer;
use crate::crypto::{CryptoProvider, X25519Secret};
use crate::handshake::{PeripheralAwaitStep3, PeripheralHandshake};
use crate::session::Session;
use crate::split::classic_max_message_len;
use crate::wire::capabilities::{Capabilities, CapabilityFlags, LargeLimits};
use crate::wire::command::{Command, CommandType, MAX_DATA_LEN, MAX_LARGE_DATA_LEN, MAX_NAME_LEN};
use crate::wire::container::{Container, ContainerKind, ControlCmd};
use crate::wire::control::ControlMessage;
use crate::wire::error_code::ErrorCode;

/// Configuration of a [`Peripheral`]. Every limit is explicit; defaults follow the reference
/// firmware except where noted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeripheralConfig {
    /// ATT MTU of the link. Default 247.
    pub att_mtu: usize,
    /// The value answered to TIMEOUT requests, in ms. Default 100 (`CONFIG_BLERPC_TIMEOUT_MS`).
    pub timeout_ms: u16,
    /// Largest request accepted, in wire bytes (after encryption), advertised in CAPABILITIES
    /// (capped at 65,535 in the classic field; in full in the large-message extension, at most
    /// `u32::MAX` then). Default 12,288 (the nRF firmware's assembler buffer).
    pub max_request_len: usize,
    /// Largest response sent, in wire bytes, advertised in CAPABILITIES like `max_request_len`.
    /// Default 16 MiB ([`super::DEFAULT_MAX_LARGE_MESSAGE_LEN`]); without the large-message
    /// extension one classic transaction (at most 65,535, advertised as such) is the limit.
    pub max_response_len: usize,
    /// Refuse plaintext requests (answer ERROR `ENCRYPTION_REQUIRED`). Default `true`.
    pub require_encryption: bool,
    /// Time allowed between key-exchange step 1 and step 3. Default 5 s.
    pub handshake_timeout: Duration,
    /// Requests handed to the application and not yet answered; more get ERROR BUSY.
    /// Default 2 (the firmware's double buffer).
    pub max_pending_requests: usize,
    /// Items one peripheral→central stream may carry. Default 10,000 (the firmware's cap).
    pub max_stream_items: u32,
    /// A partially received request idle this long is dropped. Default 10 s.
    pub reassembly_timeout: Duration,
    /// Bytes of responses waiting for the link. Default 128 KiB. A response must also fit here
    /// (minus a 6-byte entry header): a larger one is answered with ERROR `RESPONSE_TOO_LARGE`.
    pub max_outbox_bytes: usize,
    /// Agree to the large-message extension when a central announces it in its CAPABILITIES
    /// request (see `docs/protocol.md`): the reply then carries flags bit 1 and the `u32` limits
    /// (`max_request_len`, and `max_response_len` capped by the outbox), and messages beyond
    /// 65,535 bytes travel both ways. A central that does not announce it gets the classic reply,
    /// byte for byte. Needs ATT MTU >= [`MIN_ATT_MTU_FOR_LARGE_MESSAGES`] (the 14-byte reply must
    /// fit one container). Default `false`; the `blerpc` runtime turns it on.
    pub large_messages: bool,
    /// Agree to the long-container extension when a central announces it (CAPABILITIES flags
    /// bit 2, see `docs/protocol.md`): containers of up to
    /// [`MAX_LONG_CONTAINER_LEN`](crate::wire::container::MAX_LONG_CONTAINER_LEN) bytes both ways,
    /// whatever `att_mtu`. Only for links that carry such PDUs (TCP, TLS, WebSocket, memory),
    /// never BLE. Default `false`; the `blerpc` runtime turns it on for stream links.
    pub long_containers: bool,
}

impl Default for PeripheralConfig {
    fn default() -> Self {
        PeripheralConfig {
            att_mtu: 247,
            timeout_ms: 100,
            max_request_len: 12_288,
            max_response_len: super::DEFAULT_MAX_LARGE_MESSAGE_LEN,
            require_encryption: true,
            handshake_timeout: Duration::from_secs(5),
            max_pending_requests: 2,
            max_stream_items: 10_000,
            reassembly_timeout: Duration::from_secs(10),
            max_outbox_bytes: 128 * 1024,
            large_messages: false,
            long_containers: false,
        }
    }
}

/// What happened on a [`Peripheral`]. Byte slices borrow the reassembly buffer and stay valid
/// until the next [`Peripheral::poll_event`].
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeripheralEvent<'a> {
    /// A request. Answer it with exactly one of [`Peripheral::respond`],
    /// [`Peripheral::respond_with`], [`Peripheral::respond_error`], [`Peripheral::end_stream`]
    /// (after stream items) or, for an item of a central→peripheral stream, [`Peripheral::ack`].
    Request {
        /// The request's transaction id.
        tid: u8,
        /// The command name.
        name: &'a str,
        /// The protobuf data.
        data: &'a [u8],
    },
    /// The central ended its central→peripheral stream; send the final response with
    /// [`Peripheral::respond_upload`].
    StreamEndC2P {
        /// The control's transaction id.
        tid: u8,
    },
    /// The key exchange completed; requests are now encrypted.
    Secured,
    /// Something was dropped or refused (diagnostics only; the central was told where the
    /// protocol allows).
    Warning(Warning),
}

#[derive(Clone, Copy, Debug)]
enum Record {
    Request {
        tid: u8,
        name_start: u32,
        name_len: u8,
        msg: MsgRef,
    },
    StreamEndC2P {
        tid: u8,
    },
    Secured,
    Warning(Warning),
}

/// The key exchange, and the session it established. One enum holds both, so the AES-GCM key
/// (about 0.5 KB with ring) is stored once: in step 3's state while the handshake runs, in the
/// session's once it is done.
enum Kx<P: CryptoProvider> {
    /// No identity configured: the peripheral does not offer encryption.
    Unavailable,
    AwaitStep1,
    AwaitStep3 {
        deadline: Instant,
        hs: PeripheralAwaitStep3<P>,
    },
    Established(Session<P::Aead>),
}

impl<P: CryptoProvider> Kx<P> {
    fn session_mut(&mut self) -> Option<&mut Session<P::Aead>> {
        match self {
            Kx::Established(session) => Some(session),
            _ => None,
        }
    }
    fn is_established(&self) -> bool {
        matches!(self, Kx::Established(_))
    }
}

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
    /// The large-message extension is in force (the central announced it and we agreed).
    large: bool,
    /// The long-container extension is in force (likewise).
    long: bool,
    next_tid: u8,
    assembler: Assembler<A, SLOTS>,
    partials: Partials<SLOTS>,
    outbox: Outbox<O>,
    controls: ControlQueue<STEP2_CONTROL_PAYLOAD>,
    pending: TidSet,
    /// The request tid of the active peripheral→central stream and the items sent so far.
    stream: Option<(u8, u32)>,
    events: Ring<Record, EVENT_QUEUE_LEN>,
    pending_release: Option<MsgRef>,
    dropped_warnings: u32,
    closed: bool,
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
            assembler: Assembler::new(Self::assembler_config(&config, false, false)),
            outbox: Outbox::new(config.max_outbox_bytes),
            config,
            provider,
            rng,
            identity,
            kx,
            large: false,
            long: false,
            next_tid: 0,
            partials: Partials::new(),
            controls: ControlQueue::new(),
            pending: TidSet::default(),
            stream: None,
            events: Ring::new(),
            pending_release: None,
            dropped_warnings: 0,
            closed: false,
        })
    }

    // ----- accessors -------------------------------------------------------------------------

    /// The configuration in force.
    pub fn config(&self) -> &PeripheralConfig {
        &self.config
    }
    /// `true` once the key exchange has completed, until the connection closes (closing drops
    /// the session and its keys).
    pub fn is_encrypted(&self) -> bool {
        self.kx.is_established()
    }
    /// The CAPABILITIES this peripheral advertises.
    pub fn capabilities(&self) -> Capabilities {
        let flags = if self.identity.is_some() {
            CapabilityFlags::ENCRYPTION_SUPPORTED
        } else {
            CapabilityFlags::EMPTY
        };
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
        self.large
    }
    /// `true` while the long-container extension is in force (a central announced it in its
    /// CAPABILITIES request and this peripheral agreed).
    pub fn long_containers(&self) -> bool {
        self.long
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
        super::transmit_len(self.config.att_mtu, self.long, self.outbox.queued())
    }
    /// The CAPABILITIES reply with the large-message extension: the `u16` fields saturated, the
    /// flag set and the `u32` limits: [`PeripheralConfig::max_request_len`], and
    /// [`PeripheralConfig::max_response_len`] capped by what the outbox can hold.
    pub fn capabilities_large(&self) -> Capabilities {
        let request = self.config.max_request_len;
        let response = self.max_response_wire(true, self.long);
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
        self.outbox.free()
    }
    /// `true` when nothing is waiting for the link.
    pub fn is_idle(&self) -> bool {
        self.outbox.is_empty() && self.controls.len() == 0
    }
    /// Warnings not queued because the event queue was nearly full.
    pub fn dropped_warnings(&self) -> u32 {
        self.dropped_warnings
    }

    /// Gives back the heap memory of buffers not in use. Buffers keep their capacity between
    /// messages (re-allocating per message is slower than the copies); a runtime calls this when
    /// the connection has been idle for a while, so an idle connection costs only its fixed
    /// state (see the crate docs' memory table).
    pub fn release_memory(&mut self) {
        // Only free slots are released; a message an event still borrows is not free.
        self.assembler.release_memory();
        self.outbox.release_memory();
    }

    /// Changes the ATT MTU (after an MTU exchange).
    pub fn set_att_mtu(&mut self, att_mtu: usize) -> Result<(), ConfigError> {
        check_att_mtu(att_mtu)?;
        self.config.att_mtu = att_mtu;
        Ok(())
    }

    // ----- user operations -------------------------------------------------------------------

    /// Answers request `tid` with a RESPONSE named `name` carrying `data`.
    pub fn respond(
        &mut self,
        now: Instant,
        tid: u8,
        name: &str,
        data: &[u8],
    ) -> Result<(), SendError> {
        let _ = now;
        self.respond_payload(tid, name, bytes(data))
    }

    /// Like [`Peripheral::respond`], but `fill` writes the `data_len` data bytes straight into the
    /// outbox (no intermediate copy of large responses).
    pub fn respond_with(
        &mut self,
        now: Instant,
        tid: u8,
        name: &str,
        data_len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), SendError> {
        let _ = now;
        self.respond_payload(
            tid,
            name,
            Payload::Fill {
                len: data_len,
                fill,
            },
        )
    }

    fn respond_payload<F: FnOnce(&mut [u8])>(
        &mut self,
        tid: u8,
        name: &str,
        payload: Payload<'_, F>,
    ) -> Result<(), SendError> {
        self.check_open()?;
        if !self.pending.contains(tid) {
            return Err(SendError::UnknownRequest);
        }
        let data_len = match &payload {
            Payload::Bytes(d) => d.len(),
            Payload::Fill { len, .. } => *len,
        };
        if let Err(e) = self.check_response(name, data_len) {
            if let SendError::ResponseTooLarge { .. } | SendError::Split(_) = e {
                self.pending.remove(tid);
                self.send_error(tid, ErrorCode::ResponseTooLarge);
            }
            return Err(e);
        }
        self.enqueue(tid, name, payload)?;
        self.pending.remove(tid);
        Ok(())
    }

    /// Answers request `tid` with an ERROR control.
    pub fn respond_error(
        &mut self,
        now: Instant,
        tid: u8,
        code: ErrorCode,
    ) -> Result<(), SendError> {
        let _ = now;
        self.check_open()?;
        if !self.pending.remove(tid) {
            return Err(SendError::UnknownRequest);
        }
        if self.stream.is_some_and(|(t, _)| t == tid) {
            self.stream = None;
        }
        self.send_error(tid, code);
        Ok(())
    }

    /// Sends an ERROR control for any transaction id, pending or not: for failures that have
    /// no pending request to answer (e.g. the final response of an upload, which the central
    /// binds to the tid of its STREAM_END_C2P).
    pub fn report_error(
        &mut self,
        now: Instant,
        tid: u8,
        code: ErrorCode,
    ) -> Result<(), SendError> {
        let _ = now;
        self.check_open()?;
        self.pending.remove(tid);
        self.send_error(tid, code);
        Ok(())
    }

    /// Marks request `tid` as handled without a response (an item of a central→peripheral
    /// stream).
    pub fn ack(&mut self, tid: u8) -> Result<(), SendError> {
        if self.pending.remove(tid) {
            Ok(())
        } else {
            Err(SendError::UnknownRequest)
        }
    }

    /// Sends one item of the peripheral→central stream opened by request `request_tid`. Each item
    /// travels under a fresh peripheral transaction id, as the reference does.
    pub fn send_stream_item(
        &mut self,
        now: Instant,
        request_tid: u8,
        name: &str,
        data: &[u8],
    ) -> Result<(), SendError> {
        let _ = now;
        self.check_open()?;
        if !self.pending.contains(request_tid) {
            return Err(SendError::UnknownRequest);
        }
        let sent = match self.stream {
            Some((t, n)) if t == request_tid => n,
            Some(_) => return Err(SendError::StreamLimit),
            None => 0,
        };
        if sent >= self.config.max_stream_items {
            return Err(SendError::StreamLimit);
        }
        self.check_response(name, data.len())?;
        let tid = self.next_tid;
        self.enqueue(tid, name, bytes(data))?;
        self.next_tid = self.next_tid.wrapping_add(1);
        self.stream = Some((request_tid, sent + 1));
        Ok(())
    }

    /// Ends the peripheral→central stream opened by request `request_tid` (STREAM_END_P2C, queued
    /// after the last item).
    pub fn end_stream(&mut self, now: Instant, request_tid: u8) -> Result<(), SendError> {
        let _ = now;
        self.check_open()?;
        if !self.pending.contains(request_tid) {
            return Err(SendError::UnknownRequest);
        }
        let tid = self.next_tid;
        self.outbox
            .push_control(tid, ControlCmd::StreamEndP2C, &[])
            .map_err(|f| SendError::OutboxFull {
                needed: f.needed,
                free: f.free,
            })?;
        self.next_tid = self.next_tid.wrapping_add(1);
        self.pending.remove(request_tid);
        self.stream = None;
        Ok(())
    }

    /// Sends the final response of a central→peripheral stream (after
    /// [`PeripheralEvent::StreamEndC2P`]) under a fresh transaction id, as the reference does.
    pub fn respond_upload(
        &mut self,
        now: Instant,
        name: &str,
        data: &[u8],
    ) -> Result<(), SendError> {
        let _ = now;
        self.check_open()?;
        self.check_response(name, data.len())?;
        let tid = self.next_tid;
        self.enqueue(tid, name, bytes(data))?;
        self.next_tid = self.next_tid.wrapping_add(1);
        Ok(())
    }

    /// Closes the connection locally: queued output is dropped.
    pub fn close(&mut self, now: Instant) {
        let _ = now;
        self.closed = true;
        self.outbox.clear();
        self.controls.clear();
        self.assembler.reset();
        self.partials.clear();
        self.pending = TidSet::default();
        self.pending_release = None;
        self.kx = Kx::Unavailable;
    }

    // ----- inputs ----------------------------------------------------------------------------

    /// Handles one PDU from the link. Returns [`EventQueueFull`] (and leaves the PDU unconsumed)
    /// when the caller has not drained [`Peripheral::poll_event`].
    pub fn handle_input(&mut self, now: Instant, pdu: &[u8]) -> Result<(), EventQueueFull> {
        if self.closed {
            return Ok(());
        }
        if self.events.free() < EVENT_HEADROOM {
            return Err(EventQueueFull);
        }
        let container = match Container::parse(pdu) {
            Ok(c) => c,
            Err(e) => {
                self.warn(Warning::MalformedContainer(e));
                return Ok(());
            }
        };
        let tid = container.tid;
        match container.kind {
            ContainerKind::Control(cmd) => self.handle_control(now, tid, cmd, container.payload),
            ContainerKind::Unknown => self.warn(Warning::UnknownContainerType { tid }),
            ContainerKind::First { .. }
            | ContainerKind::LargeFirst { .. }
            | ContainerKind::Subsequent => match self.assembler.feed(&container) {
                Ok(None) => self.partials.touch(tid, now),
                Ok(Some(done)) => {
                    self.partials.remove(tid);
                    self.on_request(done);
                }
                Err(e) => {
                    self.partials.remove(tid);
                    self.on_assembly_error(e);
                }
            },
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
        while let Some(tid) = self
            .partials
            .pop_expired(now, self.config.reassembly_timeout)
        {
            self.assembler.discard(tid);
            self.warn(Warning::ReassemblyTimeout { tid });
        }
    }

    // ----- outputs ---------------------------------------------------------------------------

    /// Writes the next PDU for the link into `out` (which must hold `att_mtu - 3` bytes).
    pub fn poll_transmit(&mut self, now: Instant, out: &mut [u8]) -> Option<usize> {
        let _ = now;
        if let Some(n) = self.controls.emit_next(out) {
            return Some(n);
        }
        self.outbox
            .poll_transmit(self.config.att_mtu, self.large, self.long, out)
    }

    /// Takes the buffer of the request the last [`Peripheral::poll_event`] returned, instead of
    /// leaving it to be released by the next call: the whole (decrypted) command and the range
    /// of its protobuf data in it. A runtime hands a long request to its handler this way
    /// without copying it; the assembler slot reserves a new buffer of the same size (see
    /// [`Assembler::take_message`](crate::assemble::Assembler::take_message)). `None` unless the
    /// last event was a request not yet taken.
    pub fn take_request(&mut self) -> Option<(A, core::ops::Range<usize>)>
    where
        A: Default,
    {
        let msg = self.pending_release.take()?;
        Some((self.assembler.take_message(msg.done), msg.range()))
    }

    /// The next event, if any. Message bytes in the event stay valid until the next call.
    pub fn poll_event(&mut self) -> Option<PeripheralEvent<'_>> {
        if let Some(prev) = self.pending_release.take() {
            self.assembler.release(prev.done);
        }
        let record = self.events.pop()?;
        Some(match record {
            Record::Request {
                tid,
                name_start,
                name_len,
                msg,
            } => {
                self.pending_release = Some(msg);
                let all = self.assembler.message(msg.done);
                let name_start = name_start as usize;
                let name = all
                    .get(name_start..name_start + usize::from(name_len))
                    .and_then(|n| core::str::from_utf8(n).ok())
                    .unwrap_or("");
                let data = all.get(msg.range()).unwrap_or(&[]);
                PeripheralEvent::Request { tid, name, data }
            }
            Record::StreamEndC2P { tid } => PeripheralEvent::StreamEndC2P { tid },
            Record::Secured => PeripheralEvent::Secured,
            Record::Warning(w) => PeripheralEvent::Warning(w),
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
            self.partials.next_deadline(self.config.reassembly_timeout),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    // ----- internals -------------------------------------------------------------------------

    /// Reassembly limits: classic, or the large limit with LARGE FIRST accepted, and LONG
    /// containers accepted with that extension in force.
    fn assembler_config(config: &PeripheralConfig, large: bool, long: bool) -> AssemblerConfig {
        AssemblerConfig {
            max_message_len: config.max_request_len,
            max_in_flight: SLOTS,
            large_messages: large,
            long_containers: long,
        }
    }

    fn check_open(&self) -> Result<(), SendError> {
        if self.closed {
            Err(SendError::Closed)
        } else {
            Ok(())
        }
    }

    fn check_response(&self, name: &str, data_len: usize) -> Result<(), SendError> {
        if name.is_empty() || name.len() > MAX_NAME_LEN || data_len > MAX_LARGE_DATA_LEN {
            return Err(SendError::Invalid);
        }
        let len = wire_len(name.len(), data_len, self.kx.is_established());
        let max = self.max_response_wire(self.large, self.long);
        if len > max {
            return Err(SendError::ResponseTooLarge { len, max });
        }
        Ok(())
    }

    /// The largest response (wire bytes) this connection can send: the configured limit, what
    /// the outbox can ever hold, and without the extension one classic transaction at this MTU
    /// (data beyond 65,535 bytes always exceeds that).
    fn max_response_wire(&self, large: bool, long: bool) -> usize {
        let max = self.config.max_response_len.min(self.outbox.max_body());
        if large {
            max
        } else {
            max.min(classic_max_message_len(self.config.att_mtu, long))
        }
    }

    fn enqueue<F: FnOnce(&mut [u8])>(
        &mut self,
        tid: u8,
        name: &str,
        payload: Payload<'_, F>,
    ) -> Result<(), SendError> {
        enqueue_command(
            &mut self.outbox,
            self.kx.session_mut(),
            self.large,
            tid,
            CommandType::Response,
            name,
            payload,
        )
        .map_err(|e| match e {
            EnqueueError::Full(f) => SendError::OutboxFull {
                needed: f.needed,
                free: f.free,
            },
            EnqueueError::CounterExhausted => SendError::CounterExhausted,
            EnqueueError::Invalid | EnqueueError::Internal => SendError::Invalid,
        })
    }

    fn send_control(&mut self, tid: u8, cmd: ControlCmd, payload: &[u8]) {
        if self.controls.push(tid, cmd, payload).is_err() {
            // A central flooding control requests faster than the link drains: drop the reply
            // (the central's own timeout covers it) and say so.
            self.warn(Warning::UnexpectedControl {
                tid,
                cmd: cmd.bits(),
            });
        }
    }

    fn send_error(&mut self, tid: u8, code: ErrorCode) {
        self.send_control(tid, ControlCmd::Error, &[code.to_byte()]);
    }

    fn handle_control(&mut self, now: Instant, tid: u8, cmd: ControlCmd, payload: &[u8]) {
        let msg = match ControlMessage::parse(cmd, payload, Direction::CentralToPeripheral) {
            Ok(m) => m,
            Err(e) => {
                self.warn(Warning::MalformedControl(e));
                return;
            }
        };
        match msg {
            ControlMessage::TimeoutRequest => {
                let reply = self.config.timeout_ms.to_le_bytes();
                self.send_control(tid, ControlCmd::Timeout, &reply);
            }
            ControlMessage::CapabilitiesRequest { advertised } => {
                let announced =
                    advertised.is_some_and(|c| c.flags.contains(CapabilityFlags::LARGE_MESSAGES));
                // Each request decides afresh: the reply states what is in force.
                self.large = announced
                    && self.config.large_messages
                    && self.config.att_mtu >= MIN_ATT_MTU_FOR_LARGE_MESSAGES;
                self.long = self.config.long_containers
                    && advertised
                        .is_some_and(|c| c.flags.contains(CapabilityFlags::LONG_CONTAINERS));
                self.assembler.set_config(Self::assembler_config(
                    &self.config,
                    self.large,
                    self.long,
                ));
                let mut caps = if self.large {
                    self.capabilities_large()
                } else {
                    self.capabilities()
                };
                if self.long {
                    caps.flags = caps.flags | CapabilityFlags::LONG_CONTAINERS;
                }
                let mut reply = [0u8; crate::wire::capabilities::CAPABILITIES_LARGE_LEN];
                if let Ok(n) = caps.emit(&mut reply) {
                    self.send_control(tid, ControlCmd::Capabilities, reply.get(..n).unwrap_or(&[]));
                }
            }
            ControlMessage::KeyExchange(step) => self.on_key_exchange(now, tid, step),
            ControlMessage::StreamEndC2P => self.push(Record::StreamEndC2P { tid }),
            ControlMessage::Unknown { cmd, .. } => self.warn(Warning::UnknownControl { tid, cmd }),
            _ => self.warn(Warning::UnexpectedControl {
                tid,
                cmd: cmd.bits(),
            }),
        }
    }

    fn on_key_exchange(&mut self, now: Instant, tid: u8, payload: &[u8]) {
        let step = payload.first().copied();
        let kx = core::mem::replace(&mut self.kx, Kx::Unavailable);
        self.kx = match (step, kx) {
            (Some(1), Kx::AwaitStep1 | Kx::AwaitStep3 { .. })
                if self.config.att_mtu < super::central::MIN_ATT_MTU_FOR_KEY_EXCHANGE =>
            {
                // Step 2 is one 133-byte control container: it cannot travel at this MTU.
                self.send_error(tid, ErrorCode::KeyExchangeFailed);
                Kx::AwaitStep1
            }
            (Some(1), Kx::AwaitStep1 | Kx::AwaitStep3 { .. }) => {
                let Some(identity) = self.identity.as_ref() else {
                    self.send_error(tid, ErrorCode::KeyExchangeFailed);
                    return;
                };
                let ephemeral = X25519Secret::random(&mut self.rng);
                let hs = PeripheralHandshake::new(self.provider.clone(), identity.clone());
                match hs.receive_step1(payload, ephemeral) {
                    Ok((hs, step2)) => {
                        self.send_control(tid, ControlCmd::KeyExchange, &step2);
                        Kx::AwaitStep3 {
                            deadline: now + self.config.handshake_timeout,
                            hs,
                        }
                    }
                    Err(_) => {
                        self.send_error(tid, ErrorCode::KeyExchangeFailed);
                        Kx::AwaitStep1
                    }
                }
            }
            (Some(3), Kx::AwaitStep3 { hs, .. }) => {
                let mut nonce = [0u8; 12];
                self.rng.fill_bytes(&mut nonce);
                match hs.receive_step3(payload, nonce) {
                    Ok((session, step4)) => {
                        self.send_control(tid, ControlCmd::KeyExchange, &step4);
                        self.push(Record::Secured);
                        Kx::Established(session)
                    }
                    Err(_) => {
                        // Unlike the reference (which needs a reconnect), a failed step 3 lets
                        // the central start over with a new step 1.
                        self.send_error(tid, ErrorCode::KeyExchangeFailed);
                        Kx::AwaitStep1
                    }
                }
            }
            (_, other) => {
                // Out of order, unknown step byte, a second handshake on an established
                // session, or no identity: refuse loudly instead of staying silent.
                self.send_error(tid, ErrorCode::KeyExchangeFailed);
                other
            }
        };
    }

    fn on_assembly_error(&mut self, e: AssembleError) {
        let reply = match e {
            AssembleError::SequenceGap { tid, .. } => Some((tid, ErrorCode::SequenceGap)),
            AssembleError::TooLarge { tid, .. }
            | AssembleError::Capacity { tid }
            | AssembleError::ContainerTooLong { tid, .. }
            | AssembleError::LargeNotNegotiated { tid, .. } => {
                Some((tid, ErrorCode::RequestTooLarge))
            }
            AssembleError::NoFreeSlot { tid } => Some((tid, ErrorCode::Busy)),
            // A SUBSEQUENT without its FIRST: most likely the tail of a transaction we already
            // refused; replying again would only duplicate that error.
            _ => None,
        };
        if let Some((tid, code)) = reply {
            self.send_error(tid, code);
        }
        self.warn(Warning::Assembly(e));
    }

    fn on_request(&mut self, done: Completed) {
        let tid = done.tid;
        if self.pending.len() >= self.config.max_pending_requests || self.events.free() < 2 {
            self.assembler.release(done);
            self.send_error(tid, ErrorCode::Busy);
            if self.events.free() < 2 {
                self.warn(Warning::EventQueueFull);
            }
            return;
        }
        let bytes = self.assembler.message_mut(done);
        let range = match self.kx.session_mut() {
            Some(session) => match session.open_in_place(bytes) {
                Ok(r) => r,
                Err(e) => {
                    self.assembler.release(done);
                    self.send_error(tid, ErrorCode::DecryptFailed);
                    self.warn(Warning::Decrypt(e));
                    return;
                }
            },
            None if self.config.require_encryption => {
                self.assembler.release(done);
                self.send_error(tid, ErrorCode::EncryptionRequired);
                self.warn(Warning::PlaintextRejected { tid });
                return;
            }
            None => 0..bytes.len(),
        };
        let plain = self
            .assembler
            .message(done)
            .get(range.clone())
            .unwrap_or(&[]);
        let parsed = if self.large {
            Command::parse_large(plain)
        } else {
            Command::parse(plain)
        };
        let parsed = parsed.map(|c| (c.kind, c.name.len(), c.data.len()));
        match parsed {
            Ok((CommandType::Request, name_len, data_len)) => {
                self.pending.insert(tid);
                let header_len = Command::header_len_large(name_len, data_len);
                let msg = MsgRef::new(done, range.start + header_len, data_len);
                let name_start = u32::try_from(range.start + 2).unwrap_or(u32::MAX);
                let name_len = u8::try_from(name_len).unwrap_or(u8::MAX);
                self.push(Record::Request {
                    tid,
                    name_start,
                    name_len,
                    msg,
                });
            }
            Ok(_) => {
                self.assembler.release(done);
                self.send_error(tid, ErrorCode::DecodeFailed);
                self.warn(Warning::WrongCommandType { tid });
            }
            Err(e) => {
                self.assembler.release(done);
                self.send_error(tid, ErrorCode::DecodeFailed);
                self.warn(Warning::MalformedCommand(e));
            }
        }
    }

    fn push(&mut self, record: Record) {
        if let Err(Record::Request { tid, msg, .. }) = self.events.push(record) {
            self.assembler.release(msg.done);
            self.pending.remove(tid);
            self.send_error(tid, ErrorCode::Busy);
        }
    }

    fn warn(&mut self, warning: Warning) {
        if self.events.free() > EVENT_HEADROOM {
            self.push(Record::Warning(warning));
        } else {
            self.dropped_warnings = self.dropped_warnings.saturating_add(1);
        }
    }
}

impl<P: CryptoProvider, R, A: Buffer, O: Buffer, const SLOTS: usize> core::fmt::Debug
    for Peripheral<P, R, A, O, SLOTS>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Peripheral")
            .field("encrypted", &self.kx.is_established())
            .field("next_tid", &self.next_tid)
            .field("pending", &self.pending.len())
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

// Keep the data-length bound visible to readers of this module.
const _: () = assert!(MAX_DATA_LEN == 65_535);
