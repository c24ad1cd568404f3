//! # blerpc-proto: the sans-IO core of bleRPC
//!
//! A `no_std` implementation of the bleRPC wire protocol (containers, control messages, commands,
//! the X25519 + Ed25519 + AES-128-GCM end-to-end encryption) and of the connection state machine of
//! both roles, [`connection::Central`] (client) and [`connection::Peripheral`] (server). It is
//! byte-compatible with the reference bleRPC libraries and firmware and fixes their known gaps in
//! ways every reference peer still understands.
//!
//! ## Layers
//!
//! ```text
//!  user operations (start_call, respond, send_stream_item, ...)      events (Response, Request, ...)
//!        |                                                                    ^
//!  +-----v--------------------------------------------------------------------+------+
//!  | connection   Central / Peripheral: setup, calls, streams, timeouts, BUSY, ERROR |
//!  +---------------------------------------------------------------------------------+
//!  | command      [type][name_len][name][data_len u16][protobuf]                     |
//!  | session      counter u32 || AES-128-GCM(K, counter||dir||0*7, command)           |  handshake
//!  +---------------------------------------------------------------------------------+  (4 KEY_EXCHANGE
//!  | split / assemble   FIRST + SUBSEQUENT containers, MTU-aware, bounded            |   controls)
//!  | wire::container    [tid][seq][flags][...]       wire::control  CONTROL payloads |
//!  +---------------------------------------------------------------------------------+
//!        |  poll_transmit(now, buf)                            handle_input(now, pdu) ^
//!        v                                                                            |
//!                   one link PDU: a GATT write/notification, a TCP/WS/serial frame
//! ```
//!
//! ## The run loop
//!
//! The core never touches a socket, a clock or a global RNG. A runtime owns one connection and
//! loops: it hands each received PDU to `handle_input`, sends what `poll_transmit` gives,
//! handles what `poll_event` gives, and calls `handle_timeout` at `poll_timeout`. Here both
//! ends run in memory, PDUs passed by hand, through an encrypted setup and one call:
//!
//! ```
//! use blerpc_proto::connection::{
//!     CallKind, Central, CentralConfig, CentralEvent, Peripheral, PeripheralConfig,
//!     PeripheralEvent, Pinning,
//! };
//! use blerpc_proto::crypto::{CryptoProvider as _, IdentitySeed, RustCrypto};
//! use blerpc_proto::time::Instant;
//! use rand_chacha::ChaCha20Rng;
//! use rand_chacha::rand_core::SeedableRng as _;
//!
//! // Both ends on `Vec<u8>` buffers with 4 reassembly slots (firmware uses `ArrayBuf<N>`).
//! type Pc = Peripheral<RustCrypto, ChaCha20Rng, Vec<u8>, Vec<u8>, 4>;
//! type Cc = Central<RustCrypto, ChaCha20Rng, Vec<u8>, Vec<u8>, 4>;
//!
//! let now = Instant::from_millis(0);
//! let identity = RustCrypto.load_identity(&IdentitySeed::from_bytes([7; 32]))?;
//! let key = RustCrypto.identity_public(&identity);
//! let mut peripheral =
//!     Pc::new(PeripheralConfig::default(), RustCrypto, Some(identity), ChaCha20Rng::seed_from_u64(1))?;
//! let config = CentralConfig { pinning: Pinning::Expect(key), ..CentralConfig::default() };
//! let mut central = Cc::new(config, RustCrypto, ChaCha20Rng::seed_from_u64(2), now)?;
//!
//! let mut pdu = [0u8; 244]; // ATT MTU 247 - 3
//! let mut reply = None;
//! while reply.is_none() {
//!     while let Some(n) = central.poll_transmit(now, &mut pdu) {
//!         peripheral.handle_input(now, &pdu[..n])?;
//!     }
//!     // An echo handler: each request answered with its own data.
//!     let mut requests = Vec::new();
//!     while let Some(event) = peripheral.poll_event() {
//!         if let PeripheralEvent::Request { tid, name, data, .. } = event {
//!             requests.push((tid, name.to_owned(), data.to_vec()));
//!         }
//!     }
//!     for (tid, name, data) in requests {
//!         peripheral.respond(now, tid, &name, &data)?;
//!     }
//!     while let Some(n) = peripheral.poll_transmit(now, &mut pdu) {
//!         central.handle_input(now, &pdu[..n])?;
//!     }
//!     let mut connected = false;
//!     while let Some(event) = central.poll_event() {
//!         match event {
//!             CentralEvent::Connected { encrypted } => connected = encrypted,
//!             CentralEvent::Response { data, .. } => reply = Some(data.to_vec()),
//!             _ => {}
//!         }
//!     }
//!     if connected {
//!         // EchoRequest { message: "hi" }, sealed with the session key on its way out.
//!         central.start_call(now, "echo", b"\x0a\x02hi", CallKind::Unary)?;
//!     }
//! }
//! assert_eq!(reply.as_deref(), Some(&b"\x0a\x02hi"[..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Every buffer and queue is bounded by [`connection::CentralConfig`] and
//! [`connection::PeripheralConfig`]; buffers are generic over
//! [`buf::Buffer`], so the same state machine runs on a fixed [`buf::ArrayBuf`] without an
//! allocator or on `Vec<u8>` with the `alloc` feature.
//!
//! ## Memory
//!
//! What one connection costs, measured with `size_of` by `tests/memory.rs` (x86_64; the test
//! fails if these figures drift):
//!
//! | configuration | bytes |
//! |---|---|
//! | firmware peripheral, no allocator: `Peripheral<RustCrypto, Trng, ArrayBuf<12288>, ArrayBuf<8448>, 1>` (12 KB reassembly as the nRF firmware, an outbox that holds one encrypted 8 KB `flash_read` response) | **23,424** (20,736 buffers + 2,688 state: the handshake's keys, then the session's, in one 768-byte slot; identity 232, control queue 352, event queue 784 (a request's event carries its deadline), a stream's credits both ways and when the next are due, the diagnostics counters (88), timers and limits) |
//! | host peripheral, `Vec<u8>` buffers, 4 slots, idle (after `release_memory()`: buffers keep their capacity between messages and are freed when the runtime sees the connection idle) | 2,912 |
//! | host central, `Vec<u8>` buffers, 4 slots, idle | 3,136 |
//!
//! On the Cortex-M33 (32-bit) the firmware's connection is about 22.7 KB (`docs/firmware.md`
//! has the measured figure and the whole image's RAM with its BLE stack: 63.2 KB on the
//! nRF54L15).
//!
//! ## Features
//! - `std` (default, implies `alloc`): `Vec`-backed buffers and `std::error::Error` impls.
//! - `alloc`: `Vec`-backed buffers.
//! - `ring`, `aws-lc-rs`: host crypto providers (the pure-Rust [`crypto::RustCrypto`] provider is
//!   always available and `no_std`).
#![no_std]
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod assemble;
pub mod buf;
pub mod connection;
pub mod crypto;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod handshake;
pub mod session;
pub mod split;
#[cfg(feature = "alloc")]
pub mod table;
pub mod time;
pub mod wire;

pub use time::Instant;

/// Which side of a bleRPC connection a message travels from.
///
/// bleRPC keeps the BLE role names on every link: the **central** is the client that issues calls,
/// the **peripheral** is the server that answers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Central (client) to peripheral (server): requests, uploads, control requests.
    CentralToPeripheral,
    /// Peripheral (server) to central (client): responses, stream items, control replies.
    PeripheralToCentral,
}

impl Direction {
    /// The direction byte used in the AES-GCM nonce: `0x00` C→P, `0x01` P→C.
    pub const fn nonce_byte(self) -> u8 {
        match self {
            Direction::CentralToPeripheral => 0x00,
            Direction::PeripheralToCentral => 0x01,
        }
    }
}

/// The role a connection endpoint plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The client: sends requests, receives responses.
    Central,
    /// The server: receives requests, sends responses.
    Peripheral,
}

impl Role {
    /// The direction of messages this role sends.
    pub const fn tx_direction(self) -> Direction {
        match self {
            Role::Central => Direction::CentralToPeripheral,
            Role::Peripheral => Direction::PeripheralToCentral,
        }
    }
    /// The direction of messages this role receives.
    pub const fn rx_direction(self) -> Direction {
        match self {
            Role::Central => Direction::PeripheralToCentral,
            Role::Peripheral => Direction::CentralToPeripheral,
        }
    }
}
