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
/// A data entry dropped before it was (fully) sent ([`Outbox::abort`]): skipped.
const KIND_DEAD: u8 = 0xFE;
/// A data entry that is an item of the peripheral→central stream ([`Outbox::mark_last_item`]):
/// sent as data, dropped by [`Outbox::abort_items`].
const KIND_ITEM: u8 = 0xFD;
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

/// What [`Outbox::abort`] dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Aborted {
    /// Entries dropped.
    pub(crate) entries: usize,
    /// One of them had containers sent already (it was cut short).
    pub(crate) cut: bool,
}

#[derive(Debug)]
pub(crate) struct Outbox<B: Buffer> {
    buf: B,
    head: usize,
    cursor: Option<SplitCursor>,
    limit: usize,
    /// Where the entry pushed last starts.
    last: Option<usize>,
}

impl<B: Buffer + Default> Outbox<B> {
    pub(crate) fn new(limit: usize) -> Self {
        Outbox {
            buf: B::default(),
            head: 0,
            cursor: None,
            limit,
            last: None,
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
        self.last = Some(start);
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
        self.last = Some(start);
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
        self.header_at(self.head)
    }

    fn header_at(&self, at: usize) -> Option<(u8, u8, usize)> {
        let h = self.buf.as_slice().get(at..at + ENTRY_HEADER_LEN)?;
        let (&kind, &tid) = (h.first()?, h.get(1)?);
        let len = u32::from_le_bytes(h.get(2..6)?.try_into().ok()?) as usize;
        Some((kind, tid, len))
    }

    /// Drops the data entries queued under `tid`: the one being split stops after the
    /// containers already sent, the others are never sent.
    pub(crate) fn abort(&mut self, tid: u8) -> Aborted {
        let mut at = self.head;
        let mut aborted = Aborted::default();
        while let Some((kind, t, len)) = self.header_at(at) {
            if kind == KIND_DATA && t == tid {
                if at == self.head && self.cursor.take().is_some() {
                    aborted.cut = true;
                }
                if let Some(k) = self.buf.as_mut_slice().get_mut(at) {
                    *k = KIND_DEAD;
                }
                aborted.entries += 1;
            }
            at += ENTRY_HEADER_LEN + len;
        }
        aborted
    }

    /// Marks the data entry pushed last as an item of the peripheral→central stream.
    pub(crate) fn mark_last_item(&mut self) {
        if let Some(at) = self.last
            && self
                .header_at(at)
                .is_some_and(|(kind, ..)| kind == KIND_DATA)
            && let Some(k) = self.buf.as_mut_slice().get_mut(at)
        {
            *k = KIND_ITEM;
        }
    }

    /// Drops the queued items of the current peripheral→central stream: those after the last
    /// queued STREAM_END_P2C (earlier ones belong to streams that ended). An item being split
    /// is finished. Returns how many were dropped.
    pub(crate) fn abort_items(&mut self) -> usize {
        let mut at = self.head;
        let mut first = None;
        while let Some((kind, _, len)) = self.header_at(at) {
            if kind == ControlCmd::StreamEndP2C.bits() {
                first = None;
            } else if kind == KIND_ITEM && first.is_none() {
                first = Some(at);
            }
            at += ENTRY_HEADER_LEN + len;
        }
        let Some(mut at) = first else { return 0 };
        let mut dropped = 0;
        while let Some((kind, _, len)) = self.header_at(at) {
            let in_progress = at == self.head && self.cursor.is_some();
            if kind == KIND_ITEM
                && !in_progress
                && let Some(k) = self.buf.as_mut_slice().get_mut(at)
            {
                *k = KIND_DEAD;
                dropped += 1;
            }
            at += ENTRY_HEADER_LEN + len;
        }
        dropped
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
            if kind == KIND_DEAD {
                self.pop(len);
                continue;
            }
            if kind != KIND_DATA && kind != KIND_ITEM {
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
                match SplitCursor::with_extensions(tid, len, att_mtu, large, long) {
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
        self.last = None;
        self.buf.release();
    }
}

/// Largest control payload kept in a queue entry: KEY_EXCHANGE steps 3 and 4 (every other
/// control but step 2 is shorter).
pub(crate) const SMALL_CONTROL_PAYLOAD: usize = {
    let (s3, s4) = (
        crate::wire::key_exchange::STEP3_LEN,
        crate::wire::key_exchange::STEP4_LEN,
    );
    if s3 > s4 { s3 } else { s4 }
};

/// The peripheral's large control: KEY_EXCHANGE step 2.
pub(crate) const STEP2_CONTROL_PAYLOAD: usize = crate::wire::key_exchange::STEP2_LEN;

/// Marks a queue entry whose payload is in [`ControlQueue`]'s large slot.
const IN_LARGE_SLOT: u8 = u8::MAX;

/// A control container waiting in the priority queue: `len` payload bytes, or the large slot's
/// frame when `len` is [`IN_LARGE_SLOT`].
#[derive(Clone, Copy, Debug)]
struct ControlFrame<const N: usize> {
    tid: u8,
    cmd: ControlCmd,
    len: u8,
    payload: [u8; N],
}

impl<const N: usize> ControlFrame<N> {
    fn new(tid: u8, cmd: ControlCmd, payload: &[u8]) -> Option<Self> {
        let mut buf = [0u8; N];
        buf.get_mut(..payload.len())?.copy_from_slice(payload);
        Some(ControlFrame {
            tid,
            cmd,
            len: u8::try_from(payload.len())
                .ok()
                .filter(|&l| l != IN_LARGE_SLOT)?,
            payload: buf,
        })
    }

    fn emit(&self, out: &mut [u8]) -> Option<usize> {
        let payload = self.payload.get(..usize::from(self.len))?;
        Container::control(self.tid, self.cmd, payload)
            .emit(out)
            .ok()
    }
}

/// The control queue was full; the frame was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ControlQueueFull;

/// Control replies sent ahead of queued data, in order. Small and fixed: the state machines never
/// have more than a handful outstanding; a full queue refuses the newest frame (reported by the
/// caller).
///
/// Entries hold up to [`SMALL_CONTROL_PAYLOAD`] bytes. A payload up to `LARGE` bytes (the
/// peripheral's KEY_EXCHANGE step 2, `LARGE` = [`STEP2_CONTROL_PAYLOAD`]; the central has none,
/// `LARGE` = 0) waits in one large slot instead of making every entry that size (552 → 352 bytes
/// per peripheral, 224 per central). A second large frame queued while one still waits replaces
/// it, in the older one's place: a step 2 answers the latest step 1, and the peripheral's
/// handshake has already moved on from the older one, which could never complete.
#[derive(Debug)]
pub(crate) struct ControlQueue<const LARGE: usize> {
    frames: Ring<ControlFrame<SMALL_CONTROL_PAYLOAD>, 4>,
    large: Option<ControlFrame<LARGE>>,
}

impl<const LARGE: usize> ControlQueue<LARGE> {
    pub(crate) const fn new() -> Self {
        ControlQueue {
            frames: Ring::new(),
            large: None,
        }
    }

    /// Queues one control container. Refused when the queue is full or `payload` is longer than
    /// this queue can hold (neither happens to the central, whose setup has one control
    /// outstanding at a time).
    pub(crate) fn push(
        &mut self,
        tid: u8,
        cmd: ControlCmd,
        payload: &[u8],
    ) -> Result<(), ControlQueueFull> {
        if payload.len() <= SMALL_CONTROL_PAYLOAD {
            let frame = ControlFrame::new(tid, cmd, payload).ok_or(ControlQueueFull)?;
            return self.frames.push(frame).map_err(|_| ControlQueueFull);
        }
        let frame = ControlFrame::<LARGE>::new(tid, cmd, payload).ok_or(ControlQueueFull)?;
        if self.large.is_none() {
            let marker = ControlFrame {
                tid,
                cmd,
                len: IN_LARGE_SLOT,
                payload: [0; SMALL_CONTROL_PAYLOAD],
            };
            self.frames.push(marker).map_err(|_| ControlQueueFull)?;
        }
        self.large = Some(frame);
        Ok(())
    }

    /// Writes the next queued control container into `out`; frames that do not fit `out` are
    /// dropped (they never happen at a supported MTU).
    #[inline]
    pub(crate) fn emit_next(&mut self, out: &mut [u8]) -> Option<usize> {
        // Almost always empty: keep the callers' `poll_transmit` small enough to inline.
        if self.frames.len() == 0 {
            return None;
        }
        self.emit_queued(out)
    }

    #[cold]
    fn emit_queued(&mut self, out: &mut [u8]) -> Option<usize> {
        while let Some(frame) = self.frames.pop() {
            let n = if frame.len == IN_LARGE_SLOT {
                self.large.take().and_then(|large| large.emit(out))
            } else {
                frame.emit(out)
            };
            if n.is_some() {
                return n;
            }
        }
        None
    }

    /// Frames waiting.
    pub(crate) fn len(&self) -> usize {
        self.frames.len()
    }

    /// Drops every waiting frame.
    pub(crate) fn clear(&mut self) {
        self.frames.clear();
        self.large = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::ArrayBuf;

    fn step2(first: u8) -> [u8; STEP2_CONTROL_PAYLOAD] {
        core::array::from_fn(|i| if i == 0 { first } else { i as u8 })
    }

    #[test]
    fn control_queue_keeps_order_through_the_large_slot() {
        let mut q: ControlQueue<STEP2_CONTROL_PAYLOAD> = ControlQueue::new();
        let kx = step2(2);
        q.push(1, ControlCmd::Error, &[0x07]).unwrap();
        q.push(2, ControlCmd::KeyExchange, &kx).unwrap();
        q.push(3, ControlCmd::Error, &[0x08]).unwrap();
        assert_eq!(q.len(), 3);
        let mut out = [0u8; 244];
        let n = q.emit_next(&mut out).unwrap();
        assert_eq!(&out[..n], &[0x01, 0x00, 0xd4, 0x01, 0x07]);
        let n = q.emit_next(&mut out).unwrap();
        assert_eq!(&out[..4], &[0x02, 0x00, 0xd8, 129]);
        assert_eq!(&out[4..n], &kx[..]);
        let n = q.emit_next(&mut out).unwrap();
        assert_eq!(&out[..n], &[0x03, 0x00, 0xd4, 0x01, 0x08]);
        assert_eq!(q.emit_next(&mut out), None);
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn a_newer_step2_replaces_the_waiting_one_in_its_place() {
        let mut q: ControlQueue<STEP2_CONTROL_PAYLOAD> = ControlQueue::new();
        q.push(2, ControlCmd::KeyExchange, &step2(0xa0)).unwrap();
        q.push(3, ControlCmd::Error, &[0x08]).unwrap();
        q.push(4, ControlCmd::KeyExchange, &step2(0xb0)).unwrap();
        assert_eq!(q.len(), 2);
        let mut out = [0u8; 244];
        let n = q.emit_next(&mut out).unwrap();
        assert_eq!(&out[..5], &[0x04, 0x00, 0xd8, 129, 0xb0]);
        assert_eq!(n, 4 + 129);
        let n = q.emit_next(&mut out).unwrap();
        assert_eq!(&out[..n], &[0x03, 0x00, 0xd4, 0x01, 0x08]);
        assert_eq!(q.emit_next(&mut out), None);
        // The slot is free again: the next step 2 gets an entry of its own.
        q.push(5, ControlCmd::KeyExchange, &step2(0xc0)).unwrap();
        assert_eq!(q.len(), 1);
        let n = q.emit_next(&mut out).unwrap();
        assert_eq!(&out[..5], &[0x05, 0x00, 0xd8, 129, 0xc0]);
        assert_eq!(n, 4 + 129);
    }

    #[test]
    fn control_queue_refuses_when_full_or_too_long() {
        let mut q: ControlQueue<STEP2_CONTROL_PAYLOAD> = ControlQueue::new();
        for tid in 0..4 {
            q.push(tid, ControlCmd::Error, &[tid]).unwrap();
        }
        assert_eq!(q.push(4, ControlCmd::Error, &[4]), Err(ControlQueueFull));
        // No entry for a step 2 either, and the large slot stays empty.
        assert_eq!(
            q.push(5, ControlCmd::KeyExchange, &step2(1)),
            Err(ControlQueueFull)
        );
        let mut out = [0u8; 244];
        for tid in 0..4u8 {
            let n = q.emit_next(&mut out).unwrap();
            assert_eq!(&out[..n], &[tid, 0x00, 0xd4, 0x01, tid]);
        }
        assert_eq!(q.emit_next(&mut out), None);
        // Longer than the large slot.
        assert_eq!(
            q.push(6, ControlCmd::KeyExchange, &[0; STEP2_CONTROL_PAYLOAD + 1]),
            Err(ControlQueueFull)
        );
        // The central's queue has no large slot: 45 bytes (step 3) fit, 46 do not.
        let mut c: ControlQueue<0> = ControlQueue::new();
        c.push(7, ControlCmd::KeyExchange, &[3; SMALL_CONTROL_PAYLOAD])
            .unwrap();
        assert_eq!(
            c.push(8, ControlCmd::KeyExchange, &[3; SMALL_CONTROL_PAYLOAD + 1]),
            Err(ControlQueueFull)
        );
        assert_eq!(c.len(), 1);
        assert_eq!(SMALL_CONTROL_PAYLOAD, 45);
    }

    #[test]
    fn control_queue_sizes() {
        // The figures the type's docs quote (x86_64): four entries of 129 bytes took 552.
        use core::mem::size_of;
        assert_eq!(size_of::<ControlQueue<STEP2_CONTROL_PAYLOAD>>(), 352);
        assert_eq!(size_of::<ControlQueue<0>>(), 224);
    }

    #[test]
    fn control_queue_clear_and_small_output() {
        let mut q: ControlQueue<STEP2_CONTROL_PAYLOAD> = ControlQueue::new();
        q.push(2, ControlCmd::KeyExchange, &step2(9)).unwrap();
        q.clear();
        let mut out = [0u8; 244];
        assert_eq!(q.emit_next(&mut out), None);
        // A frame that does not fit `out` is dropped and the next one written.
        q.push(2, ControlCmd::KeyExchange, &step2(9)).unwrap();
        q.push(3, ControlCmd::Error, &[0x08]).unwrap();
        let mut small = [0u8; 20];
        let n = q.emit_next(&mut small).unwrap();
        assert_eq!(&small[..n], &[0x03, 0x00, 0xd4, 0x01, 0x08]);
        assert_eq!(q.emit_next(&mut small), None);
    }

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
    fn an_aborted_message_stops_where_it_was_and_the_queue_goes_on() {
        let mut ob: Outbox<ArrayBuf<512>> = Outbox::new(512);
        let msg: [u8; 40] = core::array::from_fn(|i| i as u8);
        for tid in [0x2a, 0x2b, 0x2a] {
            ob.push_data_with::<()>(tid, msg.len(), |b| {
                b.copy_from_slice(&msg);
                Ok(())
            })
            .unwrap();
        }
        ob.push_control(0x2c, ControlCmd::StreamEndP2C, &[])
            .unwrap();
        let mut out = [0u8; 20];
        // MTU 23: the first message's FIRST goes out, then tid 0x2a is aborted.
        ob.poll_transmit(23, false, false, &mut out).unwrap();
        assert_eq!(&out[..3], &[0x2a, 0x00, 0x00]);
        assert_eq!(
            ob.abort(0x2a),
            Aborted {
                entries: 2,
                cut: true
            }
        );
        // The other message, whole, then the control: nothing more of 0x2a.
        let n = ob.poll_transmit(23, false, false, &mut out).unwrap();
        assert_eq!(&out[..6], &[0x2b, 0x00, 0x00, 40, 0, 14]);
        assert_eq!(n, 20);
        ob.poll_transmit(23, false, false, &mut out).unwrap();
        let n = ob.poll_transmit(23, false, false, &mut out).unwrap();
        assert_eq!(&out[..4], &[0x2b, 0x02, 0x40, 10]);
        assert_eq!(n, 14);
        let n = ob.poll_transmit(23, false, false, &mut out).unwrap();
        assert_eq!(&out[..n], &[0x2c, 0x00, 0xcc, 0x00]);
        assert_eq!(ob.poll_transmit(23, false, false, &mut out), None);
        assert!(ob.is_empty());
        assert_eq!(ob.abort(0x2a), Aborted::default(), "nothing left under it");
        // A message not started yet goes whole: nothing of it was sent.
        ob.push_data_with::<()>(0x2d, 4, |b| {
            b.copy_from_slice(&[1, 2, 3, 4]);
            Ok(())
        })
        .unwrap();
        assert_eq!(
            ob.abort(0x2d),
            Aborted {
                entries: 1,
                cut: false
            }
        );
        assert_eq!(ob.poll_transmit(23, false, false, &mut out), None);
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
