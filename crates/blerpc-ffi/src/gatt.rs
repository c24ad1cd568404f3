//! A GATT link the app provides: on a phone the platform owns the radio, so the app connects,
//! negotiates the MTU, discovers the bleRPC characteristic and subscribes, then hands the
//! connection to [`connect_gatt`] as two halves:
//!
//! - [`GattLink`], implemented by the app: the negotiated ATT MTU, a peer id, `write without
//!   response` of one PDU (the app paces writes inside it: it returns once the stack took the
//!   PDU), and `disconnect`;
//! - [`GattInbox`], made by the app and fed from its stack's callbacks: each notification of
//!   the characteristic, in order, and the disconnection.
//!
//! Both are adapted into the runtime's [`GattClient`], so the connection is the runtime's
//! [`BleCentralLink`] under the same [`Client`](blerpc::Client) as every other link: setup,
//! encryption, pinning, the call table. Nothing here knows the protocol.
//!
//! The inbox is bounded ([`GattInbox::new`]'s `capacity`, default
//! [`DEFAULT_INBOX_CAPACITY`] notifications): the connection's task drains it as PDUs arrive,
//! so it only fills if that task is stalled. A notification that finds it full, or one longer
//! than an ATT value can be ([`MAX_NOTIFICATION_LEN`]), fails the link with that error
//! (`LINK_FAILED` for the calls in flight), never holds more memory.

use std::sync::{Arc, Mutex};

use blerpc::link::LinkError;
use blerpc::link::ble::PduStream;
use blerpc::link::ble::central::{BleCentralLink, GattClient};
use tokio::sync::mpsc;

use crate::connection::{Connection, open};
use crate::{BlerpcError, ConnectOptions};

/// Notifications a [`GattInbox`] holds when none is given: 256 (62 KiB at MTU 247).
pub const DEFAULT_INBOX_CAPACITY: u32 = 256;

/// The longest notification an inbox takes: an ATT MTU of 517 (the largest) less the 3-byte
/// ATT header.
pub const MAX_NOTIFICATION_LEN: usize = 514;

/// The app's side of a GATT connection to a bleRPC peripheral (service
/// `12340001-0000-1000-8000-00805f9b34fb`, characteristic `12340002-…`), already connected,
/// with the MTU negotiated and notifications subscribed. Implemented in Kotlin, Swift or
/// Python; called on the library's own thread. Any method may throw (the app's exception
/// becomes a [`BlerpcError`] with its text, `LINK_FAILED` unless it is one): from `att_mtu`
/// or `peer_id`, [`connect_gatt`] fails with it; from a write, the link fails; from
/// `disconnect`, it is logged.
#[uniffi::export(with_foreign)]
#[async_trait::async_trait]
pub trait GattLink: Send + Sync {
    /// The negotiated ATT MTU (Android's `onMtuChanged`, CoreBluetooth's
    /// `maximumWriteValueLength(.withoutResponse) + 3`). bleRPC's encryption needs at least
    /// 136; the reference peripherals settle on 247.
    fn att_mtu(&self) -> Result<u32, BlerpcError>;
    /// A stable name for the peripheral (`ble://AA:BB:CC:DD:EE:FF`, or the platform's id):
    /// pins are kept under it unless `device_id` is given.
    fn peer_id(&self) -> Result<String, BlerpcError>;
    /// Writes one PDU to the characteristic as a write without response. Returns once the
    /// stack has taken it; the app paces here (Android: wait for `onCharacteristicWrite`;
    /// CoreBluetooth: for `canSendWriteWithoutResponse`). The library writes one PDU at a
    /// time, in order. An error fails the link.
    async fn write_without_response(&self, pdu: Vec<u8>) -> Result<(), BlerpcError>;
    /// Ends the GATT connection (called once, when the connection closes, also when the app
    /// reported the disconnection itself). An error is logged and otherwise ignored.
    async fn disconnect(&self) -> Result<(), BlerpcError>;
}

/// Where the app delivers what its BLE stack reports for the connection: each notification of
/// the bleRPC characteristic, in order, and the disconnection. Its methods never block: call
/// them from the stack's callbacks. One inbox serves one [`connect_gatt`].
#[derive(Debug, uniffi::Object)]
pub struct GattInbox {
    capacity: usize,
    /// `None` once the link has failed or disconnected.
    tx: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    /// Taken by [`connect_gatt`].
    rx: Mutex<Option<mpsc::Receiver<Vec<u8>>>>,
    /// Why the link failed, for the calls in flight.
    failure: Arc<Mutex<Option<LinkError>>>,
}

#[uniffi::export]
impl GattInbox {
    /// An inbox that holds up to `capacity` notifications the connection has not yet taken
    /// (at least 1; default [`DEFAULT_INBOX_CAPACITY`]).
    // UniFFI takes the default as a literal: DEFAULT_INBOX_CAPACITY.
    #[uniffi::constructor(default(capacity = 256))]
    pub fn new(capacity: u32) -> Arc<Self> {
        let capacity = usize::try_from(capacity.max(1)).unwrap_or(usize::MAX);
        let (tx, rx) = mpsc::channel(capacity);
        Arc::new(GattInbox {
            capacity,
            tx: Mutex::new(Some(tx)),
            rx: Mutex::new(Some(rx)),
            failure: Arc::default(),
        })
    }

    /// One notification's value. Returns `false` if the inbox no longer takes any: the link
    /// has failed or disconnected (this one, if it found the inbox full or was too long,
    /// failed it).
    pub fn notification(&self, pdu: Vec<u8>) -> bool {
        let Ok(mut slot) = self.tx.lock() else {
            return false;
        };
        let Some(tx) = slot.as_ref() else {
            return false;
        };
        let refused = if pdu.len() > MAX_NOTIFICATION_LEN {
            LinkError::Framing(format!(
                "a notification of {} bytes: an ATT value is at most {MAX_NOTIFICATION_LEN}",
                pdu.len()
            ))
        } else {
            match tx.try_send(pdu) {
                Ok(()) => return true,
                Err(mpsc::error::TrySendError::Closed(_)) => LinkError::Closed,
                Err(mpsc::error::TrySendError::Full(_)) => LinkError::Transport(format!(
                    "GATT inbox overflow: {} notifications were waiting for the connection \
                     (GattInbox capacity)",
                    self.capacity
                )),
            }
        };
        // The reason first: the connection asks for it once the notifications end.
        if let Ok(mut failure) = self.failure.lock() {
            failure.get_or_insert(refused);
        }
        *slot = None;
        false
    }

    /// The GATT connection is gone (Android's `onConnectionStateChange` to disconnected,
    /// CoreBluetooth's `didDisconnectPeripheral`): the notifications already delivered are
    /// still read, then calls in flight fail with `LINK_CLOSED`. `reason` is logged.
    pub fn disconnected(&self, reason: String) {
        tracing::debug!("GATT link disconnected: {reason}");
        if let Ok(mut slot) = self.tx.lock() {
            *slot = None;
        }
    }
}

/// The runtime's [`GattClient`] over the app's two halves.
struct AppGatt {
    link: Arc<dyn GattLink>,
    att_mtu: usize,
    peer_id: String,
    notifications: Option<mpsc::Receiver<Vec<u8>>>,
    failure: Arc<Mutex<Option<LinkError>>>,
}

/// A foreign failure, as the link's error.
fn link_error(e: BlerpcError) -> LinkError {
    LinkError::Transport(e.to_string())
}

impl GattClient for AppGatt {
    fn att_mtu(&self) -> usize {
        self.att_mtu
    }

    fn peer_id(&self) -> String {
        self.peer_id.clone()
    }

    fn take_notifications(&mut self) -> PduStream {
        let Some(rx) = self.notifications.take() else {
            return Box::pin(futures_util::stream::empty());
        };
        Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|pdu| (pdu, rx))
        }))
    }

    fn end_reason(&self) -> Option<LinkError> {
        self.failure.lock().ok()?.take()
    }

    async fn write_without_response(&self, pdu: &[u8]) -> Result<(), LinkError> {
        let written = self.link.write_without_response(pdu.to_vec()).await;
        written.map_err(|e| {
            let e = LinkError::Transport(format!("GATT write failed: {e}"));
            // The link then disconnects, which ends the notifications: this is why.
            if let Ok(mut failure) = self.failure.lock() {
                failure.get_or_insert(LinkError::Transport(e.to_string()));
            }
            e
        })
    }

    async fn disconnect(&self) -> Result<(), LinkError> {
        self.link.disconnect().await.map_err(link_error)
    }
}

/// Connects over a GATT link the app provides and runs setup (TIMEOUT, CAPABILITIES, the key
/// exchange, with the identity check `options` ask for: pinning on first use by default).
/// `inbox` must be the one the app feeds from this connection's callbacks; it serves one
/// connection (`INVALID_ARGUMENT` if it already did). Of `options`, the link fields
/// (`tls_*`, `bearer_token`) do not apply.
#[uniffi::export(async_runtime = "tokio")]
pub async fn connect_gatt(
    link: Arc<dyn GattLink>,
    inbox: Arc<GattInbox>,
    options: ConnectOptions,
) -> Result<Arc<Connection>, BlerpcError> {
    let resolved = options.resolve()?;
    let att_mtu = usize::try_from(link.att_mtu()?).unwrap_or(usize::MAX);
    let peer_id = link.peer_id()?;
    let notifications = inbox
        .rx
        .lock()
        .ok()
        .and_then(|mut rx| rx.take())
        .ok_or_else(|| BlerpcError::invalid("this GattInbox already served a connection"))?;
    let gatt = AppGatt {
        link,
        att_mtu,
        peer_id: peer_id.clone(),
        notifications: Some(notifications),
        failure: inbox.failure.clone(),
    };
    let config = resolved.config;
    open(&peer_id, resolved.timeout, async move {
        blerpc::Client::connect(BleCentralLink::new(gatt), config).await
    })
    .await
}

/// The length of the bleRPC container that starts `bytes`, read from its header (the core's
/// [`Container::peek_len`](blerpc_proto::wire::container::Container::peek_len)), or none if
/// the header is not all there. For bridges that carry a GATT link's PDUs over a byte stream
/// (the bindings' tests bridge a fake GATT to a `blerpc serve` over TCP): each container is
/// one notification.
#[uniffi::export]
pub fn container_len(bytes: Vec<u8>) -> Option<u32> {
    blerpc_proto::wire::container::Container::peek_len(&bytes).and_then(|n| u32::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_len_reads_the_header() {
        // A TIMEOUT response: [tid][seq][flags: CONTROL][len 2][2 bytes].
        assert_eq!(container_len(vec![0x00, 0x00, 0xc4, 0x02]), Some(6));
        assert_eq!(container_len(vec![0x00, 0x00]), None);
    }

    #[test]
    fn a_full_inbox_fails_the_link_and_takes_nothing_more() {
        let inbox = GattInbox::new(2);
        assert!(inbox.notification(vec![1]));
        assert!(inbox.notification(vec![2]));
        assert!(!inbox.notification(vec![3]));
        assert!(!inbox.notification(vec![4]));
        let failure = inbox
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match failure {
            Some(LinkError::Transport(text)) => {
                assert!(
                    text.starts_with("GATT inbox overflow: 2 notifications"),
                    "{text}"
                );
            }
            other => panic!("{other:?}"),
        }
        // What was taken is still delivered, then the stream ends.
        let mut rx = inbox.rx.lock().unwrap_or_else(|e| e.into_inner()).take();
        let rx = rx
            .as_mut()
            .map(|rx| (rx.try_recv(), rx.try_recv(), rx.try_recv()));
        assert!(matches!(
            rx,
            Some((Ok(a), Ok(b), Err(mpsc::error::TryRecvError::Disconnected))) if a == [1] && b == [2]
        ));
    }

    #[test]
    fn an_oversized_notification_is_a_framing_failure() {
        let inbox = GattInbox::new(DEFAULT_INBOX_CAPACITY);
        assert!(inbox.notification(vec![0; MAX_NOTIFICATION_LEN]));
        assert!(!inbox.notification(vec![0; MAX_NOTIFICATION_LEN + 1]));
        let failure = inbox
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        assert!(
            matches!(failure, Some(LinkError::Framing(_))),
            "{failure:?}"
        );
    }

    #[test]
    fn a_disconnect_ends_the_inbox_without_a_failure() {
        let inbox = GattInbox::new(4);
        assert!(inbox.notification(vec![1]));
        inbox.disconnected("supervision timeout".into());
        assert!(!inbox.notification(vec![2]));
        assert!(
            inbox
                .failure
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_none()
        );
    }
}
