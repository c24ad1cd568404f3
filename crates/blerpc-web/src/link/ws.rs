//! The WebSocket link: one binary message per container, exactly as `blerpc serve --listen
//! ws://...` speaks it (`crates/blerpc/src/link/ws.rs`).
//!
//! ```text
//! WebSocket message (binary) = exactly one container
//! ```
//!
//! A text message, or a message longer than one container, ends the connection with `FRAMING`;
//! the socket closing ends it with `LINK_CLOSED` (its close code in the message). The browser
//! buffers what `send` is given without limit, so the driver stops handing it containers while
//! [`HIGH_WATER`] bytes are buffered and polls until they drain.

use std::cell::RefCell;
use std::rc::Weak;

use js_sys::{ArrayBuffer, Promise, Uint8Array};
use wasm_bindgen::prelude::*;
use web_sys::{BinaryType, CloseEvent, MessageEvent, WebSocket};

use crate::clock::Deadline;
use crate::conn::{self, Conn};
use crate::error::{Error, code, js_message};

/// Bytes the browser may hold unsent before the driver waits.
pub const HIGH_WATER: u32 = 1 << 20;

/// An open WebSocket.
pub struct WsLink {
    ws: WebSocket,
    url: String,
    handlers: Option<Handlers>,
}

struct Handlers {
    _message: Closure<dyn FnMut(MessageEvent)>,
    _close: Closure<dyn FnMut(CloseEvent)>,
}

/// Checks that `url` is a `ws://` or `wss://` URL.
pub fn check_url(url: &str) -> Result<(), Error> {
    let lower = url.trim_start().to_ascii_lowercase();
    if lower.starts_with("ws://") || lower.starts_with("wss://") {
        Ok(())
    } else {
        Err(Error::new(
            code::INVALID_ARGUMENT,
            format!("{url:?} is not a ws:// or wss:// URL"),
        ))
    }
}

impl WsLink {
    /// Opens a WebSocket to `url`, giving up after `timeout_ms`.
    pub async fn open(url: &str, timeout_ms: f64) -> Result<WsLink, Error> {
        check_url(url)?;
        let failed =
            |why: String| Error::new(code::LINK_FAILED, format!("cannot open {url}: {why}"));
        let ws = WebSocket::new(url).map_err(|e| failed(js_message(&e)))?;
        ws.set_binary_type(BinaryType::Arraybuffer);
        let mut ends = None;
        let opened = Promise::new(&mut |res, rej| ends = Some((res, rej)));
        let Some((resolve, reject)) = ends else {
            return Err(failed("no promise".into()));
        };
        let on_open = Closure::<dyn FnMut()>::new({
            let resolve = resolve.clone();
            move || {
                let _ = resolve.call0(&JsValue::UNDEFINED);
            }
        });
        let on_close = Closure::<dyn FnMut(CloseEvent)>::new({
            let reject = reject.clone();
            move |e: CloseEvent| {
                let why = format!("the socket closed with code {}{}", e.code(), reason(&e));
                let _ = reject.call1(&JsValue::UNDEFINED, &JsValue::from_str(&why));
            }
        });
        let _deadline = Deadline::after(timeout_ms, move || {
            let why = format!("no answer within {timeout_ms} ms");
            let _ = reject.call1(&JsValue::UNDEFINED, &JsValue::from_str(&why));
        });
        ws.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        ws.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        let result = wasm_bindgen_futures::JsFuture::from(opened).await;
        ws.set_onopen(None);
        ws.set_onclose(None);
        match result {
            Ok(_) => Ok(WsLink {
                ws,
                url: url.to_owned(),
                handlers: None,
            }),
            Err(e) => {
                let _ = ws.close();
                Err(failed(js_message(&e)))
            }
        }
    }

    /// The URL as dialled.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Routes messages and the socket's end to the connection.
    pub fn attach(&mut self, conn: &Weak<RefCell<Conn>>) {
        let message = Closure::<dyn FnMut(MessageEvent)>::new({
            let conn = conn.clone();
            move |e: MessageEvent| match e.data().dyn_into::<ArrayBuffer>() {
                Ok(buffer) => conn::input(&conn, &Uint8Array::new(&buffer)),
                Err(_) => conn::link_lost(
                    &conn,
                    Error::new(
                        code::FRAMING,
                        "the server sent a text message: bleRPC over WebSocket is one binary message per container",
                    ),
                ),
            }
        });
        let close = Closure::<dyn FnMut(CloseEvent)>::new({
            let conn = conn.clone();
            let url = self.url.clone();
            move |e: CloseEvent| {
                conn::link_lost(
                    &conn,
                    Error::new(
                        code::LINK_CLOSED,
                        format!(
                            "the WebSocket to {url} closed (code {}{}){}",
                            e.code(),
                            reason(&e),
                            if e.was_clean() {
                                ""
                            } else {
                                ": the server went away"
                            }
                        ),
                    ),
                );
            }
        });
        self.ws
            .set_onmessage(Some(message.as_ref().unchecked_ref()));
        self.ws.set_onclose(Some(close.as_ref().unchecked_ref()));
        self.handlers = Some(Handlers {
            _message: message,
            _close: close,
        });
    }

    /// Open, and less than [`HIGH_WATER`] bytes waiting in the browser.
    pub fn ready(&self) -> bool {
        self.ws.ready_state() == WebSocket::OPEN && self.ws.buffered_amount() < HIGH_WATER
    }

    /// Sends one container as one binary message.
    pub fn send(&mut self, pdu: &[u8]) -> Result<(), Error> {
        self.ws.send_with_u8_array(pdu).map_err(|e| {
            Error::new(
                code::LINK_CLOSED,
                format!(
                    "cannot send on the WebSocket to {}: {}",
                    self.url,
                    js_message(&e)
                ),
            )
        })
    }

    /// Closes the socket (what was sent is still delivered) and detaches the handlers.
    pub fn close(&mut self) {
        self.ws.set_onmessage(None);
        self.ws.set_onclose(None);
        let _ = self.ws.close();
        self.handlers = None;
    }
}

impl Drop for WsLink {
    fn drop(&mut self) {
        self.close();
    }
}

fn reason(e: &CloseEvent) -> String {
    let r = e.reason();
    if r.is_empty() {
        String::new()
    } else {
        format!(", {r}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_websocket_urls() {
        assert!(check_url("ws://127.0.0.1:9000").is_ok());
        assert!(check_url("WSS://example.invalid/blerpc").is_ok());
        assert_eq!(
            check_url("tcp://127.0.0.1:9000").map_err(|e| e.code),
            Err(code::INVALID_ARGUMENT)
        );
    }
}
