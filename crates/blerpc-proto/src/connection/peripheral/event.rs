//! What a peripheral reports: the public [`PeripheralEvent`] and the small `Copy` records queued
//! for it (request bytes stay in their reassembly slot until the event is polled).

#[cfg(doc)]
use super::Peripheral;
use crate::Instant;
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
        /// When the central stops waiting for the answer (the deadline extension in force and
        /// the request carried one), on this side's clock: its arrival plus the milliseconds
        /// the central still had. A handler past it may stop; its answer would come too late.
        deadline: Option<Instant>,
    },
    /// An item of the bidirectional stream `stream` (the streams extension). It needs no
    /// answer; report it consumed with [`Peripheral::consumed`] once processed, which credits
    /// the central for more.
    StreamItem {
        /// The item's transaction id.
        tid: u8,
        /// The stream's id: the tid of the request that opened it.
        stream: u8,
        /// The command name.
        name: &'a str,
        /// The protobuf data.
        data: &'a [u8],
    },
    /// The central ended its half of bidirectional stream `stream`: no more items come; end
    /// the peripheral's half with [`Peripheral::end_stream`] when done.
    ItemsEnd {
        /// The stream's id.
        stream: u8,
    },
    /// The central granted credit for more items of stream `stream` after it had none left
    /// ([`Peripheral::send_stream_item`] answered
    /// [`SendError::NoCredit`](crate::connection::SendError::NoCredit)).
    Credit {
        /// The stream's id.
        stream: u8,
    },
    /// The central ended its central→peripheral stream; send the final response with
    /// [`Peripheral::respond_upload`].
    StreamEndC2P {
        /// The control's transaction id.
        tid: u8,
    },
    /// The central cancelled request `tid` (the cancel extension): stop its handler or its
    /// stream; the core has dropped whatever it held for it and tells the central. An answer
    /// given later is refused ([`SendError::UnknownRequest`](crate::connection::SendError)).
    Cancelled {
        /// The request's transaction id.
        tid: u8,
    },
    /// The key exchange completed; requests are now encrypted.
    Secured,
    /// Something was dropped or refused (diagnostics only; the central was told where the
    /// protocol allows).
    Warning(Warning),
    /// The peripheral closed the connection for cause: send what is queued (an ERROR, where
    /// there is one) and close the link. Inputs are ignored from now on.
    Closed(PeripheralCloseReason),
}

/// Why a [`Peripheral`] closed its connection (see [`PeripheralEvent::Closed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeripheralCloseReason {
    /// The connection was not established within
    /// [`PeripheralConfig::setup_timeout`](super::PeripheralConfig::setup_timeout) of
    /// [`Peripheral::open`].
    SetupTimeout,
    /// The central started more key exchanges than
    /// [`PeripheralConfig::max_key_exchange_attempts`](super::PeripheralConfig::max_key_exchange_attempts)
    /// allows.
    KeyExchangeAttempts {
        /// The step 1 containers received, the refused one included.
        attempts: u8,
    },
    /// The central sent more data containers before the session existed than
    /// [`PeripheralConfig::max_containers_before_session`](super::PeripheralConfig::max_containers_before_session)
    /// allows (encryption is required).
    DataBeforeSession,
}

impl core::fmt::Display for PeripheralCloseReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PeripheralCloseReason::SetupTimeout => {
                f.write_str("the central did not complete setup in time")
            }
            PeripheralCloseReason::KeyExchangeAttempts { attempts } => write!(
                f,
                "the central started {attempts} key exchanges, more than allowed"
            ),
            PeripheralCloseReason::DataBeforeSession => {
                f.write_str("the central kept sending requests before the key exchange")
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Record {
    Request {
        tid: u8,
        name_start: u32,
        name_len: u8,
        msg: MsgRef,
        deadline: Option<Instant>,
    },
    StreamItem {
        tid: u8,
        stream: u8,
        name_start: u32,
        name_len: u8,
        msg: MsgRef,
    },
    ItemsEnd {
        stream: u8,
    },
    Credit {
        stream: u8,
    },
    StreamEndC2P {
        tid: u8,
    },
    Cancelled {
        tid: u8,
    },
    Secured,
    Warning(Warning),
    Closed(PeripheralCloseReason),
}

impl EndpointRecord for Record {
    fn warning(warning: Warning) -> Self {
        Record::Warning(warning)
    }
    fn message(&self) -> Option<MsgRef> {
        match self {
            Record::Request { msg, .. } | Record::StreamItem { msg, .. } => Some(*msg),
            _ => None,
        }
    }
}
