//! What a central reports: the public [`CentralEvent`] and the small `Copy` records queued for
//! it (message bytes stay in their reassembly slot until the event is polled).

#[cfg(doc)]
use super::Central;
use super::config::CallId;
#[cfg(doc)]
use super::config::Pinning;
use crate::connection::endpoint::{MsgRef, Record as EndpointRecord};
use crate::connection::events::Warning;
use crate::connection::{CallError, CloseReason};

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
    /// The peripheral granted credit for more items of bidirectional stream `call` (the
    /// streams extension): [`Central::send_stream_item`](super::Central::send_stream_item)
    /// takes the items it refused with [`CallError::NoCredit`].
    Credit {
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
pub(super) enum Record {
    Connected { encrypted: bool },
    IdentityPresented([u8; 32]),
    Response { call: CallId, msg: MsgRef },
    StreamItem { call: CallId, msg: MsgRef },
    StreamEnd { call: CallId },
    Credit { call: CallId },
    CallFailed { call: CallId, error: CallError },
    Closed(CloseReason),
    Warning(Warning),
}

impl EndpointRecord for Record {
    fn warning(warning: Warning) -> Self {
        Record::Warning(warning)
    }
    fn message(&self) -> Option<MsgRef> {
        match self {
            Record::Response { msg, .. } | Record::StreamItem { msg, .. } => Some(*msg),
            _ => None,
        }
    }
}
