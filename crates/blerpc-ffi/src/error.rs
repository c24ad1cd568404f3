//! The one error type every exported function returns: a variant per kind of failure, each with
//! the core's stable [`code`] and the runtime's text as `detail`.
//!
//! The codes are the ones every bleRPC central reports ([`CentralError::code`], the browser's
//! and the tokio client's alike); this crate adds none. What is its own (a bad URL, a bad hex
//! key, conflicting options) reuses [`code::INVALID_ARGUMENT`], and a link that cannot open
//! [`code::LINK_FAILED`], as the core's docs ask.
//!
//! Field names are chosen for every target language: `detail`, not `message` (Kotlin's
//! `Throwable.message`); each variant carries its text as a field, since UniFFI shows a
//! non-flat error's fields, not its `Display`.

use blerpc::client::CentralError;
use blerpc::link::LinkError;
use blerpc::link::connect::ConnectError;
pub use blerpc_proto::table::code;

/// Why a bleRPC operation failed. `code` is one of the core's stable codes
/// (`blerpc_proto::table::code`: `TIMEOUT`, `PEER_ERROR`, `IDENTITY_REJECTED`, …); `detail`
/// says what happened, for people (its wording may change; the code does not).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, uniffi::Error)]
#[non_exhaustive]
pub enum BlerpcError {
    /// The connection could not be set up: the peripheral did not answer setup in time, offers
    /// no encryption while it is required, the key exchange failed, or its identity key was
    /// refused (`IDENTITY_REJECTED` for a pinned key that differs, `IDENTITY_CHANGED` for a
    /// known-keys pin that differs, `KEY_STORE` for a known-keys file that cannot be used).
    #[error("{detail}")]
    Setup {
        /// The stable code.
        code: String,
        /// What happened.
        detail: String,
    },
    /// A call failed and the connection is still usable: no answer by its deadline
    /// (`TIMEOUT`), the peripheral's ERROR (`PEER_ERROR`, with `peer_code`), BUSY through
    /// every retry, a request or response over a limit, a stream read too slowly
    /// (`STREAM_OVERFLOW`).
    #[error("{detail}")]
    Call {
        /// The stable code.
        code: String,
        /// What happened.
        detail: String,
        /// The peripheral's ERROR byte, with `PEER_ERROR`.
        peer_code: Option<u8>,
    },
    /// The connection is gone or could not be opened: closed (`CLOSED`), the link lost
    /// (`LINK_CLOSED`, `LINK_FAILED`, `FRAMING`), nothing listening at the URL (`LINK_FAILED`).
    #[error("{detail}")]
    Connection {
        /// The stable code.
        code: String,
        /// What happened.
        detail: String,
    },
    /// An argument was refused before anything was sent (`INVALID_ARGUMENT`): a URL that does
    /// not parse or whose link this build lacks, a key that is not 64 hex digits, options
    /// that exclude each other, a TLS CA file that cannot be read, an operation on a finished
    /// stream.
    #[error("{detail}")]
    InvalidArgument {
        /// The stable code (`INVALID_ARGUMENT`).
        code: String,
        /// What was wrong.
        detail: String,
    },
}

impl BlerpcError {
    /// The stable code.
    pub fn code(&self) -> &str {
        match self {
            BlerpcError::Setup { code, .. }
            | BlerpcError::Call { code, .. }
            | BlerpcError::Connection { code, .. }
            | BlerpcError::InvalidArgument { code, .. } => code,
        }
    }

    /// An argument refused before anything was sent.
    pub(crate) fn invalid(detail: impl Into<String>) -> Self {
        BlerpcError::InvalidArgument {
            code: code::INVALID_ARGUMENT.to_string(),
            detail: detail.into(),
        }
    }

    /// A connection that is gone or could not be opened.
    pub(crate) fn connection(code: &str, detail: impl Into<String>) -> Self {
        BlerpcError::Connection {
            code: code.to_string(),
            detail: detail.into(),
        }
    }

    /// The core's error, said with `detail` (its own text, or one with more context).
    fn central(e: &CentralError, detail: String) -> Self {
        let code = e.code().to_string();
        match e {
            CentralError::Setup(_) | CentralError::Identity(_) => {
                BlerpcError::Setup { code, detail }
            }
            CentralError::Closed | CentralError::Link(_) => {
                BlerpcError::Connection { code, detail }
            }
            _ => BlerpcError::Call {
                code,
                detail,
                peer_code: e.peer_code(),
            },
        }
    }

    /// The runtime's error, said with `detail`.
    fn runtime(e: &blerpc::Error, detail: String) -> Self {
        match e {
            blerpc::Error::Central(c) => BlerpcError::central(c, detail),
            blerpc::Error::Link(l) => BlerpcError::connection(link_code(l), detail),
            blerpc::Error::Config(_) => BlerpcError::InvalidArgument {
                code: code::INVALID_ARGUMENT.to_string(),
                detail,
            },
            _ => BlerpcError::Call {
                code: code::CALL_FAILED.to_string(),
                detail,
                peer_code: None,
            },
        }
    }
}

/// The code of a link that failed while opening.
fn link_code(e: &LinkError) -> &'static str {
    match e {
        LinkError::Closed => code::LINK_CLOSED,
        LinkError::Framing(_) => code::FRAMING,
        _ => code::LINK_FAILED,
    }
}

impl From<blerpc::Error> for BlerpcError {
    fn from(e: blerpc::Error) -> Self {
        BlerpcError::runtime(&e, blerpc::error_chain(&e))
    }
}

impl From<ConnectError> for BlerpcError {
    fn from(e: ConnectError) -> Self {
        let detail = blerpc::error_chain(&e);
        match &e {
            ConnectError::Setup { source, .. } => BlerpcError::runtime(source, detail),
            ConnectError::Link { source, .. } => BlerpcError::connection(link_code(source), detail),
            ConnectError::Unsupported { .. } | ConnectError::NoTlsTrust { .. } => {
                BlerpcError::invalid(detail)
            }
            _ => BlerpcError::connection(code::LINK_FAILED, detail),
        }
    }
}

/// An exception the app's code threw in a foreign trait ([`GattLink`](crate::GattLink),
/// [`KeyStore`](crate::KeyStore)) that is not a [`BlerpcError`]: its text, as a link failure
/// (for a key store, the runtime refuses the connection with `KEY_STORE` and this text).
impl From<uniffi::UnexpectedUniFFICallbackError> for BlerpcError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        BlerpcError::connection(code::LINK_FAILED, e.reason)
    }
}

#[cfg(test)]
mod tests {
    use blerpc::blerpc_proto::connection::{CallError, CloseReason};
    use blerpc::blerpc_proto::wire::error_code::ErrorCode;

    use super::*;

    #[test]
    fn each_core_error_keeps_its_code_and_text() {
        let cases = [
            (
                CentralError::Setup(CloseReason::IdentityRejected),
                "Setup",
                "IDENTITY_REJECTED",
            ),
            (CentralError::Call(CallError::Timeout), "Call", "TIMEOUT"),
            (CentralError::Closed, "Connection", "CLOSED"),
            (
                CentralError::StreamOverflow { limit: 3 },
                "Call",
                "STREAM_OVERFLOW",
            ),
        ];
        for (core, kind, want) in cases {
            let text = core.to_string();
            let e = BlerpcError::from(blerpc::Error::Central(core));
            assert_eq!(e.code(), want);
            assert_eq!(e.to_string(), text);
            assert!(format!("{e:?}").starts_with(kind), "{e:?}");
        }
    }

    #[test]
    fn a_peer_error_carries_the_peripheral_byte() {
        let e = BlerpcError::from(blerpc::Error::Central(CentralError::Call(CallError::Peer(
            ErrorCode::HandlerFailed,
        ))));
        match e {
            BlerpcError::Call {
                code, peer_code, ..
            } => {
                assert_eq!(code, "PEER_ERROR");
                assert_eq!(peer_code, Some(ErrorCode::HandlerFailed.to_byte()));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_link_that_cannot_open_is_a_connection_error() {
        let e = BlerpcError::from(blerpc::Error::Link(LinkError::Closed));
        assert_eq!(e.code(), "LINK_CLOSED");
        let e = BlerpcError::from(blerpc::Error::Link(LinkError::Transport("tls".into())));
        assert_eq!(e.code(), "LINK_FAILED");
        assert_eq!(e.to_string(), "link error: tls");
    }
}
