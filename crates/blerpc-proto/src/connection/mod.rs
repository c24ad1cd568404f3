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

//!
//! ## Layout
//!
//! | module | holds |
//! |---|---|
//! | [`Central`] (`central/`) | its configuration, its events, setup and the key exchange, calls and streams |
//! | [`Peripheral`] (`peripheral/`) | the same four for the server role |
//! | `endpoint` | the plumbing both share: reassembly and its deadlines, outbox, priority controls, events |
//! | `framing`, `outbox` | commands serialised (and sealed) once into the outbox, split into containers lazily |
//! | `error`, `events` | the errors and warnings of both roles |

mod central;

/// The least wait before a CREDIT refused by a full outbox is tried again (a `credit_delay` of
/// zero would otherwise ask to be woken at once, again and again, while the outbox stays full).
pub(crate) const MIN_CREDIT_RETRY: core::time::Duration = core::time::Duration::from_millis(1);

/// Whether a stream's receiver lets credit for fewer than half its `window` wait (for half a
/// window) instead of granting it `credit_delay` later: when it sends items of the stream
/// itself (`sending`: data both ways, so every packet of a connection event carries data and a
/// CREDIT takes one's place) and the sender still holds three quarters of the window by this
/// side's count (`held`, which still counts the items on their way, about an event's worth).
/// A sender short of credits gets the remainder as before. Measured (`blerpc-bench`'s
/// `a_stream_carries` test, CI 15 ms, 20-byte items): a bidirectional echo carries 0.81×,
/// 0.64× and 0.63× of one way's rate with windows of 16, 24 and 32, against 0.77×, 0.56× and
/// 0.57× with every remainder granted.
pub(crate) fn remainder_waits(sending: bool, held: u32, window: u32) -> bool {
    sending && held >= window - window / 4
}
mod counters;
mod endpoint;
mod error;
mod events;
mod framing;
mod outbox;
mod peripheral;

pub use central::{
    CallId, CallKind, Central, CentralConfig, CentralEvent, MIN_ATT_MTU_FOR_KEY_EXCHANGE, Pinning,
    SetupPipelining,
};
pub use counters::{COUNTED_ERROR_CODES, Counters, OTHER_ERROR_CODE};
pub use error::{CallError, CloseReason, ConfigError, EventQueueFull, SendError};
pub use events::Warning;
pub use peripheral::{Peripheral, PeripheralCloseReason, PeripheralConfig, PeripheralEvent};

/// The smallest ATT MTU a connection accepts: the 10-byte CAPABILITIES reply (the largest
/// control every setup needs) must fit in one `ATT_MTU − 3` PDU. The splitter alone goes down
/// to [`crate::split::SplitCursor::MIN_ATT_MTU`]; BLE itself never goes below 23.
pub const MIN_CONNECTION_ATT_MTU: usize = 13;

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

/// Fails with [`ConfigError::MtuTooSmall`] below [`MIN_CONNECTION_ATT_MTU`].
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
