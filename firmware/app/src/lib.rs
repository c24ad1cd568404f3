//! # blerpc-fw-app: the bleRPC peripheral on trouble-host, for any chip
//!
//! The application every board runs (and the Linux build, over an HCI transport): the bleRPC GATT
//! service, advertising, one connection at a time, and for each connection the firmware's
//! sans-IO [`Connection`] (the `blerpc-proto` core and the demo service) driven by GATT writes,
//! notifications and embassy timers. It holds no protocol logic: bytes in, bytes out.
//!
//! | what | as the reference firmware (`peripheral_fw`, wire.md §1.1) |
//! |---|---|
//! | service `12340001-0000-1000-8000-00805f9b34fb`, characteristic `12340002-…` | WRITE_WITHOUT_RESP \| NOTIFY, with its CCC descriptor, no link-layer security |
//! | advertising | flags GENERAL \| NO_BREDR and the 128-bit service UUID (complete list); the scan response carries the complete name; connectable, restarted after each disconnection |
//! | ATT MTU | 247 (the packet pool's 251-byte L2CAP PDUs), followed when the central exchanges it |
//! | data length | 251 octets requested at connect |
//! | connection interval | 15–30 ms, latency 0, supervision timeout 1 s, requested 5 s after connect |
//! | flow control | a notification waits for room in the host's outbound queue (and the controller's ACL credits) before the next one is taken from the core |
//!
//! A board supplies the controller, its flash, where the identity seed lives, and a random seed
//! per connection ([`Board`]); [`run`] never returns.
#![no_std]
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]

#[macro_use]
mod fmt;

use core::cell::{Cell, RefCell};
use core::ops::Range;

use blerpc_demo::flash::{DemoFlash, Flash};
use blerpc_demo::{DemoLimits, DemoService};
use blerpc_fw_service::device::Device;
use blerpc_fw_service::identity::{IdentitySource, identity_seed};
use blerpc_fw_service::{Connection, firmware_config};
#[cfg(not(feature = "plaintext"))]
use blerpc_proto::crypto::CryptoProvider;
use blerpc_proto::wire::diagnostics::LinkFields;
use bt_hci::cmd::le::{LeReadLocalSupportedFeatures, LeSetDataLength};
use bt_hci::cmd::status::ReadRssi;
use bt_hci::controller::ControllerCmdSync;
use bt_hci::param::Status;
use embassy_futures::select::{Either, Either3, select, select3};
use embassy_sync::blocking_mutex::raw::NoopRawMutex;
use embassy_sync::signal::Signal;
use embassy_time::{Duration, Instant, Timer};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use trouble_host::prelude::*;

#[cfg(feature = "plaintext")]
use blerpc_fw_service::plaintext::NoCrypto as Provider;
#[cfg(not(feature = "plaintext"))]
use blerpc_proto::crypto::RustCrypto as Provider;

/// The bleRPC service UUID (wire.md §1.1).
pub const SERVICE_UUID: &str = "12340001-0000-1000-8000-00805f9b34fb";
/// The bleRPC characteristic UUID.
pub const CHARACTERISTIC_UUID: &str = "12340002-0000-1000-8000-00805f9b34fb";
/// The service UUID as advertised (128 bits, little-endian).
pub const SERVICE_UUID_LE: [u8; 16] = [
    0xfb, 0x34, 0x9b, 0x5f, 0x80, 0x00, 0x00, 0x80, 0x00, 0x10, 0x00, 0x00, 0x01, 0x00, 0x34, 0x12,
];
/// The ATT MTU the firmware offers: the packet pool's 251-byte L2CAP PDU less its 4-byte header.
pub const ATT_MTU: u16 = 247;
/// The LL data length requested at connect (`CONFIG_BT_CTLR_DATA_LENGTH_MAX=251`).
pub const DATA_LENGTH: u16 = 251;
/// When the connection-parameter request goes out (Zephyr's `CONFIG_BT_CONN_PARAM_UPDATE_TIMEOUT`).
pub const CONN_PARAMS_DELAY: Duration = Duration::from_secs(5);
/// How often the RSSI is read for the diagnostics answer (`blerpc.diagnostics`).
pub const RSSI_PERIOD: Duration = Duration::from_secs(2);

/// The connection parameters requested (`CONFIG_BT_PERIPHERAL_PREF_*`: 15–30 ms, latency 0,
/// supervision timeout 1 s).
pub fn preferred_conn_params() -> RequestedConnParams {
    RequestedConnParams {
        min_connection_interval: Duration::from_micros(15_000),
        max_connection_interval: Duration::from_micros(30_000),
        max_latency: 0,
        min_event_length: Duration::from_micros(0),
        max_event_length: Duration::from_micros(0),
        supervision_timeout: Duration::from_millis(1_000),
    }
}

/// The GATT server and the bleRPC service (the attribute macros generate more items than they
/// document).
#[allow(missing_docs)]
mod gatt {
    use trouble_host::prelude::*;

    /// The GATT server: the bleRPC service alone (trouble adds GAP and GATT).
    #[gatt_server]
    pub struct Server {
        /// The bleRPC service.
        pub blerpc: BlerpcService,
    }

    /// The bleRPC service: one characteristic, written without response by the central and
    /// notified by the peripheral. Its value is not stored (`()`): every PDU goes to the core.
    #[gatt_service(uuid = "12340001-0000-1000-8000-00805f9b34fb")]
    pub struct BlerpcService {
        /// The bleRPC data characteristic.
        #[characteristic(
            uuid = "12340002-0000-1000-8000-00805f9b34fb",
            write_without_response,
            notify
        )]
        pub data: (),
    }
}
pub use gatt::{BlerpcService, Server};

/// What a board provides.
pub struct Board<F> {
    /// The device name in the scan response (`CONFIG_BLERPC_DEVICE_NAME`, "blerpc").
    pub name: &'static str,
    /// The static random address.
    pub address: Address,
    /// The chip's flash (`flash_read` reads it).
    pub flash: F,
    /// The part of it `flash_read` may read.
    pub readable: Range<u32>,
    /// Where the identity seed is stored (outside `readable`; checked at start).
    pub identity: Range<u32>,
    /// The demo service's limits.
    pub limits: DemoLimits,
}

/// Why [`run`] stopped.
#[derive(Debug)]
pub enum AppError<E> {
    /// The flash layout exposes the identity seed, or the readable range is outside the flash.
    Layout(blerpc_demo::flash::LayoutError),
    /// The identity seed does not load.
    Identity,
    /// The BLE host failed.
    Ble(BleHostError<E>),
}

/// Connections and L2CAP channels: one central at a time (as the reference), signalling + ATT.
const CONNECTIONS: usize = 1;
const L2CAP_CHANNELS: usize = 2;

/// Runs the peripheral: advertises, serves one central at a time, advertises again. `seed` is 32
/// bytes from the chip's TRNG: it seeds a ChaCha20 generator that gives each connection its own
/// generator (the core's ephemeral keys and confirmation nonces).
pub async fn run<C, F>(controller: C, board: Board<F>, seed: [u8; 32]) -> AppError<C::Error>
where
    C: Controller
        + ControllerCmdSync<LeSetDataLength>
        + ControllerCmdSync<LeReadLocalSupportedFeatures>
        + ControllerCmdSync<ReadRssi>,
    F: Flash + Clone,
{
    // The identity: stored outside the readable range, or the public development seed.
    let mut stored = [0u8; 32];
    let id_len = board.identity.end.saturating_sub(board.identity.start);
    let flash = match DemoFlash::new(
        board.flash.clone(),
        board.readable.clone(),
        board.identity.clone(),
    ) {
        Ok(f) => f,
        Err(e) => return AppError::Layout(e),
    };
    if id_len as usize >= stored.len() && board.identity.end <= board.flash.size() {
        board.flash.read(board.identity.start, &mut stored);
    }
    let (seed_bytes, source) = identity_seed(&stored);
    match source {
        IdentitySource::Provisioned => info!("identity: provisioned seed"),
        IdentitySource::Development => {
            warn!("identity: the public DEVELOPMENT seed (provision one: docs/firmware.md)")
        }
    }
    #[cfg(not(feature = "plaintext"))]
    let identity = match Provider.load_identity(&seed_bytes) {
        Ok(id) => Some(id),
        Err(_) => return AppError::Identity,
    };
    #[cfg(feature = "plaintext")]
    let identity: Option<()> = {
        let _ = seed_bytes;
        None
    };
    let require_encryption = identity.is_some();
    let master = RefCell::new(ChaCha20Rng::from_seed(seed));

    let mut resources: HostResources<DefaultPacketPool, CONNECTIONS, L2CAP_CHANNELS> =
        HostResources::new();
    let stack = trouble_host::new(controller, &mut resources)
        .set_random_address(board.address)
        .build();
    let mut runner = stack.runner();
    let mut peripheral = stack.peripheral();
    let server = match Server::new_with_config(GapConfig::Peripheral(PeripheralConfig {
        name: board.name,
        appearance: &appearance::UNKNOWN,
    })) {
        Ok(s) => s,
        Err(_) => return AppError::Ble(BleHostError::BleHost(Error::OutOfMemory)),
    };

    // What `blerpc.diagnostics` answers across connections: booted now.
    let device = Cell::new(Device {
        ram_high_water: ram_probe(),
        ..Device::new(
            now(),
            env!("CARGO_PKG_VERSION"),
            option_env!("BLERPC_BUILD_ID"),
        )
    });
    let serve = async {
        loop {
            let conn = match advertise(board.name, &mut peripheral, &server).await {
                Ok(c) => c,
                Err(e) => return AppError::Ble(e),
            };
            info!("connected");
            let service = DemoService::new(flash.clone(), board.limits);
            let now = now();
            let mut seed_for_conn = [0u8; 32];
            rand_core::RngCore::fill_bytes(&mut *master.borrow_mut(), &mut seed_for_conn);
            // Each connection takes its own handle on the identity (`()` in the plaintext build).
            #[allow(clippy::clone_on_copy)]
            let identity = identity.clone();
            let mut this = device.get();
            this.connections = this.connections.saturating_add(1);
            match Connection::new(
                now,
                firmware_config(require_encryption),
                Provider,
                identity,
                ChaCha20Rng::from_seed(seed_for_conn),
                service,
            ) {
                Ok(c) => {
                    let c = RefCell::new(c.with_device(this));
                    let lost = serve_connection(&stack, &server, &conn, &c).await;
                    let mut after = *c.borrow().device();
                    if lost {
                        after.link_losses = after.link_losses.saturating_add(1);
                    }
                    device.set(after);
                    let stats = c.borrow().stats();
                    info!(
                        "disconnected: {} responses, {} refused, {} stream items, {} upload items",
                        stats.responses, stats.refused, stats.stream_items, stats.upload_items
                    );
                }
                Err(_) => conn.raw().disconnect(),
            }
        }
    };
    match select(runner.run(), serve).await {
        Either::First(Err(e)) => AppError::Ble(e),
        Either::First(Ok(())) => AppError::Ble(BleHostError::BleHost(Error::Disconnected)),
        Either::Second(e) => e,
    }
}

/// What reads the RAM high-water mark: the painted stack on the boards (cortex-m-rt's
/// `paint-stack`); nothing on the Linux build, a host process whose memory is the OS's.
fn ram_probe() -> Option<fn() -> u32> {
    #[cfg(all(target_arch = "arm", target_os = "none"))]
    let probe = Some(blerpc_fw_service::ram::high_water as fn() -> u32);
    #[cfg(not(all(target_arch = "arm", target_os = "none")))]
    let probe = None;
    probe
}

/// The core's clock: embassy's, in microseconds.
fn now() -> blerpc_proto::Instant {
    blerpc_proto::Instant::from_micros(Instant::now().as_micros())
}

/// Advertises until a central connects.
async fn advertise<'values, 'server, C: Controller>(
    name: &'values str,
    peripheral: &mut Peripheral<'values, C, DefaultPacketPool>,
    server: &'server Server<'values>,
) -> Result<GattConnection<'values, 'server, DefaultPacketPool>, BleHostError<C::Error>> {
    let mut adv = [0u8; 31];
    let adv_len = AdStructure::encode_slice(
        &[
            AdStructure::Flags(LE_GENERAL_DISCOVERABLE | BR_EDR_NOT_SUPPORTED),
            AdStructure::CompleteServiceUuids128(&[SERVICE_UUID_LE]),
        ],
        &mut adv[..],
    )?;
    let mut scan = [0u8; 31];
    let scan_len = AdStructure::encode_slice(
        &[AdStructure::CompleteLocalName(name.as_bytes())],
        &mut scan[..],
    )?;
    let advertiser = peripheral
        .advertise(
            &AdvertisementParameters::default(),
            Advertisement::ConnectableScannableUndirected {
                adv_data: adv.get(..adv_len).unwrap_or(&[]),
                scan_data: scan.get(..scan_len).unwrap_or(&[]),
            },
        )
        .await?;
    info!("advertising");
    Ok(advertiser.accept().await?.with_attribute_server(server)?)
}

/// Serves one connection until the central disconnects (or the core closes it); `true` when
/// the link was lost (a supervision or LL response timeout) rather than closed.
async fn serve_connection<C, F>(
    stack: &Stack<'_, C, DefaultPacketPool>,
    server: &Server<'_>,
    conn: &GattConnection<'_, '_, DefaultPacketPool>,
    session: &RefCell<Connection<Provider, ChaCha20Rng, F>>,
) -> bool
where
    C: Controller
        + ControllerCmdSync<LeSetDataLength>
        + ControllerCmdSync<LeReadLocalSupportedFeatures>
        + ControllerCmdSync<ReadRssi>,
    F: Flash,
{
    let data = &server.blerpc.data;
    let input: Signal<NoopRawMutex, ()> = Signal::new();
    // The link as the stack reports it: its parameters now, a legacy-advertising connection's
    // LE 1M and 27-byte data length until the stack says otherwise.
    let params = conn.raw().params();
    let link = Cell::new(LinkFields {
        conn_interval_us: u32::try_from(params.conn_interval.as_micros()).ok(),
        peripheral_latency: Some(u32::from(params.peripheral_latency)),
        supervision_timeout_ms: u32::try_from(params.supervision_timeout.as_millis()).ok(),
        phy: Some(1),
        data_length: Some(27),
        rssi_dbm: None,
    });
    let set_link = |update: &dyn Fn(&mut LinkFields)| {
        let mut now_ = link.get();
        update(&mut now_);
        link.set(now_);
        session.borrow_mut().set_link(now_);
    };
    set_link(&|_| {});

    // Data length 251 at once; a controller that cannot is logged, not fatal.
    if let Err(e) = conn
        .raw()
        .update_data_length(stack, DATA_LENGTH, 2120)
        .await
    {
        warn!("data length update: {:?}", e);
    }

    // GATT events: writes to the data characteristic go to the core; the rest (CCC writes,
    // the MTU exchange) to trouble's attribute server.
    let events = async {
        loop {
            match conn.next().await {
                GattConnectionEvent::Disconnected { reason } => {
                    info!("disconnected: {:?}", reason);
                    return matches!(
                        reason,
                        Status::CONN_TIMEOUT | Status::LMP_LL_RESPONSE_TIMEOUT
                    );
                }
                GattConnectionEvent::Gatt { event } => {
                    let reply = match event {
                        GattEvent::Write(w) if w.handle() == data.handle => {
                            w.with_data(|_, pdu| session.borrow_mut().handle_pdu(now(), pdu));
                            input.signal(());
                            w.accept_unprocessed()
                        }
                        other => other.accept(),
                    };
                    if let Ok(reply) = reply {
                        reply.send().await;
                    }
                    // A CCC write may have subscribed the central: the notifier looks again.
                    input.signal(());
                }
                GattConnectionEvent::ConnectionParamsUpdated {
                    conn_interval,
                    peripheral_latency,
                    supervision_timeout,
                } => {
                    info!("connection interval {} us", conn_interval.as_micros());
                    set_link(&|l| {
                        l.conn_interval_us = u32::try_from(conn_interval.as_micros()).ok();
                        l.peripheral_latency = Some(u32::from(peripheral_latency));
                        l.supervision_timeout_ms =
                            u32::try_from(supervision_timeout.as_millis()).ok();
                    });
                }
                GattConnectionEvent::DataLengthUpdated {
                    max_tx_octets,
                    max_rx_octets,
                    ..
                } => {
                    info!("data length tx {} rx {}", max_tx_octets, max_rx_octets);
                    set_link(&|l| l.data_length = Some(u32::from(max_tx_octets)));
                }
                GattConnectionEvent::PhyUpdated { tx_phy, .. } => {
                    set_link(&|l| {
                        l.phy = Some(match tx_phy {
                            PhyKind::Le1M => 1,
                            PhyKind::Le2M => 2,
                            _ => 3,
                        })
                    });
                }
                _ => {}
            }
        }
    };

    // Notifications: everything the core has, as the host takes it, then sleep until new
    // input or the core's next deadline.
    let notify = async {
        let mut att_mtu = 0u16;
        let mut pdu = [0u8; ATT_MTU as usize - 3];
        loop {
            let mtu = conn.raw().att_mtu();
            if mtu != att_mtu {
                att_mtu = mtu;
                info!("ATT MTU {}", mtu);
                if session.borrow_mut().set_att_mtu(usize::from(mtu)).is_err() {
                    warn!("ATT MTU {} too small for bleRPC", mtu);
                }
            }
            // Nothing is taken from the core before the central subscribed: trouble would drop
            // the notification (as any GATT server does), and the PDU would be lost.
            let subscribed = data.should_notify(conn);
            let len = usize::from(att_mtu.saturating_sub(3)).min(pdu.len());
            let next = if subscribed {
                session
                    .borrow_mut()
                    .poll_transmit(now(), pdu.get_mut(..len).unwrap_or(&mut []))
            } else {
                None
            };
            if let Some(n) = next {
                if data
                    .notify_raw(conn, pdu.get(..n).unwrap_or(&[]), false)
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            if let Some(reason) = session.borrow().closed() {
                warn!("closing: {:?}", reason);
                conn.raw().disconnect();
                return;
            }
            let deadline = session.borrow().poll_timeout();
            match deadline {
                Some(at) => {
                    let at = Instant::from_micros(at.as_micros());
                    if let Either::Second(()) = select(input.wait(), Timer::at(at)).await {
                        session.borrow_mut().handle_timeout(now());
                    }
                }
                None => input.wait().await,
            }
        }
    };

    // The connection-interval request, 5 s after connect, once; the RSSI read every
    // RSSI_PERIOD for the diagnostics.
    let params = async {
        let (mut requested, mut rssi_logged) = (false, false);
        let start = Instant::now();
        loop {
            match conn.raw().rssi(stack).await {
                Ok(rssi) => set_link(&|l| l.rssi_dbm = Some(i32::from(rssi))),
                // Logged once: the answer then names the RSSI unavailable.
                Err(e) if !rssi_logged => {
                    rssi_logged = true;
                    warn!("RSSI read: {:?}", e);
                }
                Err(_) => {}
            }
            if !requested && start.elapsed() >= CONN_PARAMS_DELAY {
                requested = true;
                if let Err(e) = conn
                    .raw()
                    .update_connection_params(stack, &preferred_conn_params())
                    .await
                {
                    warn!("connection parameter request: {:?}", e);
                }
            }
            let next = if requested {
                RSSI_PERIOD
            } else {
                RSSI_PERIOD.min(CONN_PARAMS_DELAY - start.elapsed().min(CONN_PARAMS_DELAY))
            };
            Timer::after(next).await;
        }
    };

    match select3(events, notify, params).await {
        Either3::First(lost) => lost,
        Either3::Second(()) | Either3::Third(_) => false,
    }
}
