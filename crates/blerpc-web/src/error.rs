//! Errors as JavaScript sees them: an `Error` whose `name` is `"BlerpcError"` and whose `code`
//! is a stable string (the TypeScript layer turns it into a `BlerpcError` instance with the same
//! fields).
//!
//! Everything a connection reports comes from the core's [`CentralError`], with its texts and
//! [codes](blerpc_proto::table::code) (the same as every other bleRPC central's); this crate adds
//! only the codes of what is the browser's own ([`BLUETOOTH_UNAVAILABLE`],
//! [`NO_DEVICE_SELECTED`]).

use blerpc_proto::connection::ConfigError;
pub use blerpc_proto::table::code;
use blerpc_proto::table::{CentralError, LinkFailure, LinkFailureKind};
use wasm_bindgen::JsValue;

/// This browser has no Web Bluetooth (`navigator.bluetooth` is undefined).
pub const BLUETOOTH_UNAVAILABLE: &str = "BLUETOOTH_UNAVAILABLE";
/// The user closed the device chooser without picking a device.
pub const NO_DEVICE_SELECTED: &str = "NO_DEVICE_SELECTED";
/// The TypeScript layer's own: a response did not decode as its message type.
pub const DECODE: &str = "DECODE";

/// Every code JavaScript can see: the core's, then the browser's own.
pub fn all_codes() -> impl Iterator<Item = &'static str> {
    code::ALL
        .iter()
        .copied()
        .chain([BLUETOOTH_UNAVAILABLE, NO_DEVICE_SELECTED, DECODE])
}

/// An error on its way to JavaScript.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The stable code ([`code`], or one of this crate's).
    pub code: &'static str,
    /// What happened, for people.
    pub message: String,
    /// The peripheral's ERROR byte, for [`code::PEER_ERROR`].
    pub peer_code: Option<u8>,
}

impl Error {
    /// An error with a code and a message.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
            peer_code: None,
        }
    }

    /// The link failed, closed or broke its framing: [`LinkFailureKind`]'s code.
    pub fn link(kind: LinkFailureKind, message: impl Into<String>) -> Self {
        Error::from(CentralError::Link(LinkFailure::new(kind, message)))
    }

    /// A configuration the core refused.
    pub fn config(e: ConfigError) -> Self {
        Error::new(
            code::INVALID_ARGUMENT,
            format!("invalid configuration: {e}"),
        )
    }

    /// The link failure this error stands for (a link's own errors reach the core as one).
    pub fn to_link_failure(&self) -> LinkFailure {
        let kind = match self.code {
            code::LINK_CLOSED => LinkFailureKind::Closed,
            code::FRAMING => LinkFailureKind::Framing,
            _ => LinkFailureKind::Failed,
        };
        LinkFailure::new(kind, self.message.clone())
    }

    /// The JavaScript `Error` object.
    pub fn to_js(&self) -> JsValue {
        let error = js_sys::Error::new(&self.message);
        error.set_name("BlerpcError");
        let object: &JsValue = error.as_ref();
        set(object, "code", &JsValue::from_str(self.code));
        if let Some(peer) = self.peer_code {
            set(object, "peerCode", &JsValue::from(peer));
        }
        error.into()
    }
}

impl From<CentralError> for Error {
    fn from(e: CentralError) -> Self {
        Error {
            code: e.code(),
            peer_code: e.peer_code(),
            message: match &e {
                // The link's own words, not "the link closed: the link closed".
                CentralError::Link(f) if f.message.is_empty() => e.to_string(),
                CentralError::Link(f) => f.message.clone(),
                _ => e.to_string(),
            },
        }
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl From<Error> for JsValue {
    fn from(e: Error) -> JsValue {
        e.to_js()
    }
}

/// Sets `object[key] = value` (the object is ours: this cannot fail).
pub(crate) fn set(object: &JsValue, key: &str, value: &JsValue) {
    let _ = js_sys::Reflect::set(object, &JsValue::from_str(key), value);
}

/// A JavaScript exception's message (what a rejected browser promise said).
pub(crate) fn js_message(e: &JsValue) -> String {
    if let Some(s) = e.as_string() {
        return s;
    }
    let name = js_sys::Reflect::get(e, &JsValue::from_str("name"))
        .ok()
        .and_then(|v| v.as_string());
    let message = js_sys::Reflect::get(e, &JsValue::from_str("message"))
        .ok()
        .and_then(|v| v.as_string());
    match (name, message) {
        (Some(n), Some(m)) => format!("{n}: {m}"),
        (None, Some(m)) => m,
        _ => format!("{e:?}"),
    }
}

#[cfg(web_sys_unstable_apis)]
/// The `name` of a JavaScript exception (`NotFoundError`, `NetworkError`, ...).
pub(crate) fn js_name(e: &JsValue) -> Option<String> {
    js_sys::Reflect::get(e, &JsValue::from_str("name"))
        .ok()
        .and_then(|v| v.as_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use blerpc_proto::connection::{CallError, CloseReason};
    use blerpc_proto::wire::error_code::ErrorCode;

    #[test]
    fn central_errors_keep_the_cores_codes_and_texts() {
        let e = Error::from(CentralError::Call(CallError::Timeout));
        assert_eq!(e.code, "TIMEOUT");
        let peer = Error::from(CentralError::Call(CallError::Peer(
            ErrorCode::UnknownCommand,
        )));
        assert_eq!((peer.code, peer.peer_code), ("PEER_ERROR", Some(0x03)));
        let setup = Error::from(CentralError::Setup(CloseReason::IdentityRejected));
        assert_eq!(setup.code, "IDENTITY_REJECTED");
        assert_eq!(
            setup.message,
            CentralError::Setup(CloseReason::IdentityRejected).to_string()
        );
        let link = Error::link(LinkFailureKind::Closed, "the server closed the WebSocket");
        assert_eq!(
            (link.code, link.message.as_str()),
            ("LINK_CLOSED", "the server closed the WebSocket")
        );
        assert_eq!(link.to_link_failure().kind, LinkFailureKind::Closed);
    }

    /// The TypeScript `ErrorCode` type lists exactly the codes the wasm side can produce.
    #[test]
    fn the_typescript_error_codes_are_the_rust_ones() {
        let ts = include_str!("../ts/errors.ts");
        let start = ts.find("export type ErrorCode =").unwrap_or(0);
        let end = ts[start..].find(';').map_or(ts.len(), |e| start + e);
        let listed: Vec<&str> = ts[start..end].split('\'').skip(1).step_by(2).collect();
        let mut rust: Vec<&str> = all_codes().collect();
        let mut ts_codes = listed.clone();
        rust.sort_unstable();
        ts_codes.sort_unstable();
        assert_eq!(
            ts_codes, rust,
            "ts/errors.ts ErrorCode against the Rust codes"
        );
    }
}
