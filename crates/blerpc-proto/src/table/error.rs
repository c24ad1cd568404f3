//! What a central reports to the code that called it: one error type, one set of texts and one
//! set of stable codes for every runtime (the tokio client, the browser, the bindings).

use alloc::string::String;
use core::fmt;

use crate::connection::{CallError, CloseReason};

/// Why a call, an operation on a call, or the connection's setup failed. Every central runtime
/// reports these texts and [`CentralError::code`]s; a runtime adds only what is its own (its
/// link's errors in detail, decoding, configuration).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CentralError {
    /// Setup ended the connection: the peripheral did not answer, offers no encryption while it
    /// is required, the key exchange failed, or its key is not the one trusted.
    Setup(CloseReason),
    /// Trust on first use refused the peripheral's identity key.
    Identity(IdentityError),
    /// The call failed: no reply in time, an ERROR from the peripheral, BUSY through every
    /// retry, a local limit.
    Call(CallError),
    /// The connection is closed (it was closed, or it closed while the operation waited).
    Closed,
    /// The call was cancelled by its caller.
    Cancelled,
    /// A peripheral→central stream delivered more items than its reader's buffer holds; the
    /// call was cancelled.
    StreamOverflow {
        /// The reader's buffer, in items.
        limit: usize,
    },
    /// The link failed or closed under the connection.
    Link(LinkFailure),
}

impl CentralError {
    /// A stable, machine-readable name for the error: what the browser central and the
    /// bindings expose as `error.code`. Texts may change; codes do not.
    ///
    /// | code | when |
    /// |---|---|
    /// | `SETUP_TIMEOUT`, `ENCRYPTION_UNAVAILABLE`, `MTU_TOO_SMALL`, `HANDSHAKE_FAILED`, `HANDSHAKE_TIMEOUT`, `IDENTITY_REJECTED` | setup failed ([`CentralError::Setup`]) |
    /// | `IDENTITY_CHANGED`, `KEY_STORE` | trust on first use refused the key, or its store failed |
    /// | `TIMEOUT`, `PEER_ERROR`, `BUSY`, `REQUEST_TOO_LARGE`, `RESPONSE_TOO_LARGE`, `TOO_MANY_CALLS`, `STREAM_ACTIVE`, `INVALID_ARGUMENT`, `CALL_FAILED` | the call failed ([`CentralError::Call`]) |
    /// | `CLOSED`, `CANCELLED`, `STREAM_OVERFLOW` | the connection closed, the caller cancelled, the reader fell behind |
    /// | `LINK_CLOSED`, `LINK_FAILED`, `FRAMING` | the link ([`LinkFailureKind`]) |
    pub fn code(&self) -> &'static str {
        match self {
            CentralError::Setup(reason) => match reason {
                CloseReason::SetupTimeout => code::SETUP_TIMEOUT,
                CloseReason::EncryptionUnavailable => code::ENCRYPTION_UNAVAILABLE,
                CloseReason::MtuTooSmallForKeyExchange { .. } => code::MTU_TOO_SMALL,
                CloseReason::Handshake(_) | CloseReason::HandshakeRefused(_) => {
                    code::HANDSHAKE_FAILED
                }
                CloseReason::HandshakeTimeout => code::HANDSHAKE_TIMEOUT,
                CloseReason::IdentityRejected => code::IDENTITY_REJECTED,
                _ => code::CLOSED,
            },
            CentralError::Identity(IdentityError::Changed { .. }) => code::IDENTITY_CHANGED,
            CentralError::Identity(IdentityError::Store(_)) => code::KEY_STORE,
            CentralError::Call(e) => match e {
                CallError::Timeout => code::TIMEOUT,
                CallError::Peer(_) => code::PEER_ERROR,
                CallError::Busy { .. } => code::BUSY,
                CallError::RequestTooLarge { .. } | CallError::DataTooLong { .. } => {
                    code::REQUEST_TOO_LARGE
                }
                CallError::ResponseTooLarge { .. } => code::RESPONSE_TOO_LARGE,
                CallError::TooManyCalls { .. } => code::TOO_MANY_CALLS,
                CallError::StreamActive => code::STREAM_ACTIVE,
                CallError::InvalidName
                | CallError::MalformedCommand
                | CallError::WrongCallKind
                | CallError::UnknownCall => code::INVALID_ARGUMENT,
                CallError::Closed | CallError::NotReady => code::CLOSED,
                _ => code::CALL_FAILED,
            },
            CentralError::Closed => code::CLOSED,
            CentralError::Cancelled => code::CANCELLED,
            CentralError::StreamOverflow { .. } => code::STREAM_OVERFLOW,
            CentralError::Link(failure) => failure.kind.code(),
        }
    }

    /// The peripheral's ERROR byte, when the peripheral answered the call with one.
    pub fn peer_code(&self) -> Option<u8> {
        match self {
            CentralError::Call(CallError::Peer(code)) => Some(code.to_byte()),
            _ => None,
        }
    }

    /// The core's call error, when the call itself failed.
    pub fn call_error(&self) -> Option<CallError> {
        match self {
            CentralError::Call(e) => Some(*e),
            _ => None,
        }
    }
}

impl fmt::Display for CentralError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CentralError::Setup(reason) => write!(f, "connection setup failed: {reason}"),
            CentralError::Identity(e) => write!(f, "peripheral identity refused: {e}"),
            CentralError::Call(e) => write!(f, "{e}"),
            CentralError::Closed => f.write_str("the connection is closed"),
            CentralError::Cancelled => f.write_str("the call was cancelled"),
            CentralError::StreamOverflow { limit } => write!(
                f,
                "more than {limit} stream items arrived before they were read: read them faster or give the stream a larger buffer"
            ),
            CentralError::Link(failure) => write!(f, "{failure}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for CentralError {}

/// Why trust on first use refused the peripheral's identity key.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdentityError {
    /// A different key is pinned for this device: it was re-keyed, or this is not the device
    /// (a man in the middle).
    Changed {
        /// The id the pin is stored under.
        device: String,
        /// The key the peripheral presented.
        presented: [u8; 32],
        /// The key pinned for it.
        pinned: [u8; 32],
        /// Where the pin is (the store's [`KnownKeys::describe`](crate::handshake::KnownKeys::describe)).
        store: String,
    },
    /// The known-keys store could not be read or written; the connection is refused
    /// (fail-closed). The store's own message.
    Store(String),
}

impl fmt::Display for IdentityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdentityError::Changed {
                device,
                presented,
                pinned,
                store,
            } => write!(
                f,
                "{device} presented key {} but {} is pinned for it in {store}: the device was \
                 re-keyed, or this is not the device (a man in the middle); remove the pin only \
                 if you know why the key changed",
                Hex(presented),
                Hex(pinned)
            ),
            IdentityError::Store(e) => write!(f, "cannot use the known-keys store: {e}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for IdentityError {}

/// The link failed under a connection: what kind of failure, and the link's own words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkFailure {
    /// What happened.
    pub kind: LinkFailureKind,
    /// The link's message (an I/O error, a close reason).
    pub message: String,
}

impl LinkFailure {
    /// A failure of `kind` with the link's `message`.
    pub fn new(kind: LinkFailureKind, message: impl Into<String>) -> Self {
        LinkFailure {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for LinkFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            LinkFailureKind::Closed => "the link closed",
            LinkFailureKind::Failed => "the link failed",
            LinkFailureKind::Framing => "the peer broke the link's framing",
        };
        if self.message.is_empty() {
            f.write_str(what)
        } else {
            write!(f, "{what}: {}", self.message)
        }
    }
}

/// The kinds of [`LinkFailure`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkFailureKind {
    /// The link went away (the peer closed it or died, the device disconnected).
    Closed,
    /// The link could not carry on (an I/O error, a refused write).
    Failed,
    /// The peer sent something the link cannot frame (an oversized or text message).
    Framing,
}

impl LinkFailureKind {
    /// The stable code of [`CentralError::Link`] with this kind.
    pub fn code(self) -> &'static str {
        match self {
            LinkFailureKind::Closed => code::LINK_CLOSED,
            LinkFailureKind::Failed => code::LINK_FAILED,
            LinkFailureKind::Framing => code::FRAMING,
        }
    }
}

/// The stable error codes of [`CentralError::code`]: the strings every central runtime
/// reports, and that a runtime's own errors reuse where they mean the same
/// ([`INVALID_ARGUMENT`](code::INVALID_ARGUMENT) for a bad option, [`LINK_FAILED`](code::LINK_FAILED)
/// for a link that cannot open).
pub mod code {
    /// The peripheral did not answer the setup requests in time.
    pub const SETUP_TIMEOUT: &str = "SETUP_TIMEOUT";
    /// Encryption is required and the peripheral does not offer it.
    pub const ENCRYPTION_UNAVAILABLE: &str = "ENCRYPTION_UNAVAILABLE";
    /// The ATT MTU is too small for the key exchange (it needs 136).
    pub const MTU_TOO_SMALL: &str = "MTU_TOO_SMALL";
    /// The key exchange failed or the peripheral refused it.
    pub const HANDSHAKE_FAILED: &str = "HANDSHAKE_FAILED";
    /// The key exchange did not complete in time.
    pub const HANDSHAKE_TIMEOUT: &str = "HANDSHAKE_TIMEOUT";
    /// The peripheral's key is not the one trusted.
    pub const IDENTITY_REJECTED: &str = "IDENTITY_REJECTED";
    /// Trust on first use: the peripheral presented another key than the one pinned for it.
    pub const IDENTITY_CHANGED: &str = "IDENTITY_CHANGED";
    /// The known-keys store could not be read or written.
    pub const KEY_STORE: &str = "KEY_STORE";
    /// No reply before the deadline.
    pub const TIMEOUT: &str = "TIMEOUT";
    /// The peripheral answered with an ERROR control
    /// ([`CentralError::peer_code`](super::CentralError::peer_code) holds its byte).
    pub const PEER_ERROR: &str = "PEER_ERROR";
    /// The peripheral stayed BUSY through every retry.
    pub const BUSY: &str = "BUSY";
    /// The request is larger than the peripheral accepts.
    pub const REQUEST_TOO_LARGE: &str = "REQUEST_TOO_LARGE";
    /// The response is larger than the central accepts.
    pub const RESPONSE_TOO_LARGE: &str = "RESPONSE_TOO_LARGE";
    /// More calls in flight than the central allows.
    pub const TOO_MANY_CALLS: &str = "TOO_MANY_CALLS";
    /// Another stream is already running (bleRPC runs one stream at a time).
    pub const STREAM_ACTIVE: &str = "STREAM_ACTIVE";
    /// An argument is out of range (a command name, an operation that does not fit the call).
    pub const INVALID_ARGUMENT: &str = "INVALID_ARGUMENT";
    /// Any other failure of a call (the message says which).
    pub const CALL_FAILED: &str = "CALL_FAILED";
    /// The connection is closed.
    pub const CLOSED: &str = "CLOSED";
    /// The caller cancelled the call.
    pub const CANCELLED: &str = "CANCELLED";
    /// A peripheral→central stream delivered more items than its reader's buffer holds.
    pub const STREAM_OVERFLOW: &str = "STREAM_OVERFLOW";
    /// The link went away (the peer closed it or died, the device disconnected).
    pub const LINK_CLOSED: &str = "LINK_CLOSED";
    /// The link failed (an I/O error, a refused write) or could not be opened.
    pub const LINK_FAILED: &str = "LINK_FAILED";
    /// The peer broke the link's framing (an oversized or text message).
    pub const FRAMING: &str = "FRAMING";

    /// Every code above, in order.
    pub const ALL: &[&str] = &[
        SETUP_TIMEOUT,
        ENCRYPTION_UNAVAILABLE,
        MTU_TOO_SMALL,
        HANDSHAKE_FAILED,
        HANDSHAKE_TIMEOUT,
        IDENTITY_REJECTED,
        IDENTITY_CHANGED,
        KEY_STORE,
        TIMEOUT,
        PEER_ERROR,
        BUSY,
        REQUEST_TOO_LARGE,
        RESPONSE_TOO_LARGE,
        TOO_MANY_CALLS,
        STREAM_ACTIVE,
        INVALID_ARGUMENT,
        CALL_FAILED,
        CLOSED,
        CANCELLED,
        STREAM_OVERFLOW,
        LINK_CLOSED,
        LINK_FAILED,
        FRAMING,
    ];
}

/// Bytes as lowercase hex.
pub(crate) struct Hex<'a>(pub(crate) &'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

#[cfg(test)]
mod tests {
    use alloc::string::ToString;

    use super::*;
    use crate::wire::error_code::ErrorCode;

    #[test]
    fn codes_are_stable() {
        assert_eq!(CentralError::Call(CallError::Timeout).code(), "TIMEOUT");
        let peer = CentralError::Call(CallError::Peer(ErrorCode::UnknownCommand));
        assert_eq!((peer.code(), peer.peer_code()), ("PEER_ERROR", Some(0x03)));
        assert_eq!(CentralError::Call(CallError::Closed).code(), "CLOSED");
        assert_eq!(
            CentralError::Setup(CloseReason::IdentityRejected).code(),
            "IDENTITY_REJECTED"
        );
        assert_eq!(
            CentralError::Setup(CloseReason::SetupTimeout).code(),
            "SETUP_TIMEOUT"
        );
        assert_eq!(
            CentralError::StreamOverflow { limit: 3 }.code(),
            "STREAM_OVERFLOW"
        );
        assert_eq!(
            CentralError::Link(LinkFailure::new(LinkFailureKind::Framing, "")).code(),
            "FRAMING"
        );
        assert_eq!(
            CentralError::Identity(IdentityError::Store("x".into())).code(),
            "KEY_STORE"
        );
    }

    /// Every error's code is one of [`code::ALL`], and every code is some error's.
    #[test]
    fn every_code_is_listed_and_used() {
        use crate::handshake::HandshakeError;
        let link = |kind| CentralError::Link(LinkFailure::new(kind, "x"));
        let errors = [
            CentralError::Setup(CloseReason::SetupTimeout),
            CentralError::Setup(CloseReason::EncryptionUnavailable),
            CentralError::Setup(CloseReason::MtuTooSmallForKeyExchange { att_mtu: 23 }),
            CentralError::Setup(CloseReason::Handshake(HandshakeError::BadConfirmation)),
            CentralError::Setup(CloseReason::HandshakeTimeout),
            CentralError::Setup(CloseReason::IdentityRejected),
            CentralError::Identity(IdentityError::Changed {
                device: String::new(),
                presented: [0; 32],
                pinned: [1; 32],
                store: String::new(),
            }),
            CentralError::Identity(IdentityError::Store(String::new())),
            CentralError::Call(CallError::Timeout),
            CentralError::Call(CallError::Peer(ErrorCode::Busy)),
            CentralError::Call(CallError::Busy { attempts: 3 }),
            CentralError::Call(CallError::RequestTooLarge { len: 2, max: 1 }),
            CentralError::Call(CallError::ResponseTooLarge { len: 2, max: 1 }),
            CentralError::Call(CallError::TooManyCalls { limit: 4 }),
            CentralError::Call(CallError::StreamActive),
            CentralError::Call(CallError::InvalidName),
            CentralError::Call(CallError::CounterExhausted),
            CentralError::Closed,
            CentralError::Cancelled,
            CentralError::StreamOverflow { limit: 1 },
            link(LinkFailureKind::Closed),
            link(LinkFailureKind::Failed),
            link(LinkFailureKind::Framing),
        ];
        let used: alloc::vec::Vec<&str> = errors.iter().map(CentralError::code).collect();
        for c in &used {
            assert!(code::ALL.contains(c), "{c} is not in code::ALL");
        }
        for c in code::ALL {
            assert!(used.contains(c), "no error has the code {c}");
        }
    }

    #[test]
    fn a_changed_key_names_both_keys_the_store_and_what_to_do() {
        let e = CentralError::Identity(IdentityError::Changed {
            device: "tcp://h:1".into(),
            presented: [0xab; 32],
            pinned: [0x01; 32],
            store: "known_keys.json".into(),
        });
        let text = e.to_string();
        assert!(text.starts_with("peripheral identity refused: tcp://h:1 presented key abab"));
        assert!(text.contains(" but 0101"));
        assert!(text.contains("pinned for it in known_keys.json"));
        assert!(text.contains("remove the pin only if"));
        assert_eq!(e.code(), "IDENTITY_CHANGED");
    }

    #[test]
    fn link_failures_say_what_happened() {
        let f = LinkFailure::new(LinkFailureKind::Closed, "");
        assert_eq!(f.to_string(), "the link closed");
        let f = LinkFailure::new(LinkFailureKind::Failed, "connection reset");
        assert_eq!(f.to_string(), "the link failed: connection reset");
    }
}
