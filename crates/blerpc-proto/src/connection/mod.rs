//! The connection state machine of both roles: [`Central`] (client) and [`Peripheral`] (server).
//!
//! Both are sans-IO: they are driven by three kinds of input and polled for three kinds of output.
//!
//! | input | meaning |
//! |---|---|
//! | `handle_input(now, pdu)` | exactly one link PDU (one GATT write or notification, one deframed TCP/WS/serial message) |
//! | `handle_timeout(now)` | the instant returned by `poll_timeout` has passed |
//! | user operations | `start_call`, `send_stream_item`, `finish_stream`, `respond`, `close`, ... |
//!
//! | output | meaning |
//! |---|---|
//! | `poll_transmit(now, &mut buf)` | the next PDU to put on the link, never above the ATT MTU − 3 |
//! | `poll_event()` | what happened: a response, a request, a stream item, a failure |
//! | `poll_timeout()` | when to call `handle_timeout` next |
//!
//! After any input, poll all three until they return `None`. Events that carry message bytes
//! borrow them from the connection's reassembly buffer (decrypted in place, no copy); the bytes
//! stay valid until the next call to `poll_event`.
//!
//! ## Connection setup (as the reference centrals do it)
//! 1. TIMEOUT request (tid 0) — the peripheral answers with its `timeout_ms`;
//! 2. CAPABILITIES request (tid 1) — the peripheral answers with its limits and flags;
//! 3. if the peripheral supports encryption, the four-step key exchange (tids 2 and 3);
//! 4. the connection is ready; the first call uses tid 4 (tid 2 without encryption).
//!
//! ## Fixes over the reference (all wire-compatible)
//! - unary responses are bound to the request's transaction id *and* command name; responses that
//!   match no outstanding call (late answers to timed-out calls) are dropped with a
//!   [`Warning::StaleResponse`];
//! - the request-size check uses the encrypted (wire) length;
//! - the peripheral answers every failure the reference leaves silent with an ERROR control (see
//!   [`crate::wire::error_code`]), so a central fails fast instead of timing out;
//! - the central retries BUSY with exponential backoff;
//! - unknown container types and control commands are ignored;
//! - every buffer, queue and wait is bounded by [`CentralConfig`] / [`PeripheralConfig`].

mod central;
mod events;
mod outbox;
mod peripheral;

pub use central::{
    CallId, CallKind, Central, CentralConfig, CentralEvent, MIN_ATT_MTU_FOR_KEY_EXCHANGE, Pinning,
    SetupPipelining,
};
pub use events::Warning;
pub use peripheral::{Peripheral, PeripheralConfig, PeripheralEvent};

use crate::handshake::HandshakeError;
use crate::split::SplitError;
use crate::wire::error_code::ErrorCode;

/// Why a call failed. Delivered in [`CentralEvent::CallFailed`] or returned by a user operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    /// The connection is not ready (still in setup) or already closed.
    NotReady,
    /// The encrypted request is larger than the peripheral's advertised `max_request`
    /// (or than one transaction at this MTU can carry, or, with the large-message extension, than
    /// the outbox can hold: [`CentralConfig::max_outbox_bytes`]).
    RequestTooLarge {
        /// Wire length of the request (after encryption).
        len: usize,
        /// The limit it exceeds.
        max: usize,
    },
    /// The command name is empty or longer than 255 bytes.
    InvalidName,
    /// The buffer given to [`Central::start_call_framed`] is not exactly one REQUEST command.
    MalformedCommand,
    /// Request data longer than the command layer can carry (4 GiB, the large-message
    /// extension's `u32`; a request above 65,535 bytes without the extension fails with
    /// [`CallError::RequestTooLarge`]).
    DataTooLong {
        /// The data length given.
        len: usize,
    },
    /// Too many calls in flight; see [`CentralConfig::max_calls_in_flight`].
    TooManyCalls {
        /// The configured limit.
        limit: usize,
    },
    /// A stream call is already active; bleRPC stream items cannot be told apart by transaction id,
    /// so only one stream runs at a time.
    StreamActive,
    /// The outbox (bytes queued for the link) is full; poll `poll_transmit` and retry.
    OutboxFull {
        /// Bytes the message needed.
        needed: usize,
        /// Bytes still free.
        free: usize,
    },
    /// No reply before the deadline.
    Timeout,
    /// The peripheral answered with an ERROR control.
    Peer(ErrorCode),
    /// The peripheral stayed BUSY through every retry.
    Busy {
        /// Attempts made.
        attempts: u8,
    },
    /// The response exceeds [`CentralConfig::max_response_len`].
    ResponseTooLarge {
        /// The response's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The operation does not fit this call (e.g. a stream item on a unary call).
    WrongCallKind,
    /// No call with this id is active.
    UnknownCall,
    /// The session's message counter is exhausted; reconnect.
    CounterExhausted,
    /// The connection closed while the call was active.
    Closed,
}

impl core::fmt::Display for CallError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            CallError::NotReady => f.write_str("connection not ready"),
            CallError::RequestTooLarge { len, max } => {
                write!(
                    f,
                    "request is {len} bytes on the wire, peripheral accepts at most {max}"
                )
            }
            CallError::InvalidName => f.write_str("command name must be 1..=255 bytes"),
            CallError::MalformedCommand => {
                f.write_str("the framed request is not exactly one REQUEST command")
            }
            CallError::DataTooLong { len } => {
                write!(f, "request data is {len} bytes, at most 4294967295 allowed")
            }
            CallError::TooManyCalls { limit } => write!(f, "more than {limit} calls in flight"),
            CallError::StreamActive => f.write_str("another stream is already active"),
            CallError::OutboxFull { needed, free } => {
                write!(f, "outbox full: {needed} bytes needed, {free} free")
            }
            CallError::Timeout => f.write_str("no reply before the deadline"),
            CallError::Peer(code) => write!(f, "peripheral error: {}", code.description()),
            CallError::Busy { attempts } => {
                write!(f, "peripheral busy after {attempts} attempts")
            }
            CallError::ResponseTooLarge { len, max } => {
                write!(f, "response is {len} bytes, limit {max}")
            }
            CallError::WrongCallKind => f.write_str("operation does not match the call kind"),
            CallError::UnknownCall => f.write_str("no such call"),
            CallError::CounterExhausted => f.write_str("session counter exhausted; reconnect"),
            CallError::Closed => f.write_str("connection closed"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for CallError {}

/// Why a connection closed. Delivered once as `Closed` event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// The user called `close`.
    Local,
    /// The peripheral did not answer CAPABILITIES in time and encryption is required.
    SetupTimeout,
    /// Encryption is required but the peripheral does not offer it (or its CAPABILITIES were
    /// not received).
    EncryptionUnavailable,
    /// The ATT MTU is too small for the key exchange (133-byte step 2 needs ATT MTU ≥ 136).
    MtuTooSmallForKeyExchange {
        /// The MTU in force.
        att_mtu: usize,
    },
    /// The key exchange failed.
    Handshake(HandshakeError),
    /// The key exchange did not complete in time.
    HandshakeTimeout,
    /// The peripheral's identity key was refused (pinning mismatch or the user rejected it).
    IdentityRejected,
    /// The peer answered the key exchange with an ERROR control.
    HandshakeRefused(ErrorCode),
}

impl core::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            CloseReason::Local => f.write_str("closed locally"),
            CloseReason::SetupTimeout => f.write_str("peripheral did not answer CAPABILITIES"),
            CloseReason::EncryptionUnavailable => {
                f.write_str("encryption required but the peripheral does not support it")
            }
            CloseReason::MtuTooSmallForKeyExchange { att_mtu } => write!(
                f,
                "ATT MTU {att_mtu} is too small for the key exchange (needs at least 136)"
            ),
            CloseReason::Handshake(e) => write!(f, "key exchange failed: {e}"),
            CloseReason::HandshakeTimeout => f.write_str("key exchange timed out"),
            CloseReason::IdentityRejected => f.write_str("peripheral identity key rejected"),
            CloseReason::HandshakeRefused(code) => {
                write!(
                    f,
                    "peripheral refused the key exchange: {}",
                    code.description()
                )
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for CloseReason {}

/// A user operation on the peripheral could not be carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// The response would exceed [`PeripheralConfig::max_response_len`]; the central has been sent
    /// ERROR `RESPONSE_TOO_LARGE` for the request instead.
    ResponseTooLarge {
        /// Wire length of the response.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The message cannot be split at this MTU.
    Split(SplitError),
    /// The command name is empty or longer than 255 bytes, or the data longer than 65,535 (4 GiB
    /// with the large-message extension).
    Invalid,
    /// The outbox is full; poll `poll_transmit` and retry.
    OutboxFull {
        /// Bytes the message needed.
        needed: usize,
        /// Bytes still free.
        free: usize,
    },
    /// The stream already sent [`PeripheralConfig::max_stream_items`] items.
    StreamLimit,
    /// The session counter is exhausted; the connection must be re-established.
    CounterExhausted,
    /// No request with this transaction id is pending.
    UnknownRequest,
    /// The connection is closed.
    Closed,
}

impl core::fmt::Display for SendError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            SendError::ResponseTooLarge { len, max } => {
                write!(f, "response is {len} bytes, limit {max}")
            }
            SendError::Split(e) => write!(f, "cannot split: {e}"),
            SendError::Invalid => f.write_str("invalid command name or data length"),
            SendError::OutboxFull { needed, free } => {
                write!(f, "outbox full: {needed} bytes needed, {free} free")
            }
            SendError::StreamLimit => f.write_str("stream item limit reached"),
            SendError::CounterExhausted => f.write_str("session counter exhausted"),
            SendError::UnknownRequest => f.write_str("no such pending request"),
            SendError::Closed => f.write_str("connection closed"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for SendError {}

/// A configuration value is out of range. Returned by the constructors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The ATT MTU is below [`MIN_CONNECTION_ATT_MTU`].
    MtuTooSmall {
        /// The MTU given.
        att_mtu: usize,
    },
    /// Encryption is required but no identity key was given to the peripheral.
    IdentityRequired,
    /// A limit is zero or exceeds what the chosen buffers can hold.
    Limit {
        /// The configuration field.
        field: &'static str,
    },
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ConfigError::MtuTooSmall { att_mtu } => write!(f, "ATT MTU {att_mtu} is too small"),
            ConfigError::IdentityRequired => {
                f.write_str("encryption is required but no identity key was configured")
            }
            ConfigError::Limit { field } => write!(f, "configuration `{field}` is out of range"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ConfigError {}

/// The data of a command being queued.
pub(crate) enum Payload<'a, F: FnOnce(&mut [u8])> {
    /// Copied into the outbox as is.
    Bytes(&'a [u8]),
    /// `len` bytes written in place by `fill` (no intermediate copy of large responses).
    Fill { len: usize, fill: F },
}

/// A `Payload` of borrowed bytes (names the unused closure type).
pub(crate) fn bytes(data: &[u8]) -> Payload<'_, fn(&mut [u8])> {
    Payload::Bytes(data)
}

/// Serialises a command into a new outbox data entry, encrypting it in place when a session is
/// established.
#[allow(clippy::too_many_arguments)]
pub(crate) fn enqueue_command<B, A, F>(
    outbox: &mut outbox::Outbox<B>,
    session: Option<&mut crate::session::Session<A>>,
    large: bool,
    tid: u8,
    kind: crate::wire::command::CommandType,
    name: &str,
    payload: Payload<'_, F>,
) -> Result<(), EnqueueError>
where
    B: crate::buf::Buffer,
    A: crate::crypto::Aead,
    F: FnOnce(&mut [u8]),
{
    use crate::session::{COUNTER_LEN, SESSION_OVERHEAD};
    use crate::wire::command::{Command, MAX_NAME_LEN};
    const COUNTER_ROOM: [u8; COUNTER_LEN] = [0; COUNTER_LEN];
    const TAG_ROOM: [u8; SESSION_OVERHEAD - COUNTER_LEN] = [0; SESSION_OVERHEAD - COUNTER_LEN];
    let data_len = match &payload {
        Payload::Bytes(d) => d.len(),
        Payload::Fill { len, .. } => *len,
    };
    let header_len = if large {
        Command::header_len_large(name.len(), data_len)
    } else {
        Command::header_len(name.len())
    };
    let emit_header = |kind, name, len, out: &mut [u8]| {
        if large {
            Command::emit_header_large(kind, name, len, out)
        } else {
            Command::emit_header(kind, name, len, out)
        }
    };
    let cmd_len = header_len + data_len;
    let encrypted = session.is_some();
    let seal = |body: &mut [u8]| match session {
        Some(s) => s
            .seal_in_place(body)
            .map_err(|_| EnqueueError::CounterExhausted),
        None => Ok(()),
    };
    let result = match payload {
        Payload::Bytes(data) => {
            let mut header = [0u8; Command::header_len_large(MAX_NAME_LEN, usize::MAX)];
            let header = header.get_mut(..header_len).ok_or(EnqueueError::Invalid)?;
            emit_header(kind, name, data_len, header).map_err(|_| EnqueueError::Invalid)?;
            let parts: [&[u8]; 4] = if encrypted {
                [&COUNTER_ROOM, header, data, &TAG_ROOM]
            } else {
                [&[], header, data, &[]]
            };
            outbox.push_data_parts(tid, &parts, seal)
        }
        Payload::Fill { len, fill } => {
            let (pre, body_len) = if encrypted {
                (COUNTER_LEN, cmd_len + SESSION_OVERHEAD)
            } else {
                (0, cmd_len)
            };
            outbox.push_data_with(tid, body_len, |body| {
                let cmd = body
                    .get_mut(pre..pre + cmd_len)
                    .ok_or(EnqueueError::Internal)?;
                emit_header(kind, name, len, cmd).map_err(|_| EnqueueError::Invalid)?;
                if let Some(data) = cmd.get_mut(header_len..) {
                    fill(data);
                }
                seal(body)
            })
        }
    };
    result.map_err(|e| match e {
        outbox::PushError::Full(f) => EnqueueError::Full(f),
        outbox::PushError::Fill(e) => e,
    })
}

/// Queues a command that is already serialised (a stored request: header and data exactly as
/// [`enqueue_command`] would write them), encrypting it in place when a session is established:
/// one copy into the outbox, no parsing and no second header.
pub(crate) fn enqueue_framed<B, A>(
    outbox: &mut outbox::Outbox<B>,
    session: Option<&mut crate::session::Session<A>>,
    tid: u8,
    command: &[u8],
) -> Result<(), EnqueueError>
where
    B: crate::buf::Buffer,
    A: crate::crypto::Aead,
{
    use crate::session::{COUNTER_LEN, SESSION_OVERHEAD};
    const COUNTER_ROOM: [u8; COUNTER_LEN] = [0; COUNTER_LEN];
    const TAG_ROOM: [u8; SESSION_OVERHEAD - COUNTER_LEN] = [0; SESSION_OVERHEAD - COUNTER_LEN];
    let parts: [&[u8]; 3] = if session.is_some() {
        [&COUNTER_ROOM, command, &TAG_ROOM]
    } else {
        [&[], command, &[]]
    };
    let seal = |body: &mut [u8]| match session {
        Some(s) => s
            .seal_in_place(body)
            .map_err(|_| EnqueueError::CounterExhausted),
        None => Ok(()),
    };
    outbox
        .push_data_parts(tid, &parts, seal)
        .map_err(|e| match e {
            outbox::PushError::Full(f) => EnqueueError::Full(f),
            outbox::PushError::Fill(e) => e,
        })
}

/// Wire length of a command once (optionally) encrypted (with the large-message header when the
/// data exceeds 65,535 bytes).
pub(crate) fn wire_len(name_len: usize, data_len: usize, encrypted: bool) -> usize {
    let cmd = crate::wire::command::Command::header_len_large(name_len, data_len)
        .saturating_add(data_len);
    if encrypted {
        cmd.saturating_add(crate::session::SESSION_OVERHEAD)
    } else {
        cmd
    }
}

#[derive(Debug)]
pub(crate) enum EnqueueError {
    Full(outbox::Full),
    Invalid,
    CounterExhausted,
    Internal,
}

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

/// Tracks when each partially reassembled transaction last made progress, so that a
/// transaction abandoned by the peer cannot hold a reassembly slot forever.
#[derive(Debug)]
pub(crate) struct Partials<const SLOTS: usize> {
    entries: [Option<(u8, crate::Instant)>; SLOTS],
}

impl<const SLOTS: usize> Partials<SLOTS> {
    pub(crate) fn new() -> Self {
        Partials {
            entries: [None; SLOTS],
        }
    }
    /// Records progress on `tid`.
    pub(crate) fn touch(&mut self, tid: u8, now: crate::Instant) {
        if let Some(e) = self
            .entries
            .iter_mut()
            .find(|e| matches!(e, Some((t, _)) if *t == tid))
        {
            *e = Some((tid, now));
        } else if let Some(e) = self.entries.iter_mut().find(|e| e.is_none()) {
            *e = Some((tid, now));
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
    /// The earliest instant at which a transaction expires.
    pub(crate) fn next_deadline(&self, timeout: core::time::Duration) -> Option<crate::Instant> {
        self.entries
            .iter()
            .flatten()
            .map(|(_, t)| *t + timeout)
            .min()
    }
    /// Removes and returns one transaction that has been idle past `timeout`.
    pub(crate) fn pop_expired(
        &mut self,
        now: crate::Instant,
        timeout: core::time::Duration,
    ) -> Option<u8> {
        let e = self
            .entries
            .iter_mut()
            .find(|e| matches!(e, Some((_, t)) if *t + timeout <= now))?;
        e.take().map(|(tid, _)| tid)
    }
}

/// A reference to a message (decrypted in place) in a reassembly slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MsgRef {
    pub(crate) done: crate::assemble::Completed,
    /// Offset of the data in the slot (messages are at most 16 MiB, so `u32` suffices and keeps
    /// queued events small on an MCU).
    pub(crate) start: u32,
    pub(crate) len: u32,
}

impl MsgRef {
    pub(crate) fn new(done: crate::assemble::Completed, start: usize, len: usize) -> Self {
        MsgRef {
            done,
            start: u32::try_from(start).unwrap_or(u32::MAX),
            len: u32::try_from(len).unwrap_or(0),
        }
    }
    pub(crate) fn range(&self) -> core::ops::Range<usize> {
        let start = self.start as usize;
        start..start.saturating_add(self.len as usize)
    }
}

/// The event queue is full: poll events before feeding more input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventQueueFull;

impl core::fmt::Display for EventQueueFull {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("event queue full: poll events before handing in more input")
    }
}

#[cfg(feature = "std")]
impl std::error::Error for EventQueueFull {}

/// The smallest ATT MTU a connection accepts: the 10-byte CAPABILITIES reply (the largest
/// control every setup needs) must fit in one `ATT_MTU − 3` PDU. The splitter alone goes down
/// to [`crate::split::SplitCursor::MIN_ATT_MTU`]; BLE itself never goes below 23.
pub const MIN_CONNECTION_ATT_MTU: usize = 13;

/// Fails with [`ConfigError::MtuTooSmall`] below [`MIN_CONNECTION_ATT_MTU`].
/// The longest container a connection writes: `att_mtu - 3`, or the long-container maximum when
/// that extension is configured (it may come into force at CAPABILITIES).
pub(crate) fn max_container_len(att_mtu: usize, long_containers: bool) -> usize {
    let classic = att_mtu.saturating_sub(crate::wire::container::ATT_OVERHEAD);
    if long_containers {
        classic.max(crate::wire::container::MAX_LONG_CONTAINER_LEN)
    } else {
        classic
    }
}

/// The output buffer `poll_transmit` needs for what the outbox holds (`queued` bytes, entry
/// headers included): `att_mtu - 3`, or with long containers in force enough for the longest
/// container that data can make (a chunk plus at most a 9-byte header), at most 16 KiB.
pub(crate) fn transmit_len(att_mtu: usize, long: bool, queued: usize) -> usize {
    use crate::wire::container::{LARGE_FIRST_HEADER_LEN, MAX_LONG_CONTAINER_LEN};
    let classic = att_mtu.saturating_sub(crate::wire::container::ATT_OVERHEAD);
    if long {
        classic.max(
            queued
                .saturating_add(LARGE_FIRST_HEADER_LEN + 1)
                .min(MAX_LONG_CONTAINER_LEN),
        )
    } else {
        classic
    }
}

pub(crate) fn check_att_mtu(att_mtu: usize) -> Result<(), ConfigError> {
    if att_mtu < MIN_CONNECTION_ATT_MTU {
        return Err(ConfigError::MtuTooSmall { att_mtu });
    }
    Ok(())
}

/// 16 MiB: the default of [`CentralConfig::max_response_len`] and
/// [`PeripheralConfig::max_response_len`] (only reachable with the large-message extension; the
/// classic wire stops at 65,535), and of the `blerpc` runtime's request limit.
pub const DEFAULT_MAX_LARGE_MESSAGE_LEN: usize = 16 * 1024 * 1024;

/// The smallest ATT MTU at which a peripheral agrees to the large-message extension: its
/// 14-byte CAPABILITIES reply must fit one container (`4 + 14 <= ATT_MTU - 3`).
pub const MIN_ATT_MTU_FOR_LARGE_MESSAGES: usize = crate::wire::container::ATT_OVERHEAD
    + crate::wire::container::HEADER_LEN
    + crate::wire::capabilities::CAPABILITIES_LARGE_LEN;

/// With the extension enabled, a size limit must fit the extension's `u32`.
pub(crate) fn check_large_limit(
    enabled: bool,
    limit: usize,
    field: &'static str,
) -> Result<(), ConfigError> {
    if enabled && limit > crate::split::MAX_LARGE_MESSAGE_LEN {
        return Err(ConfigError::Limit { field });
    }
    Ok(())
}

/// Events a connection can hold before `handle_input` asks the caller to poll.
pub const EVENT_QUEUE_LEN: usize = 16;
/// Free event slots `handle_input` needs before it consumes a PDU.
pub(crate) const EVENT_HEADROOM: usize = 4;
