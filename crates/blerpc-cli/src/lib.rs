//! # blerpc-cli: the `blerpc` command-line tool
//!
//! The binary is a thin [`clap`] shell (`src/main.rs`); each subcommand lives in its own module
//! here, with its logic in plain functions, so it can be tested without spawning the binary.
//!
//! - [`demo`]: `blerpc demo`, a server and a client in one process over every link, running the
//!   reference functional tests.
//! - [`serve`]: `blerpc serve`, the demo service as a peripheral on any link.
//! - [`call`]: `blerpc call` and `blerpc upload`, JSON in and out ([`schema`] maps it to protobuf).
//! - [`gateway`]: `blerpc gateway`, the device gateway (the `blerpc-gateway` crate).
//! - [`keygen`], [`scan`]: identities and BLE discovery.
//! - [`decode`]: `blerpc decode`, a protocol dissector for captured link PDUs.
//!
//! Shared pieces: [`link`] (addresses, connecting, listening, the PDU trace), [`os`] (process
//! limits for `serve --workers`), [`identity`]
//! (seed files), [`certs`] (a local CA for TLS), [`trace`] (`--verbose`).

pub mod call;
pub mod decode;
pub mod demo;
pub mod gateway;
pub mod keygen;
pub mod links;
pub mod scan;
pub use blerpc_schema as schema;
pub mod serve;
pub mod trace;
