//! # blerpc-bench: the benchmarks of blerpc-rs
//!
//! Every benchmark of the project, its report code and its child processes, in one crate that
//! is never published (the shipped `blerpc` binary carries none of it). One binary,
//! `blerpc-bench`, runs them; without a subcommand it runs the full suite.
//!
//! | subcommand | what it measures | baseline in the same run |
//! |---|---|---|
//! | (none) | [`suite`]: every BLE profile, then every link | the published figures |
//! | `ble` | [`ble`]: the reference functional tests and benchmarks on the simulated BLE link per platform profile, or over a real link | the published figures, the link's physical limit |
//! | `pipeline` | [`pipeline`]: calls/s with 1, 2, 4 and 8 calls in flight on the simulated BLE link, against this peripheral and the reference peripherals' request limits | the same case with one call in flight |
//! | `links` | [`links`]: the same tests and benchmarks over every link of this build, in one process | — |
//! | `loopback` | [`loopback`]: DATA→ACK round trips over TCP and TLS, two processes | bare tokio / rustls echo, the same sealed with AES-GCM, gRPC (tonic) |
//! | `scale` | [`scale`]: 10k–100k WebSocket connections against `blerpc serve` | a raw TCP echo on the same load generators |
//! | `codec` | [`codec`]: the codec path and the key exchange | the reference Python library |
//! | `aead`, `copy`, `calls`, `wakeup` | [`aead`], [`copy`], [`calls`], [`wakeup`]: the pieces that explain the loopback figures | the other rows of each table |
//! | `handshake` | [`handshake`]: the key exchange's primitives per crypto library (what the codec's `kx` row sums) | the other libraries |
//! | `hostile` | [`hostile`]: attacks (silent sockets, pre-auth memory, slow containers, key-exchange floods, random bytes, many tids, reopen storms) on a real `blerpc serve` while a legitimate client calls | the same client with no attack |
//! | `gateway` | [`gateway`]: calls through the device gateway (HTTP/JSON and relayed end to end), and 100,000 dialled-in devices with calls to random ones | direct calls to the same device over TCP |
//! | `soak` | [`soak`]: thousands of encrypted connections doing mixed calls and streams with reconnect churn and a hostile mix; server RSS slope | — (0 wrong answers) |
//! | `serial` | [`serial`]: the serial link's framing (CRC-16, COBS) per PDU size | — |
//!
//! Child processes re-execute this binary with a hidden subcommand ([`process`]); the scale
//! test's server is `blerpc serve` itself, run from this binary through the CLI's library.
//!
//! Results print as tables on stdout (progress on stderr); `--json FILE` writes them for
//! machines and `--plot FILE.svg` / `--svg FILE` draws them where the suite has a chart.
//!
//! ```
//! // One simulated platform, each benchmark once: the same code `blerpc-bench ble` runs.
//! use blerpc_bench::ble::{BleArgs, run_suite};
//!
//! let args = BleArgs {
//!     profile: vec!["macos".into()],
//!     reps: 1,
//!     ..BleArgs::default()
//! };
//! let runs = run_suite(&args)?;
//! assert!(runs[0].ok(), "{:?}", runs[0].error);
//! # anyhow::Ok(())
//! ```
#![forbid(unsafe_code)]

pub mod aead;
pub mod ble;
pub mod calls;
pub mod codec;
pub mod copy;
pub mod gateway;
pub mod handshake;
pub mod hostile;
pub mod links;
pub mod loopback;
pub mod pipeline;
pub mod plot;
pub mod process;
pub mod reference;
pub mod scale;
pub mod serial;
pub mod soak;
pub mod stats;
pub mod suite;
pub mod table;
pub mod wakeup;
