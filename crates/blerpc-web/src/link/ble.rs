//! The Web Bluetooth link: the bleRPC GATT service as the reference firmware defines it, one
//! container per ATT PDU.
//!
//! ```text
//! service        12340001-0000-1000-8000-00805f9b34fb
//! characteristic 12340002-0000-1000-8000-00805f9b34fb   WRITE_WITHOUT_RESP | NOTIFY
//! central → peripheral: writeValueWithoutResponse(container)
//! peripheral → central: a notification (characteristicvaluechanged) per container
//! ```
//!
//! **One write at a time.** Chromium runs one GATT operation per characteristic at once, so the
//! link writes the next container when the previous write's promise settles; the core's outbox
//! is the queue (containers are cut from it one at a time, never copied ahead). A write that
//! fails while the device is still connected is retried ([`WRITE_RETRIES`] times, 20 ms apart);
//! then the connection ends with `LINK_FAILED`.
//!
//! **MTU.** Web Bluetooth has no MTU getter (and no way to request one): the page cannot learn
//! what the browser and the device negotiated. The link assumes ATT MTU 247 (containers of at
//! most 244 bytes), as the reference's web central does and as every current phone, desktop and
//! the reference firmware negotiate; the `attMtu` option sets another value for a device known
//! to negotiate less. It bounds what the central writes; notifications are taken at any length
//! up to the longest attribute value (512), since the device sends at the MTU actually
//! negotiated. Too large an MTU shows up as failed writes, too small only costs speed. The key
//! exchange needs at least 136.

use std::cell::RefCell;
use std::rc::Weak;

use js_sys::{JsString, Uint8Array};
use wasm_bindgen::prelude::*;
use web_sys::{
    BluetoothDevice, BluetoothLeScanFilterInit, BluetoothRemoteGattCharacteristic, Event,
    RequestDeviceOptions,
};

use crate::conn::{self, Conn};
use crate::error::{Error, code, js_message, js_name};

pub use super::{CHARACTERISTIC_UUID, SERVICE_UUID};
/// Retries of a failed write while the device stays connected.
pub const WRITE_RETRIES: u8 = 3;

/// Which device to use.
#[derive(Default)]
pub struct Choose {
    /// A device the page already has (from an earlier `requestDevice` or
    /// `navigator.bluetooth.getDevices()`): no chooser.
    pub device: Option<BluetoothDevice>,
    /// Offer only devices advertising this exact name.
    pub name: Option<String>,
    /// Offer only devices whose name starts with this.
    pub name_prefix: Option<String>,
}

/// A connected device's bleRPC characteristic, notifications on.
pub struct BleLink {
    device: BluetoothDevice,
    characteristic: BluetoothRemoteGattCharacteristic,
    /// The container being written, and how many times it was tried.
    inflight: Option<(Vec<u8>, u8)>,
    handlers: Option<Handlers>,
}

struct Handlers {
    value: Closure<dyn FnMut(Event)>,
    disconnected: Closure<dyn FnMut(Event)>,
}

fn failed(what: &str, e: &JsValue) -> Error {
    Error::new(code::LINK_FAILED, format!("{what}: {}", js_message(e)))
}

impl BleLink {
    /// Asks the user for a device advertising the bleRPC service (the page must be handling a
    /// user gesture, such as a click), connects, finds the characteristic and turns
    /// notifications on.
    pub async fn open(choose: Choose) -> Result<BleLink, Error> {
        let device = match choose.device {
            Some(device) => device,
            None => request(&choose).await?,
        };
        let gatt = device
            .gatt()
            .ok_or_else(|| Error::new(code::LINK_FAILED, "the device has no GATT server"))?;
        let server = gatt
            .connect()
            .await
            .map_err(|e| failed("GATT connect failed", &e))?;
        let service = server
            .get_primary_service_with_str(SERVICE_UUID)
            .await
            .map_err(|e| failed("the device has no bleRPC service", &e))?;
        let characteristic = service
            .get_characteristic_with_str(CHARACTERISTIC_UUID)
            .await
            .map_err(|e| failed("the bleRPC service has no bleRPC characteristic", &e))?;
        characteristic
            .start_notifications()
            .await
            .map_err(|e| failed("cannot turn notifications on", &e))?;
        Ok(BleLink {
            device,
            characteristic,
            inflight: None,
            handlers: None,
        })
    }

    /// `ble:<BluetoothDevice.id>`: Chromium's id of the device for this origin.
    pub fn peer_id(&self) -> String {
        format!("ble:{}", self.device.id())
    }

    /// The device (for reconnecting without the chooser).
    pub fn device(&self) -> &BluetoothDevice {
        &self.device
    }

    /// Routes notifications and the device's disconnection to the connection.
    pub fn attach(&mut self, conn: &Weak<RefCell<Conn>>) {
        let value = Closure::<dyn FnMut(Event)>::new({
            let conn = conn.clone();
            move |e: Event| {
                let Some(ch) = e
                    .target()
                    .and_then(|t| t.dyn_into::<BluetoothRemoteGattCharacteristic>().ok())
                else {
                    return;
                };
                if let Some(view) = ch.value() {
                    let pdu = Uint8Array::new_with_byte_offset_and_length(
                        &view.buffer(),
                        view.byte_offset() as u32,
                        view.byte_length() as u32,
                    );
                    conn::input(&conn, &pdu);
                }
            }
        });
        let disconnected = Closure::<dyn FnMut(Event)>::new({
            let conn = conn.clone();
            move |_: Event| {
                conn::link_lost(
                    &conn,
                    Error::new(code::LINK_CLOSED, "the Bluetooth device disconnected"),
                );
            }
        });
        let _ = self.characteristic.add_event_listener_with_callback(
            "characteristicvaluechanged",
            value.as_ref().unchecked_ref(),
        );
        let _ = self.device.add_event_listener_with_callback(
            "gattserverdisconnected",
            disconnected.as_ref().unchecked_ref(),
        );
        self.handlers = Some(Handlers {
            value,
            disconnected,
        });
    }

    /// No write in flight.
    pub fn ready(&self) -> bool {
        self.inflight.is_none() && self.handlers.is_some()
    }

    /// Writes one container without response.
    pub fn send(&mut self, pdu: &[u8], conn: &Weak<RefCell<Conn>>) -> Result<(), Error> {
        self.inflight = Some((pdu.to_vec(), 1));
        self.write(conn)
    }

    fn write(&mut self, conn: &Weak<RefCell<Conn>>) -> Result<(), Error> {
        let Some((pdu, _)) = &self.inflight else {
            return Ok(());
        };
        let promise = self
            .characteristic
            .write_value_without_response_with_u8_array(&Uint8Array::from(pdu.as_slice()))
            .map_err(|e| failed("GATT write failed", &e))?;
        let conn = conn.clone();
        wasm_bindgen_futures::spawn_local(async move {
            let result = promise.await.map(|_| ()).map_err(|e| js_message(&e));
            conn::write_done(&conn, result);
        });
        Ok(())
    }

    /// The write's promise settled.
    pub fn write_done(
        &mut self,
        result: Result<(), String>,
        conn: &Weak<RefCell<Conn>>,
    ) -> Result<(), Error> {
        match result {
            Ok(()) => {
                self.inflight = None;
                Ok(())
            }
            Err(why) => {
                let connected = self.device.gatt().is_some_and(|g| g.connected());
                let Some((_, tries)) = self.inflight.as_mut() else {
                    return Ok(());
                };
                if !connected || *tries > WRITE_RETRIES {
                    return Err(Error::new(
                        code::LINK_FAILED,
                        format!("GATT write failed after {tries} tries: {why}"),
                    ));
                }
                *tries += 1;
                let conn = conn.clone();
                wasm_bindgen_futures::spawn_local(async move {
                    crate::clock::sleep(20.0).await;
                    conn::retry_write(&conn);
                });
                Ok(())
            }
        }
    }

    /// Writes the container in flight again.
    pub fn retry(&mut self, conn: &Weak<RefCell<Conn>>) -> Result<(), Error> {
        self.write(conn)
    }

    /// Detaches the handlers and disconnects.
    pub fn close(&mut self) {
        if let Some(h) = self.handlers.take() {
            let _ = self.characteristic.remove_event_listener_with_callback(
                "characteristicvaluechanged",
                h.value.as_ref().unchecked_ref(),
            );
            let _ = self.device.remove_event_listener_with_callback(
                "gattserverdisconnected",
                h.disconnected.as_ref().unchecked_ref(),
            );
        }
        self.inflight = None;
        if let Some(gatt) = self.device.gatt() {
            gatt.disconnect();
        }
    }
}

impl Drop for BleLink {
    fn drop(&mut self) {
        self.close();
    }
}

async fn request(choose: &Choose) -> Result<BluetoothDevice, Error> {
    let navigator = js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str("navigator"))
        .unwrap_or(JsValue::UNDEFINED);
    let bluetooth = js_sys::Reflect::get(&navigator, &JsValue::from_str("bluetooth"))
        .unwrap_or(JsValue::UNDEFINED);
    let bluetooth: web_sys::Bluetooth = bluetooth.dyn_into().map_err(|_| {
        Error::new(
            crate::error::BLUETOOTH_UNAVAILABLE,
            "this browser has no Web Bluetooth (navigator.bluetooth is undefined): use Chrome or Edge, on a secure (https or localhost) page",
        )
    })?;
    let filter = BluetoothLeScanFilterInit::new();
    filter.set_services(&[JsString::from(SERVICE_UUID)]);
    if let Some(name) = &choose.name {
        filter.set_name(name);
    }
    if let Some(prefix) = &choose.name_prefix {
        filter.set_name_prefix(prefix);
    }
    let options = RequestDeviceOptions::new();
    options.set_filters(&[filter]);
    bluetooth.request_device(&options).await.map_err(|e| {
        if js_name(&e).as_deref() == Some("NotFoundError") {
            Error::new(crate::error::NO_DEVICE_SELECTED, js_message(&e))
        } else {
            failed("requestDevice failed", &e)
        }
    })
}
