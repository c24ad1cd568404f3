//! # blerpc-cli: the `blerpc` command-line tool
//!
//! The binary is a thin [`clap`] shell (`src/main.rs`); each subcommand lives in its own module
//! here, with its logic in plain functions that return structured values, so it can be tested
//! without spawning the binary.
//!
//! - [`decode`]: `blerpc decode`, a protocol dissector for captured link PDUs.
//!
//! Later subcommands (`serve`, `call`, `bench`, `keygen`) get their own modules next to it.

pub mod decode;
