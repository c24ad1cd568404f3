//! BLE central link (feature `ble-gatt`): bleRPC over a GATT client, whatever BLE stack owns
//! the radio.
//!
//! [`BleCentralLink`] is the runtime's [`Link`] over a [`GattClient`]: a connected GATT client
//! subscribed to the bleRPC characteristic's notifications. The adapters:
//!
//! - [`super::btleplug::BtleplugGatt`] (feature `ble-central`): scans, connects and subscribes
//!   with btleplug (BlueZ, CoreBluetooth, WinRT);
//! - an app's own stack (a phone's `BluetoothGatt` or `CBPeripheral`, Bumble, bleak), through
//!   the bindings' foreign GATT link (`blerpc-ffi`);
//! - [`super::fake::FakeGatt`], in memory, for tests.
//!
//! The feature `ble-gatt` alone brings no BLE library.

use std::future::Future;
use std::sync::Arc;

use super::{DEFAULT_QUEUE_PDUS, GattRx, GattTx, PduSender, PduStream};
use crate::link::{Link, LinkError};
use blerpc_proto::connection::SetupPipelining;

/// The central's view of one GATT connection to a bleRPC peripheral: the seam between
/// [`BleCentralLink`] and a BLE library.
pub trait GattClient: Send + Sync + 'static {
    /// The ATT MTU of the connection.
    fn att_mtu(&self) -> usize;
    /// A stable identifier of the peripheral (`ble://<address>`).
    fn peer_id(&self) -> String;
    /// The notifications of the characteristic, in order, ending when the connection does.
    /// Called once, by [`Link::split`].
    fn take_notifications(&mut self) -> PduStream;
    /// Waits until the stack can take a write without response (CoreBluetooth's
    /// `canSendWriteWithoutResponse`, Android's `onCharacteristicWrite`). Stacks that pace writes
    /// inside [`GattClient::write_without_response`] are always ready.
    fn ready(&self) -> impl Future<Output = Result<(), LinkError>> + Send {
        async { Ok(()) }
    }
    /// Sends one PDU as an ATT Write Command.
    fn write_without_response(
        &self,
        pdu: &[u8],
    ) -> impl Future<Output = Result<(), LinkError>> + Send;
    /// Ends the connection.
    fn disconnect(&self) -> impl Future<Output = Result<(), LinkError>> + Send;
    /// Why the notifications ended, asked once they have: `None` (the default) is the
    /// connection closing ([`LinkError::Closed`]); an error is the link failing with it (an
    /// app's notification queue that overflowed).
    fn end_reason(&self) -> Option<LinkError> {
        None
    }
}

/// A [`crate::link::Link`] to a bleRPC peripheral over a [`GattClient`].
#[derive(Debug)]
pub struct BleCentralLink<G> {
    gatt: G,
    queue_limit: usize,
}

impl<G: GattClient> BleCentralLink<G> {
    /// A link over a connected, subscribed GATT client.
    pub fn new(gatt: G) -> Self {
        BleCentralLink {
            gatt,
            queue_limit: DEFAULT_QUEUE_PDUS,
        }
    }

    /// Sets how many PDUs the link queues before reporting itself full.
    pub fn with_queue_limit(mut self, pdus: usize) -> Self {
        self.queue_limit = pdus.max(1);
        self
    }

    /// The GATT client.
    pub fn gatt(&self) -> &G {
        &self.gatt
    }
}

struct ClientSender<G>(Arc<G>);

impl<G: GattClient> PduSender for ClientSender<G> {
    fn ready(&self) -> impl Future<Output = Result<(), LinkError>> + Send {
        self.0.ready()
    }
    fn send(&self, pdu: &[u8]) -> impl Future<Output = Result<(), LinkError>> + Send {
        self.0.write_without_response(pdu)
    }
    fn disconnect(&self) -> impl Future<Output = Result<(), LinkError>> + Send {
        self.0.disconnect()
    }
}

impl<G: GattClient> Link for BleCentralLink<G> {
    type Tx = GattTx;
    type Rx = GattRx;

    fn att_mtu(&self) -> usize {
        self.gatt.att_mtu()
    }

    fn peer_id(&self) -> String {
        self.gatt.peer_id()
    }

    /// TIMEOUT and CAPABILITIES together; step 1 after the reply, as the reference centrals
    /// send it (BLE peripherals may be reference firmware).
    fn setup_pipelining(&self) -> SetupPipelining {
        SetupPipelining::Requests
    }

    fn split(mut self) -> (GattTx, GattRx) {
        let att_mtu = self.gatt.att_mtu();
        let incoming = self.gatt.take_notifications();
        let gatt = Arc::new(self.gatt);
        let ended = gatt.clone();
        let (tx, rx) = super::split(ClientSender(gatt), incoming, att_mtu, self.queue_limit);
        (tx, rx.with_end_reason(move || ended.end_reason()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::LinkRx;
    use crate::link::ble::fake::{self, FakeGatt};

    /// A GATT client whose notifications end for a reason of its own (an app's queue that
    /// overflowed).
    struct Failing(FakeGatt);

    impl GattClient for Failing {
        fn att_mtu(&self) -> usize {
            self.0.att_mtu()
        }
        fn peer_id(&self) -> String {
            self.0.peer_id()
        }
        fn take_notifications(&mut self) -> PduStream {
            self.0.take_notifications()
        }
        async fn write_without_response(&self, pdu: &[u8]) -> Result<(), LinkError> {
            self.0.write_without_response(pdu).await
        }
        async fn disconnect(&self) -> Result<(), LinkError> {
            GattClient::disconnect(&self.0).await
        }
        fn end_reason(&self) -> Option<LinkError> {
            Some(LinkError::Transport("inbox overflow".into()))
        }
    }

    #[tokio::test]
    async fn notifications_that_end_fail_the_link_with_the_clients_reason() {
        let (central, peripheral) = fake::pair(247);
        let (_tx, mut rx) = BleCentralLink::new(Failing(central)).split();
        peripheral.handle().disconnect();
        match rx.recv().await {
            Err(LinkError::Transport(text)) => assert_eq!(text, "inbox overflow"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn without_a_reason_the_end_is_a_close() {
        let (central, peripheral) = fake::pair(247);
        let (_tx, mut rx) = BleCentralLink::new(central).split();
        peripheral.handle().disconnect();
        assert!(matches!(rx.recv().await, Ok(None)));
    }
}
