//! The central (client) role: connection setup, calls, streams, timeouts and BUSY retries.

use core::time::Duration;

use rand_core::CryptoRngCore;
use subtle::ConstantTimeEq;

use super::events::{Ring, Warning};
use super::outbox::{ControlQueue, Outbox};
use super::{
    CallError, CloseReason, ConfigError, EVENT_HEADROOM, EVENT_QUEUE_LEN, EnqueueError,
    EventQueueFull, MsgRef, Partials, TidSet, bytes, check_att_mtu, check_large_limit,
    enqueue_command, enqueue_framed, wire_len,
};
use crate::Instant;
use crate::assemble::{AssembleError, Assembler, AssemblerConfig};
use crate::buf::Buffer;
use crate::crypto::{CryptoProvider, X25519Secret};
use crate::handshake::{
    CentralAwaitStep2, CentralAwaitStep4, CentralHandshake, CentralVerifyIdentity,
};
use crate::session::Session;
use crate::split::classic_max_message_len;
use crate::wire::capabilities::{Capabilities, CapabilityFlags, LargeLimits};
use crate::wire::command::{Command, CommandType, MAX_DATA_LEN, MAX_LARGE_DATA_LEN, MAX_NAME_LEN};
use crate::wire::container::{Container, ContainerKind, ControlCmd};
use crate::wire::control::ControlMessage;
use crate::wire::error_code::ErrorCode;
use crate::{Direction, Role};

/// ATT MTU the key exchange needs: step 2 is a single 133-byte control container.
pub const MIN_ATT_MTU_FOR_KEY_EXCHANGE: usize = 136;

/// How the central decides whether to trust the peripheral's Ed25519 identity key.
///
/// bleRPC's handshake signature covers only the ephemeral keys, so without pinning a
/// man-in-the-middle can substitute its own identity. Pinning is therefore on by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pinning {
    /// Accept only this key (compared in constant time).
    Expect([u8; 32]),
    /// Emit [`CentralEvent::IdentityPresented`] and wait for
    /// [`Central::accept_identity`] or [`Central::reject_identity`]; the runtime consults its
    /// known-keys store (trust on first use). If nobody answers, the handshake times out:
    /// fail-closed.
    Decide,
    /// Accept any key. An explicit opt-out: the connection is open to man-in-the-middle attacks.
    Disabled,
}

/// How the central sends its setup requests (TIMEOUT, CAPABILITIES, KEY_EXCHANGE step 1).
///
/// Each setup request is a control container the peripheral answers with the same tid. The
/// reference centrals send each one after the previous reply: four round trips before the
/// first call with the key exchange, each one or two connection intervals on BLE. Peripherals
/// answer control requests in the order they arrive (the reference firmware answers them inline
/// as they are written, as does a `blerpc` peripheral), so requests that do not depend on a
/// reply can go out together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupPipelining {
    /// Each request after the previous reply (the reference centrals' order).
    Off,
    /// TIMEOUT and CAPABILITIES back to back; step 1 after the CAPABILITIES reply, when it
    /// announces encryption. One round trip fewer. A TIMEOUT left unanswered when the
    /// CAPABILITIES reply arrives is taken as never answered (the default 100 ms stays, as
    /// when a sequential TIMEOUT request times out).
    Requests,
    /// TIMEOUT, CAPABILITIES and step 1 back to back: two round trips fewer. Step 1 goes out
    /// before the central knows whether the peripheral supports encryption (it carries only an
    /// ephemeral public key); if the CAPABILITIES reply does not announce encryption, the early
    /// handshake is dropped and setup goes on as it would have (a reply to step 1 arriving later
    /// is ignored with a warning). The peripheral must answer in order: a step 2 arriving
    /// before the CAPABILITIES reply is ignored with a warning, and the handshake then times
    /// out. Needs `att_mtu` ≥ [`MIN_ATT_MTU_FOR_KEY_EXCHANGE`]; below it this is `Requests`.
    KeyExchange,
}

/// Configuration of a [`Central`]. Every limit is explicit; defaults follow the reference centrals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CentralConfig {
    /// ATT MTU of the link (containers are at most `att_mtu - 3` bytes). Default 247.
    pub att_mtu: usize,
    /// Refuse to run without an encrypted session. Default `true` (reference audit item C-1).
    pub require_encryption: bool,
    /// Identity policy. Default [`Pinning::Decide`].
    pub pinning: Pinning,
    /// Skip the TIMEOUT request (as the C central does). Default `false`.
    pub skip_timeout_request: bool,
    /// Which setup requests go out without waiting for the previous reply. Default
    /// [`SetupPipelining::Off`] (the reference centrals' order); the `blerpc` runtime uses
    /// [`SetupPipelining::KeyExchange`] on its stream links and [`SetupPipelining::Requests`]
    /// on BLE.
    pub setup_pipelining: SetupPipelining,
    /// Send the 6-byte CAPABILITIES request (`true`, Python/mobile) or the empty one (`false`,
    /// C central). Default `true`.
    pub capabilities_payload: bool,
    /// Wait for the TIMEOUT and CAPABILITIES replies. Default 1 s.
    pub setup_timeout: Duration,
    /// Wait for each key-exchange reply (and for the identity decision). Default 2 s.
    pub handshake_step_timeout: Duration,
    /// Deadline of a call, from `start_call` (or `finish_stream`) to its response or first stream
    /// item. Default 5 s.
    pub call_timeout: Duration,
    /// Longest gap between two items of a peripheral→central stream. Default 2 s.
    pub stream_idle_timeout: Duration,
    /// A partially received response idle this long is dropped. Default 10 s.
    pub reassembly_timeout: Duration,
    /// Largest response accepted (wire bytes, after encryption). Default 16 MiB
    /// ([`super::DEFAULT_MAX_LARGE_MESSAGE_LEN`]); beyond 65,535 only reachable with the
    /// large-message extension (at most `u32::MAX` then).
    pub max_response_len: usize,
    /// Calls in flight at once (at most the `SLOTS` of the central type). Default 4.
    pub max_calls_in_flight: usize,
    /// Retries of a unary call answered with BUSY. Default 3.
    pub busy_retries: u8,
    /// Backoff before the first BUSY retry; doubles on each retry. Default 20 ms.
    pub busy_backoff: Duration,
    /// Bytes of requests waiting for the link. Default 128 KiB. With the large-message
    /// extension, a request must also fit here (minus a 6-byte entry header), or it fails with
    /// [`CallError::RequestTooLarge`](super::CallError::RequestTooLarge).
    pub max_outbox_bytes: usize,
    /// Announce the large-message extension (flags bit 1 of the CAPABILITIES request; see
    /// `docs/protocol.md`): `u32` message lengths, so requests up to the peripheral's announced
    /// limit and responses up to `max_response_len`. In force only if the peripheral announces it
    /// too; otherwise the classic limits apply. Default `false` (the reference centrals' bytes);
    /// the `blerpc` runtime turns it on. The request is then always the 6-byte one, whatever
    /// `capabilities_payload` says.
    pub large_messages: bool,
    /// Announce the long-container extension (flags bit 2 of the CAPABILITIES request; see
    /// `docs/protocol.md`): containers of up to
    /// [`MAX_LONG_CONTAINER_LEN`](crate::wire::container::MAX_LONG_CONTAINER_LEN) bytes both ways,
    /// whatever `att_mtu`, in force only if the peripheral announces it too. Only for links that
    /// carry such PDUs (TCP, TLS, WebSocket, memory), never BLE. Default `false`; the `blerpc`
    /// runtime turns it on for stream links. The request is then always the 6-byte one.
    pub long_containers: bool,
}

impl Default for CentralConfig {
    fn default() -> Self {
        CentralConfig {
            att_mtu: 247,
            require_encryption: true,
            pinning: Pinning::Decide,
            skip_timeout_request: false,
            setup_pipelining: SetupPipelining::Off,
            capabilities_payload: true,
            setup_timeout: Duration::from_secs(1),
            handshake_step_timeout: Duration::from_secs(2),
            call_timeout: Duration::from_secs(5),
            stream_idle_timeout: Duration::from_secs(2),
            reassembly_timeout: Duration::from_secs(10),
            max_response_len: super::DEFAULT_MAX_LARGE_MESSAGE_LEN,
            max_calls_in_flight: 4,
            busy_retries: 3,
            busy_backoff: Duration::from_millis(20),
            max_outbox_bytes: 128 * 1024,
            large_messages: false,
            long_containers: false,
        }
    }
}

/// Identifies a call for the lifetime of a [`Central`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallId(pub u32);

/// The shape of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// One request, one response.
    Unary,
    /// One request, then any number of responses ended by STREAM_END_P2C
    /// (peripheral→central stream, `p2c`).
    ServerStream,
    /// Any number of requests ([`Central::send_stream_item`]), STREAM_END_C2P
    /// ([`Central::finish_stream`]), then one response (central→peripheral stream, `c2p`).
    ClientStream,
}

/// What happened on a [`Central`]. Byte slices borrow the connection's reassembly buffer and stay
/// valid until the next [`Central::poll_event`].
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CentralEvent<'a> {
    /// Setup finished; calls may start.
    Connected {
        /// `true` when an E2E session is established.
        encrypted: bool,
    },
    /// [`Pinning::Decide`]: the peripheral presented this identity key with a valid handshake
    /// signature. Answer with [`Central::accept_identity`] or [`Central::reject_identity`].
    IdentityPresented {
        /// The peripheral's Ed25519 public key.
        identity: [u8; 32],
    },
    /// The response of a unary call, or the final response of a central→peripheral stream.
    Response {
        /// The call.
        call: CallId,
        /// The response's protobuf data.
        data: &'a [u8],
    },
    /// One item of a peripheral→central stream.
    StreamItem {
        /// The call.
        call: CallId,
        /// The item's protobuf data.
        data: &'a [u8],
    },
    /// The peripheral→central stream ended.
    StreamEnd {
        /// The call.
        call: CallId,
    },
    /// The call failed; no further events for it.
    CallFailed {
        /// The call.
        call: CallId,
        /// Why.
        error: CallError,
    },
    /// The connection closed; every call has failed with [`CallError::Closed`].
    Closed {
        /// Why.
        reason: CloseReason,
    },
    /// Something was dropped or ignored (diagnostics only).
    Warning(Warning),
}

#[derive(Clone, Copy, Debug)]
enum Record {
    Connected { encrypted: bool },
    IdentityPresented([u8; 32]),
    Response { call: CallId, msg: MsgRef },
    StreamItem { call: CallId, msg: MsgRef },
    StreamEnd { call: CallId },
    CallFailed { call: CallId, error: CallError },
    Closed(CloseReason),
    Warning(Warning),
}

enum State<P: CryptoProvider> {
    AwaitTimeout {
        tid: u8,
        deadline: Instant,
    },
    AwaitCapabilities {
        tid: u8,
        deadline: Instant,
        /// Step 1 sent with the CAPABILITIES request ([`SetupPipelining::KeyExchange`]).
        early: EarlyStep1<P>,
    },
    AwaitStep2 {
        tid: u8,
        deadline: Instant,
        hs: CentralAwaitStep2<P>,
    },
    VerifyIdentity {
        deadline: Instant,
        hs: CentralVerifyIdentity<P>,
    },
    AwaitStep4 {
        tid: u8,
        deadline: Instant,
        hs: CentralAwaitStep4<P>,
    },
    /// Set up; with the E2E session if the key exchange ran. The session lives in the state so
    /// that the AES-GCM key (about 0.5 KB with ring) is stored once, not beside the handshake's.
    Ready(Option<Session<P::Aead>>),
    Closed,
}

/// The key exchange's step 1 sent before the CAPABILITIES reply.
enum EarlyStep1<P: CryptoProvider> {
    /// Not sent.
    None,
    /// Sent with this tid; its step 2 is handled once CAPABILITIES has been answered.
    Sent { tid: u8, hs: CentralAwaitStep2<P> },
    /// The peripheral answered it with ERROR before the CAPABILITIES reply.
    Refused(ErrorCode),
}

impl<P: CryptoProvider> State<P> {
    fn deadline(&self) -> Option<Instant> {
        match self {
            State::AwaitTimeout { deadline, .. }
            | State::AwaitCapabilities { deadline, .. }
            | State::AwaitStep2 { deadline, .. }
            | State::VerifyIdentity { deadline, .. }
            | State::AwaitStep4 { deadline, .. } => Some(*deadline),
            State::Ready(_) | State::Closed => None,
        }
    }
    fn session_mut(&mut self) -> Option<&mut Session<P::Aead>> {
        match self {
            State::Ready(session) => session.as_mut(),
            _ => None,
        }
    }
    fn is_encrypted(&self) -> bool {
        matches!(self, State::Ready(Some(_)))
    }
}

struct Call<O: Buffer> {
    id: CallId,
    kind: CallKind,
    /// Transaction id of the (latest attempt of the) request.
    tid: u8,
    /// The plaintext request command (unary / server stream, kept for BUSY retries) or, for a
    /// client stream, a command header carrying just the name.
    request: O,
    deadline: Option<Instant>,
    attempts: u8,
    retry_at: Option<Instant>,
    /// Client stream: tids of the items and of STREAM_END_C2P.
    upload_tids: TidSet,
    finished: bool,
}

impl<O: Buffer> Call<O> {
    /// The stored command's name as bytes, read from its header without validating it again
    /// (it was valid UTF-8 when the call started): for comparisons on every response.
    fn name_bytes(&self) -> &[u8] {
        let request = self.request.as_slice();
        let len = request.get(1).map_or(0, |l| usize::from(*l));
        request.get(2..2 + len).unwrap_or(&[])
    }
}

/// The central (client) side of one bleRPC connection. See the [module docs](super).
///
/// `A` holds reassembled responses (one per slot), `O` queued requests; `SLOTS` bounds both the
/// responses reassembled at once and the calls in flight. With `alloc`, `Vec<u8>` for both gives
/// a central whose idle memory is a few hundred bytes; without, `ArrayBuf<N>` fixes it.
pub struct Central<P: CryptoProvider, R, A: Buffer, O: Buffer, const SLOTS: usize> {
    config: CentralConfig,
    provider: P,
    rng: R,
    state: State<P>,
    next_tid: u8,
    next_call: u32,
    capabilities: Option<Capabilities>,
    /// The peripheral's limits while the large-message extension is in force.
    large: Option<LargeLimits>,
    /// The long-container extension is in force (both sides announced it).
    long: bool,
    peer_timeout_ms: u16,
    /// The tid of a TIMEOUT request sent together with CAPABILITIES and not answered yet.
    pending_timeout: Option<u8>,
    identity: Option<[u8; 32]>,
    assembler: Assembler<A, SLOTS>,
    partials: Partials<SLOTS>,
    outbox: Outbox<O>,
    controls: ControlQueue<0>,
    calls: [Option<Call<O>>; SLOTS],
    events: Ring<Record, EVENT_QUEUE_LEN>,
    pending_release: Option<MsgRef>,
    dropped_warnings: u32,
}

impl<P, R, A, O, const SLOTS: usize> Central<P, R, A, O, SLOTS>
where
    P: CryptoProvider,
    R: CryptoRngCore,
    A: Buffer + Default,
    O: Buffer + Default,
{
    /// Creates a central for a link that has just connected and starts the setup sequence
    /// (TIMEOUT, CAPABILITIES, key exchange). `rng` supplies ephemeral keys and confirmation
    /// nonces.
    pub fn new(
        config: CentralConfig,
        provider: P,
        rng: R,
        now: Instant,
    ) -> Result<Self, ConfigError> {
        check_att_mtu(config.att_mtu)?;
        if config.max_calls_in_flight == 0 || config.max_calls_in_flight > SLOTS {
            return Err(ConfigError::Limit {
                field: "max_calls_in_flight",
            });
        }
        if config.max_response_len == 0 {
            return Err(ConfigError::Limit {
                field: "max_response_len",
            });
        }
        check_large_limit(
            config.large_messages,
            config.max_response_len,
            "max_response_len",
        )?;
        let assembler = Assembler::new(AssemblerConfig {
            max_message_len: config.max_response_len,
            max_in_flight: SLOTS,
            large_messages: false,
            long_containers: false,
        });
        let mut central = Central {
            config,
            provider,
            rng,
            state: State::Ready(None),
            next_tid: 0,
            next_call: 0,
            capabilities: None,
            large: None,
            long: false,
            peer_timeout_ms: 100,
            pending_timeout: None,
            identity: None,
            assembler,
            partials: Partials::new(),
            outbox: Outbox::new(config.max_outbox_bytes),
            controls: ControlQueue::new(),
            calls: core::array::from_fn(|_| None),
            events: Ring::new(),
            pending_release: None,
            dropped_warnings: 0,
        };
        if config.skip_timeout_request {
            central.request_capabilities(now);
        } else {
            let tid = central.alloc_tid();
            central.send_control(tid, ControlCmd::Timeout, &[]);
            if config.setup_pipelining == SetupPipelining::Off {
                central.state = State::AwaitTimeout {
                    tid,
                    deadline: now + central.config.setup_timeout,
                };
            } else {
                central.pending_timeout = Some(tid);
                central.request_capabilities(now);
            }
        }
        Ok(central)
    }

    // ----- accessors -------------------------------------------------------------------------

    /// The configuration in force.
    pub fn config(&self) -> &CentralConfig {
        &self.config
    }
    /// `true` once setup has finished and until the connection closes.
    pub fn is_ready(&self) -> bool {
        matches!(self.state, State::Ready(_))
    }
    /// `true` after the connection closed.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }
    /// `true` while an E2E session is established. Closing drops the session (and its keys):
    /// `false` after [`Central::is_closed`].
    pub fn is_encrypted(&self) -> bool {
        self.state.is_encrypted()
    }
    /// The peripheral's CAPABILITIES, once received.
    pub fn capabilities(&self) -> Option<Capabilities> {
        self.capabilities
    }
    /// The peripheral's limits when the large-message extension is in force (both sides
    /// announced it); `None` otherwise.
    pub fn large_messages(&self) -> Option<LargeLimits> {
        self.large
    }
    /// `true` when the long-container extension is in force (both sides announced it).
    pub fn long_containers(&self) -> bool {
        self.long
    }
    /// The longest container [`Central::poll_transmit`] can write: `att_mtu - 3`, or
    /// [`MAX_LONG_CONTAINER_LEN`](crate::wire::container::MAX_LONG_CONTAINER_LEN) when
    /// `long_containers` is configured. Size its output buffer to this.
    pub fn max_container_len(&self) -> usize {
        super::max_container_len(self.config.att_mtu, self.config.long_containers)
    }
    /// The output buffer [`Central::poll_transmit`] needs for what is queued now: `att_mtu - 3`,
    /// or, while long containers are in force, enough for the longest container the queued data
    /// makes (at most [`Central::max_container_len`]). Idle connections thus keep a small
    /// buffer; a shorter buffer only makes `poll_transmit` return `None`, losing nothing.
    pub fn transmit_len(&self) -> usize {
        super::transmit_len(self.config.att_mtu, self.long, self.outbox.queued())
    }
    /// The peripheral's TIMEOUT value in milliseconds (100 until it answers).
    pub fn peer_timeout_ms(&self) -> u16 {
        self.peer_timeout_ms
    }
    /// The peripheral's identity key, once the handshake has verified its signature.
    pub fn peer_identity(&self) -> Option<[u8; 32]> {
        self.identity
    }
    /// Bytes the outbox can still take.
    pub fn outbox_free(&self) -> usize {
        self.outbox.free()
    }
    /// Calls in flight.
    pub fn calls_in_flight(&self) -> usize {
        self.calls.iter().flatten().count()
    }
    /// Warnings not queued because the event queue was nearly full.
    pub fn dropped_warnings(&self) -> u32 {
        self.dropped_warnings
    }
    /// Largest request data (bytes) a call can carry right now for a command name of
    /// `name_len` bytes, from the peripheral's `max_request` (wire length) and the MTU.
    pub fn max_request_data(&self, name_len: usize) -> usize {
        let overhead = wire_len(name_len, 0, self.state.is_encrypted());
        let data = self.max_request_wire().saturating_sub(overhead);
        if self.large.is_none() {
            return data.min(MAX_DATA_LEN);
        }
        // Beyond 65,535 bytes the command header grows by two bytes (u32 data_len).
        let data = if data > MAX_DATA_LEN {
            data.saturating_sub(2).max(MAX_DATA_LEN)
        } else {
            data
        };
        data.min(MAX_LARGE_DATA_LEN)
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

    /// Changes the ATT MTU (after an MTU exchange). Messages already being split keep the MTU
    /// they started with.
    pub fn set_att_mtu(&mut self, att_mtu: usize) -> Result<(), ConfigError> {
        check_att_mtu(att_mtu)?;
        self.config.att_mtu = att_mtu;
        Ok(())
    }

    // ----- user operations -------------------------------------------------------------------

    /// Starts a call. For [`CallKind::ClientStream`], `request` must be empty: the items are sent
    /// with [`Central::send_stream_item`]. The call keeps its own copy of the request command
    /// (for BUSY retries); [`Central::start_call_framed`] takes one already framed instead.
    pub fn start_call(
        &mut self,
        now: Instant,
        name: &str,
        request: &[u8],
        kind: CallKind,
    ) -> Result<CallId, CallError> {
        self.check_call(name, request.len(), kind)?;
        // Keep the plaintext command (the name alone for client streams).
        // (In our own encoding: the extended header only for data beyond 65,535 bytes, which
        // check_request_len allows only with the extension in force.)
        // Header and data appended (not a zero-filled buffer written over: for a long request
        // that would be one more pass over every byte).
        let mut stored = O::default();
        let header_len = Command::header_len_large(name.len(), request.len());
        let needed = header_len + request.len();
        let mut header = [0u8; Command::header_len_large(MAX_NAME_LEN, usize::MAX)];
        let header = header.get_mut(..header_len).ok_or(CallError::InvalidName)?;
        Command::emit_header_large(CommandType::Request, name, request.len(), header)
            .map_err(|_| CallError::InvalidName)?;
        let full = |_| CallError::OutboxFull { needed, free: 0 };
        stored.try_reserve(needed).map_err(full)?;
        stored.try_extend(header).map_err(full)?;
        stored.try_extend(request).map_err(full)?;
        self.insert_call(now, stored, kind).map_err(|(e, _)| e)
    }

    /// Starts a call whose request command is already framed in `command`: a REQUEST command
    /// header as [`Command::emit_header_large`] writes it (the extended form only for data above
    /// 65,535 bytes), followed by exactly its protobuf data. On success the call takes the buffer
    /// (leaving `command` empty) instead of copying the request, so a runtime can encode the
    /// protobuf message straight behind the header; on failure `command` is left as it was, to
    /// retry after [`CallError::OutboxFull`]. A buffer that is not exactly one REQUEST command
    /// is [`CallError::MalformedCommand`]; every other check is [`Central::start_call`]'s.
    pub fn start_call_framed(
        &mut self,
        now: Instant,
        command: &mut O,
        kind: CallKind,
    ) -> Result<CallId, CallError> {
        let cmd =
            Command::parse_large(command.as_slice()).map_err(|_| CallError::MalformedCommand)?;
        let framed_len = Command::header_len_large(cmd.name.len(), cmd.data.len()) + cmd.data.len();
        if cmd.kind != CommandType::Request || framed_len != command.len() {
            return Err(CallError::MalformedCommand);
        }
        self.check_call(cmd.name, cmd.data.len(), kind)?;
        let stored = core::mem::take(command);
        self.insert_call(now, stored, kind).map_err(|(e, stored)| {
            *command = stored;
            e
        })
    }

    /// The checks [`Central::start_call`] makes before it stores anything.
    fn check_call(&self, name: &str, data_len: usize, kind: CallKind) -> Result<(), CallError> {
        self.check_ready()?;
        if name.is_empty() || name.len() > MAX_NAME_LEN {
            return Err(CallError::InvalidName);
        }
        if data_len > MAX_LARGE_DATA_LEN {
            return Err(CallError::DataTooLong { len: data_len });
        }
        if kind == CallKind::ClientStream && data_len != 0 {
            return Err(CallError::WrongCallKind);
        }
        let in_flight = self.calls_in_flight();
        if in_flight >= self.config.max_calls_in_flight {
            return Err(CallError::TooManyCalls {
                limit: self.config.max_calls_in_flight,
            });
        }
        if kind != CallKind::Unary
            && self
                .calls
                .iter()
                .flatten()
                .any(|c| c.kind != CallKind::Unary)
        {
            return Err(CallError::StreamActive);
        }
        if kind != CallKind::ClientStream {
            self.check_request_len(name.len(), data_len)?;
        }
        Ok(())
    }

    /// Sends a checked call's stored request command (not for client streams) and records the
    /// call; on failure the stored command comes back with the error.
    fn insert_call(
        &mut self,
        now: Instant,
        stored: O,
        kind: CallKind,
    ) -> Result<CallId, (CallError, O)> {
        let id = CallId(self.next_call);
        let mut call = Call {
            id,
            kind,
            tid: 0,
            request: stored,
            deadline: None,
            attempts: 0,
            retry_at: None,
            upload_tids: TidSet::default(),
            finished: false,
        };
        let Some(slot) = self.calls.iter().position(Option::is_none) else {
            let limit = self.config.max_calls_in_flight;
            return Err((CallError::TooManyCalls { limit }, call.request));
        };
        if kind != CallKind::ClientStream {
            match self.send_request(&mut call.request) {
                Ok(tid) => call.tid = tid,
                Err(e) => return Err((e, call.request)),
            }
            call.attempts = 1;
            call.deadline = Some(now + self.config.call_timeout);
        }
        if let Some(s) = self.calls.get_mut(slot) {
            *s = Some(call);
        }
        self.next_call = self.next_call.wrapping_add(1);
        Ok(id)
    }

    /// Sends one item of a central→peripheral stream.
    pub fn send_stream_item(
        &mut self,
        now: Instant,
        call: CallId,
        item: &[u8],
    ) -> Result<(), CallError> {
        let _ = now;
        self.check_ready()?;
        if item.len() > MAX_LARGE_DATA_LEN {
            return Err(CallError::DataTooLong { len: item.len() });
        }
        let idx = self.call_index(call).ok_or(CallError::UnknownCall)?;
        let (name_len, finished, kind) = match self.calls.get(idx).and_then(Option::as_ref) {
            Some(c) => (c.name_bytes().len(), c.finished, c.kind),
            None => return Err(CallError::UnknownCall),
        };
        if kind != CallKind::ClientStream || finished {
            return Err(CallError::WrongCallKind);
        }
        self.check_request_len(name_len, item.len())?;
        let tid = self.alloc_tid();
        let Some(c) = self.calls.get_mut(idx).and_then(Option::as_mut) else {
            return Err(CallError::UnknownCall);
        };
        let name = Command::parse_large(c.request.as_slice())
            .map(|c| c.name)
            .unwrap_or("");
        enqueue_command(
            &mut self.outbox,
            self.state.session_mut(),
            self.large.is_some(),
            tid,
            CommandType::Request,
            name,
            bytes(item),
        )
        .map_err(enqueue_to_call_error)?;
        c.upload_tids.insert(tid);
        Ok(())
    }

    /// Ends a central→peripheral stream (STREAM_END_C2P); the final response arrives as
    /// [`CentralEvent::Response`].
    pub fn finish_stream(&mut self, now: Instant, call: CallId) -> Result<(), CallError> {
        self.check_ready()?;
        let idx = self.call_index(call).ok_or(CallError::UnknownCall)?;
        let tid = self.next_tid;
        let call_timeout = self.config.call_timeout;
        let Some(c) = self.calls.get_mut(idx).and_then(Option::as_mut) else {
            return Err(CallError::UnknownCall);
        };
        if c.kind != CallKind::ClientStream || c.finished {
            return Err(CallError::WrongCallKind);
        }
        self.outbox
            .push_control(tid, ControlCmd::StreamEndC2P, &[])
            .map_err(|f| CallError::OutboxFull {
                needed: f.needed,
                free: f.free,
            })?;
        c.upload_tids.insert(tid);
        c.finished = true;
        c.deadline = Some(now + call_timeout);
        self.next_tid = self.next_tid.wrapping_add(1);
        Ok(())
    }

    /// Overrides the deadline of a call.
    pub fn set_call_deadline(&mut self, call: CallId, deadline: Instant) -> Result<(), CallError> {
        let idx = self.call_index(call).ok_or(CallError::UnknownCall)?;
        if let Some(c) = self.calls.get_mut(idx).and_then(Option::as_mut) {
            c.deadline = Some(deadline);
        }
        Ok(())
    }

    /// Forgets a call. Anything the peripheral still sends for it is dropped as stale.
    pub fn cancel(&mut self, call: CallId) -> Result<(), CallError> {
        let idx = self.call_index(call).ok_or(CallError::UnknownCall)?;
        if let Some(slot) = self.calls.get_mut(idx) {
            *slot = None;
        }
        Ok(())
    }

    /// Trusts the identity key presented in [`CentralEvent::IdentityPresented`] and continues the
    /// handshake.
    pub fn accept_identity(&mut self, now: Instant) {
        if !matches!(self.state, State::VerifyIdentity { .. }) {
            return;
        }
        if let State::VerifyIdentity { hs, .. } = core::mem::replace(&mut self.state, State::Closed)
        {
            self.continue_handshake(now, hs);
        }
    }

    /// Refuses the identity key presented in [`CentralEvent::IdentityPresented`]; the connection
    /// closes with [`CloseReason::IdentityRejected`].
    pub fn reject_identity(&mut self, now: Instant) {
        let _ = now;
        if matches!(self.state, State::VerifyIdentity { .. }) {
            self.close_with(CloseReason::IdentityRejected);
        }
    }

    /// Closes the connection locally: every call fails with [`CallError::Closed`].
    pub fn close(&mut self, now: Instant) {
        let _ = now;
        if !self.is_closed() {
            self.close_with(CloseReason::Local);
        }
    }

    // ----- inputs ----------------------------------------------------------------------------

    /// Handles one PDU from the link. Returns [`EventQueueFull`] (and leaves the PDU unconsumed)
    /// when the caller has not drained [`Central::poll_event`].
    pub fn handle_input(&mut self, now: Instant, pdu: &[u8]) -> Result<(), EventQueueFull> {
        if self.is_closed() {
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
        match container.kind {
            ContainerKind::Control(cmd) => {
                self.handle_control(now, container.tid, cmd, container.payload)
            }
            ContainerKind::Unknown => {
                self.warn(Warning::UnknownContainerType { tid: container.tid })
            }
            ContainerKind::First { .. }
            | ContainerKind::LargeFirst { .. }
            | ContainerKind::Subsequent => self.handle_data(now, &container),
        }
        Ok(())
    }

    /// Handles the passing of the instant returned by [`Central::poll_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.is_closed() {
            return;
        }
        if self.state.deadline().is_some_and(|d| d <= now) {
            self.setup_timed_out(now);
        }
        while let Some(tid) = self
            .partials
            .pop_expired(now, self.config.reassembly_timeout)
        {
            self.assembler.discard(tid);
            self.warn(Warning::ReassemblyTimeout { tid });
        }
        for idx in 0..SLOTS {
            if self.events.free() < 2 {
                break;
            }
            let Some(call) = self.calls.get_mut(idx).and_then(Option::as_mut) else {
                continue;
            };
            if call.retry_at.is_some_and(|t| t <= now) {
                call.retry_at = None;
                let mut request = core::mem::take(&mut call.request);
                let result = self.send_request(&mut request);
                let Some(call) = self.calls.get_mut(idx).and_then(Option::as_mut) else {
                    continue;
                };
                call.request = request;
                match result {
                    Ok(tid) => {
                        call.tid = tid;
                        call.attempts = call.attempts.saturating_add(1);
                    }
                    Err(error) => {
                        let id = call.id;
                        self.fail_call(idx, id, error);
                        continue;
                    }
                }
            }
            let Some(call) = self.calls.get(idx).and_then(Option::as_ref) else {
                continue;
            };
            if call.retry_at.is_none() && call.deadline.is_some_and(|d| d <= now) {
                let id = call.id;
                self.fail_call(idx, id, CallError::Timeout);
            }
        }
    }

    // ----- outputs ---------------------------------------------------------------------------

    /// Writes the next PDU for the link into `out` (which must hold `att_mtu - 3` bytes) and
    /// returns its length.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut [u8]) -> Option<usize> {
        let _ = now;
        if let Some(n) = self.controls.emit_next(out) {
            return Some(n);
        }
        if self.is_closed() {
            return None;
        }
        self.outbox
            .poll_transmit(self.config.att_mtu, self.large.is_some(), self.long, out)
    }

    /// The next event, if any. Message bytes in the event stay valid until the next call.
    pub fn poll_event(&mut self) -> Option<CentralEvent<'_>> {
        if let Some(prev) = self.pending_release.take() {
            self.assembler.release(prev.done);
        }
        let record = self.events.pop()?;
        Some(match record {
            Record::Connected { encrypted } => CentralEvent::Connected { encrypted },
            Record::IdentityPresented(identity) => CentralEvent::IdentityPresented { identity },
            Record::Response { call, msg } => {
                self.pending_release = Some(msg);
                CentralEvent::Response {
                    call,
                    data: self.msg_bytes(msg),
                }
            }
            Record::StreamItem { call, msg } => {
                self.pending_release = Some(msg);
                CentralEvent::StreamItem {
                    call,
                    data: self.msg_bytes(msg),
                }
            }
            Record::StreamEnd { call } => CentralEvent::StreamEnd { call },
            Record::CallFailed { call, error } => CentralEvent::CallFailed { call, error },
            Record::Closed(reason) => CentralEvent::Closed { reason },
            Record::Warning(w) => CentralEvent::Warning(w),
        })
    }

    /// When [`Central::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_closed() {
            return None;
        }
        let calls = self
            .calls
            .iter()
            .flatten()
            .filter_map(|c| match c.retry_at {
                Some(r) => Some(r),
                None => c.deadline,
            })
            .min();
        [
            self.state.deadline(),
            calls,
            self.partials.next_deadline(self.config.reassembly_timeout),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    // ----- internals: setup ------------------------------------------------------------------

    fn alloc_tid(&mut self) -> u8 {
        let tid = self.next_tid;
        self.next_tid = self.next_tid.wrapping_add(1);
        tid
    }

    fn send_control(&mut self, tid: u8, cmd: ControlCmd, payload: &[u8]) {
        // The setup sequence has at most three controls outstanding (TIMEOUT, CAPABILITIES and
        // step 1, pipelined), each of at most 45 bytes (step 3): the four-entry queue cannot
        // refuse them.
        let _ = self.controls.push(tid, cmd, payload);
    }

    fn request_capabilities(&mut self, now: Instant) {
        let tid = self.alloc_tid();
        let mut flags = CapabilityFlags::EMPTY;
        if self.config.large_messages {
            flags = flags | CapabilityFlags::LARGE_MESSAGES;
        }
        if self.config.long_containers {
            flags = flags | CapabilityFlags::LONG_CONTAINERS;
        }
        // The announcement: flags bits 1 and 2, nothing else (no extension bytes in a request).
        let payload = Capabilities {
            flags,
            ..Capabilities::default()
        }
        .to_bytes();
        let announce = self.config.large_messages || self.config.long_containers;
        let payload: &[u8] = if self.config.capabilities_payload || announce {
            &payload
        } else {
            &[]
        };
        self.send_control(tid, ControlCmd::Capabilities, payload);
        let early = if self.config.setup_pipelining == SetupPipelining::KeyExchange
            && self.config.att_mtu >= MIN_ATT_MTU_FOR_KEY_EXCHANGE
        {
            let (kx_tid, hs) = self.send_step1();
            EarlyStep1::Sent { tid: kx_tid, hs }
        } else {
            EarlyStep1::None
        };
        self.state = State::AwaitCapabilities {
            tid,
            deadline: now + self.config.setup_timeout,
            early,
        };
    }

    /// Queues KEY_EXCHANGE step 1 with a fresh ephemeral key.
    fn send_step1(&mut self) -> (u8, CentralAwaitStep2<P>) {
        let ephemeral = X25519Secret::random(&mut self.rng);
        let (hs, step1) = CentralHandshake::start(self.provider.clone(), ephemeral);
        let tid = self.alloc_tid();
        self.send_control(tid, ControlCmd::KeyExchange, &step1);
        (tid, hs)
    }

    fn on_capabilities(&mut self, now: Instant, caps: Option<Capabilities>, early: EarlyStep1<P>) {
        self.capabilities = caps;
        // Peripherals answer in order: a TIMEOUT sent before CAPABILITIES and still unanswered
        // never will be (the default 100 ms stays).
        self.pending_timeout = None;
        // In force only if we announced it and the reply carries the (complete) extension;
        // `Capabilities::parse` already refused a reply with the bit but a truncated extension.
        self.large = caps
            .and_then(|c| c.large)
            .filter(|_| self.config.large_messages);
        self.long = self.config.long_containers
            && caps.is_some_and(|c| c.flags.contains(CapabilityFlags::LONG_CONTAINERS));
        if self.large.is_some() || self.long {
            self.assembler.set_config(AssemblerConfig {
                max_message_len: self.config.max_response_len,
                max_in_flight: SLOTS,
                large_messages: self.large.is_some(),
                long_containers: self.long,
            });
        }
        let offers = caps.is_some_and(|c| c.flags.contains(CapabilityFlags::ENCRYPTION_SUPPORTED));
        let mtu_ok = self.config.att_mtu >= MIN_ATT_MTU_FOR_KEY_EXCHANGE;
        if offers && mtu_ok {
            let (tid, hs) = match early {
                EarlyStep1::Sent { tid, hs } => (tid, hs),
                EarlyStep1::Refused(code) => {
                    self.close_with(CloseReason::HandshakeRefused(code));
                    return;
                }
                EarlyStep1::None => self.send_step1(),
            };
            self.state = State::AwaitStep2 {
                tid,
                deadline: now + self.config.handshake_step_timeout,
                hs,
            };
        } else if self.config.require_encryption {
            let reason = if offers {
                CloseReason::MtuTooSmallForKeyExchange {
                    att_mtu: self.config.att_mtu,
                }
            } else if caps.is_none() {
                CloseReason::SetupTimeout
            } else {
                CloseReason::EncryptionUnavailable
            };
            self.close_with(reason);
        } else {
            self.become_ready(None);
        }
    }

    fn continue_handshake(&mut self, now: Instant, hs: CentralVerifyIdentity<P>) {
        let mut nonce = [0u8; 12];
        self.rng.fill_bytes(&mut nonce);
        match hs.accept(nonce) {
            Ok((hs, step3)) => {
                let tid = self.alloc_tid();
                self.send_control(tid, ControlCmd::KeyExchange, &step3);
                self.state = State::AwaitStep4 {
                    tid,
                    deadline: now + self.config.handshake_step_timeout,
                    hs,
                };
            }
            Err(e) => self.close_with(CloseReason::Handshake(e)),
        }
    }

    fn setup_timed_out(&mut self, now: Instant) {
        match core::mem::replace(&mut self.state, State::Closed) {
            State::AwaitTimeout { .. } => {
                // As the reference centrals: keep the default 100 ms and go on.
                self.request_capabilities(now);
            }
            State::AwaitCapabilities { early, .. } => self.on_capabilities(now, None, early),
            State::AwaitStep2 { .. } | State::VerifyIdentity { .. } | State::AwaitStep4 { .. } => {
                self.close_with(CloseReason::HandshakeTimeout)
            }
            other => self.state = other,
        }
    }

    fn on_key_exchange(&mut self, now: Instant, tid: u8, payload: &[u8]) {
        match core::mem::replace(&mut self.state, State::Closed) {
            State::AwaitStep2 { tid: t, hs, .. } if t == tid => match hs.receive_step2(payload) {
                Ok(verify) => {
                    let identity = *verify.identity();
                    self.identity = Some(identity);
                    match self.config.pinning {
                        Pinning::Disabled => self.continue_handshake(now, verify),
                        Pinning::Expect(pinned) => {
                            if bool::from(pinned.ct_eq(&identity)) {
                                self.continue_handshake(now, verify)
                            } else {
                                self.close_with(CloseReason::IdentityRejected)
                            }
                        }
                        Pinning::Decide => {
                            self.push(Record::IdentityPresented(identity));
                            self.state = State::VerifyIdentity {
                                deadline: now + self.config.handshake_step_timeout,
                                hs: verify,
                            };
                        }
                    }
                }
                Err(e) => self.close_with(CloseReason::Handshake(e)),
            },
            State::AwaitStep4 { tid: t, hs, .. } if t == tid => match hs.receive_step4(payload) {
                Ok(session) => self.become_ready(Some(session)),
                Err(e) => self.close_with(CloseReason::Handshake(e)),
            },
            other => {
                self.state = other;
                self.warn(Warning::UnexpectedControl {
                    tid,
                    cmd: ControlCmd::KeyExchange.bits(),
                });
            }
        }
    }

    fn become_ready(&mut self, session: Option<Session<P::Aead>>) {
        let encrypted = session.is_some();
        self.state = State::Ready(session);
        self.push(Record::Connected { encrypted });
    }

    fn close_with(&mut self, reason: CloseReason) {
        self.state = State::Closed;
        for idx in 0..SLOTS {
            if let Some(call) = self.calls.get_mut(idx).and_then(Option::take) {
                self.push(Record::CallFailed {
                    call: call.id,
                    error: CallError::Closed,
                });
            }
        }
        self.outbox.clear();
        self.assembler.reset();
        self.partials.clear();
        self.pending_release = None;
        self.push(Record::Closed(reason));
    }

    // ----- internals: calls ------------------------------------------------------------------

    fn check_ready(&self) -> Result<(), CallError> {
        match self.state {
            State::Ready(_) => Ok(()),
            State::Closed => Err(CallError::Closed),
            _ => Err(CallError::NotReady),
        }
    }

    fn max_request_wire(&self) -> usize {
        if let Some(large) = self.large {
            return (large.max_request as usize).min(self.outbox.max_body());
        }
        let by_peer = self
            .capabilities
            .map_or(usize::MAX, |c| usize::from(c.max_request));
        by_peer.min(classic_max_message_len(self.config.att_mtu, self.long))
    }

    fn check_request_len(&self, name_len: usize, data_len: usize) -> Result<(), CallError> {
        let len = wire_len(name_len, data_len, self.state.is_encrypted());
        let max = self.max_request_wire();
        if len > max {
            return Err(CallError::RequestTooLarge { len, max });
        }
        Ok(())
    }

    /// Encrypts and queues a stored request command under a fresh tid. The stored command was
    /// checked when the call started (one REQUEST, a large header only where the extension is in
    /// force), so its bytes go to the outbox as they are.
    fn send_request(&mut self, request: &mut O) -> Result<u8, CallError> {
        let tid = self.next_tid;
        enqueue_framed(
            &mut self.outbox,
            self.state.session_mut(),
            tid,
            request.as_slice(),
        )
        .map_err(enqueue_to_call_error)?;
        self.next_tid = self.next_tid.wrapping_add(1);
        Ok(tid)
    }

    fn call_index(&self, id: CallId) -> Option<usize> {
        self.calls
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.id == id))
    }

    fn fail_call(&mut self, idx: usize, id: CallId, error: CallError) {
        if let Some(slot) = self.calls.get_mut(idx) {
            *slot = None;
        }
        self.push(Record::CallFailed { call: id, error });
    }

    // ----- internals: input ------------------------------------------------------------------

    fn handle_control(&mut self, now: Instant, tid: u8, cmd: ControlCmd, payload: &[u8]) {
        let msg = match ControlMessage::parse(cmd, payload, Direction::PeripheralToCentral) {
            Ok(m) => m,
            Err(e) => {
                self.warn(Warning::MalformedControl(e));
                return;
            }
        };
        match msg {
            ControlMessage::TimeoutResponse { timeout_ms } => match self.state {
                State::AwaitTimeout { tid: t, .. } if t == tid => {
                    self.peer_timeout_ms = timeout_ms;
                    self.request_capabilities(now);
                }
                _ if self.pending_timeout == Some(tid) => {
                    self.peer_timeout_ms = timeout_ms;
                    self.pending_timeout = None;
                }
                _ => self.warn(Warning::UnexpectedControl {
                    tid,
                    cmd: cmd.bits(),
                }),
            },
            ControlMessage::CapabilitiesResponse(caps) => match self.state {
                State::AwaitCapabilities { tid: t, .. } if t == tid => {
                    if let State::AwaitCapabilities { early, .. } =
                        core::mem::replace(&mut self.state, State::Closed)
                    {
                        self.on_capabilities(now, Some(caps), early);
                    }
                }
                _ => self.warn(Warning::UnexpectedControl {
                    tid,
                    cmd: cmd.bits(),
                }),
            },
            ControlMessage::KeyExchange(step) => self.on_key_exchange(now, tid, step),
            ControlMessage::StreamEndP2C => {
                // The reference sends STREAM_END_P2C with a fresh tid: it ends the active
                // peripheral→central stream whatever its tid.
                let active = self
                    .calls
                    .iter()
                    .position(|c| c.as_ref().is_some_and(|c| c.kind == CallKind::ServerStream));
                match active
                    .and_then(|i| self.calls.get_mut(i))
                    .and_then(Option::take)
                {
                    Some(call) => self.push(Record::StreamEnd { call: call.id }),
                    None => self.warn(Warning::UnexpectedControl {
                        tid,
                        cmd: cmd.bits(),
                    }),
                }
            }
            ControlMessage::Error(code) => self.on_error(now, tid, code),
            ControlMessage::Unknown { cmd, .. } => self.warn(Warning::UnknownControl { tid, cmd }),
            _ => self.warn(Warning::UnexpectedControl {
                tid,
                cmd: cmd.bits(),
            }),
        }
    }

    fn on_error(&mut self, now: Instant, tid: u8, code: ErrorCode) {
        if self.pending_timeout == Some(tid) {
            // A pipelined TIMEOUT refused: the default 100 ms stays, as in the sequential order.
            self.pending_timeout = None;
            return;
        }
        if let State::AwaitCapabilities {
            early: early @ EarlyStep1::Sent { .. },
            ..
        } = &mut self.state
            && matches!(early, EarlyStep1::Sent { tid: t, .. } if *t == tid)
        {
            // The early step 1 refused: it matters only if CAPABILITIES announces encryption.
            *early = EarlyStep1::Refused(code);
            return;
        }
        let setup_tid = match self.state {
            State::AwaitTimeout { tid, .. } | State::AwaitCapabilities { tid, .. } => Some(tid),
            State::AwaitStep2 { tid, .. } | State::AwaitStep4 { tid, .. } => Some(tid),
            _ => None,
        };
        if setup_tid == Some(tid) {
            match core::mem::replace(&mut self.state, State::Closed) {
                State::AwaitTimeout { .. } => self.request_capabilities(now),
                State::AwaitCapabilities { early, .. } => self.on_capabilities(now, None, early),
                _ => self.close_with(CloseReason::HandshakeRefused(code)),
            }
            return;
        }
        let found = self.calls.iter().position(|c| {
            c.as_ref().is_some_and(|c| match c.kind {
                CallKind::ClientStream => c.upload_tids.contains(tid),
                _ => c.tid == tid && c.retry_at.is_none(),
            })
        });
        let Some(idx) = found else {
            self.warn(Warning::StaleError { tid, code });
            return;
        };
        let retries = self.config.busy_retries;
        let backoff = self.config.busy_backoff;
        let Some(call) = self.calls.get_mut(idx).and_then(Option::as_mut) else {
            return;
        };
        let id = call.id;
        if code == ErrorCode::Busy && call.kind != CallKind::ClientStream {
            if call.attempts <= retries {
                let shift = u32::from(call.attempts.saturating_sub(1)).min(16);
                let delay = backoff.saturating_mul(1u32 << shift);
                call.retry_at = Some(now + delay);
                // The deadline still bounds the call as a whole.
                if call.deadline.is_some_and(|d| d <= now + delay) {
                    let attempts = call.attempts;
                    self.fail_call(idx, id, CallError::Busy { attempts });
                }
            } else {
                let attempts = call.attempts;
                self.fail_call(idx, id, CallError::Busy { attempts });
            }
        } else {
            self.fail_call(idx, id, CallError::Peer(code));
        }
    }

    fn handle_data(&mut self, now: Instant, container: &Container<'_>) {
        let tid = container.tid;
        match self.assembler.feed(container) {
            Ok(None) => self.partials.touch(tid, now),
            Ok(Some(done)) => {
                self.partials.remove(tid);
                self.on_message(now, done);
            }
            Err(e) => {
                self.partials.remove(tid);
                let too_large = match e {
                    AssembleError::TooLarge {
                        tid,
                        total_length,
                        limit,
                    } => Some((tid, total_length, limit)),
                    // Not negotiated: the classic limit (a u16 total) is the one in force.
                    AssembleError::LargeNotNegotiated { tid, total_length } => {
                        let classic = self.assembler.config().max_message_len.min(65_535);
                        Some((tid, total_length, classic))
                    }
                    // A container longer than this side accepts: the response cannot arrive.
                    AssembleError::ContainerTooLong {
                        tid,
                        payload_len,
                        max,
                    } => Some((tid, payload_len, max)),
                    _ => None,
                };
                if let Some((tid, len, max)) = too_large
                    && let Some(idx) = self.unary_index(tid)
                    && let Some(id) = self.calls.get(idx).and_then(|c| c.as_ref()).map(|c| c.id)
                {
                    self.fail_call(idx, id, CallError::ResponseTooLarge { len, max });
                }
                self.warn(Warning::Assembly(e));
            }
        }
    }

    fn unary_index(&self, tid: u8) -> Option<usize> {
        self.calls.iter().position(|c| {
            c.as_ref()
                .is_some_and(|c| c.kind != CallKind::ClientStream && c.tid == tid)
        })
    }

    fn on_message(&mut self, now: Instant, done: crate::assemble::Completed) {
        let tid = done.tid;
        let bytes = self.assembler.message_mut(done);
        let range = match self.state.session_mut() {
            Some(session) => match session.open_in_place(bytes) {
                Ok(r) => r,
                Err(e) => {
                    self.assembler.release(done);
                    self.warn(Warning::Decrypt(e));
                    return;
                }
            },
            None => 0..bytes.len(),
        };
        let plain = self
            .assembler
            .message(done)
            .get(range.clone())
            .unwrap_or(&[]);
        let parsed = if self.large.is_some() {
            Command::parse_large(plain)
        } else {
            Command::parse(plain)
        };
        let (kind, name_len, data_len) = match parsed {
            Ok(c) => (c.kind, c.name.len(), c.data.len()),
            Err(e) => {
                self.assembler.release(done);
                self.warn(Warning::MalformedCommand(e));
                return;
            }
        };
        if kind != CommandType::Response {
            self.assembler.release(done);
            self.warn(Warning::WrongCommandType { tid });
            return;
        }
        let name_start = range.start + 2;
        let header_len = Command::header_len_large(name_len, data_len);
        let msg = MsgRef::new(done, range.start + header_len, data_len);
        let name_matches = |call: &Call<O>, assembler: &Assembler<A, SLOTS>| {
            let name = assembler
                .message(done)
                .get(name_start..name_start + name_len);
            name == Some(call.name_bytes())
        };
        let stream_idle = self.config.stream_idle_timeout;
        let mut matched = None;
        for (idx, slot) in self.calls.iter().enumerate() {
            let Some(call) = slot else { continue };
            if !name_matches(call, &self.assembler) {
                continue;
            }
            let hit = match call.kind {
                CallKind::Unary => call.tid == tid && call.retry_at.is_none(),
                CallKind::ServerStream => true,
                CallKind::ClientStream => call.finished,
            };
            if hit {
                matched = Some((idx, call.id, call.kind));
                break;
            }
        }
        match matched {
            Some((idx, id, CallKind::ServerStream)) => {
                if let Some(c) = self.calls.get_mut(idx).and_then(Option::as_mut) {
                    c.deadline = Some(now + stream_idle);
                }
                self.push(Record::StreamItem { call: id, msg });
            }
            Some((idx, id, _)) => {
                if let Some(slot) = self.calls.get_mut(idx) {
                    *slot = None;
                }
                self.push(Record::Response { call: id, msg });
            }
            None => {
                self.assembler.release(done);
                self.warn(Warning::StaleResponse { tid });
            }
        }
    }

    fn msg_bytes(&self, msg: MsgRef) -> &[u8] {
        self.assembler
            .message(msg.done)
            .get(msg.range())
            .unwrap_or(&[])
    }

    fn push(&mut self, record: Record) {
        // Only reachable if the caller ignores EventQueueFull; release what the record holds so
        // no slot leaks.
        if let Err(Record::Response { msg, .. } | Record::StreamItem { msg, .. }) =
            self.events.push(record)
        {
            self.assembler.release(msg.done);
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
    for Central<P, R, A, O, SLOTS>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Central")
            .field("role", &Role::Central)
            .field("next_tid", &self.next_tid)
            .field("encrypted", &self.state.is_encrypted())
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

fn enqueue_to_call_error(e: EnqueueError) -> CallError {
    match e {
        EnqueueError::Full(f) => CallError::OutboxFull {
            needed: f.needed,
            free: f.free,
        },
        EnqueueError::CounterExhausted => CallError::CounterExhausted,
        EnqueueError::Invalid | EnqueueError::Internal => CallError::InvalidName,
    }
}
