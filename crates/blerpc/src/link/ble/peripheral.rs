//! BLE peripheral link (feature `ble-peripheral`): serves bleRPC from this machine's Bluetooth
//! adapter, the way the firmware does.
//!
//! [`GattServer`] is one central's session on the characteristic and [`BlePeripheralLink`] the
//! link over it. On Linux, [`BluerPeripheral`] (bluer, BlueZ over D-Bus) registers the GATT
//! service, advertises, and yields a link per connected central; it is a
//! [`crate::link::Acceptor`], so `server.serve(BluerPeripheral::start(..).await?, shutdown)`
//! runs a BLE peripheral. Other platforms have the trait and the link (and the in-memory fake in
//! [`super::fake`]) but no adapter.
//!
//! # How the BlueZ adapter works
//!
//! - Registers the primary service [`SERVICE_UUID`] with the characteristic
//!   [`CHARACTERISTIC_UUID`], WRITE_WITHOUT_RESP | NOTIFY. BlueZ adds and handles the CCC
//!   descriptor.
//! - Advertises connectable with the service UUID and the local name [`DEVICE_NAME`] ("blerpc");
//!   BlueZ places the name in the scan response when it does not fit and restarts advertising
//!   after a disconnection.
//! - Uses BlueZ's `AcquireNotify` / `AcquireWrite`: when a central enables notifications BlueZ
//!   hands over a socket for notifications, and on its first write command one for writes, so
//!   each PDU is one datagram with no D-Bus round trip. The ATT MTU is the one BlueZ reports with
//!   the session (the notify socket's, else the write socket's).
//! - **One central at a time**, like the firmware: BlueZ acquires one notify socket per
//!   characteristic, and a notification goes to every subscribed central, so concurrent
//!   centrals cannot be told apart. A second central that connects while one is served is not
//!   answered until the first disconnects.
//!
//! # Platforms and permissions
//!
//! - Linux with BlueZ ≥ 5.50 (`AcquireWrite`/`AcquireNotify` and LE advertising are stable
//!   there; no `--experimental` flag is needed). The adapter must be powered and LE capable.
//! - Registering a GATT application and an advertisement needs D-Bus access to `org.bluez`:
//!   root, or a user in the `bluetooth` group on distributions whose D-Bus policy allows it.
//! - Building needs `libdbus-1-dev` and `pkg-config`.
//! - macOS, Windows: not supported by this adapter (the reference's Python peripheral uses
//!   CoreBluetooth through bless; see wire.md §2.6).
//!
//! The peer id is `ble://<central address>`.

use std::future::Future;
use std::sync::Arc;

#[cfg(target_os = "linux")]
use super::{CHARACTERISTIC_UUID, DEVICE_NAME, SERVICE_UUID};
use super::{DEFAULT_QUEUE_PDUS, GattRx, GattTx, PduSender, PduStream};
use crate::link::{Link, LinkError};
use blerpc_proto::connection::SetupPipelining;

/// The peripheral's view of one central's session on the bleRPC characteristic: the seam between
/// [`BlePeripheralLink`] and a BLE library.
pub trait GattServer: Send + Sync + 'static {
    /// The ATT MTU of the session.
    fn att_mtu(&self) -> usize;
    /// A stable identifier of the central (`ble://<address>`).
    fn peer_id(&self) -> String;
    /// The central's writes, in order, ending when the session does. Called once, by
    /// [`Link::split`].
    fn take_writes(&mut self) -> PduStream;
    /// Waits until the stack can take a notification. Stacks that pace inside
    /// [`GattServer::notify`] are always ready.
    fn ready(&self) -> impl Future<Output = Result<(), LinkError>> + Send {
        async { Ok(()) }
    }
    /// Sends one PDU as a Handle Value Notification.
    fn notify(&self, pdu: &[u8]) -> impl Future<Output = Result<(), LinkError>> + Send;
    /// Ends the session.
    fn disconnect(&self) -> impl Future<Output = Result<(), LinkError>> + Send {
        async { Ok(()) }
    }
}

/// A [`crate::link::Link`] to one central over a [`GattServer`] session.
#[derive(Debug)]
pub struct BlePeripheralLink<S> {
    session: S,
    queue_limit: usize,
}

impl<S: GattServer> BlePeripheralLink<S> {
    /// A link over a session.
    pub fn new(session: S) -> Self {
        BlePeripheralLink {
            session,
            queue_limit: DEFAULT_QUEUE_PDUS,
        }
    }

    /// Sets how many PDUs the link queues before reporting itself full.
    pub fn with_queue_limit(mut self, pdus: usize) -> Self {
        self.queue_limit = pdus.max(1);
        self
    }

    /// The session.
    pub fn session(&self) -> &S {
        &self.session
    }
}

struct ServerSender<S>(Arc<S>);

impl<S: GattServer> PduSender for ServerSender<S> {
    fn ready(&self) -> impl Future<Output = Result<(), LinkError>> + Send {
        self.0.ready()
    }
    fn send(&self, pdu: &[u8]) -> impl Future<Output = Result<(), LinkError>> + Send {
        self.0.notify(pdu)
    }
    fn disconnect(&self) -> impl Future<Output = Result<(), LinkError>> + Send {
        self.0.disconnect()
    }
}

impl<S: GattServer> Link for BlePeripheralLink<S> {
    type Tx = GattTx;
    type Rx = GattRx;

    fn att_mtu(&self) -> usize {
        self.session.att_mtu()
    }

    fn peer_id(&self) -> String {
        self.session.peer_id()
    }

    /// As every BLE link (a server never runs a central's setup; this only matters for a client
    /// run over the peripheral role).
    fn setup_pipelining(&self) -> SetupPipelining {
        SetupPipelining::Requests
    }

    fn split(mut self) -> (GattTx, GattRx) {
        let att_mtu = self.session.att_mtu();
        let incoming = self.session.take_writes();
        super::split(
            ServerSender(Arc::new(self.session)),
            incoming,
            att_mtu,
            self.queue_limit,
        )
    }
}

#[cfg(target_os = "linux")]
pub use self::bluez::{BluerPeripheral, BluerPeripheralOptions, BluerSession};

#[cfg(target_os = "linux")]
mod bluez {
    use bluer::adv::{Advertisement, AdvertisementHandle};
    use bluer::gatt::local::{
        Application, ApplicationHandle, Characteristic, CharacteristicControl,
        CharacteristicControlEvent, CharacteristicNotify, CharacteristicNotifyMethod,
        CharacteristicWrite, CharacteristicWriteMethod, Service, characteristic_control,
    };
    use bluer::gatt::{CharacteristicReader, CharacteristicWriter};
    use futures_util::StreamExt;
    use tokio::sync::{mpsc, watch};

    use super::*;

    fn transport(e: impl std::fmt::Display) -> LinkError {
        LinkError::Transport(e.to_string())
    }

    /// Options of [`BluerPeripheral::start`].
    #[derive(Clone, Debug)]
    pub struct BluerPeripheralOptions {
        /// The adapter (`hci0`); default: BlueZ's default adapter.
        pub adapter: Option<String>,
        /// The advertised local name. Default [`DEVICE_NAME`].
        pub name: String,
    }

    impl Default for BluerPeripheralOptions {
        fn default() -> Self {
            BluerPeripheralOptions {
                adapter: None,
                name: DEVICE_NAME.to_string(),
            }
        }
    }

    /// A registered bleRPC GATT service, advertising; [`BluerPeripheral::accept`] yields a link
    /// per connected central. Dropping it unregisters the service and stops advertising.
    pub struct BluerPeripheral {
        sessions: mpsc::Receiver<BluerSession>,
        _app: ApplicationHandle,
        _adv: AdvertisementHandle,
        router: tokio::task::JoinHandle<()>,
    }

    impl std::fmt::Debug for BluerPeripheral {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("BluerPeripheral").finish_non_exhaustive()
        }
    }

    impl Drop for BluerPeripheral {
        fn drop(&mut self) {
            self.router.abort();
        }
    }

    impl BluerPeripheral {
        /// Powers the adapter on, registers the service and starts advertising.
        pub async fn start(options: BluerPeripheralOptions) -> Result<Self, LinkError> {
            let session = bluer::Session::new().await.map_err(transport)?;
            let adapter = match &options.adapter {
                Some(name) => session.adapter(name).map_err(transport)?,
                None => session.default_adapter().await.map_err(transport)?,
            };
            adapter.set_powered(true).await.map_err(transport)?;
            let (control, control_handle) = characteristic_control();
            let app = Application {
                services: vec![Service {
                    uuid: SERVICE_UUID,
                    primary: true,
                    characteristics: vec![Characteristic {
                        uuid: CHARACTERISTIC_UUID,
                        write: Some(CharacteristicWrite {
                            write_without_response: true,
                            method: CharacteristicWriteMethod::Io,
                            ..Default::default()
                        }),
                        notify: Some(CharacteristicNotify {
                            notify: true,
                            method: CharacteristicNotifyMethod::Io,
                            ..Default::default()
                        }),
                        control_handle,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            };
            let app = adapter
                .serve_gatt_application(app)
                .await
                .map_err(transport)?;
            let adv = Advertisement {
                advertisement_type: bluer::adv::Type::Peripheral,
                service_uuids: [SERVICE_UUID].into_iter().collect(),
                local_name: Some(options.name.clone()),
                discoverable: Some(true),
                ..Default::default()
            };
            let adv = adapter.advertise(adv).await.map_err(transport)?;
            let (tx, sessions) = mpsc::channel(1);
            let router = tokio::spawn(route(control, tx));
            tracing::info!(adapter = adapter.name(), name = %options.name, "BLE peripheral advertising");
            Ok(BluerPeripheral {
                sessions,
                _app: app,
                _adv: adv,
                router,
            })
        }

        /// Waits for the next central.
        pub async fn accept(&mut self) -> Result<BlePeripheralLink<BluerSession>, LinkError> {
            self.sessions
                .recv()
                .await
                .map(BlePeripheralLink::new)
                .ok_or(LinkError::Closed)
        }
    }

    impl crate::link::Acceptor for BluerPeripheral {
        type Link = BlePeripheralLink<BluerSession>;
        async fn accept(&mut self) -> std::io::Result<Self::Link> {
            BluerPeripheral::accept(self)
                .await
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::BrokenPipe, e.to_string()))
        }
    }

    /// The session being fed by [`route`].
    struct Current {
        address: bluer::Address,
        writer: Option<watch::Sender<Option<Arc<CharacteristicWriter>>>>,
        reader: Option<mpsc::Sender<CharacteristicReader>>,
        has_writer: bool,
        has_reader: bool,
    }

    /// Routes BlueZ's acquired sockets to sessions: a notify socket or a write socket from a new
    /// central (or one whose session already has that socket) starts a new session.
    async fn route(mut control: CharacteristicControl, sessions: mpsc::Sender<BluerSession>) {
        let mut current: Option<Current> = None;
        while let Some(event) = control.next().await {
            let (address, mtu) = match &event {
                CharacteristicControlEvent::Notify(w) => (w.device_address(), w.mtu()),
                CharacteristicControlEvent::Write(r) => (r.device_address(), r.mtu()),
            };
            let reuse = current.as_ref().is_some_and(|c| {
                c.address == address
                    && match &event {
                        CharacteristicControlEvent::Notify(_) => !c.has_writer,
                        CharacteristicControlEvent::Write(_) => !c.has_reader,
                    }
            });
            if !reuse {
                let (writer_tx, writer_rx) = watch::channel(None);
                let (reader_tx, reader_rx) = mpsc::channel(1);
                let session = BluerSession {
                    att_mtu: mtu,
                    peer_id: format!("ble://{address}"),
                    writer: writer_rx,
                    readers: Some(reader_rx),
                };
                current = Some(Current {
                    address,
                    writer: Some(writer_tx),
                    reader: Some(reader_tx),
                    has_writer: false,
                    has_reader: false,
                });
                tracing::debug!(%address, mtu, "BLE central session");
                if sessions.send(session).await.is_err() {
                    return;
                }
            }
            let Some(c) = current.as_mut() else { continue };
            match event {
                CharacteristicControlEvent::Notify(writer) => {
                    c.has_writer = true;
                    if let Some(tx) = &c.writer {
                        let _ = tx.send(Some(Arc::new(writer)));
                    }
                }
                CharacteristicControlEvent::Write(request) => {
                    c.has_reader = true;
                    match request.accept() {
                        Ok(reader) => {
                            if let Some(tx) = &c.reader {
                                let _ = tx.send(reader).await;
                            }
                        }
                        Err(e) => tracing::warn!("BLE write socket refused: {e}"),
                    }
                }
            }
        }
    }

    /// One central's session on BlueZ's acquired sockets.
    pub struct BluerSession {
        att_mtu: usize,
        peer_id: String,
        writer: watch::Receiver<Option<Arc<CharacteristicWriter>>>,
        readers: Option<mpsc::Receiver<CharacteristicReader>>,
    }

    impl std::fmt::Debug for BluerSession {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("BluerSession")
                .field("peer_id", &self.peer_id)
                .field("att_mtu", &self.att_mtu)
                .finish_non_exhaustive()
        }
    }

    impl GattServer for BluerSession {
        fn att_mtu(&self) -> usize {
            self.att_mtu
        }

        fn peer_id(&self) -> String {
            self.peer_id.clone()
        }

        fn take_writes(&mut self) -> PduStream {
            let Some(readers) = self.readers.take() else {
                return Box::pin(futures_util::stream::empty());
            };
            // The write socket arrives with the central's first write; each datagram is one
            // PDU; an empty read is BlueZ closing the socket (the central is gone).
            Box::pin(futures_util::stream::unfold(
                (readers, None::<CharacteristicReader>),
                |(mut readers, mut reader)| async move {
                    loop {
                        let r = match &reader {
                            Some(r) => r,
                            None => {
                                reader = Some(readers.recv().await?);
                                continue;
                            }
                        };
                        match r.recv().await {
                            Ok(pdu) if !pdu.is_empty() => return Some((pdu, (readers, reader))),
                            _ => return None,
                        }
                    }
                },
            ))
        }

        async fn ready(&self) -> Result<(), LinkError> {
            // Notifications can only go out once the central has subscribed.
            let mut rx = self.writer.clone();
            let writer = rx
                .wait_for(|w| w.is_some())
                .await
                .map_err(|_| LinkError::Closed)?
                .clone();
            if let Some(w) = writer {
                w.sendable().await?;
            }
            Ok(())
        }

        async fn notify(&self, pdu: &[u8]) -> Result<(), LinkError> {
            let writer = self.writer.borrow().clone();
            match writer {
                Some(w) => w.send(pdu).await.map_err(LinkError::Io),
                None => Err(LinkError::Closed),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_link_reports_the_session_mtu_and_id() {
        let (central, peripheral) = super::super::fake::pair(185);
        let link = BlePeripheralLink::new(peripheral);
        assert_eq!(link.att_mtu(), 185);
        assert_eq!(link.peer_id(), "ble://fake-central");
        drop(central);
    }
}
