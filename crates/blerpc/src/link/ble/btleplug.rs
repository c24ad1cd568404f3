//! The btleplug adapter of the BLE central link (feature `ble-central`): connects to a bleRPC
//! peripheral with btleplug.
//!
//! [`BleCentralLink::connect`] scans for a peripheral advertising [`SERVICE_UUID`] (optionally
//! with a given name or address), connects, discovers services, finds [`CHARACTERISTIC_UUID`],
//! subscribes to its notifications (the stack writes the CCC) and sends containers with write
//! without response. [`scan`] lists what is advertising the service (for `blerpc scan`).
//!
//! Everything above the BLE library goes through [`GattClient`]; [`BtleplugGatt`] is the real
//! adapter and [`super::fake`] the in-memory one the tests use.
//!
//! # ATT MTU per platform
//!
//! btleplug 0.13 exposes the negotiated MTU ([`btleplug::api::Peripheral::mtu`]):
//!
//! - **Linux (BlueZ)**: read from the characteristic's `MTU` property, which BlueZ ≥ 5.62 exports;
//!   BlueZ exchanges the MTU itself on connect (it asks for 517; the firmware settles on 247).
//!   Older BlueZ reports nothing and btleplug answers 23.
//! - **macOS / iOS (CoreBluetooth)**: `maximumWriteValueLength(.withoutResponse) + 3`, known after
//!   service discovery.
//! - **Windows (WinRT)**: `GattSession.MaxPduSize`, updated when it changes.
//!
//! A value of 23 (the pre-exchange default) is taken to mean "unknown": the link then uses
//! [`BleCentralOptions::fallback_att_mtu`] (247, what every reference central requests).
//! [`BleCentralOptions::att_mtu`] overrides the platform's value altogether. bleRPC encryption
//! needs an ATT MTU of at least 136.
//!
//! # Platforms and permissions
//!
//! - **Linux**: BlueZ (`bluetoothd`) running and the adapter powered (`bluetoothctl power on`).
//!   Access is through D-Bus; a desktop user has it, a service account may need to be in the
//!   `bluetooth` group. Building needs `libdbus-1-dev` and `pkg-config`.
//! - **macOS**: the first scan triggers the Bluetooth permission prompt; a binary run from a
//!   terminal inherits the terminal's permission (System Settings → Privacy & Security →
//!   Bluetooth). Addresses are hidden by CoreBluetooth: peers are identified by a per-host UUID,
//!   which is what [`Found::address`] and the peer id then show.
//! - **Windows**: Windows 10 1809 or later. bleRPC needs no pairing (the characteristic requires
//!   no link-layer encryption).
//!
//! The peer id (used for identity pinning) is `ble://<address>`, e.g. `ble://AA:BB:CC:DD:EE:FF`.

use std::time::Duration;

use ::btleplug::api::{
    BDAddr, Central as _, CentralEvent, CharPropFlags, Characteristic, Manager as _,
    Peripheral as _, ScanFilter, WriteType,
};
use ::btleplug::platform::{Adapter, Manager, Peripheral};
use futures_util::StreamExt;

use super::central::{BleCentralLink, GattClient};
use super::{CHARACTERISTIC_UUID, DEFAULT_ATT_MTU, MIN_ATT_MTU, PduStream, SERVICE_UUID};
use crate::link::LinkError;

/// Options of [`BleCentralLink::connect`].
#[derive(Clone, Debug)]
pub struct BleCentralOptions {
    /// Connect only to a peripheral with this advertised name.
    pub name: Option<String>,
    /// Connect only to this address (`AA:BB:CC:DD:EE:FF`, or the platform id on macOS).
    pub address: Option<String>,
    /// How long to scan for a matching peripheral. Default 5 s (the Python central's default).
    pub scan_timeout: Duration,
    /// Timeout of the connection and of service discovery. Default 10 s.
    pub connect_timeout: Duration,
    /// Use this ATT MTU whatever the platform reports.
    pub att_mtu: Option<usize>,
    /// The ATT MTU used when the platform does not report one. Default 247.
    pub fallback_att_mtu: usize,
    /// Which Bluetooth adapter to use (index in the platform's list). Default 0.
    pub adapter: usize,
}

impl Default for BleCentralOptions {
    fn default() -> Self {
        BleCentralOptions {
            name: None,
            address: None,
            scan_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(10),
            att_mtu: None,
            fallback_att_mtu: DEFAULT_ATT_MTU,
            adapter: 0,
        }
    }
}

impl BleCentralOptions {
    /// The default options, narrowed to `peripheral` (what follows `ble://` in a
    /// [`LinkUrl`](crate::link::url::LinkUrl)): an address (`AA:BB:CC:DD:EE:FF`, or a
    /// CoreBluetooth UUID of 36 characters) sets [`address`](Self::address), anything else
    /// [`name`](Self::name); `None` leaves both unset (any bleRPC peripheral).
    pub fn for_peripheral(peripheral: Option<&str>) -> BleCentralOptions {
        let mut options = BleCentralOptions::default();
        match peripheral {
            Some(p) if p.len() == 17 && p.matches(':').count() == 5 || p.len() == 36 => {
                options.address = Some(p.to_string());
            }
            Some(name) => options.name = Some(name.to_string()),
            None => {}
        }
        options
    }
}

/// A peripheral found by [`scan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The advertised local name.
    pub name: Option<String>,
    /// The address (`AA:BB:CC:DD:EE:FF`), or the platform's id where addresses are hidden
    /// (macOS).
    pub address: String,
    /// Signal strength of the last advertisement, in dBm.
    pub rssi: Option<i16>,
}

fn transport(e: impl std::fmt::Display) -> LinkError {
    LinkError::Transport(e.to_string())
}

/// The ATT MTU to use: an override, else the platform's value unless it is the pre-exchange
/// default, else the fallback.
pub fn choose_att_mtu(reported: usize, options: &BleCentralOptions) -> usize {
    match options.att_mtu {
        Some(mtu) => mtu,
        None if reported > MIN_ATT_MTU => reported,
        None => options.fallback_att_mtu,
    }
}

async fn adapter(index: usize) -> Result<Adapter, LinkError> {
    let manager = Manager::new().await.map_err(transport)?;
    let adapters = manager.adapters().await.map_err(transport)?;
    adapters
        .into_iter()
        .nth(index)
        .ok_or_else(|| LinkError::Transport(format!("no Bluetooth adapter #{index}")))
}

fn address_of(p: &Peripheral) -> String {
    let addr = p.address();
    if addr == BDAddr::default() {
        // CoreBluetooth hides addresses: use the platform id.
        p.id().to_string()
    } else {
        addr.to_string()
    }
}

async fn found(p: &Peripheral) -> Option<Found> {
    let props = p.properties().await.ok().flatten()?;
    if !props.services.contains(&SERVICE_UUID) {
        return None;
    }
    Some(Found {
        name: props.local_name.or(props.advertisement_name),
        address: address_of(p),
        rssi: props.rssi,
    })
}

/// Scans for `duration` and lists the peripherals advertising the bleRPC service.
pub async fn scan(duration: Duration) -> Result<Vec<Found>, LinkError> {
    let adapter = adapter(0).await?;
    adapter
        .start_scan(ScanFilter {
            services: vec![SERVICE_UUID],
        })
        .await
        .map_err(transport)?;
    tokio::time::sleep(duration).await;
    let _ = adapter.stop_scan().await;
    let mut out = Vec::new();
    for p in adapter.peripherals().await.map_err(transport)? {
        if let Some(f) = found(&p).await {
            out.push(f);
        }
    }
    out.sort_by_key(|f| std::cmp::Reverse(f.rssi));
    Ok(out)
}

fn matches(f: &Found, options: &BleCentralOptions) -> bool {
    options
        .name
        .as_ref()
        .is_none_or(|n| f.name.as_ref() == Some(n))
        && options
            .address
            .as_ref()
            .is_none_or(|a| f.address.eq_ignore_ascii_case(a))
}

/// A GATT client on btleplug.
pub struct BtleplugGatt {
    peripheral: Peripheral,
    characteristic: Characteristic,
    // A `Mutex` only to make the handle `Sync`; it is taken once, through `&mut`.
    notifications: std::sync::Mutex<Option<PduStream>>,
    att_mtu: usize,
    peer_id: String,
}

impl std::fmt::Debug for BtleplugGatt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BtleplugGatt")
            .field("peer_id", &self.peer_id)
            .field("att_mtu", &self.att_mtu)
            .finish_non_exhaustive()
    }
}

impl BtleplugGatt {
    /// Scans for a matching peripheral, connects, discovers and subscribes.
    pub async fn connect(options: &BleCentralOptions) -> Result<Self, LinkError> {
        let adapter = adapter(options.adapter).await?;
        let mut events = adapter.events().await.map_err(transport)?;
        adapter
            .start_scan(ScanFilter {
                services: vec![SERVICE_UUID],
            })
            .await
            .map_err(transport)?;
        let deadline = tokio::time::Instant::now() + options.scan_timeout;
        let peripheral = loop {
            let mut hit = None;
            for p in adapter.peripherals().await.map_err(transport)? {
                if let Some(f) = found(&p).await
                    && matches(&f, options)
                {
                    hit = Some(p);
                    break;
                }
            }
            if let Some(p) = hit {
                break p;
            }
            // Wait for the next discovery event (or poll again shortly).
            let wait = tokio::time::sleep(Duration::from_millis(200));
            tokio::select! {
                _ = events.next() => {}
                () = wait => {}
                () = tokio::time::sleep_until(deadline) => {
                    let _ = adapter.stop_scan().await;
                    return Err(LinkError::Transport(format!(
                        "no bleRPC peripheral found in {:?}",
                        options.scan_timeout
                    )));
                }
            }
        };
        let _ = adapter.stop_scan().await;
        Self::attach(&adapter, peripheral, options).await
    }

    /// Connects to `peripheral` (already discovered), finds the characteristic and subscribes.
    pub async fn attach(
        adapter: &Adapter,
        peripheral: Peripheral,
        options: &BleCentralOptions,
    ) -> Result<Self, LinkError> {
        let timeout = options.connect_timeout;
        let peer_id = format!("ble://{}", address_of(&peripheral));
        if !peripheral.is_connected().await.map_err(transport)? {
            peripheral
                .connect_with_timeout(timeout)
                .await
                .map_err(transport)?;
        }
        peripheral
            .discover_services_with_timeout(timeout)
            .await
            .map_err(transport)?;
        let characteristic = peripheral
            .characteristics()
            .into_iter()
            .find(|c| c.uuid == CHARACTERISTIC_UUID && c.service_uuid == SERVICE_UUID)
            .ok_or_else(|| {
                LinkError::Transport(format!("{peer_id} has no bleRPC characteristic"))
            })?;
        let needed = CharPropFlags::WRITE_WITHOUT_RESPONSE | CharPropFlags::NOTIFY;
        if !characteristic.properties.contains(needed) {
            return Err(LinkError::Transport(format!(
                "{peer_id}: characteristic lacks write-without-response/notify ({:?})",
                characteristic.properties
            )));
        }
        // Take the stream before subscribing so that no early notification is missed.
        let raw = peripheral.notifications().await.map_err(transport)?;
        peripheral
            .subscribe(&characteristic)
            .await
            .map_err(transport)?;
        // btleplug's notification stream outlives connections: end ours at disconnection.
        let id = peripheral.id();
        let mut central_events = adapter.events().await.map_err(transport)?;
        let disconnected = async move {
            while let Some(event) = central_events.next().await {
                if matches!(&event, CentralEvent::DeviceDisconnected(d) if *d == id) {
                    return;
                }
            }
        };
        let notifications: PduStream = Box::pin(
            raw.filter_map(|n| async move { (n.uuid == CHARACTERISTIC_UUID).then_some(n.value) })
                .take_until(Box::pin(disconnected)),
        );
        let att_mtu = choose_att_mtu(usize::from(peripheral.mtu()), options);
        tracing::debug!(%peer_id, att_mtu, "BLE central connected");
        Ok(BtleplugGatt {
            peripheral,
            characteristic,
            notifications: std::sync::Mutex::new(Some(notifications)),
            att_mtu,
            peer_id,
        })
    }
}

impl GattClient for BtleplugGatt {
    fn att_mtu(&self) -> usize {
        self.att_mtu
    }

    fn peer_id(&self) -> String {
        self.peer_id.clone()
    }

    fn take_notifications(&mut self) -> PduStream {
        self.notifications
            .get_mut()
            .ok()
            .and_then(Option::take)
            .unwrap_or_else(|| Box::pin(futures_util::stream::empty()))
    }

    async fn write_without_response(&self, pdu: &[u8]) -> Result<(), LinkError> {
        // BlueZ queues write commands in the kernel and the D-Bus call returns once queued;
        // CoreBluetooth and WinRT pace writes inside btleplug.
        self.peripheral
            .write(&self.characteristic, pdu, WriteType::WithoutResponse)
            .await
            .map_err(transport)
    }

    async fn disconnect(&self) -> Result<(), LinkError> {
        self.peripheral.disconnect().await.map_err(transport)
    }
}

impl BleCentralLink<BtleplugGatt> {
    /// Scans for a bleRPC peripheral matching `options`, connects and subscribes.
    pub async fn connect(options: BleCentralOptions) -> Result<Self, LinkError> {
        Ok(BleCentralLink::new(BtleplugGatt::connect(&options).await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peripheral_is_an_address_or_a_name() {
        let o = BleCentralOptions::for_peripheral(Some("AA:BB:CC:DD:EE:FF"));
        assert_eq!(
            (o.address.as_deref(), o.name),
            (Some("AA:BB:CC:DD:EE:FF"), None)
        );
        let uuid = "12345678-1234-1234-1234-123456789abc";
        let o = BleCentralOptions::for_peripheral(Some(uuid));
        assert_eq!(o.address.as_deref(), Some(uuid));
        let o = BleCentralOptions::for_peripheral(Some("blerpc-demo"));
        assert_eq!((o.address, o.name.as_deref()), (None, Some("blerpc-demo")));
        let o = BleCentralOptions::for_peripheral(None);
        assert_eq!((o.address, o.name), (None, None));
    }

    #[test]
    fn mtu_choice() {
        let mut o = BleCentralOptions::default();
        assert_eq!(choose_att_mtu(23, &o), 247);
        assert_eq!(choose_att_mtu(185, &o), 185);
        o.fallback_att_mtu = 100;
        assert_eq!(choose_att_mtu(23, &o), 100);
        o.att_mtu = Some(64);
        assert_eq!(choose_att_mtu(185, &o), 64);
    }

    #[test]
    fn filters() {
        let f = Found {
            name: Some("blerpc".into()),
            address: "AA:BB:CC:DD:EE:FF".into(),
            rssi: Some(-40),
        };
        let mut o = BleCentralOptions::default();
        assert!(matches(&f, &o));
        o.address = Some("aa:bb:cc:dd:ee:ff".into());
        assert!(matches(&f, &o));
        o.name = Some("other".into());
        assert!(!matches(&f, &o));
    }
}
