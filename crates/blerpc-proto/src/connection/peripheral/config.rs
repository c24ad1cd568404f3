//! How a peripheral is configured: the limits it advertises and enforces, its timeouts, and
//! which extensions it agrees to.

use core::time::Duration;

#[cfg(doc)]
use super::Peripheral;
#[cfg(doc)]
use crate::connection::MIN_ATT_MTU_FOR_LARGE_MESSAGES;

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
    /// Default 16 MiB ([`crate::connection::DEFAULT_MAX_LARGE_MESSAGE_LEN`]); without the large-message
    /// extension one classic transaction (at most 65,535, advertised as such) is the limit.
    pub max_response_len: usize,
    /// Refuse plaintext requests (answer ERROR `ENCRYPTION_REQUIRED`). Default `true`.
    pub require_encryption: bool,
    /// Time allowed between key-exchange step 1 and step 3. Default 5 s.
    pub handshake_timeout: Duration,
    /// Requests handed to the application and not yet answered, together with the partial
    /// requests still arriving (counted from their FIRST container); more get ERROR BUSY.
    /// Default 2 (the firmware's double buffer).
    pub max_pending_requests: usize,
    /// Items one peripheral→central stream may carry. Default 10,000 (the firmware's cap).
    pub max_stream_items: u32,
    /// A partially received request is dropped (and its buffer given back) this long after its
    /// FIRST container, plus its length's allowance (`reassembly_min_rate`); later containers
    /// do not move the deadline. Default 10 s.
    pub reassembly_timeout: Duration,
    /// Bytes per second a partial request must at least average: a request of `n` bytes may
    /// take `reassembly_timeout + n / reassembly_min_rate` (0: `reassembly_timeout` alone).
    /// Default 4,096.
    pub reassembly_min_rate: u32,
    /// The announced lengths of all partial requests together ([`Assembler::claimed`]): a
    /// FIRST container that would take them past this is refused with ERROR BUSY before any
    /// byte of it is buffered. Never less than `max_request_len` (one request of the largest
    /// size always fits). Default 24,576 (two requests of the default `max_request_len`). A
    /// runtime can lower it per input with [`Peripheral::set_reassembly_budget`] to share a
    /// budget among connections.
    ///
    /// [`Assembler::claimed`]: crate::assemble::Assembler::claimed
    pub max_reassembly_bytes: usize,
    /// Time from [`Peripheral::open`] until the connection must be established: the key
    /// exchange complete when `require_encryption`, else a CAPABILITIES request or a request
    /// received. A connection still unproven then is closed
    /// ([`PeripheralCloseReason::SetupTimeout`]). `None`: no deadline. Default 10 s.
    ///
    /// [`PeripheralCloseReason::SetupTimeout`]: super::PeripheralCloseReason::SetupTimeout
    pub setup_timeout: Option<Duration>,
    /// Key-exchange step 1 containers accepted on one connection (each costs an X25519 key
    /// pair and an Ed25519 signature); one more closes the connection
    /// ([`PeripheralCloseReason::KeyExchangeAttempts`]). At least 1. Default 3.
    ///
    /// [`PeripheralCloseReason::KeyExchangeAttempts`]: super::PeripheralCloseReason::KeyExchangeAttempts
    pub max_key_exchange_attempts: u8,
    /// Data containers (FIRST, SUBSEQUENT) accepted before the session exists when encryption
    /// is required: each request among them is refused with ERROR `ENCRYPTION_REQUIRED`, and
    /// one container more closes the connection
    /// ([`PeripheralCloseReason::DataBeforeSession`]; a central that keeps sending requests it
    /// was told are refused is not one to serve). Default 16: a central that follows the
    /// protocol sends none (the key exchange is control containers), and one that does not
    /// know encryption is required has its first request refused before it reaches this.
    ///
    /// [`PeripheralCloseReason::DataBeforeSession`]: super::PeripheralCloseReason::DataBeforeSession
    pub max_containers_before_session: u16,
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
    /// Agree to the cancel extension when a central announces it (CAPABILITIES flags bit 4, see
    /// `docs/protocol.md`): a CANCEL control then drops the named request wherever it is
    /// (arriving, handed out, its response queued) and ends its stream, and
    /// [`PeripheralEvent::Cancelled`](super::PeripheralEvent::Cancelled) tells the application
    /// to stop. Default `false`; the `blerpc` runtime and the firmware turn it on.
    pub cancel: bool,
    /// Agree to the deadline extension when a central announces it (CAPABILITIES flags bit 5,
    /// see `docs/protocol.md`): a request may then carry the milliseconds its central still
    /// waits, and [`PeripheralEvent::Request`](super::PeripheralEvent::Request) gives the
    /// application that deadline (`deadline`, on this side's clock: counted from the request's
    /// arrival). Default `false`; the `blerpc` runtime turns it on.
    pub deadline: bool,
    /// Agree to the streams extension when a central announces it (CAPABILITIES flags bit 6,
    /// see `docs/protocol.md`): a server stream's items then need the central's credits
    /// ([`Peripheral::send_stream_item`](super::Peripheral::send_stream_item) answers
    /// [`SendError::NoCredit`](crate::connection::SendError::NoCredit) without them), and
    /// bidirectional streams open. Default `false`; the `blerpc` runtime turns it on.
    pub streams: bool,
    /// The central→peripheral items of a bidirectional stream this side holds unconsumed at
    /// most (the credits it grants; at least 1). Default 8.
    pub stream_window: u16,
    /// How long consumed items of a bidirectional stream wait to be credited back while fewer
    /// than half the window: the items that arrive in one BLE connection event go back in one
    /// CREDIT (a CREDIT per item would take a packet from the peripheral's side each; one per
    /// half window alone leaves a remainder waiting a round trip, which cost a window of 8 a
    /// third of its rate). Keep it well under the connection interval. Not used while this
    /// side sends items of the stream too (data both ways: every packet of an event carries
    /// data, and a CREDIT would take one's place): consumed items then go back half a window
    /// at a time. `None`: always half a window at a time. Default 2 ms.
    pub credit_delay: Option<Duration>,
    /// Announce [`CapabilityFlags::RELAY`](crate::wire::capabilities::CapabilityFlags::RELAY):
    /// the application answers the device gateway's `blerpc.relay` command (it opens a relayed
    /// connection on request). Changes nothing else in the protocol. Default `false`; `blerpc
    /// serve --dial` sets it on its gateway connection.
    pub relay: bool,
    /// Announce [`CapabilityFlags::DIAGNOSTICS`](crate::wire::capabilities::CapabilityFlags::DIAGNOSTICS):
    /// the application answers
    /// [`DIAGNOSTICS_COMMAND`](crate::wire::diagnostics::DIAGNOSTICS_COMMAND) with its
    /// [`Diagnostics`](crate::wire::diagnostics::Diagnostics). Changes nothing else in the
    /// protocol. Default `false`; the `blerpc` runtime server turns it on.
    pub diagnostics: bool,
}

impl Default for PeripheralConfig {
    fn default() -> Self {
        PeripheralConfig {
            att_mtu: 247,
            timeout_ms: 100,
            max_request_len: 12_288,
            max_response_len: crate::connection::DEFAULT_MAX_LARGE_MESSAGE_LEN,
            require_encryption: true,
            handshake_timeout: Duration::from_secs(5),
            max_pending_requests: 2,
            max_stream_items: 10_000,
            reassembly_timeout: Duration::from_secs(10),
            reassembly_min_rate: 4096,
            max_reassembly_bytes: 2 * 12_288,
            setup_timeout: Some(Duration::from_secs(10)),
            max_key_exchange_attempts: 3,
            max_containers_before_session: 16,
            max_outbox_bytes: 128 * 1024,
            large_messages: false,
            long_containers: false,
            cancel: false,
            deadline: false,
            streams: false,
            stream_window: 8,
            credit_delay: Some(Duration::from_millis(2)),
            relay: false,
            diagnostics: false,
        }
    }
}
