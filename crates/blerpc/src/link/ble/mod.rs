//! BLE links: bleRPC over its native GATT transport (wire.md §1.1).
//!
//! One primary service [`SERVICE_UUID`] with one characteristic [`CHARACTERISTIC_UUID`]
//! (WRITE_WITHOUT_RESP | NOTIFY, with a CCC descriptor). The central writes each container as an
//! ATT Write Command; the peripheral answers with Handle Value Notifications. One container is one
//! ATT PDU of at most `att_mtu - 3` bytes. The peripheral advertises the service UUID and the
//! complete local name [`DEVICE_NAME`].
//!
//! Each side is a thin adapter over a BLE library behind a small trait, so that everything above
//! the adapter is tested against in-memory fakes ([`fake`]):
//!
//! | side | trait | adapter | link |
//! |---|---|---|---|
//! | central (`ble-gatt`) | [`central::GattClient`] | btleplug (`ble-central`: Linux, macOS, Windows), or the app's own stack through the bindings (`blerpc-ffi`) | [`central::BleCentralLink`] |
//! | peripheral (`ble-peripheral`) | [`peripheral::GattServer`] | bluer (Linux, BlueZ) | [`peripheral::BlePeripheralLink`] |
//!
//! Both links share the transmit and receive halves [`GattTx`] and [`GattRx`]. Writes go through
//! a small writer task that owns the GATT handle: a BLE library's write future is not
//! cancel-safe (dropped half-way, the PDU may or may not have left), so [`LinkTx::flush`] only
//! hands PDUs to that task through a bounded channel, which is. The channel's depth plus the
//! stack's own write-without-response credits ([`central::GattClient::ready`]) are the link's
//! flow control: [`LinkTx::is_full`] turns true when the queue is at its limit and
//! [`LinkTx::flush`] waits while the stack is congested, so PDUs are never dropped by the link.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::{LinkError, LinkRx, LinkTx, SendQueue};

#[cfg(feature = "ble-central")]
pub mod btleplug;
#[cfg(feature = "ble-gatt")]
pub mod central;
pub mod fake;
#[cfg(feature = "ble-peripheral")]
pub mod peripheral;

/// The bleRPC primary service, `12340001-0000-1000-8000-00805f9b34fb`.
pub const SERVICE_UUID: uuid::Uuid = uuid::Uuid::from_u128(0x12340001_0000_1000_8000_00805f9b34fb);

/// The bleRPC characteristic, `12340002-0000-1000-8000-00805f9b34fb`.
pub const CHARACTERISTIC_UUID: uuid::Uuid =
    uuid::Uuid::from_u128(0x12340002_0000_1000_8000_00805f9b34fb);

/// The complete local name the peripheral advertises (`CONFIG_BLERPC_DEVICE_NAME`).
pub const DEVICE_NAME: &str = "blerpc";

/// The ATT MTU the reference firmware and centrals negotiate.
pub const DEFAULT_ATT_MTU: usize = 247;

/// The ATT MTU before any exchange (the Bluetooth default).
pub const MIN_ATT_MTU: usize = 23;

/// PDUs a BLE link queues of its own before [`LinkTx::is_full`] asks for a flush: few, so the
/// rest of a response waits in the core's outbox, where a CANCEL still stops it (with 2 instead
/// of 8, a cancelled 8 KB read sends 16 containers after the drop instead of 20 on the
/// simulated link, at the same calls/s and stream rates: `cargo test -p blerpc-bench --test
/// pipeline -- --nocapture`, `blerpc-bench pipeline`).
pub const DEFAULT_QUEUE_PDUS: usize = 2;

/// PDUs handed to the writer task and not yet accepted by the BLE stack.
const WRITER_DEPTH: usize = 4;

/// A stream of received PDUs (notifications on the central, writes on the peripheral). It ends
/// when the connection does.
pub type PduStream = Pin<Box<dyn futures_core::Stream<Item = Vec<u8>> + Send + 'static>>;

/// The sending side of a GATT connection, as the shared writer task sees it.
pub(crate) trait PduSender: Send + Sync + 'static {
    fn ready(&self) -> impl Future<Output = Result<(), LinkError>> + Send;
    fn send(&self, pdu: &[u8]) -> impl Future<Output = Result<(), LinkError>> + Send;
    fn disconnect(&self) -> impl Future<Output = Result<(), LinkError>> + Send;
}

/// Splits a GATT connection into link halves and starts its writer task. Must run inside a
/// tokio runtime.
pub(crate) fn split<S: PduSender>(
    sender: S,
    incoming: PduStream,
    att_mtu: usize,
    queue_limit: usize,
) -> (GattTx, GattRx) {
    let (tx, rx) = mpsc::channel(WRITER_DEPTH);
    let failure = Arc::new(Mutex::new(None));
    let task = tokio::spawn(writer(sender, rx, failure.clone()));
    (
        GattTx {
            tx: Some(tx),
            queue: SendQueue::for_att_mtu(queue_limit, att_mtu),
            failure,
            task: Some(task),
        },
        GattRx {
            incoming,
            current: Vec::new(),
            end_reason: None,
        },
    )
}

/// Owns the GATT handle: writes each PDU in order, waiting for the stack's credits first.
async fn writer<S: PduSender>(
    sender: S,
    mut rx: mpsc::Receiver<Vec<u8>>,
    failure: Arc<Mutex<Option<String>>>,
) {
    while let Some(pdu) = rx.recv().await {
        let sent = async {
            sender.ready().await?;
            sender.send(&pdu).await
        }
        .await;
        if let Err(e) = sent {
            tracing::debug!("BLE write failed: {e}");
            if let Ok(mut f) = failure.lock() {
                *f = Some(e.to_string());
            }
            // Dropping the receiver makes the next flush fail.
            break;
        }
    }
    drop(rx);
    if let Err(e) = sender.disconnect().await {
        tracing::debug!("BLE disconnect failed: {e}");
    }
}

/// Transmit half of a BLE link.
#[derive(Debug)]
pub struct GattTx {
    tx: Option<mpsc::Sender<Vec<u8>>>,
    queue: SendQueue,
    failure: Arc<Mutex<Option<String>>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl GattTx {
    fn closed_error(&self) -> LinkError {
        match self.failure.lock().ok().and_then(|f| f.clone()) {
            Some(msg) => LinkError::Transport(msg),
            None => LinkError::Closed,
        }
    }
}

impl LinkTx for GattTx {
    fn queue(&mut self, pdu: &[u8]) -> Result<(), LinkError> {
        match &self.tx {
            Some(tx) if !tx.is_closed() => {}
            _ => return Err(self.closed_error()),
        }
        self.queue.push(pdu)
    }

    fn is_full(&self) -> bool {
        self.queue.is_full()
    }

    fn has_pending(&self) -> bool {
        !self.queue.is_empty()
    }

    async fn flush(&mut self) -> Result<(), LinkError> {
        while !self.queue.is_empty() {
            let Some(tx) = &self.tx else {
                return Err(LinkError::Closed);
            };
            // `reserve` is cancel-safe; a PDU leaves the queue only once a slot is held.
            let Ok(permit) = tx.reserve().await else {
                return Err(self.closed_error());
            };
            if let Some(pdu) = self.queue.pop() {
                permit.send(pdu);
            }
        }
        Ok(())
    }

    async fn close(&mut self) -> Result<(), LinkError> {
        let flushed = self.flush().await;
        // Closing the channel lets the writer finish what it holds, then disconnect.
        self.tx = None;
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        flushed
    }
}

/// Why a link's received PDUs ended (see [`GattRx::with_end_reason`]).
type EndReason = Box<dyn Fn() -> Option<LinkError> + Send + Sync>;

/// Receive half of a BLE link.
pub struct GattRx {
    incoming: PduStream,
    current: Vec<u8>,
    end_reason: Option<EndReason>,
}

impl GattRx {
    /// Asks `reason` why the PDUs ended once they have: an error fails the link with it,
    /// `None` closes it ([`LinkRx::recv`] gives `Ok(None)`).
    #[cfg(feature = "ble-gatt")]
    fn with_end_reason(
        mut self,
        reason: impl Fn() -> Option<LinkError> + Send + Sync + 'static,
    ) -> Self {
        self.end_reason = Some(Box::new(reason));
        self
    }
}

impl std::fmt::Debug for GattRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GattRx").finish_non_exhaustive()
    }
}

impl LinkRx for GattRx {
    async fn recv(&mut self) -> Result<Option<&[u8]>, LinkError> {
        // `StreamExt::next` is cancel-safe: an item is taken only when the future completes.
        match self.incoming.next().await {
            Some(pdu) => {
                self.current = pdu;
                Ok(Some(&self.current))
            }
            None => match self.end_reason.as_ref().and_then(|reason| reason()) {
                Some(e) => Err(e),
                None => Ok(None),
            },
        }
    }
}
