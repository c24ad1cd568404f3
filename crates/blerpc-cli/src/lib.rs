//! # blerpc-cli: the `blerpc` command-line tool
//!
//! The binary is a thin [`clap`] shell (`src/main.rs`); each subcommand is a module here that
//! parses its arguments, turns them into the libraries' typed configurations, runs them and
//! prints. The work itself is the libraries': links, listening, identities and worker
//! processes in the runtime (`blerpc`), the demo service and its run over every link in
//! `blerpc-demo`, the gateway in `blerpc-gateway`, JSON ⇄ protobuf in `blerpc-schema`.
//!
//! - [`demo`]: `blerpc demo`, the reference functional tests over every link in one process.
//! - [`serve`]: `blerpc serve`, the demo service as a peripheral on any link (`--dial`,
//!   `--workers`).
//! - [`call`]: `blerpc call` and `blerpc upload`, JSON in and out.
//! - [`diagnostics`]: `blerpc diagnostics`, a peripheral's diagnostics as a table or JSON.
//! - [`report`]: `blerpc report`, a field report of a real link (`blerpc-report`), and
//!   `report compare`.
//! - [`gateway`]: `blerpc gateway`, the device gateway.
//! - [`keygen`], [`scan`]: identities and BLE discovery.
//! - [`decode`]: `blerpc decode`, the shell around the protocol dissector (`blerpc-dissect`).
//! - [`links`]: the link flags (TLS trust) and the runtime's link errors in the flags' words;
//!   [`trace`]: `--verbose`.

pub mod call;
pub mod decode;
pub mod demo;
pub mod diagnostics;
pub mod gateway;
pub mod keygen;
pub mod links;
pub mod report;
pub mod scan;
pub mod serve;
pub mod trace;
