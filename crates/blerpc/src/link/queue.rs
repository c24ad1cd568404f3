//! The send queue of the datagram links.

use std::collections::VecDeque;

use super::LinkError;

/// The send queue of the datagram links (in-memory, BLE, the simulated BLE link): whole PDUs
/// waiting for the transport, bounded in count ([`LinkTx::is_full`](super::LinkTx::is_full)
/// turns true at the limit) and in size (a PDU above `att_mtu − 3` is refused as
/// [`LinkError::TooLarge`]). The stream links (TCP, TLS) queue bytes instead, in their own
/// buffer.
#[derive(Debug, Default)]
pub struct SendQueue {
    pdus: VecDeque<Vec<u8>>,
    limit: usize,
    max_pdu: usize,
}

impl SendQueue {
    /// A queue of at most `limit` PDUs (at least 1) of at most `max_pdu` bytes each.
    pub fn new(limit: usize, max_pdu: usize) -> SendQueue {
        SendQueue {
            pdus: VecDeque::new(),
            limit: limit.max(1),
            max_pdu,
        }
    }

    /// A queue for a link of ATT MTU `att_mtu` (PDUs of at most `att_mtu − 3` bytes).
    pub fn for_att_mtu(limit: usize, att_mtu: usize) -> SendQueue {
        SendQueue::new(limit, att_mtu.saturating_sub(3))
    }

    /// Appends a copy of `pdu`; refuses one larger than the link carries.
    pub fn push(&mut self, pdu: &[u8]) -> Result<(), LinkError> {
        if pdu.len() > self.max_pdu {
            return Err(LinkError::TooLarge {
                len: pdu.len(),
                max: self.max_pdu,
            });
        }
        self.pdus.push_back(pdu.to_vec());
        Ok(())
    }

    /// The oldest PDU, taken out.
    pub fn pop(&mut self) -> Option<Vec<u8>> {
        self.pdus.pop_front()
    }

    /// `true` at the limit: the link's owner flushes before queueing more.
    pub fn is_full(&self) -> bool {
        self.pdus.len() >= self.limit
    }

    /// `true` when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.pdus.is_empty()
    }

    /// PDUs waiting.
    pub fn len(&self) -> usize {
        self.pdus.len()
    }

    /// The largest PDU accepted.
    pub fn max_pdu(&self) -> usize {
        self.max_pdu
    }

    /// Gives back the memory the queue grew to, when nothing waits.
    pub fn release_memory(&mut self) {
        if self.pdus.is_empty() {
            self.pdus = VecDeque::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_in_count_and_size_and_in_order() {
        let mut q = SendQueue::for_att_mtu(2, 23);
        assert_eq!(q.max_pdu(), 20);
        assert!(matches!(
            q.push(&[0; 21]),
            Err(LinkError::TooLarge { len: 21, max: 20 })
        ));
        q.push(b"one").unwrap_or_else(|e| panic!("{e}"));
        assert!(!q.is_full());
        q.push(b"two").unwrap_or_else(|e| panic!("{e}"));
        assert!(q.is_full() && q.len() == 2);
        assert_eq!(q.pop().as_deref(), Some(&b"one"[..]));
        assert_eq!(q.pop().as_deref(), Some(&b"two"[..]));
        assert!(q.is_empty() && q.pop().is_none());
        q.release_memory();
        assert_eq!(SendQueue::new(0, 10).limit, 1);
    }
}
