//! How a central is configured: limits, timeouts, the identity policy, the setup order; and how
//! calls are named.

use core::time::Duration;

#[cfg(doc)]
use super::{Central, CentralEvent};

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
    /// A partially received response is dropped this long after its FIRST container (plus its
    /// length's allowance, see `reassembly_min_rate`). Default 10 s.
    pub reassembly_timeout: Duration,
    /// Bytes per second a partial response must at least average: a response of `n` bytes
    /// may take `reassembly_timeout + n / reassembly_min_rate` from its FIRST container before
    /// it is dropped (0: `reassembly_timeout` alone). Default 4,096 (a 16 MiB message gets
    /// 68 minutes more).
    pub reassembly_min_rate: u32,
    /// Largest response accepted (wire bytes, after encryption). Default 16 MiB
    /// ([`DEFAULT_MAX_LARGE_MESSAGE_LEN`](super::super::DEFAULT_MAX_LARGE_MESSAGE_LEN)); beyond 65,535 only reachable with the
    /// large-message extension (at most `u32::MAX` then).
    pub max_response_len: usize,
    /// Calls in flight at once (at most the `SLOTS` of the central type). Default 4.
    pub max_calls_in_flight: usize,
    /// Retries of a call answered with BUSY in a row while the peripheral answers nothing else:
    /// a BUSY that comes after another call was answered (the peripheral is full, not stuck)
    /// is retried without counting and starts the count again, within the call's deadline.
    /// Default 3.
    pub busy_retries: u8,
    /// Backoff before the first BUSY retry; doubles with each strike (a BUSY that counts).
    /// Default 20 ms.
    pub busy_backoff: Duration,
    /// Bytes of requests waiting for the link. Default 128 KiB. With the large-message
    /// extension, a request must also fit here (minus a 6-byte entry header), or it fails with
    /// [`CallError::RequestTooLarge`](super::super::CallError::RequestTooLarge).
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
    /// Announce the cancel extension (flags bit 4 of the CAPABILITIES request; see
    /// `docs/protocol.md`): when a call is cancelled or passes its deadline while the peripheral
    /// may still be answering it, a CANCEL control tells the peripheral to stop. In force only if
    /// the peripheral announces it too; otherwise the call is forgotten locally (and a server
    /// stream drains). Default `false`; the `blerpc` runtime turns it on. The request is then
    /// always the 6-byte one.
    pub cancel: bool,
    /// Announce the deadline extension (flags bit 5 of the CAPABILITIES request; see
    /// `docs/protocol.md`): each unary call's request (and a server stream's, when its caller
    /// gave a deadline) carries the milliseconds left until the call's deadline, so the
    /// peripheral's handler can give up in time. In force only if the peripheral announces it
    /// too. Default `false`; the `blerpc` runtime turns it on. The request is then always the
    /// 6-byte one.
    pub deadline: bool,
    /// Announce the streams extension (flags bit 6 of the CAPABILITIES request; see
    /// `docs/protocol.md`): a server stream's items then come against this side's credits
    /// (at most `stream_window` unconsumed), and bidirectional streams
    /// ([`CallKind::BidiStream`]) open. In force only if the peripheral announces it too.
    /// Default `false`; the `blerpc` runtime turns it on. The request is then always the
    /// 6-byte one.
    pub streams: bool,
    /// The peripheral→central items of a stream this side accepts before it grants more (the
    /// streams extension; at least 1): the window a stream's open request announces. Default
    /// 32.
    pub stream_window: u16,
    /// How long room made for fewer than half the window waits before it is granted (the
    /// streams extension): the items of one BLE connection event are credited in one CREDIT,
    /// and a remainder never waits for more items to arrive (which would cost a window a
    /// round trip). Keep it well under the connection interval. Not used while this side sends
    /// items of a bidirectional stream too (data both ways: every packet of an event carries
    /// data, and a CREDIT would take one's place): room then goes half a window at a time (or
    /// when the peripheral's credits ran out). `None`: always so. Default 2 ms.
    pub credit_delay: Option<Duration>,
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
            reassembly_min_rate: 4096,
            max_response_len: super::super::DEFAULT_MAX_LARGE_MESSAGE_LEN,
            max_calls_in_flight: 4,
            busy_retries: 3,
            busy_backoff: Duration::from_millis(20),
            max_outbox_bytes: 128 * 1024,
            large_messages: false,
            long_containers: false,
            cancel: false,
            deadline: false,
            streams: false,
            stream_window: 32,
            credit_delay: Some(Duration::from_millis(2)),
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
    /// Items both ways under one stream (the streams extension): an open request without
    /// data, then items sent with [`Central::send_stream_item`] against the peripheral's
    /// credits and ended with [`Central::finish_stream`], while the peripheral's items arrive
    /// as for a [`CallKind::ServerStream`] until its STREAM_END_P2C ends the call (`bidi`).
    BidiStream,
}

impl CallKind {
    /// The peripheral sends this call's answer as stream items.
    pub const fn receives_items(self) -> bool {
        matches!(self, CallKind::ServerStream | CallKind::BidiStream)
    }

    /// The central sends this call's request as stream items.
    pub const fn sends_items(self) -> bool {
        matches!(self, CallKind::ClientStream | CallKind::BidiStream)
    }
}
