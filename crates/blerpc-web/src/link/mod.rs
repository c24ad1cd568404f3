//! The links a browser central runs over: a WebSocket (`ws://`, `wss://`) or a Web Bluetooth
//! GATT characteristic. Both carry exactly one container per message (a WebSocket binary
//! message; a GATT write without response or a notification), as `blerpc serve` and the
//! reference peripherals speak them.

use std::cell::RefCell;
use std::rc::Weak;

use crate::conn::Conn;
use crate::error::Error;

/// The bleRPC GATT service (wire.md §1.1).
pub const SERVICE_UUID: &str = "12340001-0000-1000-8000-00805f9b34fb";
/// Its one characteristic (WRITE_WITHOUT_RESP | NOTIFY).
pub const CHARACTERISTIC_UUID: &str = "12340002-0000-1000-8000-00805f9b34fb";
/// The longest value a GATT attribute has (Core specification, Vol 3 Part F 3.2.9).
pub const MAX_ATTRIBUTE_LEN: usize = 512;

#[cfg(web_sys_unstable_apis)]
pub mod ble;
pub mod ws;

/// An open link.
pub enum Link {
    /// `ws://` or `wss://`.
    WebSocket(ws::WsLink),
    /// Web Bluetooth (wasm32 builds, which set `--cfg=web_sys_unstable_apis`).
    #[cfg(web_sys_unstable_apis)]
    Bluetooth(ble::BleLink),
}

impl Link {
    /// `"websocket"` or `"bluetooth"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Link::WebSocket(_) => "websocket",
            #[cfg(web_sys_unstable_apis)]
            Link::Bluetooth(_) => "bluetooth",
        }
    }

    /// The peer: the URL as dialled, or `ble:<device id>`.
    pub fn peer_id(&self) -> String {
        match self {
            Link::WebSocket(l) => l.url().to_owned(),
            #[cfg(web_sys_unstable_apis)]
            Link::Bluetooth(l) => l.peer_id(),
        }
    }

    /// Routes the link's messages and its end to the connection.
    pub fn attach(&mut self, conn: &Weak<RefCell<Conn>>) {
        match self {
            Link::WebSocket(l) => l.attach(conn),
            #[cfg(web_sys_unstable_apis)]
            Link::Bluetooth(l) => l.attach(conn),
        }
    }

    /// The longest PDU accepted from the peer, given the longest container the core sends
    /// (`max_container`). A WebSocket message longer than what this side sends breaks the link
    /// contract (as `blerpc serve` holds its peers to it). A notification is bounded by the ATT
    /// MTU the browser and the device negotiated, which a page cannot read: it is accepted up to
    /// [`MAX_ATTRIBUTE_LEN`], so an `attMtu` set lower than the real one only slows the sending
    /// side.
    pub fn max_input(&self, max_container: usize) -> usize {
        match self {
            Link::WebSocket(_) => max_container,
            #[cfg(web_sys_unstable_apis)]
            Link::Bluetooth(_) => max_container.max(MAX_ATTRIBUTE_LEN),
        }
    }

    /// `true` if the link takes a PDU now.
    pub fn ready(&self) -> bool {
        match self {
            Link::WebSocket(l) => l.ready(),
            #[cfg(web_sys_unstable_apis)]
            Link::Bluetooth(l) => l.ready(),
        }
    }

    /// `true` if the link has no event for "room again" and the driver must poll it.
    pub fn needs_polling(&self) -> bool {
        matches!(self, Link::WebSocket(_))
    }

    /// Sends one PDU (only when [`Link::ready`]).
    #[cfg_attr(not(web_sys_unstable_apis), allow(unused_variables))]
    pub fn send(&mut self, pdu: &[u8], conn: &Weak<RefCell<Conn>>) -> Result<(), Error> {
        match self {
            Link::WebSocket(l) => l.send(pdu),
            #[cfg(web_sys_unstable_apis)]
            Link::Bluetooth(l) => l.send(pdu, conn),
        }
    }

    /// A Web Bluetooth write finished (`Ok`) or failed.
    #[cfg_attr(not(web_sys_unstable_apis), allow(unused_variables))]
    pub fn write_done(
        &mut self,
        result: Result<(), String>,
        conn: &Weak<RefCell<Conn>>,
    ) -> Result<(), Error> {
        match self {
            Link::WebSocket(_) => Ok(()),
            #[cfg(web_sys_unstable_apis)]
            Link::Bluetooth(l) => l.write_done(result, conn),
        }
    }

    /// Writes the container in flight again (after a failed Web Bluetooth write).
    #[cfg_attr(not(web_sys_unstable_apis), allow(unused_variables))]
    pub fn retry(&mut self, conn: &Weak<RefCell<Conn>>) -> Result<(), Error> {
        match self {
            Link::WebSocket(_) => Ok(()),
            #[cfg(web_sys_unstable_apis)]
            Link::Bluetooth(l) => l.retry(conn),
        }
    }

    /// The Bluetooth device, on a Web Bluetooth link.
    #[cfg(web_sys_unstable_apis)]
    pub fn bluetooth_device(&self) -> Option<web_sys::BluetoothDevice> {
        match self {
            Link::WebSocket(_) => None,
            #[cfg(web_sys_unstable_apis)]
            Link::Bluetooth(l) => Some(l.device().clone()),
        }
    }

    /// Closes the link; its events no longer reach the connection.
    pub fn close(&mut self) {
        match self {
            Link::WebSocket(l) => l.close(),
            #[cfg(web_sys_unstable_apis)]
            Link::Bluetooth(l) => l.close(),
        }
    }
}
