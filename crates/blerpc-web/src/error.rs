//! Errors as JavaScript sees them: an `Error` whose `name` is `"BlerpcError"` and whose `code`
//! is one of the stable strings of [`Code`] (the TypeScript layer turns it into a
//! `BlerpcError` instance with the same fields).

use blerpc_proto::connection::{CallError, CloseReason, ConfigError};
use wasm_bindgen::JsValue;

/// The stable error codes (`error.code` in JavaScript).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Code {
    /// An option is missing or out of range.
    InvalidArgument,
    /// The link could not be opened (WebSocket refused, GATT connect failed, ...).
    LinkFailed,
    /// The link went away (the server closed or died, the device disconnected).
    LinkClosed,
    /// The peer broke the link's framing (a text message, an oversized message).
    Framing,
    /// This browser has no Web Bluetooth (`navigator.bluetooth` is undefined).
    BluetoothUnavailable,
    /// The user closed the device chooser without picking a device.
    NoDeviceSelected,
    /// The peripheral did not answer the setup requests in time.
    SetupTimeout,
    /// Encryption is required and the peripheral does not offer it.
    EncryptionUnavailable,
    /// The ATT MTU is too small for the key exchange (needs 136).
    MtuTooSmall,
    /// The key exchange failed or was refused.
    HandshakeFailed,
    /// The key exchange did not complete in time.
    HandshakeTimeout,
    /// Trust on first use: the device presented a different key from the one pinned for it.
    IdentityChanged,
    /// The device's key is not the one given with `{ trust: key }`.
    IdentityRejected,
    /// The known-keys store (browser storage) could not be read or written.
    KeyStore,
    /// No reply before the deadline.
    Timeout,
    /// The caller cancelled the call.
    Cancelled,
    /// The peripheral answered with an ERROR control (`error.peerCode` holds its byte).
    PeerError,
    /// The peripheral stayed BUSY through every retry.
    Busy,
    /// The request is larger than the peripheral accepts.
    RequestTooLarge,
    /// The response is larger than `maxResponseBytes`.
    ResponseTooLarge,
    /// More calls in flight than `maxCallsInFlight`.
    TooManyCalls,
    /// Another stream is already running (bleRPC runs one stream at a time).
    StreamActive,
    /// A server stream delivered more items than `streamBuffer` before they were read.
    StreamOverflow,
    /// The connection is closed.
    Closed,
    /// Any other call failure (`error.message` says which).
    CallFailed,
}

impl Code {
    /// The string JavaScript sees.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::LinkFailed => "LINK_FAILED",
            Code::LinkClosed => "LINK_CLOSED",
            Code::Framing => "FRAMING",
            Code::BluetoothUnavailable => "BLUETOOTH_UNAVAILABLE",
            Code::NoDeviceSelected => "NO_DEVICE_SELECTED",
            Code::SetupTimeout => "SETUP_TIMEOUT",
            Code::EncryptionUnavailable => "ENCRYPTION_UNAVAILABLE",
            Code::MtuTooSmall => "MTU_TOO_SMALL",
            Code::HandshakeFailed => "HANDSHAKE_FAILED",
            Code::HandshakeTimeout => "HANDSHAKE_TIMEOUT",
            Code::IdentityChanged => "IDENTITY_CHANGED",
            Code::IdentityRejected => "IDENTITY_REJECTED",
            Code::KeyStore => "KEY_STORE",
            Code::Timeout => "TIMEOUT",
            Code::Cancelled => "CANCELLED",
            Code::PeerError => "PEER_ERROR",
            Code::Busy => "BUSY",
            Code::RequestTooLarge => "REQUEST_TOO_LARGE",
            Code::ResponseTooLarge => "RESPONSE_TOO_LARGE",
            Code::TooManyCalls => "TOO_MANY_CALLS",
            Code::StreamActive => "STREAM_ACTIVE",
            Code::StreamOverflow => "STREAM_OVERFLOW",
            Code::Closed => "CLOSED",
            Code::CallFailed => "CALL_FAILED",
        }
    }
}

/// An error on its way to JavaScript.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The stable code.
    pub code: Code,
    /// What happened, for people.
    pub message: String,
    /// The peripheral's ERROR byte, for [`Code::PeerError`].
    pub peer_code: Option<u8>,
}

impl Error {
    /// An error with a code and a message.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
            peer_code: None,
        }
    }

    /// A failed call.
    pub fn call(e: CallError) -> Self {
        let code = match e {
            CallError::Timeout => Code::Timeout,
            CallError::Peer(peer) => {
                let mut err = Error::new(Code::PeerError, e.to_string());
                err.peer_code = Some(peer.to_byte());
                return err;
            }
            CallError::Busy { .. } => Code::Busy,
            CallError::RequestTooLarge { .. } | CallError::DataTooLong { .. } => {
                Code::RequestTooLarge
            }
            CallError::ResponseTooLarge { .. } => Code::ResponseTooLarge,
            CallError::TooManyCalls { .. } => Code::TooManyCalls,
            CallError::StreamActive => Code::StreamActive,
            CallError::InvalidName | CallError::WrongCallKind | CallError::UnknownCall => {
                Code::InvalidArgument
            }
            CallError::Closed | CallError::NotReady => Code::Closed,
            _ => Code::CallFailed,
        };
        Error::new(code, e.to_string())
    }

    /// Setup ended the connection.
    pub fn setup(reason: CloseReason) -> Self {
        let code = match reason {
            CloseReason::SetupTimeout => Code::SetupTimeout,
            CloseReason::EncryptionUnavailable => Code::EncryptionUnavailable,
            CloseReason::MtuTooSmallForKeyExchange { .. } => Code::MtuTooSmall,
            CloseReason::Handshake(_) | CloseReason::HandshakeRefused(_) => Code::HandshakeFailed,
            CloseReason::HandshakeTimeout => Code::HandshakeTimeout,
            CloseReason::IdentityRejected => Code::IdentityRejected,
            _ => Code::Closed,
        };
        Error::new(code, format!("connection setup failed: {reason}"))
    }

    /// A configuration the core refused.
    pub fn config(e: ConfigError) -> Self {
        Error::new(Code::InvalidArgument, format!("invalid configuration: {e}"))
    }

    /// The JavaScript `Error` object.
    pub fn to_js(&self) -> JsValue {
        let error = js_sys::Error::new(&self.message);
        error.set_name("BlerpcError");
        let object: &JsValue = error.as_ref();
        set(object, "code", &JsValue::from_str(self.code.as_str()));
        if let Some(peer) = self.peer_code {
            set(object, "peerCode", &JsValue::from(peer));
        }
        error.into()
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
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
    use blerpc_proto::wire::error_code::ErrorCode;

    #[test]
    fn call_errors_map_to_stable_codes() {
        assert_eq!(Error::call(CallError::Timeout).code, Code::Timeout);
        let peer = Error::call(CallError::Peer(ErrorCode::UnknownCommand));
        assert_eq!((peer.code, peer.peer_code), (Code::PeerError, Some(0x03)));
        assert_eq!(Error::call(CallError::Closed).code.as_str(), "CLOSED");
        assert_eq!(
            Error::setup(CloseReason::IdentityRejected).code.as_str(),
            "IDENTITY_REJECTED"
        );
    }
}
