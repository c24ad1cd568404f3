//! # blerpc: the bleRPC host runtime
//!
//! An async [`Client`] (the bleRPC *central*) and [`Server`] (the *peripheral*) over any
//! [`link::Link`]: in-memory, TCP, TLS, WebSocket, serial or BLE. Each connection is one tokio
//! task around the sans-IO core in [`blerpc_proto`]; end-to-end encryption is on by default and
//! the client pins the server's identity (trust on first use, fail-closed).
//!
//! ## Quick start
//!
//! Describe the service in a `.proto` file, as gRPC users do:
//!
//! ```text
//! // proto/thermostat.proto
//! syntax = "proto3";
//! package thermostat;
//! message SetTargetRequest { sint32 centi_celsius = 1; }
//! message SetTargetResponse { sint32 centi_celsius = 1; }
//! service Thermostat {
//!   rpc SetTarget(SetTargetRequest) returns (SetTargetResponse);
//!   // ... streams in either direction too
//! }
//! ```
//!
//! generate it in `build.rs` with [`blerpc-build`](https://docs.rs/blerpc-build) (pure Rust, no
//! `protoc`): `blerpc_build::compile(&["proto/thermostat.proto"], &["proto"])?;`, and include
//! it with `pub mod thermostat { blerpc::include_proto!("thermostat"); }`. That gives the
//! messages, a typed `ThermostatClient`, a `Thermostat` trait to implement and a
//! `ThermostatServer` that serves it. The workspace's `blerpc-example` crate does exactly
//! this; serve its handler and call it, end-to-end encrypted over an in-memory link:
//!
//! ```
//! use blerpc::client::PinPolicy;
//! use blerpc::link::mem;
//! use blerpc::{Client, ClientConfig, Server, ServerConfig};
//! use blerpc_example::SimThermostat;
//! use blerpc_example::thermostat::{SetTargetRequest, ThermostatClient, ThermostatServer};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The peripheral: the handler behind the generated server, with its identity key.
//! let (central_end, peripheral_end) = mem::pair(247); // ATT MTU 247
//! let server = Server::new(
//!     ThermostatServer::new(SimThermostat::default()),
//!     ServerConfig { identity: Some([7; 32]), ..Default::default() },
//! )?;
//! let key = server.identity_public().ok_or("the server has no identity")?;
//! tokio::spawn(async move { server.serve_link(peripheral_end).await });
//!
//! // The central: the generated client over a connection that trusts exactly that key.
//! let config = ClientConfig { pinning: PinPolicy::Trust(key), ..Default::default() };
//! let client = ThermostatClient::new(Client::connect(central_end, config).await?);
//! let reply = client.set_target(SetTargetRequest { centi_celsius: 2050 }).await?;
//! assert_eq!(reply.centi_celsius, 2050);
//! assert!(client.inner().info().encrypted);
//! # Ok(())
//! # }
//! ```
//!
//! Swap `mem::pair` for a link of `link::tcp`, `link::tls`, `link::ws`, `link::serial` or the BLE
//! links to run the same code over a real transport.

pub mod backoff;
pub mod client;
mod clock;
pub mod diagnostics;
mod driver;
pub mod identity;
pub mod key_store;
pub mod known_keys;
pub mod link;
pub mod metrics;
#[cfg(feature = "process")]
pub mod process;
pub mod server;

pub use blerpc_proto;

/// A copy of a received message in a new `Vec` of its size, made by the core's
/// `Buffer::try_extend` (in pieces where one `memcpy` between two buffers of a size would be
/// slow).
pub(crate) fn copy_message(data: &[u8]) -> Vec<u8> {
    copy_message_into(data, data.len())
}

/// [`copy_message`] into a `Vec` of `capacity` bytes (at least the message's).
pub(crate) fn copy_message_into(data: &[u8], capacity: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(capacity.max(data.len()));
    if blerpc_proto::buf::Buffer::try_extend(&mut v, data).is_err() {
        // Out of memory: fail the way any `Vec` does.
        v.extend_from_slice(data);
    }
    v
}
pub use client::{BidiSender, BidiStream, Client, ClientConfig, Error, ResponseStream, Upload};
pub use server::{Server, ServerConfig};

/// `e` and its sources, `: `-separated: one line that says what failed and why (for logs and
/// reports; `anyhow`'s `{:#}` without `anyhow`).
///
/// ```
/// let e = std::io::Error::other("refused");
/// assert_eq!(blerpc::error_chain(&e), "refused");
/// ```
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

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

    use prost::bytes::buf::UninitSlice;
    use prost::bytes::{Buf, BufMut};

    /// Encodes `message` into a new `Vec` of exactly its length, copying `bytes` fields with
    /// the core's `Buffer::try_extend` (a plain `Vec` copies them with one `memcpy`, which is
    /// many times slower on AMD Zen when the message was built just before; see
    /// [`Buffer::try_extend`](blerpc_proto::buf::Buffer::try_extend)).
    pub fn encode(message: &impl prost::Message) -> Vec<u8> {
        encode_into(message, Vec::new())
    }

    /// Appends `message` to `out` the way [`encode`] encodes (reserving its length first unless
    /// `out` has the room) and returns `out`.
    pub fn encode_into(message: &impl prost::Message, mut out: Vec<u8>) -> Vec<u8> {
        out.reserve_exact(message.encoded_len());
        let mut out = EncodeBuf(out);
        message.encode_raw(&mut out);
        out.0
    }

    /// A `Vec<u8>` whose slice copies go through the core's `Buffer::try_extend`.
    struct EncodeBuf(Vec<u8>);

    impl EncodeBuf {
        fn append(&mut self, src: &[u8]) {
            if blerpc_proto::buf::Buffer::try_extend(&mut self.0, src).is_err() {
                // Out of memory: the plain append fails the way any `Vec` does.
                self.0.extend_from_slice(src);
            }
        }
    }

    // SAFETY: every method that touches uninitialised memory is `Vec<u8>`'s own implementation;
    // `put` and `put_slice` only append initialised bytes through safe `Vec` methods.
    unsafe impl BufMut for EncodeBuf {
        fn remaining_mut(&self) -> usize {
            self.0.remaining_mut()
        }

        unsafe fn advance_mut(&mut self, cnt: usize) {
            // SAFETY: the caller's contract (`cnt` bytes of `chunk_mut` initialised) is passed
            // on unchanged to the `Vec` that handed out that chunk.
            unsafe { self.0.advance_mut(cnt) }
        }

        fn chunk_mut(&mut self) -> &mut UninitSlice {
            self.0.chunk_mut()
        }

        fn put<T: Buf>(&mut self, mut src: T)
        where
            Self: Sized,
        {
            while src.has_remaining() {
                let chunk = src.chunk();
                let n = chunk.len();
                self.append(chunk);
                src.advance(n);
            }
        }

        fn put_slice(&mut self, src: &[u8]) {
            self.append(src);
        }
    }

    #[cfg(test)]
    mod tests {
        use prost::Message;

        #[derive(Clone, PartialEq, prost::Message)]
        struct Sample {
            #[prost(bytes = "vec", tag = "1")]
            data: Vec<u8>,
            #[prost(bytes = "bytes", tag = "2")]
            shared: prost::bytes::Bytes,
            #[prost(string, tag = "3")]
            name: String,
            #[prost(uint32, repeated, tag = "4")]
            values: Vec<u32>,
        }

        #[test]
        fn encode_matches_prost_byte_for_byte() {
            for len in [0usize, 1, 1023, 1025, 65_536, 70_001] {
                let message = Sample {
                    data: (0..len).map(|i| (i % 251) as u8).collect(),
                    shared: (0..len / 2)
                        .map(|i| (i % 241) as u8)
                        .collect::<Vec<_>>()
                        .into(),
                    name: "data_write".into(),
                    values: vec![1, 300, 70_000],
                };
                let ours = super::encode(&message);
                assert_eq!(ours, message.encode_to_vec(), "len {len}");
                assert_eq!(ours.len(), ours.capacity());
                assert_eq!(Sample::decode(ours.as_slice()).unwrap(), message);
            }
        }
    }
}
