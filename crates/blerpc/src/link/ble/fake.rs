//! An in-memory BLE connection for tests: one [`FakeGatt`] is the central's GATT client, the
//! other the peripheral's session, so [`super::central::BleCentralLink`] and
//! [`super::peripheral::BlePeripheralLink`] run end to end without a Bluetooth controller.
//!
//! Each direction models a stack's write-without-response (or notification) buffer: it holds
//! [`FakeOptions::credits`] PDUs, and the radio takes [`FakeOptions::air_time`] to send each one.
//! Like CoreBluetooth, a write into a full buffer is **dropped silently**;
//! [`FakeGatt`]'s `ready()` waits for room (`canSendWriteWithoutResponse`). With
//! [`FakeOptions::flow_control`] off, `ready()` returns at once, as on a stack that does not expose
//! its credits, and writes are lost under load.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{mpsc, watch};

use super::PduStream;
use crate::link::LinkError;

/// How the fake stack behaves (both directions).
#[derive(Clone, Copy, Debug)]
pub struct FakeOptions {
    /// PDUs the stack buffers per direction. Default 8.
    pub credits: usize,
    /// Radio time per PDU. Default zero.
    pub air_time: Duration,
    /// `ready()` waits for a free credit. Default `true`.
    pub flow_control: bool,
}

impl Default for FakeOptions {
    fn default() -> Self {
        FakeOptions {
            credits: 8,
            air_time: Duration::ZERO,
            flow_control: true,
        }
    }
}

/// Counters of one [`FakeGatt`]'s outgoing direction.
#[derive(Debug, Default)]
struct Counters {
    sent: AtomicU64,
    dropped: AtomicU64,
}

/// One end of a fake GATT connection.
#[derive(Debug)]
pub struct FakeGatt {
    tx: mpsc::Sender<Vec<u8>>,
    rx: Option<mpsc::Receiver<Vec<u8>>>,
    att_mtu: usize,
    peer_id: String,
    options: FakeOptions,
    counters: Arc<Counters>,
    connected: Arc<watch::Sender<bool>>,
}

/// A connected pair (central end, peripheral end) with default [`FakeOptions`].
pub fn pair(att_mtu: usize) -> (FakeGatt, FakeGatt) {
    pair_with(att_mtu, FakeOptions::default())
}

/// A connected pair (central end, peripheral end).
pub fn pair_with(att_mtu: usize, options: FakeOptions) -> (FakeGatt, FakeGatt) {
    let credits = options.credits.max(1);
    let (c2p_tx, c2p_rx) = mpsc::channel(credits);
    let (p2c_tx, p2c_rx) = mpsc::channel(credits);
    let connected = Arc::new(watch::Sender::new(true));
    let central = FakeGatt {
        tx: c2p_tx,
        rx: Some(p2c_rx),
        att_mtu,
        peer_id: "ble://fake-peripheral".into(),
        options,
        counters: Arc::default(),
        connected: connected.clone(),
    };
    let peripheral = FakeGatt {
        tx: p2c_tx,
        rx: Some(c2p_rx),
        att_mtu,
        peer_id: "ble://fake-central".into(),
        options,
        counters: Arc::default(),
        connected,
    };
    (central, peripheral)
}

/// A handle on a [`FakeGatt`]'s counters and connection, usable after the link took the end.
#[derive(Clone, Debug)]
pub struct FakeHandle {
    counters: Arc<Counters>,
    connected: Arc<watch::Sender<bool>>,
}

impl FakeHandle {
    /// PDUs this end's stack accepted.
    pub fn sent(&self) -> u64 {
        self.counters.sent.load(Ordering::Relaxed)
    }
    /// PDUs this end's stack dropped because its buffer was full.
    pub fn dropped(&self) -> u64 {
        self.counters.dropped.load(Ordering::Relaxed)
    }
    /// Drops the connection, as a radio link loss would.
    pub fn disconnect(&self) {
        self.connected.send_replace(false);
    }
}

impl FakeGatt {
    /// A handle on this end's counters and connection.
    pub fn handle(&self) -> FakeHandle {
        FakeHandle {
            counters: self.counters.clone(),
            connected: self.connected.clone(),
        }
    }

    fn incoming(&mut self) -> PduStream {
        let Some(rx) = self.rx.take() else {
            return Box::pin(futures_util::stream::empty());
        };
        let air_time = self.options.air_time;
        let mut down = self.connected.subscribe();
        let disconnected = async move {
            let _ = down.wait_for(|up| !*up).await;
        };
        // The PDU at the head keeps its credit while it is on the air.
        let received = futures_util::stream::unfold(rx, move |mut rx| async move {
            if !air_time.is_zero() {
                tokio::time::sleep(air_time).await;
            }
            rx.recv().await.map(|pdu| (pdu, rx))
        });
        Box::pin(received.take_until(Box::pin(disconnected)))
    }

    async fn wait_ready(&self) -> Result<(), LinkError> {
        if !*self.connected.borrow() {
            return Err(LinkError::Closed);
        }
        if self.options.flow_control {
            // Hold a credit and give it back: only the writer task writes, so it stays free.
            let permit = self.tx.reserve().await.map_err(|_| LinkError::Closed)?;
            drop(permit);
        }
        Ok(())
    }

    fn write(&self, pdu: &[u8]) -> Result<(), LinkError> {
        if !*self.connected.borrow() {
            return Err(LinkError::Closed);
        }
        if pdu.len() > self.att_mtu.saturating_sub(3) {
            return Err(LinkError::Transport(format!(
                "ATT value of {} bytes exceeds MTU {}",
                pdu.len(),
                self.att_mtu
            )));
        }
        match self.tx.try_send(pdu.to_vec()) {
            Ok(()) => {
                self.counters.sent.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                // What CoreBluetooth does when `canSendWriteWithoutResponse` was not checked.
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(LinkError::Closed),
        }
    }
}

#[cfg(feature = "ble-gatt")]
impl super::central::GattClient for FakeGatt {
    fn att_mtu(&self) -> usize {
        self.att_mtu
    }
    fn peer_id(&self) -> String {
        self.peer_id.clone()
    }
    fn take_notifications(&mut self) -> PduStream {
        self.incoming()
    }
    async fn ready(&self) -> Result<(), LinkError> {
        self.wait_ready().await
    }
    async fn write_without_response(&self, pdu: &[u8]) -> Result<(), LinkError> {
        self.write(pdu)
    }
    async fn disconnect(&self) -> Result<(), LinkError> {
        self.connected.send_replace(false);
        Ok(())
    }
}

#[cfg(feature = "ble-peripheral")]
impl super::peripheral::GattServer for FakeGatt {
    fn att_mtu(&self) -> usize {
        self.att_mtu
    }
    fn peer_id(&self) -> String {
        self.peer_id.clone()
    }
    fn take_writes(&mut self) -> PduStream {
        self.incoming()
    }
    async fn ready(&self) -> Result<(), LinkError> {
        self.wait_ready().await
    }
    async fn notify(&self, pdu: &[u8]) -> Result<(), LinkError> {
        self.write(pdu)
    }
    async fn disconnect(&self) -> Result<(), LinkError> {
        self.connected.send_replace(false);
        Ok(())
    }
}
