//! The queue of messages waiting for the link, split into containers lazily.
//!
//! Entries are stored back to back in one [`Buffer`]:
//!
//! ```text
//! [kind u8][tid u8][len u32 LE][body: len bytes]
//! kind 0xFF = data message (split into FIRST/SUBSEQUENT containers)
//! kind 0x00..=0x0F = control command; body is the control payload (one CONTROL container)
//! ```
//!
//! Control entries in this queue are the ones whose order relative to data matters
//! (STREAM_END_C2P after the last upload item, STREAM_END_P2C after the last stream item).
//! Replies that must not wait behind a long response (TIMEOUT, CAPABILITIES, KEY_EXCHANGE, ERROR)
//! go through the small priority [`ControlQueue`] instead.

use crate::buf::Buffer;
use crate::split::SplitCursor;
use crate::wire::container::{Container, ControlCmd};

use super::events::Ring;

const KIND_DATA: u8 = 0xFF;
pub(crate) const ENTRY_HEADER_LEN: usize = 6;

/// The outbox could not take an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Full {
    pub(crate) needed: usize,
    pub(crate) free: usize,
}

/// Why filling a reserved data entry failed.
#[derive(Debug)]
pub(crate) enum PushError<E> {
    Full(Full),
    Fill(E),
}

#[derive(Debug)]
pub(crate) struct Outbox<B: Buffer> {
    buf: B,
    head: usize,
    cursor: Option<SplitCursor>,
    limit: usize,
}

impl<B: Buffer + Default> Outbox<B> {
    pub(crate) fn new(limit: usize) -> Self {
        Outbox {
            buf: B::default(),
            head: 0,
            cursor: None,
            limit,
        }
    }
}

impl<B: Buffer> Outbox<B> {
    /// Bytes queued and not yet fully transmitted (entry headers included).
    pub(crate) fn queued(&self) -> usize {
        self.buf.len().saturating_sub(self.head)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queued() == 0
    }

    /// The largest message body one entry can ever hold (the limit, or the buffer's own
    /// capacity, minus the entry header): a larger message can never be queued.
    pub(crate) fn max_body(&self) -> usize {
        self.limit
            .min(self.buf.capacity_limit())
            .saturating_sub(ENTRY_HEADER_LEN)
    }

    /// Bytes a new entry may still use (header included).
    pub(crate) fn free(&self) -> usize {
        self.limit
            .min(self.buf.capacity_limit())
            .saturating_sub(self.queued())
    }

    /// Appends a data entry of `body_len` bytes and lets `fill` write the body. On any failure
    /// the queue is left exactly as it was.
    pub(crate) fn push_data_with<E>(
        &mut self,
        tid: u8,
        body_len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<(), PushError<E>> {
        let start = self
            .reserve(KIND_DATA, tid, body_len)
            .map_err(PushError::Full)?;
        let body_start = start + ENTRY_HEADER_LEN;
        let result = match self
            .buf
            .as_mut_slice()
            .get_mut(body_start..body_start + body_len)
        {
            Some(body) => fill(body),
            None => Ok(()),
        };
        if let Err(e) = result {
            self.buf.truncate(start);
            return Err(PushError::Fill(e));
        }
        Ok(())
    }

    /// Appends a data entry whose body is the concatenation of `parts` (copied once, never
    /// zero-filled first), then lets `seal` transform the body in place. On any failure the
    /// queue is left exactly as it was.
    pub(crate) fn push_data_parts<E>(
        &mut self,
        tid: u8,
        parts: &[&[u8]],
        seal: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<(), PushError<E>> {
        let body_len = parts
            .iter()
            .map(|p| p.len())
            .fold(0usize, usize::saturating_add);
        let needed = ENTRY_HEADER_LEN.saturating_add(body_len);
        let free = self.free();
        let full = Full { needed, free };
        let len32 = u32::try_from(body_len).map_err(|_| PushError::Full(full))?;
        if needed > free {
            return Err(PushError::Full(full));
        }
        self.compact_if_needed(needed);
        let start = self.buf.len();
        let [l0, l1, l2, l3] = len32.to_le_bytes();
        let header = [KIND_DATA, tid, l0, l1, l2, l3];
        let written = self.buf.try_reserve(needed).is_ok()
            && self.buf.try_extend(&header).is_ok()
            && parts.iter().all(|p| self.buf.try_extend(p).is_ok());
        if !written {
            self.buf.truncate(start);
            return Err(PushError::Full(full));
        }
        let body_start = start + ENTRY_HEADER_LEN;
        let result = match self.buf.as_mut_slice().get_mut(body_start..) {
            Some(body) => seal(body),
            None => Ok(()),
        };
        if let Err(e) = result {
            self.buf.truncate(start);
            return Err(PushError::Fill(e));
        }
        Ok(())
    }

    /// Appends a control entry, sent as one CONTROL container in queue order.
    pub(crate) fn push_control(
        &mut self,
        tid: u8,
        cmd: ControlCmd,
        payload: &[u8],
    ) -> Result<(), Full> {
        let start = self.reserve(cmd.bits(), tid, payload.len())?;
        let body_start = start + ENTRY_HEADER_LEN;
        if let Some(dst) = self
            .buf
            .as_mut_slice()
            .get_mut(body_start..body_start + payload.len())
        {
            dst.copy_from_slice(payload);
        }
        Ok(())
    }

    /// Makes room for an entry and writes its header; returns the entry's offset.
    fn reserve(&mut self, kind: u8, tid: u8, body_len: usize) -> Result<usize, Full> {
        let needed = ENTRY_HEADER_LEN.saturating_add(body_len);
        let free = self.free();
        let len32 = u32::try_from(body_len).map_err(|_| Full { needed, free })?;
        if needed > free {
            return Err(Full { needed, free });
        }
        self.compact_if_needed(needed);
        let start = self.buf.len();
        self.buf
            .try_resize(start + needed)
            .map_err(|_| Full { needed, free })?;
        if let Some(h) = self
            .buf
            .as_mut_slice()
            .get_mut(start..start + ENTRY_HEADER_LEN)
        {
            h.copy_from_slice(&[kind, tid, 0, 0, 0, 0]);
            if let Some(l) = h.get_mut(2..6) {
                l.copy_from_slice(&len32.to_le_bytes());
            }
        }
        Ok(start)
    }

    /// Moves the live entries to the front when the buffer's own capacity would not hold the
    /// new entry otherwise (fixed buffers), or when more than half of it is dead space.
    fn compact_if_needed(&mut self, needed: usize) {
        if self.head == 0 {
            return;
        }
        let len = self.buf.len();
        let over_capacity = len.saturating_add(needed) > self.buf.capacity_limit();
        if over_capacity || self.head > len / 2 {
            self.buf.as_mut_slice().copy_within(self.head..len, 0);
            self.buf.truncate(len - self.head);
            self.head = 0;
        }
    }

    fn entry_header(&self) -> Option<(u8, u8, usize)> {
        let h = self
            .buf
            .as_slice()
            .get(self.head..self.head + ENTRY_HEADER_LEN)?;
        let (&kind, &tid) = (h.first()?, h.get(1)?);
        let len = u32::from_le_bytes(h.get(2..6)?.try_into().ok()?) as usize;
        Some((kind, tid, len))
    }

    fn pop(&mut self, body_len: usize) {
        self.head = self.head.saturating_add(ENTRY_HEADER_LEN + body_len);
        self.cursor = None;
        if self.head >= self.buf.len() {
            // Keep the capacity for the next message; `release_memory` frees it when idle.
            self.head = 0;
            self.buf.clear();
        }
    }

    /// Writes the next container into `out`. `out` must hold `att_mtu - 3` bytes, or
    /// `MAX_LONG_CONTAINER_LEN` with `long`. With `large` (the large-message extension in force),
    /// messages that do not fit a classic transaction start with a LARGE FIRST container; with
    /// `long` (the long-container extension in force), containers are up to 16 KiB.
    pub(crate) fn poll_transmit(
        &mut self,
        att_mtu: usize,
        large: bool,
        long: bool,
        out: &mut [u8],
    ) -> Option<usize> {
        loop {
            let (kind, tid, len) = self.entry_header()?;
            let body_start = self.head + ENTRY_HEADER_LEN;
            if kind != KIND_DATA {
                let body = self.buf.as_slice().get(body_start..body_start + len)?;
                let c = Container::control(tid, ControlCmd::from_bits(kind), body);
                let n = c.emit(out).ok();
                self.pop(len);
                match n {
                    Some(n) => return Some(n),
                    None => continue,
                }
            }
            if self.cursor.is_none() {
                let cursor = if long {
                    SplitCursor::new_long(tid, len, large)
                } else if large {
                    SplitCursor::new_large(tid, len, att_mtu)
                } else {
                    SplitCursor::new(tid, len, att_mtu)
                };
                match cursor {
                    Ok(c) => self.cursor = Some(c),
                    Err(_) => {
                        // Only possible if the MTU shrank after the entry was queued; the
                        // entry cannot be sent at all, so drop it.
                        self.pop(len);
                        continue;
                    }
                }
            }
            let body = self.buf.as_slice().get(body_start..body_start + len)?;
            let cursor = self.cursor.as_mut()?;
            match cursor.emit_next(body, out) {
                Ok(Some(n)) => {
                    if cursor.is_done() {
                        self.pop(len);
                    }
                    return Some(n);
                }
                Ok(None) => {
                    self.pop(len);
                }
                Err(_) => return None,
            }
        }
    }

    /// Frees the buffer's heap memory if nothing is queued.
    pub(crate) fn release_memory(&mut self) {
        if self.is_empty() {
            self.head = 0;
            self.cursor = None;
            self.buf.release();
        }
    }

    /// Drops everything queued and frees heap memory.
    pub(crate) fn clear(&mut self) {
        self.head = 0;
        self.cursor = None;
        self.buf.release();
    }
}

/// Largest control payload (KEY_EXCHANGE step 2).
pub(crate) const MAX_CONTROL_PAYLOAD: usize = crate::wire::key_exchange::STEP2_LEN;

/// A control container waiting in the priority queue.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ControlFrame {
    tid: u8,
    cmd: ControlCmd,
    len: u8,
    payload: [u8; MAX_CONTROL_PAYLOAD],
}

impl ControlFrame {
    pub(crate) fn new(tid: u8, cmd: ControlCmd, payload: &[u8]) -> Option<Self> {
        let mut buf = [0u8; MAX_CONTROL_PAYLOAD];
        buf.get_mut(..payload.len())?.copy_from_slice(payload);
        Some(ControlFrame {
            tid,
            cmd,
            len: u8::try_from(payload.len()).ok()?,
            payload: buf,
        })
    }

    pub(crate) fn emit(&self, out: &mut [u8]) -> Option<usize> {
        let payload = self.payload.get(..usize::from(self.len))?;
        Container::control(self.tid, self.cmd, payload)
            .emit(out)
            .ok()
    }
}

/// Control replies sent ahead of queued data. Small and fixed: the state machines never have
/// more than a handful outstanding; a full queue drops the newest frame (reported by the caller).
pub(crate) type ControlQueue = Ring<ControlFrame, 4>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::ArrayBuf;

    #[test]
    fn data_entry_is_split_and_control_keeps_order() {
        let mut ob: Outbox<ArrayBuf<512>> = Outbox::new(512);
        let msg: [u8; 40] = core::array::from_fn(|i| i as u8);
        ob.push_data_with::<()>(0x2a, msg.len(), |b| {
            b.copy_from_slice(&msg);
            Ok(())
        })
        .unwrap();
        ob.push_control(0x2b, ControlCmd::StreamEndC2P, &[])
            .unwrap();
        let mut out = [0u8; 20];
        // MTU 23: FIRST carries 14 bytes, SUBSEQUENT 16.
        let n = ob.poll_transmit(23, false, false, &mut out).unwrap();
        assert_eq!(&out[..6], &[0x2a, 0x00, 0x00, 40, 0, 14]);
        assert_eq!(n, 20);
        let n = ob.poll_transmit(23, false, false, &mut out).unwrap();
        assert_eq!(&out[..4], &[0x2a, 0x01, 0x40, 16]);
        assert_eq!(n, 20);
        let n = ob.poll_transmit(23, false, false, &mut out).unwrap();
        assert_eq!(
            &out[..n],
            &[&[0x2a, 0x02, 0x40, 10][..], &msg[30..]].concat()[..]
        );
        let n = ob.poll_transmit(23, false, false, &mut out).unwrap();
        assert_eq!(&out[..n], &[0x2b, 0x00, 0xc8, 0x00]);
        assert_eq!(ob.poll_transmit(23, false, false, &mut out), None);
        assert!(ob.is_empty());
    }

    #[test]
    fn limit_is_enforced_and_failed_fill_leaves_no_trace() {
        let mut ob: Outbox<ArrayBuf<64>> = Outbox::new(32);
        assert_eq!(
            ob.push_control(1, ControlCmd::Error, &[0; 40]),
            Err(Full {
                needed: 46,
                free: 32
            })
        );
        let r = ob.push_data_with(1, 10, |_| Err("nope"));
        assert!(matches!(r, Err(PushError::Fill("nope"))));
        assert!(ob.is_empty());
    }

    #[test]
    fn fixed_buffer_compacts_to_reuse_space() {
        let mut ob: Outbox<ArrayBuf<32>> = Outbox::new(32);
        let mut out = [0u8; 64];
        for round in 0..10u8 {
            ob.push_data_with::<()>(round, 10, |b| {
                b.fill(round);
                Ok(())
            })
            .unwrap();
            ob.push_data_with::<()>(round, 10, |b| {
                b.fill(round);
                Ok(())
            })
            .unwrap();
            assert!(ob.poll_transmit(247, false, false, &mut out).is_some());
            assert!(ob.poll_transmit(247, false, false, &mut out).is_some());
            assert!(ob.is_empty());
        }
    }
}
