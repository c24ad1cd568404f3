//! What a peripheral reports: the public [`PeripheralEvent`] and the small `Copy` records queued
//! for it (request bytes stay in their reassembly slot until the event is polled).

#[cfg(doc)]
use super::Peripheral;
use crate::connection::endpoint::{MsgRef, Record as EndpointRecord};
use crate::connection::events::Warning;

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
pub(super) enum Record {
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

impl EndpointRecord for Record {
    fn warning(warning: Warning) -> Self {
        Record::Warning(warning)
    }
    fn message(&self) -> Option<MsgRef> {
        match self {
            Record::Request { msg, .. } => Some(*msg),
            _ => None,
        }
    }
}
