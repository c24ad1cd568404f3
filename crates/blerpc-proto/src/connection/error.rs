//! The errors of a connection: a call's failure, a connection's close, a peripheral's refused
//! send, a configuration out of range, and the event queue asking to be drained.

use crate::handshake::HandshakeError;
use crate::split::SplitError;
use crate::wire::error_code::ErrorCode;

/// Why a call failed. Delivered in [`CentralEvent::CallFailed`](super::CentralEvent::CallFailed) or returned by a user operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    /// The connection is not ready (still in setup) or already closed.
    NotReady,
    /// The encrypted request is larger than the peripheral's advertised `max_request`
    /// (or than one transaction at this MTU can carry, or, with the large-message extension, than
    /// the outbox can hold: [`CentralConfig::max_outbox_bytes`](super::CentralConfig::max_outbox_bytes)).
    RequestTooLarge {
        /// Wire length of the request (after encryption).
        len: usize,
        /// The limit it exceeds.
        max: usize,
    },
    /// The command name is empty or longer than 255 bytes.
    InvalidName,
    /// The buffer given to [`Central::start_call_framed`](super::Central::start_call_framed) is not exactly one REQUEST command.
    MalformedCommand,
    /// Request data longer than the command layer can carry (4 GiB, the large-message
    /// extension's `u32`; a request above 65,535 bytes without the extension fails with
    /// [`CallError::RequestTooLarge`]).
    DataTooLong {
        /// The data length given.
        len: usize,
    },
    /// Too many calls in flight; see [`CentralConfig::max_calls_in_flight`](super::CentralConfig::max_calls_in_flight).
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
    /// The response exceeds [`CentralConfig::max_response_len`](super::CentralConfig::max_response_len).
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
    /// A bidirectional stream's item before the peripheral granted credit for it (the streams
    /// extension): send it once [`Central::stream_credits`](super::Central::stream_credits)
    /// is above zero.
    NoCredit,
    /// The peripheral did not agree to the extension this call needs (a bidirectional stream
    /// needs the streams extension, CAPABILITIES flag bit 6).
    NotNegotiated,
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
            CallError::NoCredit => {
                f.write_str("the peripheral has granted no credit for another stream item yet")
            }
            CallError::NotNegotiated => f.write_str(
                "the peripheral does not support bidirectional streams (the streams extension)",
            ),
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
    /// The response would exceed [`PeripheralConfig::max_response_len`](super::PeripheralConfig::max_response_len); the central has been sent
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
    /// The stream already sent [`PeripheralConfig::max_stream_items`](super::PeripheralConfig::max_stream_items) items.
    StreamLimit,
    /// The session counter is exhausted; the connection must be re-established.
    CounterExhausted,
    /// No request with this transaction id is pending.
    UnknownRequest,
    /// The connection is closed.
    Closed,
    /// The central has granted no credit for another item of this stream (the streams
    /// extension): send it after
    /// [`PeripheralEvent::Credit`](super::PeripheralEvent::Credit).
    NoCredit,
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
            SendError::NoCredit => f.write_str("the central granted no credit for another item"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for SendError {}

/// A configuration value is out of range. Returned by the constructors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The ATT MTU is below [`MIN_CONNECTION_ATT_MTU`](super::MIN_CONNECTION_ATT_MTU).
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
