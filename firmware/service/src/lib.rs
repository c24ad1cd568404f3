//! # blerpc-fw-service: one firmware connection, `no_std` and without an allocator
//!
//! What the firmware runs for each connection, independent of the chip and of the BLE stack:
//!
//! | module | holds |
//! |---|---|
//! | [`connection`] | [`Connection`]: the core's `Peripheral` on fixed buffers and the demo service's `Responder` answering it (the MCU shell's sans-IO half) |
//! | [`device`] | [`device::Device`] and the link as the BLE stack reports it (the core's `LinkFields`): what `blerpc.diagnostics` answers (the device across connections, the link as the BLE stack reports it) |
//! | `ram` (Cortex-M only) | `ram::high_water`: the most RAM used since boot, from the stack paint cortex-m-rt lays at reset |
//! | [`identity`] | the identity seed from its flash location, or the documented development seed |
//! | [`plaintext`] | [`plaintext::NoCrypto`], the provider of the build that measures what encryption costs |
//!
//! The protocol is entirely the `blerpc-proto` core's and the demo service entirely
//! `blerpc-demo`'s (built without `std`: the same service the host demo serves); this crate
//! sizes the buffers and joins the two.
//!
//! ## Example: one connection, driven by hand
//!
//! A core `Central` in memory sets up an encrypted session with a [`Connection`] and calls `echo`
//! (the QEMU image runs the same, and more, on a Cortex-M33):
//!
//! ```
//! use blerpc_demo::flash::{DemoFlash, SliceFlash};
//! use blerpc_demo::{DemoLimits, DemoService, noalloc};
//! use blerpc_fw_service::{Connection, firmware_config};
//! use blerpc_proto::buf::ArrayBuf;
//! use blerpc_proto::connection::{CallKind, Central, CentralConfig, CentralEvent, Pinning};
//! use blerpc_proto::crypto::{CryptoProvider as _, IdentitySeed, RustCrypto};
//! use blerpc_proto::Instant;
//! use rand_chacha::ChaCha20Rng;
//! use rand_chacha::rand_core::SeedableRng as _;
//!
//! static FLASH: [u8; 4096] = [0x5a; 4096];
//! let now = Instant::from_millis(0);
//! let identity = RustCrypto.load_identity(&IdentitySeed::from_bytes([9; 32])).unwrap();
//! let key = RustCrypto.identity_public(&identity);
//! let flash = DemoFlash::new(SliceFlash(&FLASH), 0..4096, 4096..4096).unwrap();
//! let service = DemoService::new(flash, DemoLimits::REFERENCE);
//! let mut conn = Connection::new(now, firmware_config(true), RustCrypto, Some(identity),
//!     ChaCha20Rng::seed_from_u64(1), service).unwrap();
//! let config = CentralConfig {
//!     pinning: Pinning::Expect(key),
//!     max_calls_in_flight: 1,
//!     max_outbox_bytes: 1024,
//!     max_response_len: 1024,
//!     ..CentralConfig::default()
//! };
//! let mut central: Central<RustCrypto, ChaCha20Rng, ArrayBuf<1024>, ArrayBuf<1024>, 1> =
//!     Central::new(config, RustCrypto, ChaCha20Rng::seed_from_u64(2), now).unwrap();
//!
//! let mut pdu = [0u8; 244];
//! let mut echoed = None;
//! for _ in 0..10 {
//!     while let Some(n) = central.poll_transmit(now, &mut pdu) {
//!         conn.handle_pdu(now, &pdu[..n]);
//!     }
//!     while let Some(n) = conn.poll_transmit(now, &mut pdu) {
//!         central.handle_input(now, &pdu[..n]).unwrap();
//!     }
//!     let mut start = false;
//!     while let Some(event) = central.poll_event() {
//!         match event {
//!             CentralEvent::Connected { encrypted } => start = encrypted,
//!             CentralEvent::Response { data, .. } => {
//!                 echoed = Some(noalloc::EchoResponse::decode(data).unwrap().message.len());
//!             }
//!             _ => {}
//!         }
//!     }
//!     if start {
//!         let mut req = [0u8; 16];
//!         let n = noalloc::EchoRequest { message: "hi" }.encode(&mut req).unwrap();
//!         central.start_call(now, "echo", &req[..n], CallKind::Unary).unwrap();
//!     }
//! }
//! assert_eq!(echoed, Some(2));
//! assert!(conn.is_secured());
//! ```
#![no_std]
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]

pub mod connection;
pub mod device;
pub mod identity;
pub mod plaintext;
#[cfg(all(target_arch = "arm", target_os = "none"))]
pub mod ram;

pub use connection::{
    Connection, FirmwarePeripheral, OUTBOX_BYTES, REASSEMBLY_BYTES, firmware_config,
};
