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
//! #   fn unary(&self, _: &str, r: blerpc::server::Bytes) -> blerpc::server::BoxFuture<Result<Vec<u8>, blerpc::server::Status>> { Box::pin(async move { Ok(r.to_vec()) }) }
//! #   fn server_stream(&self, _: &str, _: blerpc::server::Bytes) -> blerpc::server::BoxStream<Result<Vec<u8>, blerpc::server::Status>> { unimplemented!() }
//! #   fn client_stream(&self, _: &str, _: blerpc::server::BoxStream<blerpc::server::Bytes>) -> blerpc::server::BoxFuture<Result<Vec<u8>, blerpc::server::Status>> { unimplemented!() }
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
mod driver;
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

    use prost::bytes::buf::UninitSlice;
    use prost::bytes::{Buf, BufMut};

    /// Encodes `message` into a new `Vec` of exactly its length, copying `bytes` fields with
    /// [`blerpc_proto::buf::extend_bytes`] (a plain `Vec` copies them with one `memcpy`, which
    /// is about 20 times slower on AMD Zen when the message was built just before; see
    /// [`blerpc_proto::buf::copy_bytes`]).
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

    /// A `Vec<u8>` whose slice copies go through [`blerpc_proto::buf::extend_bytes`].
    struct EncodeBuf(Vec<u8>);

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
                blerpc_proto::buf::extend_bytes(&mut self.0, chunk);
                src.advance(n);
            }
        }

        fn put_slice(&mut self, src: &[u8]) {
            blerpc_proto::buf::extend_bytes(&mut self.0, src);
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
