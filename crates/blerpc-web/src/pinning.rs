//! The peripheral's identity key in the browser: trust on first use with the pins in browser
//! storage (`localStorage` by default, or any store the page hands in), one key trusted
//! explicitly, or no pinning at all (an explicit opt-out).
//!
//! A pin is one storage entry: key `<prefix><device id>` (default prefix
//! `blerpc.known_keys.`), value the Ed25519 public key as 64 lowercase hex digits. The device
//! id is the WebSocket URL as dialled (`ws://host:port/path`) or `ble:<BluetoothDevice.id>`
//! (Chromium's id for that device and origin), unless the page names its own.

use blerpc_proto::handshake::KnownKeys;
use wasm_bindgen::{JsCast, JsValue};

use crate::error::{Error, code, js_message};

/// The storage key prefix of pins.
pub const DEFAULT_PREFIX: &str = "blerpc.known_keys.";

/// Where pins live.
pub enum Store {
    /// `localStorage` (`globalThis.localStorage`), under a prefix.
    Local {
        /// The key prefix.
        prefix: String,
    },
    /// A page's own store: an object with `get(deviceId)` returning the hex key or
    /// `null`/`undefined`, and `set(deviceId, keyHex)`.
    Js(js_sys::Object),
}

impl Store {
    fn local_storage() -> Result<web_sys::Storage, String> {
        let storage = js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str("localStorage"))
            .map_err(|e| format!("localStorage is not accessible: {}", js_message(&e)))?;
        storage
            .dyn_into::<web_sys::Storage>()
            .map_err(|_| "this context has no localStorage (a worker?): pass a keyStore".into())
    }

    fn get_hex(&self, device_id: &str) -> Result<Option<String>, String> {
        match self {
            Store::Local { prefix } => Self::local_storage()?
                .get_item(&format!("{prefix}{device_id}"))
                .map_err(|e| format!("localStorage.getItem failed: {}", js_message(&e))),
            Store::Js(store) => {
                let get = method(store, "get")?;
                let v = get
                    .call1(store, &JsValue::from_str(device_id))
                    .map_err(|e| format!("keyStore.get failed: {}", js_message(&e)))?;
                if v.is_null() || v.is_undefined() {
                    return Ok(None);
                }
                v.as_string()
                    .map(Some)
                    .ok_or_else(|| "keyStore.get returned neither a string nor null".into())
            }
        }
    }

    fn set_hex(&self, device_id: &str, hex: &str) -> Result<(), String> {
        match self {
            Store::Local { prefix } => Self::local_storage()?
                .set_item(&format!("{prefix}{device_id}"), hex)
                .map_err(|e| format!("localStorage.setItem failed: {}", js_message(&e))),
            Store::Js(store) => {
                let set = method(store, "set")?;
                set.call2(
                    store,
                    &JsValue::from_str(device_id),
                    &JsValue::from_str(hex),
                )
                .map(|_| ())
                .map_err(|e| format!("keyStore.set failed: {}", js_message(&e)))
            }
        }
    }

    /// Removes the pin of `device_id` (`localStorage` only; a page's own store forgets its
    /// own way).
    pub fn forget(&self, device_id: &str) -> Result<(), String> {
        match self {
            Store::Local { prefix } => Self::local_storage()?
                .remove_item(&format!("{prefix}{device_id}"))
                .map_err(|e| format!("localStorage.removeItem failed: {}", js_message(&e))),
            Store::Js(_) => Err("forget pins in your own keyStore".into()),
        }
    }

    /// The pinned key of `device_id`, as hex.
    pub fn pinned_hex(&self, device_id: &str) -> Result<Option<String>, String> {
        self.get_hex(device_id)
    }
}

fn method(store: &js_sys::Object, name: &str) -> Result<js_sys::Function, String> {
    js_sys::Reflect::get(store, &JsValue::from_str(name))
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .ok_or_else(|| format!("keyStore has no {name}() method"))
}

impl KnownKeys for Store {
    type Error = String;
    fn get(&self, device_id: &str) -> Result<Option<[u8; 32]>, String> {
        match self.get_hex(device_id)? {
            None => Ok(None),
            Some(hex) => from_hex(&hex)
                .map(Some)
                .ok_or_else(|| format!("the pin of {device_id} is not 64 hex digits: {hex:?}")),
        }
    }
    fn put(&mut self, device_id: &str, key: &[u8; 32]) -> Result<(), String> {
        self.set_hex(device_id, &to_hex(key))
    }
    fn describe(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Store::Local { prefix } => {
                write!(f, "localStorage[\"{prefix}…\"] (forgetKey removes it)")
            }
            Store::Js(_) => f.write_str("the page's keyStore"),
        }
    }
}

/// A key as 64 lowercase hex digits.
pub fn to_hex(key: &[u8; 32]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(64);
    for b in key {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// Exactly 64 hex digits (either case) as a key.
pub fn from_hex(s: &str) -> Option<[u8; 32]> {
    let s = s.trim();
    if s.len() != 64 {
        return None;
    }
    let mut key = [0u8; 32];
    for (out, pair) in key.iter_mut().zip(s.as_bytes().chunks_exact(2)) {
        let digit = |c: u8| char::from(c).to_digit(16);
        let (hi, lo) = (digit(pair[0])?, digit(pair[1])?);
        *out = u8::try_from(hi << 4 | lo).ok()?;
    }
    Some(key)
}

/// A `{ trust: "<hex>" }` key, checked.
pub fn parse_trusted(hex: &str) -> Result<[u8; 32], Error> {
    from_hex(hex).ok_or_else(|| {
        Error::new(
            code::INVALID_ARGUMENT,
            format!("pinning.trust must be the peripheral's key as 64 hex digits, got {hex:?}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_bad_input() {
        let key: [u8; 32] = core::array::from_fn(|i| (i * 37 + 5) as u8);
        let hex = to_hex(&key);
        assert_eq!(&hex[..6], "052a4f");
        assert_eq!(from_hex(&hex), Some(key));
        assert_eq!(from_hex(&hex.to_uppercase()), Some(key));
        assert_eq!(from_hex(&hex[..62]), None);
        assert_eq!(from_hex(&format!("{}zz", &hex[..62])), None);
        assert!(parse_trusted("00").is_err());
    }
}
