//! # blerpc-ffi: bleRPC for other languages, through UniFFI
//!
//! The exported API of the Python package `blerpc` (`bindings/python`), of the Kotlin library
//! `dev.blerpc` (`bindings/kotlin`) and of the Swift package `Blerpc` (`bindings/swift`): a
//! thin shell over the runtime's [`blerpc::Client`]. It holds no protocol
//! logic and no call bookkeeping: connecting by URL is [`blerpc::link::connect`], every call
//! goes to the client's connection task, which drives the core's call table (the same one the
//! tokio client and the browser central run), and errors carry the core's stable
//! [codes](code).
//!
//! | item | what |
//! |---|---|
//! | [`connect`] | opens `tcp://`, `tls://`, `ws://` or `wss://` and runs setup and the key exchange |
//! | [`connect_gatt`], [`GattLink`], [`GattInbox`] | the same over a GATT link the app's BLE stack provides (a phone's radio, Bumble, bleak): the app implements [`GattLink`] and feeds a [`GattInbox`] |
//! | [`ConnectOptions`] | the identity to trust (a pinned key, a known-keys file: the default, an app's [`KeyStore`], or any key if asked), the connect timeout, TLS trust |
//! | [`Connection`] | `call` (with an optional deadline), `server_stream`, `client_stream`, `bidi_stream`, `diagnostics` (the peripheral's, as JSON), `info`, `disconnect` |
//! | `run_report`, `ReportConnector`, `ReportOptions` (feature `report`: the Python wheel) | a field report (`blerpc report`'s run) over connections the app opens, reconnects included |
//! | [`ResponseStream`], [`Upload`], [`BidiStream`] | the two directions of a stream, and both at once |
//! | [`CancelToken`], [`connect_cancellable`], `Connection::*_cancellable` | an explicit cancel for each operation (for Swift, whose generated code does not drop a cancelled task's future) |
//! | [`CompletionQueue`], `Connection::start_call` | calls whose outcomes a queue delivers: two crossings per call instead of UniFFI's future polling (the Python and Kotlin layers' `call`) |
//! | [`BlerpcError`] | every failure: a variant per kind, with `code` and `detail` |
//!
//! Requests and responses are protobuf bytes: each language encodes its own messages, from
//! the app's `.proto`, with its standard protobuf runtime.
//!
//! ## Threads and cancellation
//!
//! The crate owns one tokio runtime ([`runtime`], one worker thread, made on first use): the
//! links and each connection's task live there. A call is polled on the caller's own thread
//! (UniFFI polls Rust futures from the foreign event loop, under its tokio compatibility
//! layer), so cancelling the foreign task (Python's `task.cancel()`, `asyncio.wait_for`, a
//! Kotlin coroutine's `cancel()`, `withTimeout`) drops
//! the call's future, which cancels the call in the core: the connection stays usable.
//! Swift's generated code keeps awaiting a cancelled task's future, so every operation has a
//! variant that takes a [`CancelToken`]: cancelling it ends the operation the same way.
//!
//! ## Example
//!
//! The same API from Rust, against the demo service on a TCP listener (the Python test suite
//! runs it against a `blerpc serve` process):
//!
//! ```
//! use blerpc::link::listen::{ListenOptions, Listener};
//! use blerpc::known_keys::to_hex;
//! use blerpc_demo::pb::{EchoRequest, EchoResponse};
//! use blerpc_ffi::{ConnectOptions, connect};
//! use prost::Message;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (server, key) = blerpc_demo::server::demo_server()?;
//! let listener = Listener::bind(&"tcp://127.0.0.1:0".parse()?, &ListenOptions::default()).await?;
//! let url = listener.url().to_string();
//! tokio::spawn(async move { listener.serve(&server, std::future::pending()).await });
//!
//! // Trust exactly the server's key (the default would pin it on first use).
//! let options = ConnectOptions { trust_key: Some(to_hex(&key)), ..Default::default() };
//! let conn = connect(url, options).await?;
//! let request = EchoRequest { message: "hello".into() }.encode_to_vec();
//! let reply = conn.call("echo".into(), request, Some(2_000)).await?;
//! assert_eq!(EchoResponse::decode(&reply[..])?.message, "hello");
//! assert!(conn.info().encrypted);
//!
//! // Every failure has the core's code.
//! let e = conn.call("x".repeat(300), Vec::new(), None).await.err().ok_or("accepted")?;
//! assert_eq!(e.code(), "INVALID_ARGUMENT");
//! conn.disconnect().await;
//! # Ok(())
//! # }
//! ```

pub mod cancel;
mod completion;
mod connection;
mod error;
mod gatt;
mod keys;
mod options;
#[cfg(feature = "report")]
mod report;
mod stream;

use std::sync::OnceLock;

pub use cancel::{CancelToken, connect_cancellable};
pub use completion::{Completion, CompletionQueue};
pub use connection::{Connection, ConnectionInfo, Pinned, connect};
pub use error::{BlerpcError, code};
pub use gatt::{
    DEFAULT_INBOX_CAPACITY, GattInbox, GattLink, MAX_NOTIFICATION_LEN, connect_gatt, container_len,
};
pub use keys::KeyStore;
pub use options::{ConnectOptions, DEFAULT_CONNECT_TIMEOUT_MS};
#[cfg(feature = "report")]
pub use report::{ReportConnector, ReportOptions, run_report};
pub use stream::{BidiStream, ResponseStream, Upload};

uniffi::setup_scaffolding!();

/// The crate's tokio runtime, where links and connection tasks run: one worker thread, made
/// on first use. A runtime that cannot be made (no threads left) is `LINK_FAILED` for every
/// connect.
pub fn runtime() -> Result<&'static tokio::runtime::Runtime, BlerpcError> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("blerpc-ffi")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| {
            BlerpcError::connection(code::LINK_FAILED, format!("cannot start the runtime: {e}"))
        })
}
