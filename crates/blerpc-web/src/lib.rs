//! # blerpc-web: the bleRPC browser central
//!
//! A bleRPC central for web pages: the sans-IO core [`blerpc_proto`] compiled to WebAssembly,
//! driven by the browser's event loop, over **Web Bluetooth** (the bleRPC GATT service, as on
//! a real device) or **WebSocket** (`ws://`, `wss://`, one binary message per container, as
//! `blerpc serve --listen ws://...` speaks it). Calls, streams both ways, deadlines,
//! cancellation and end-to-end encryption with the peripheral's key pinned (trust on first use
//! in browser storage, one key trusted explicitly, or an explicit opt-out) are the core's; this
//! crate holds no protocol logic, only the browser's timers and I/O:
//!
//! | module | holds |
//! |---|---|
//! | `api` | the wasm-bindgen exports: the `Connection` class and the pin-store functions |
//! | `conn` | one connection: the core's `Central` driven by callbacks (the host runtime's driver steps) |
//! | `link::ws`, `link::ble` | the WebSocket and Web Bluetooth links |
//! | `pinning` | trust on first use in `localStorage` (or the page's own store) |
//! | `clock` | `performance.now()` as the core's `Instant`, one `setTimeout` per connection |
//! | `error` | errors as JavaScript `Error`s with a stable `code` |
//! | `codec_bench` | (feature `codec-bench`) the codec benchmark's workloads in wasm |
//!
//! It is used from JavaScript or TypeScript through the package `tools/web/build.sh` makes
//! (`web/pkg/`: the wasm, wasm-bindgen's glue and the typed API of `ts/`):
//!
//! ```js
//! import { init, connectWebSocket, DemoClient } from './pkg/index.js';
//! await init();
//! const conn = await connectWebSocket('ws://127.0.0.1:9000');   // trust on first use
//! const demo = new DemoClient(conn);
//! console.log((await demo.echo({ message: 'hi' })).message);
//! for await (const item of demo.counterStream({ count: 5 })) console.log(item.seq, item.value);
//! console.log((await demo.counterUpload([{ seq: 0, value: 0 }])).receivedCount);
//! const raw = await conn.call('echo', new Uint8Array([0x0a, 0x02, 0x68, 0x69]));  // any service
//! conn.close();
//! ```
//!
//! The browser tests (`web/test/`, run by `tools/web/check.sh`) run exactly this API in
//! headless Chromium against a real `blerpc serve`, over WebSocket and over Chromium's
//! Bluetooth emulation. See `docs/web.md`.
#![forbid(unsafe_code)]

pub mod api;
pub mod clock;
#[cfg(feature = "codec-bench")]
pub mod codec_bench;
pub mod conn;
pub mod error;
pub mod link;
pub mod pinning;
