//! What wasm-bindgen exports: the [`Connection`] class and the pin-store functions. The
//! TypeScript layer (`ts/`) wraps these in the documented API (promises, async iterators,
//! `BlerpcError`, the typed demo client); this layer is not meant to be used directly.

use std::rc::Rc;

use blerpc_proto::connection::{CallKind, CentralConfig, SetupPipelining};
use blerpc_proto::handshake::TofuOutcome;
use core::time::Duration;
use js_sys::{Object, Promise};
use wasm_bindgen::prelude::*;

use blerpc_proto::table::Trust;

use crate::conn::{self, Conn, Settings, Shared};
use crate::error::{Error, code, set};
use crate::link::Link;
#[cfg(web_sys_unstable_apis)]
use crate::link::ble::{BleLink, Choose};
use crate::link::ws::WsLink;
use crate::pinning::{self, DEFAULT_PREFIX, Store, to_hex};

/// The runtime's outbox limit: one 16 MiB message plus the core's default 128 KiB (as the host
/// client's).
const LARGE_OUTBOX_BYTES: usize =
    blerpc_proto::connection::DEFAULT_MAX_LARGE_MESSAGE_LEN + 128 * 1024;

fn field(options: &JsValue, key: &str) -> JsValue {
    if options.is_undefined() || options.is_null() {
        return JsValue::UNDEFINED;
    }
    js_sys::Reflect::get(options, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

fn bad(key: &str, want: &str) -> Error {
    Error::new(
        code::INVALID_ARGUMENT,
        format!("option {key} must be {want}"),
    )
}

fn opt_number(options: &JsValue, key: &str) -> Result<Option<f64>, Error> {
    let v = field(options, key);
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    match v.as_f64() {
        Some(n) if n.is_finite() && n > 0.0 => Ok(Some(n)),
        _ => Err(bad(key, "a positive number")),
    }
}

fn opt_ms(options: &JsValue, key: &str, default: Duration) -> Result<Duration, Error> {
    Ok(opt_number(options, key)?.map_or(default, |ms| Duration::from_secs_f64(ms / 1000.0)))
}

fn opt_count(options: &JsValue, key: &str) -> Result<Option<usize>, Error> {
    match opt_number(options, key)? {
        None => Ok(None),
        Some(n) if n.fract() == 0.0 && n <= u32::MAX as f64 => Ok(Some(n as usize)),
        Some(_) => Err(bad(key, "a whole number")),
    }
}

fn opt_bool(options: &JsValue, key: &str) -> Result<Option<bool>, Error> {
    let v = field(options, key);
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    v.as_bool()
        .map(Some)
        .ok_or_else(|| bad(key, "true or false"))
}

fn opt_string(options: &JsValue, key: &str) -> Result<Option<String>, Error> {
    let v = field(options, key);
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    v.as_string().map(Some).ok_or_else(|| bad(key, "a string"))
}

fn store(options: &JsValue) -> Result<Store, Error> {
    let custom = field(options, "keyStore");
    if !(custom.is_undefined() || custom.is_null()) {
        let object = custom
            .dyn_into::<Object>()
            .map_err(|_| bad("keyStore", "an object with get() and set()"))?;
        return Ok(Store::Js(object));
    }
    let prefix = opt_string(options, "keyStorePrefix")?.unwrap_or_else(|| DEFAULT_PREFIX.into());
    Ok(Store::Local { prefix })
}

/// How the identity is decided: `pinning` is `"tofu"` (the default, pins under `device_id`),
/// `"none"`, or `{ trust: "<hex>" }`.
fn trust(options: &JsValue, device_id: &str) -> Result<Trust<Store>, Error> {
    let tofu = |options| {
        Ok(Trust::FirstUse {
            store: store(options)?,
            device_id: device_id.to_owned(),
        })
    };
    let v = field(options, "pinning");
    if v.is_undefined() || v.is_null() {
        return tofu(options);
    }
    if let Some(s) = v.as_string() {
        return match s.as_str() {
            "tofu" => tofu(options),
            "none" => Ok(Trust::Anyone),
            _ => Err(bad(
                "pinning",
                "\"tofu\", \"none\" or { trust: \"<64 hex digits>\" }",
            )),
        };
    }
    match opt_string(&v, "trust")? {
        Some(hex) => Ok(Trust::Key(pinning::parse_trusted(&hex)?)),
        None => Err(bad(
            "pinning",
            "\"tofu\", \"none\" or { trust: \"<64 hex digits>\" }",
        )),
    }
}

/// The core's configuration from the page's options, on top of the link's own settings.
fn settings(options: &JsValue, link: &Link) -> Result<Settings, Error> {
    let device_id = opt_string(options, "deviceId")?.unwrap_or_else(|| link.peer_id());
    let trust = trust(options, &device_id)?;
    let defaults = CentralConfig::default();
    let mut central = CentralConfig {
        large_messages: true,
        // A cancelled call or stream tells a peripheral that agrees (docs/protocol.md).
        cancel: true,
        // Each call's deadline travels with its request (docs/protocol.md).
        deadline: true,
        streams: true,
        max_outbox_bytes: LARGE_OUTBOX_BYTES,
        require_encryption: opt_bool(options, "requireEncryption")?.unwrap_or(true),
        call_timeout: opt_ms(options, "callTimeoutMs", defaults.call_timeout)?,
        setup_timeout: opt_ms(options, "setupTimeoutMs", defaults.setup_timeout)?,
        handshake_step_timeout: opt_ms(
            options,
            "handshakeTimeoutMs",
            defaults.handshake_step_timeout,
        )?,
        stream_idle_timeout: opt_ms(options, "streamIdleTimeoutMs", defaults.stream_idle_timeout)?,
        max_response_len: opt_count(options, "maxResponseBytes")?
            .unwrap_or(defaults.max_response_len),
        max_calls_in_flight: opt_count(options, "maxCallsInFlight")?
            .unwrap_or(conn::MAX_CALLS_IN_FLIGHT),
        ..defaults
    };
    match link {
        Link::WebSocket(_) => {
            // A stream link: every setup request at once, long containers if both sides agree.
            central.setup_pipelining = SetupPipelining::KeyExchange;
            central.long_containers = opt_bool(options, "longContainers")?.unwrap_or(true);
        }
        #[cfg(web_sys_unstable_apis)]
        Link::Bluetooth(_) => {
            central.setup_pipelining = SetupPipelining::Requests;
            central.long_containers = false;
            central.att_mtu = opt_count(options, "attMtu")?.unwrap_or(247);
        }
    }
    let stream_buffer = opt_count(options, "streamBuffer")?.unwrap_or(1024).max(1);
    // A stream's window never exceeds what its inbox holds (the streams extension): the
    // peripheral waits for the page instead of overflowing it.
    let buffer = u16::try_from(stream_buffer).unwrap_or(u16::MAX);
    central.stream_window = central.stream_window.min(buffer);
    Ok(Settings {
        central,
        trust,
        device_id,
        stream_buffer,
    })
}

/// Runs setup over an open link; resolves once calls can be made.
async fn establish(options: &JsValue, link: Link) -> Result<Connection, JsValue> {
    let settings = settings(options, &link)?;
    let (inner, ready) = Conn::start(settings, link)?;
    wasm_bindgen_futures::JsFuture::from(ready).await?;
    Ok(Connection { inner })
}

/// One bleRPC connection (a central). Made by [`Connection::connect_websocket`] or
/// [`Connection::connect_bluetooth`]; use it through the TypeScript API.
#[wasm_bindgen]
pub struct Connection {
    inner: Shared,
}

fn kind(k: u8) -> Result<CallKind, Error> {
    match k {
        0 => Ok(CallKind::Unary),
        1 => Ok(CallKind::ServerStream),
        2 => Ok(CallKind::ClientStream),
        3 => Ok(CallKind::BidiStream),
        _ => Err(Error::new(
            code::INVALID_ARGUMENT,
            "call kind must be 0, 1, 2 or 3",
        )),
    }
}

#[wasm_bindgen]
impl Connection {
    /// Opens a WebSocket to `url` (`ws://` or `wss://`) and runs setup.
    #[wasm_bindgen(js_name = connectWebSocket)]
    pub async fn connect_websocket(url: String, options: JsValue) -> Result<Connection, JsValue> {
        let timeout = opt_number(&options, "connectTimeoutMs")?.unwrap_or(10_000.0);
        let link = WsLink::open(&url, timeout).await?;
        establish(&options, Link::WebSocket(link)).await
    }

    /// Asks for a device advertising the bleRPC service (call it from a user gesture),
    /// connects over GATT and runs setup.
    #[cfg(web_sys_unstable_apis)]
    #[wasm_bindgen(js_name = connectBluetooth)]
    pub async fn connect_bluetooth(options: JsValue) -> Result<Connection, JsValue> {
        let device = field(&options, "device");
        let choose = Choose {
            device: if device.is_undefined() || device.is_null() {
                None
            } else {
                Some(
                    device
                        .dyn_into()
                        .map_err(|_| bad("device", "a BluetoothDevice"))?,
                )
            },
            name: opt_string(&options, "name")?,
            name_prefix: opt_string(&options, "namePrefix")?,
        };
        let link = BleLink::open(choose).await?;
        establish(&options, Link::Bluetooth(link)).await
    }

    /// What setup established.
    pub fn info(&self) -> JsValue {
        let c = self.inner.borrow();
        let central = c.table().central();
        let info: JsValue = Object::new().into();
        set(&info, "link", &c.link().kind().into());
        set(&info, "deviceId", &c.device_id().into());
        set(&info, "encrypted", &central.is_encrypted().into());
        let identity = central
            .peer_identity()
            .map_or(JsValue::NULL, |k| to_hex(&k).into());
        set(&info, "peerIdentity", &identity);
        let pinned = match c.pinned() {
            Some(TofuOutcome::FirstUse) => "first-use".into(),
            Some(TofuOutcome::Matched) => "matched".into(),
            _ => JsValue::NULL,
        };
        set(&info, "pinned", &pinned);
        set(&info, "attMtu", &(central.config().att_mtu as u32).into());
        set(
            &info,
            "maxContainer",
            &(central.max_container_len() as u32).into(),
        );
        let caps = central.capabilities();
        set(
            &info,
            "maxRequest",
            &caps.map_or(JsValue::NULL, |c| c.max_request.into()),
        );
        set(
            &info,
            "maxResponse",
            &caps.map_or(JsValue::NULL, |c| c.max_response.into()),
        );
        set(&info, "peerTimeoutMs", &central.peer_timeout_ms().into());
        set(
            &info,
            "largeMessages",
            &central.large_messages().is_some().into(),
        );
        set(&info, "longContainers", &central.long_containers().into());
        info
    }

    /// The largest request data a call named with `name_len` bytes can carry now.
    #[wasm_bindgen(js_name = maxRequestData)]
    pub fn max_request_data(&self, name_len: usize) -> usize {
        self.inner
            .borrow()
            .table()
            .central()
            .max_request_data(name_len)
    }

    /// The Bluetooth device of a Web Bluetooth connection (`undefined` otherwise).
    #[cfg(web_sys_unstable_apis)]
    #[wasm_bindgen(js_name = bluetoothDevice)]
    pub fn bluetooth_device(&self) -> Option<web_sys::BluetoothDevice> {
        self.inner.borrow().link().bluetooth_device()
    }

    /// Starts a call (`kind`: 0 unary, 1 server stream, 2 upload, 3 bidirectional stream: send
    /// items and finish as for an upload, read items as for a server stream); returns its
    /// ticket.
    pub fn start(
        &self,
        name: &str,
        data: &[u8],
        kind_code: u8,
        timeout_ms: Option<f64>,
    ) -> Result<f64, JsValue> {
        let kind = kind(kind_code)?;
        let weak = Rc::downgrade(&self.inner);
        Ok(self
            .inner
            .borrow_mut()
            .start_call(&weak, name, data, kind, timeout_ms)?)
    }

    /// The response of a unary call or a finished upload.
    pub fn response(&self, ticket: f64) -> Promise {
        self.inner.borrow_mut().read(ticket)
    }

    /// The next item of a server stream, `undefined` at its end.
    pub fn next(&self, ticket: f64) -> Promise {
        let weak = Rc::downgrade(&self.inner);
        let mut conn = self.inner.borrow_mut();
        let item = conn.read(ticket);
        // The room the read made is granted to the peripheral.
        conn.drive(&weak);
        item
    }

    /// Sends one upload item.
    pub fn send(&self, ticket: f64, data: &[u8]) -> Promise {
        let weak = Rc::downgrade(&self.inner);
        self.inner.borrow_mut().send_item(&weak, ticket, data)
    }

    /// Ends an upload.
    pub fn finish(&self, ticket: f64) -> Promise {
        let weak = Rc::downgrade(&self.inner);
        self.inner.borrow_mut().finish(&weak, ticket)
    }

    /// Cancels a call.
    pub fn cancel(&self, ticket: f64) {
        let weak = Rc::downgrade(&self.inner);
        self.inner.borrow_mut().cancel(&weak, ticket);
    }

    /// Closes the connection.
    pub fn close(&self) {
        let weak = Rc::downgrade(&self.inner);
        self.inner.borrow_mut().close(&weak);
    }

    /// `true` once closed.
    #[wasm_bindgen(getter, js_name = isClosed)]
    pub fn is_closed(&self) -> bool {
        self.inner.borrow().closed().is_some()
    }

    /// Settles with the reason (an error object) when the connection closes.
    pub fn closed(&self) -> Promise {
        self.inner.borrow_mut().closed_promise()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let weak = Rc::downgrade(&self.inner);
        if let Ok(mut c) = self.inner.try_borrow_mut() {
            c.close(&weak);
        }
    }
}

fn local(prefix: Option<String>) -> Store {
    Store::Local {
        prefix: prefix.unwrap_or_else(|| DEFAULT_PREFIX.into()),
    }
}

fn store_error(e: String) -> JsValue {
    Error::new(code::KEY_STORE, e).to_js()
}

/// The key pinned in `localStorage` for `device_id` (64 hex digits), if any.
#[wasm_bindgen(js_name = knownKey)]
pub fn known_key(device_id: &str, prefix: Option<String>) -> Result<Option<String>, JsValue> {
    local(prefix).pinned_hex(device_id).map_err(store_error)
}

/// Forgets the key pinned in `localStorage` for `device_id`.
#[wasm_bindgen(js_name = forgetKey)]
pub fn forget_key(device_id: &str, prefix: Option<String>) -> Result<(), JsValue> {
    local(prefix).forget(device_id).map_err(store_error)
}

/// Pins `key_hex` for `device_id` in `localStorage` (trust a key learnt another way, before
/// the first connection).
#[wasm_bindgen(js_name = pinKey)]
pub fn pin_key(device_id: &str, key_hex: &str, prefix: Option<String>) -> Result<(), JsValue> {
    use blerpc_proto::handshake::KnownKeys as _;
    let key = pinning::parse_trusted(key_hex)?;
    local(prefix).put(device_id, &key).map_err(store_error)
}

/// The bleRPC GATT service UUID.
#[wasm_bindgen(js_name = serviceUuid)]
pub fn service_uuid() -> String {
    crate::link::SERVICE_UUID.into()
}
