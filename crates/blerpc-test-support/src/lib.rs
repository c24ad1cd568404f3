//! # blerpc-test-support: what the process tests share
//!
//! The integration tests of `blerpc-cli` (the binary under test is `blerpc`) and of
//! `blerpc-bench` (`blerpc-bench`, which serves with the same code) start real processes. This
//! crate holds what they share, as a dev-dependency of both (it is not published):
//!
//! - [`process`]: the binary under test ([`bin`], found through Cargo's `CARGO_BIN_EXE_*`), a
//!   child that is killed when dropped and whose stdout lines arrive within a bound ([`Proc`]),
//!   bounded runs ([`run`], [`run_within`]), `serve` with its `listening` line parsed
//!   ([`serve`]), the repository root and the reference venv's python.
//! - [`nats::NatsServer`]: a real `nats-server` with JetStream, for the fleet's tests, alone or
//!   as a cluster member on a host.
//! - [`netns`]: separate hosts (network namespaces on one switch) for failover tests.
//! - [`gateway`]: the arguments the tests give `blerpc gateway`.
//! - [`http`]: a small blocking HTTP/1.1 client (one request per connection, chunked bodies
//!   decoded, every read bounded), for the gateway's API.
//!
//! Every helper panics with what went wrong (a test's way to fail); every wait is bounded.

pub mod gateway;
pub mod http;
pub mod nats;
pub mod netns;
pub mod process;

pub use process::{Done, Proc, TIMEOUT, bin, blerpc, repo, run, run_within, serve, venv_python};
