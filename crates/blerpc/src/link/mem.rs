//! An in-memory link: two ends joined by bounded channels. For tests and in-process use; it
//! behaves like any other link, flow control included (a full channel makes `flush` wait).

use tokio::sync::mpsc;

use super::{Link, LinkError, LinkRx, LinkTx, SendQueue};

/// PDUs each direction's channel holds before the sender's `flush` waits.
pub const DEFAULT_CAPACITY: usize = 64;

/// One end of an in-memory link.
#[derive(Debug)]
pub struct MemLink {
    att_mtu: usize,
    name: String,
    tx: mpsc::Sender<Vec<u8>>,
    rx: mpsc::Receiver<Vec<u8>>,
    capacity: usize,
}

/// Two connected ends with the given ATT MTU and the default channel capacity.
pub fn pair(att_mtu: usize) -> (MemLink, MemLink) {
    pair_with_capacity(att_mtu, DEFAULT_CAPACITY)
}

/// Two connected ends; each direction buffers `capacity` PDUs.
pub fn pair_with_capacity(att_mtu: usize, capacity: usize) -> (MemLink, MemLink) {
    let capacity = capacity.max(1);
    let (a_tx, b_rx) = mpsc::channel(capacity);
    let (b_tx, a_rx) = mpsc::channel(capacity);
    let a = MemLink {
        att_mtu,
        name: "mem://a".into(),
        tx: a_tx,
        rx: a_rx,
        capacity,
    };
    let b = MemLink {
        att_mtu,
        name: "mem://b".into(),
        tx: b_tx,
        rx: b_rx,
        capacity,
    };
    (a, b)
}

impl MemLink {
    /// Renames the peer id this end reports (useful when several in-memory peers share one
    /// known-keys store).
    pub fn with_peer_id(mut self, id: impl Into<String>) -> Self {
        self.name = id.into();
        self
    }
}

impl Link for MemLink {
    type Tx = MemTx;
    type Rx = MemRx;
    fn att_mtu(&self) -> usize {
        self.att_mtu
    }
    fn peer_id(&self) -> String {
        self.name.clone()
    }
    fn split(self) -> (MemTx, MemRx) {
        (
            MemTx {
                tx: self.tx,
                queue: SendQueue::for_att_mtu(self.capacity, self.att_mtu),
            },
            MemRx {
                rx: self.rx,
                current: Vec::new(),
            },
        )
    }
}

/// Transmit half of a [`MemLink`].
#[derive(Debug)]
pub struct MemTx {
    tx: mpsc::Sender<Vec<u8>>,
    queue: SendQueue,
}

impl LinkTx for MemTx {
    fn queue(&mut self, pdu: &[u8]) -> Result<(), LinkError> {
        if self.tx.is_closed() {
            return Err(LinkError::Closed);
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
            // `reserve` is cancel-safe; the PDU leaves the queue only once a slot is held.
            let permit = self.tx.reserve().await.map_err(|_| LinkError::Closed)?;
            if let Some(pdu) = self.queue.pop() {
                permit.send(pdu);
            }
        }
        Ok(())
    }
    async fn close(&mut self) -> Result<(), LinkError> {
        let flushed = self.flush().await;
        // Dropping our sender is how the peer learns we closed; replace it with a closed one.
        let (closed, _) = mpsc::channel(1);
        self.tx = closed;
        flushed
    }
}

/// Receive half of a [`MemLink`].
#[derive(Debug)]
pub struct MemRx {
    rx: mpsc::Receiver<Vec<u8>>,
    current: Vec<u8>,
}

impl LinkRx for MemRx {
    async fn recv(&mut self) -> Result<Option<&[u8]>, LinkError> {
        // `mpsc::Receiver::recv` is cancel-safe.
        match self.rx.recv().await {
            Some(pdu) => {
                self.current = pdu;
                Ok(Some(&self.current))
            }
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn pdus_cross_in_order_and_close_is_seen() {
        let (a, b) = pair(23);
        let (mut atx, _arx) = a.split();
        let (_btx, mut brx) = b.split();
        atx.queue(b"one").unwrap();
        atx.queue(b"two").unwrap();
        assert!(matches!(
            atx.queue(&[0; 21]),
            Err(LinkError::TooLarge { len: 21, max: 20 })
        ));
        atx.flush().await.unwrap();
        assert_eq!(brx.recv().await.unwrap(), Some(&b"one"[..]));
        assert_eq!(brx.recv().await.unwrap(), Some(&b"two"[..]));
        atx.close().await.unwrap();
        assert_eq!(brx.recv().await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_full_channel_makes_flush_wait_without_losing_pdus() {
        let (a, b) = pair_with_capacity(247, 2);
        let (mut atx, _arx) = a.split();
        let (_btx, mut brx) = b.split();
        for i in 0..5u8 {
            atx.queue(&[i]).unwrap();
        }
        assert!(atx.is_full());
        // The channel holds 2; a flush cannot finish until the receiver drains, and dropping the
        // unfinished flush loses nothing.
        let stalled = tokio::time::timeout(std::time::Duration::from_millis(20), atx.flush()).await;
        assert!(stalled.is_err());
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Ok(Some(p)) = brx.recv().await {
                got.push(p[0]);
                if got.len() == 5 {
                    break;
                }
            }
            got
        });
        atx.flush().await.unwrap();
        assert_eq!(reader.await.unwrap(), vec![0, 1, 2, 3, 4]);
    }
}
