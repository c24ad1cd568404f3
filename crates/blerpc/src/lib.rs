//! # blerpc: the bleRPC host runtime
//!
//! An async [`Client`] (the bleRPC *central*) and [`Server`] (the *peripheral*) over any
//! [`link::Link`]: in-memory, TCP, TLS, WebSocket, serial or BLE. Each connection is one tokio
//! task around the sans-IO core in [`blerpc_proto`]; end-to-end encryption is on by default and
//! the client pins the server's identity (trust on first use, fail-closed).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use blerpc::link::mem;
//! # struct Echo;
//! # impl blerpc::server::Dispatch for Echo {
//! #   fn kind(&self, _: &str) -> Option<blerpc::server::CallKind> { Some(blerpc::server::CallKind::Unary) }
//! #   fn unary(&self, _: &str, r: Vec<u8>) -> blerpc::server::BoxFuture<Result<Vec<u8>, blerpc::server::Status>> { Box::pin(async move { Ok(r) }) }
//! #   fn server_stream(&self, _: &str, _: Vec<u8>) -> blerpc::server::BoxStream<Result<Vec<u8>, blerpc::server::Status>> { unimplemented!() }
//! #   fn client_stream(&self, _: &str, _: blerpc::server::BoxStream<Vec<u8>>) -> blerpc::server::BoxFuture<Result<Vec<u8>, blerpc::server::Status>> { unimplemented!() }
//! # }
//! let (a, b) = mem::pair(247);
//! let server = blerpc::Server::new(Echo, blerpc::ServerConfig {
//!     identity: Some([7; 32]),
//!     ..Default::default()
//! })?;
//! let key = server.identity_public().unwrap();
//! tokio::spawn(async move { server.serve_link(b).await });
//! let client = blerpc::Client::connect(a, blerpc::ClientConfig {
//!     pinning: blerpc::client::PinPolicy::Trust(key),
//!     ..Default::default()
//! })
//! .await?;
//! let reply = client.call("echo", b"\x0a\x02hi".to_vec()).await?;
//! # Ok(()) }
//! ```

pub mod client;
mod clock;
pub mod known_keys;
pub mod link;
pub mod server;

pub use blerpc_proto;
pub use client::{Client, ClientConfig, Error, ResponseStream, Upload};
pub use server::{Server, ServerConfig};

/// Includes the code `blerpc-build` generated for a protobuf package.
#[macro_export]
macro_rules! include_proto {
    ($package:tt) => {
        include!(concat!(env!("OUT_DIR"), "/", $package, ".rs"));
    };
}

/// Re-exports for generated code. Not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use futures_core;
    pub use futures_util;
    pub use prost;
}
