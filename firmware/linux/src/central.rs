//! Our central on trouble-host: a [`GattClient`] for the `blerpc` runtime's own BLE central link
//! (`blerpc::link::ble::central::BleCentralLink`), so the real `Client`, its connection driver
//! and the runtime's GATT link layer (`crates/blerpc/src/link/ble/`) run over a real BLE host
//! stack, the same code the btleplug adapter drives on a phone or a laptop.
//!
//! trouble-host is single-threaded (`!Send`), the runtime's link is `Send`: the stack runs on its
//! own thread with its own current-thread runtime, and [`TroubleGatt`] talks to it over
//! channels. A write is acknowledged once trouble has handed the ATT Write Command to the
//! controller (which waits for the controller's ACL buffer credits): that is the flow control
//! the runtime's writer task waits on.
//!
//! ```text
//!  tokio runtime (Client, driver, BleCentralLink)         trouble thread (current-thread runtime)
//!   GattTx writer task ──write(pdu) + ack──────────────>  GattClient::write_characteristic_without_response
//!   GattRx  <──────────────── notifications ────────────  NotificationListener (subscribed via the CCC)
//! ```

use std::cell::Cell;
use std::time::Duration;

use blerpc::link::LinkError;
use blerpc::link::ble::PduStream;
use blerpc::link::ble::central::GattClient as RuntimeGatt;
use blerpc_fw_app::SERVICE_UUID_LE;
use embassy_futures::select::{Either, select};
use tokio::sync::{mpsc, oneshot};
use trouble_host::prelude::*;

use crate::hci;

/// The characteristic UUID, little-endian.
const CHARACTERISTIC_UUID_LE: [u8; 16] = [
    0xfb, 0x34, 0x9b, 0x5f, 0x80, 0x00, 0x00, 0x80, 0x00, 0x10, 0x00, 0x00, 0x02, 0x00, 0x34, 0x12,
];

enum Command {
    Write {
        pdu: Vec<u8>,
        done: oneshot::Sender<Result<(), String>>,
    },
    Disconnect,
}

/// A connected, subscribed GATT client on trouble-host.
pub struct TroubleGatt {
    att_mtu: usize,
    peer: String,
    commands: mpsc::Sender<Command>,
    notifications: Option<mpsc::UnboundedReceiver<Vec<u8>>>,
}

impl TroubleGatt {
    /// Scans the controller at `hci_addr` for a peripheral advertising the bleRPC service,
    /// connects, exchanges the ATT MTU (trouble asks for 247), discovers the characteristic and
    /// subscribes to it. Fails after `timeout`.
    pub async fn connect(hci_addr: String, timeout: Duration) -> anyhow::Result<TroubleGatt> {
        let (ready_tx, ready_rx) = oneshot::channel();
        let (commands, commands_rx) = mpsc::channel(4);
        let (notes_tx, notes_rx) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("trouble-central".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                rt.block_on(stack_task(hci_addr, ready_tx, commands_rx, notes_tx));
            })?;
        let (att_mtu, peer) = tokio::time::timeout(timeout, ready_rx)
            .await
            .map_err(|_| anyhow::anyhow!("no bleRPC peripheral connected within {timeout:?}"))?
            .map_err(|_| anyhow::anyhow!("the trouble-host thread stopped"))?
            .map_err(|e| anyhow::anyhow!("trouble-host: {e}"))?;
        Ok(TroubleGatt {
            att_mtu,
            peer,
            commands,
            notifications: Some(notes_rx),
        })
    }
}

impl RuntimeGatt for TroubleGatt {
    fn att_mtu(&self) -> usize {
        self.att_mtu
    }
    fn peer_id(&self) -> String {
        format!("ble://{}", self.peer)
    }
    fn take_notifications(&mut self) -> PduStream {
        let rx = self.notifications.take();
        Box::pin(futures_util::stream::unfold(rx, |rx| async move {
            let mut rx = rx?;
            let pdu = rx.recv().await?;
            Some((pdu, Some(rx)))
        }))
    }
    async fn write_without_response(&self, pdu: &[u8]) -> Result<(), LinkError> {
        let (done, acked) = oneshot::channel();
        self.commands
            .send(Command::Write {
                pdu: pdu.to_vec(),
                done,
            })
            .await
            .map_err(|_| LinkError::Closed)?;
        acked
            .await
            .map_err(|_| LinkError::Closed)?
            .map_err(LinkError::Transport)
    }
    async fn disconnect(&self) -> Result<(), LinkError> {
        let _ = self.commands.send(Command::Disconnect).await;
        Ok(())
    }
}

/// Remembers the first advertiser of the bleRPC service.
struct Finder {
    found: Cell<Option<Address>>,
}

/// `true` if advertising data `ad` lists `uuid` (128-bit, little-endian) as a service.
fn advertises(mut ad: &[u8], uuid: &[u8; 16]) -> bool {
    while let [len, rest @ ..] = ad {
        let len = usize::from(*len);
        if len == 0 || rest.len() < len {
            return false;
        }
        let (field, tail) = rest.split_at(len);
        // 0x06 incomplete, 0x07 complete list of 128-bit service UUIDs.
        if let [0x06 | 0x07, uuids @ ..] = field
            && uuids.chunks_exact(16).any(|u| u == uuid)
        {
            return true;
        }
        ad = tail;
    }
    false
}

impl Finder {
    fn seen(&self, kind: AddrKind, addr: BdAddr, data: &[u8]) {
        log::debug!("central: advertisement from {addr:?}: {data:02x?}");
        if self.found.get().is_none() && advertises(data, &SERVICE_UUID_LE) {
            self.found.set(Some(Address { kind, addr }));
        }
    }
}

impl EventHandler for Finder {
    fn on_adv_reports(&self, mut reports: LeAdvReportsIter<'_>) {
        while let Some(Ok(r)) = reports.next() {
            self.seen(r.addr_kind, r.addr, r.data);
        }
    }
    fn on_ext_adv_reports(&self, mut reports: LeExtAdvReportsIter<'_>) {
        while let Some(Ok(r)) = reports.next() {
            self.seen(r.addr_kind, r.addr, r.data);
        }
    }
}

/// The trouble-host central: scan, connect, discover, subscribe, then carry writes and
/// notifications until told to disconnect or the link drops.
async fn stack_task(
    hci_addr: String,
    ready: oneshot::Sender<Result<(usize, String), String>>,
    mut commands: mpsc::Receiver<Command>,
    notes: mpsc::UnboundedSender<Vec<u8>>,
) {
    let controller = match hci::connect(&hci_addr).await {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(format!("HCI {hci_addr}: {e}")));
            return;
        }
    };
    let mut resources: HostResources<DefaultPacketPool, 1, 3> = HostResources::new();
    let stack = trouble_host::new(controller, &mut resources)
        .set_random_address(Address::random([0x11, 0x22, 0x33, 0x44, 0x55, 0xC6]))
        .build();
    let mut runner = stack.runner();
    let mut central = stack.central();
    let finder = Finder {
        found: Cell::new(None),
    };
    let mut ready = Some(ready);
    let fail = |ready: &mut Option<oneshot::Sender<_>>, what: String| {
        log::warn!("central: {what}");
        if let Some(r) = ready.take() {
            let _ = r.send(Err(what));
        }
    };

    let session = async {
        // Scan until an advertiser of the service shows up; dropping the session stops the scan.
        let target = {
            let mut scanner = Scanner::new(&mut central);
            let _scan = match scanner.scan(&ScanConfig::default()).await {
                Ok(s) => s,
                Err(e) => return fail(&mut ready, format!("scan: {e:?}")),
            };
            loop {
                if let Some(a) = finder.found.get() {
                    break a;
                }
                embassy_time::Timer::after_millis(20).await;
            }
        };
        log::info!("central: found {:?}", target.addr);
        let config = ConnectConfig {
            scan_config: ScanConfig {
                filter_accept_list: &[target],
                ..ScanConfig::default()
            },
            connect_params: blerpc_fw_app::preferred_conn_params(),
        };
        let conn = match central.connect(&config).await {
            Ok(c) => c,
            Err(e) => return fail(&mut ready, format!("connect: {e:?}")),
        };
        let client = match GattClient::<_, DefaultPacketPool, 4>::new(&stack, &conn).await {
            Ok(c) => c,
            Err(e) => return fail(&mut ready, format!("MTU exchange: {e:?}")),
        };
        let work = async {
            let services = match client
                .services_by_uuid(&Uuid::new_long(SERVICE_UUID_LE))
                .await
            {
                Ok(s) => s,
                Err(e) => return fail(&mut ready, format!("service discovery: {e:?}")),
            };
            let Some(service) = services.first().cloned() else {
                return fail(&mut ready, "no bleRPC service".into());
            };
            let c: Characteristic<[u8]> = match client
                .characteristic_by_uuid(&service, &Uuid::new_long(CHARACTERISTIC_UUID_LE))
                .await
            {
                Ok(c) => c,
                Err(e) => return fail(&mut ready, format!("characteristic discovery: {e:?}")),
            };
            let mut listener = match client.subscribe(&c, false).await {
                Ok(l) => l,
                Err(e) => return fail(&mut ready, format!("subscribe: {e:?}")),
            };
            log::info!("central: connected, ATT MTU {}", conn.att_mtu());
            if let Some(r) = ready.take() {
                let _ = r.send(Ok((
                    usize::from(conn.att_mtu()),
                    format!("{:?}", target.addr),
                )));
            }
            loop {
                match select(listener.next(), commands.recv()).await {
                    Either::First(n) => {
                        if notes.send(n.as_ref().to_vec()).is_err() {
                            break;
                        }
                    }
                    Either::Second(Some(Command::Write { pdu, done })) => {
                        let r = client.write_characteristic_without_response(&c, &pdu).await;
                        let _ = done.send(r.map_err(|e| format!("{e:?}")));
                    }
                    Either::Second(Some(Command::Disconnect) | None) => break,
                }
            }
            conn.disconnect();
        };
        match select(client.task(), work).await {
            Either::First(r) => log::info!("central: GATT client stopped: {r:?}"),
            Either::Second(()) => {}
        }
    };
    match select(runner.run_with_handler(&finder), session).await {
        Either::First(r) => log::warn!("central: host stopped: {r:?}"),
        Either::Second(()) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_service_uuid_in_advertising_data() {
        let mut ad = vec![0x02, 0x01, 0x06, 0x11, 0x07];
        ad.extend_from_slice(&SERVICE_UUID_LE);
        assert!(advertises(&ad, &SERVICE_UUID_LE));
        assert!(!advertises(&ad[..10], &SERVICE_UUID_LE));
        assert!(!advertises(&[0x02, 0x01, 0x06], &SERVICE_UUID_LE));
        assert!(!advertises(&[0x00], &SERVICE_UUID_LE));
    }
}
