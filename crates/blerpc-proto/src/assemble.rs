//! Reassembling messages from FIRST and SUBSEQUENT containers, several transactions at a time.
//!
//! ```text
//! FIRST      [tid][seq 0][0x00][total_length u16][payload_len][chunk 0]   starts slot for tid
//! LARGE FIRST [tid][seq 0][0x01][total_length u32][payload_len][chunk 0]  same, seq wraps mod 256
//!                                                  (only with AssemblerConfig::large_messages)
//! SUBSEQUENT [tid][seq n][0x40][payload_len][chunk n]                      appends if n == expected
//! CONTROL    [tid][0][0xC0|cmd<<2][...]                                    ignored (Ok(None))
//! type 0b10  [tid][seq][0x80][...]                                         ignored (Ok(None))
//!
//! slot:  Free -> Receiving { tid, expected_seq, total } -> Complete -> (release) Free
//! ```
//!
//! Behaviour, compared with the reference:
//! - FIRST (re)starts the transaction of its tid; a `total_length` of 0 completes at once.
//! - A SUBSEQUENT whose seq is not the expected one drops the transaction
//!   ([`AssembleError::SequenceGap`]); one for a tid with nothing in progress is reported as
//!   [`AssembleError::UnknownTransaction`] and changes nothing.
//! - Bytes beyond `total_length` are cut off, as the reference does.
//! - Unlike the reference (which has no limit, or one fixed C buffer), `total_length` above
//!   [`AssemblerConfig::max_message_len`] or the buffer's capacity is rejected at FIRST, and at
//!   most [`AssemblerConfig::max_in_flight`] slots are in use at once.
//! - Unlike the C assembler, a 256-container message (seq 0..=255) assembles, and a CONTROL or
//!   undefined-type container is never taken for a SUBSEQUENT one (Python 0.8.0 does that).
//! - A failed feed leaves no partial state behind for that tid.
//! - Long-container extension: a LONG container (payload above 255 bytes) is accepted only when
//!   [`AssemblerConfig::long_containers`] is set, and never above [`MAX_LONG_CONTAINER_LEN`]
//!   bytes ([`AssembleError::ContainerTooLong`]; the transaction of its tid is dropped).
//! - Large-message extension: a LARGE FIRST container is accepted only when
//!   [`AssemblerConfig::large_messages`] is set (otherwise
//!   [`AssembleError::LargeNotNegotiated`]); its SUBSEQUENT containers count seq 1..=255, 0, 1, ...
//!   and the transaction ends when `total_length` bytes have arrived. Memory is reserved at most
//!   [`RESERVE_AHEAD`] bytes ahead of what has arrived, so a 6-byte header announcing 4 GiB
//!   commits nothing more than a small one.
//!
//! A completed message stays in its slot, where it can be decrypted in place with
//! [`Assembler::message_mut`], until [`Assembler::release`]; `Vec` buffers give their memory back
//! then, so idle slots hold no heap memory.

use crate::buf::Buffer;
use crate::wire::container::{Container, ContainerKind, MAX_CHUNK_LEN, MAX_LONG_CONTAINER_LEN};

/// Limits of an [`Assembler`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AssemblerConfig {
    /// The largest `total_length` accepted (default 65 535, the protocol maximum).
    pub max_message_len: usize,
    /// Transactions in progress or completed-but-unreleased at once (default 4); clamped to the
    /// assembler's `SLOTS`.
    pub max_in_flight: usize,
    /// Accept LARGE FIRST containers (the large-message extension is in force). Default `false`.
    pub large_messages: bool,
    /// Accept LONG containers, up to [`MAX_LONG_CONTAINER_LEN`] bytes (the long-container
    /// extension is in force). Default `false`.
    pub long_containers: bool,
}

impl Default for AssemblerConfig {
    fn default() -> Self {
        AssemblerConfig {
            max_message_len: 65_535,
            max_in_flight: 4,
            large_messages: false,
            long_containers: false,
        }
    }
}

/// A handle to a completed message, valid until it is given to [`Assembler::release`] (or the
/// assembler is [`reset`](Assembler::reset)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completed {
    /// The transaction id the message arrived with.
    pub tid: u8,
    slot: usize,
}

/// A container that could not be taken into reassembly. The transaction of `tid` (if any) has
/// been dropped, except for [`AssembleError::UnknownTransaction`], which changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AssembleError {
    /// A SUBSEQUENT container did not carry the next seq.
    SequenceGap {
        /// The transaction.
        tid: u8,
        /// The seq that was expected (wraps to 0 after 255: nothing can follow seq 255).
        expected: u8,
        /// The seq that arrived.
        got: u8,
    },
    /// A FIRST container announced more bytes than the assembler accepts.
    TooLarge {
        /// The transaction.
        tid: u8,
        /// The announced `total_length`.
        total_length: usize,
        /// The limit: `max_message_len`, or less if the buffer cannot hold that much.
        limit: usize,
    },
    /// A FIRST container arrived while `max_in_flight` slots are in use.
    NoFreeSlot {
        /// The transaction that was refused.
        tid: u8,
    },
    /// A SUBSEQUENT container for a tid with no transaction in progress (ignored).
    UnknownTransaction {
        /// The tid.
        tid: u8,
        /// Its seq.
        seq: u8,
    },
    /// The buffer could not grow (allocation failure).
    Capacity {
        /// The transaction.
        tid: u8,
    },
    /// A LONG container arrived while the long-container extension is not in force, or one
    /// longer than [`MAX_LONG_CONTAINER_LEN`].
    ContainerTooLong {
        /// The transaction.
        tid: u8,
        /// Its payload length.
        payload_len: usize,
        /// The longest payload accepted in a container of its kind.
        max: usize,
    },
    /// A LARGE FIRST container arrived, but the large-message extension is not in force.
    LargeNotNegotiated {
        /// The transaction.
        tid: u8,
        /// The announced `total_length`.
        total_length: usize,
    },
}

impl AssembleError {
    /// The transaction the error is about.
    pub fn tid(&self) -> u8 {
        match *self {
            AssembleError::SequenceGap { tid, .. }
            | AssembleError::TooLarge { tid, .. }
            | AssembleError::NoFreeSlot { tid }
            | AssembleError::UnknownTransaction { tid, .. }
            | AssembleError::Capacity { tid }
            | AssembleError::ContainerTooLong { tid, .. }
            | AssembleError::LargeNotNegotiated { tid, .. } => tid,
        }
    }
}

impl core::fmt::Display for AssembleError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            AssembleError::SequenceGap { tid, expected, got } => write!(
                f,
                "transaction {tid}: expected seq {expected}, got {got}; transaction dropped"
            ),
            AssembleError::TooLarge {
                tid,
                total_length,
                limit,
            } => write!(
                f,
                "transaction {tid}: message of {total_length} bytes exceeds the limit of {limit}"
            ),
            AssembleError::NoFreeSlot { tid } => {
                write!(f, "transaction {tid}: too many transactions in flight")
            }
            AssembleError::UnknownTransaction { tid, seq } => {
                write!(f, "transaction {tid}: seq {seq} without a FIRST container")
            }
            AssembleError::Capacity { tid } => {
                write!(f, "transaction {tid}: reassembly buffer could not grow")
            }
            AssembleError::ContainerTooLong {
                tid,
                payload_len,
                max,
            } => write!(
                f,
                "transaction {tid}: a container with {payload_len} payload bytes, at most {max} \
                 accepted"
            ),
            AssembleError::LargeNotNegotiated { tid, total_length } => write!(
                f,
                "transaction {tid}: LARGE FIRST container ({total_length} bytes) without the \
                 large-message extension"
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for AssembleError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    Free,
    Receiving {
        tid: u8,
        /// LARGE FIRST transaction: seq wraps mod 256.
        large: bool,
        /// Containers taken so far (FIRST included): the next seq is this mod 256. A classic
        /// transaction takes nothing after 256 containers.
        received: u32,
        total: usize,
    },
    Complete {
        tid: u8,
    },
}

#[derive(Debug)]
struct Slot<B> {
    state: SlotState,
    buf: B,
}

impl<B: Buffer> Slot<B> {
    /// Frees the slot, keeping the buffer's capacity for the next message (allocating and
    /// freeing per message costs more than the copy itself on a busy heap).
    fn free(&mut self) {
        self.state = SlotState::Free;
        self.buf.clear();
    }

    /// Frees the slot of a transaction that will not complete (discarded, timed out, refused):
    /// a buffer grown past [`RESERVE_AHEAD`] gives its memory back at once, so an abandoned
    /// long message does not stay resident until the connection next goes idle.
    fn drop_transaction(&mut self) {
        let grown = self.buf.len() > RESERVE_AHEAD;
        self.free();
        if grown {
            self.buf.release();
        }
    }

    fn is_receiving(&self, tid: u8) -> bool {
        matches!(self.state, SlotState::Receiving { tid: t, .. } if t == tid)
    }

    /// Appends `payload` (cut to what `total` still needs); returns `true` when complete.
    fn append(&mut self, tid: u8, total: usize, payload: &[u8]) -> Result<bool, AssembleError> {
        let need = total.saturating_sub(self.buf.len());
        let take = payload.get(..need).unwrap_or(payload);
        // Grow in RESERVE_AHEAD steps (never past `total`), so the capacity stays within
        // RESERVE_AHEAD of what has actually arrived instead of doubling.
        let len = self.buf.len();
        let ahead = total.saturating_sub(len).min(RESERVE_AHEAD);
        if self.buf.spare_capacity() < take.len() && self.buf.try_reserve(ahead).is_err() {
            self.drop_transaction();
            return Err(AssembleError::Capacity { tid });
        }
        if self.buf.try_extend(take).is_err() {
            self.drop_transaction();
            return Err(AssembleError::Capacity { tid });
        }
        if self.buf.len() >= total {
            self.state = SlotState::Complete { tid };
            Ok(true)
        } else {
            Ok(false)
        }
    }
}

/// Bytes reserved up front when a FIRST announces a message (at most its `total_length`).
pub const RESERVE_AHEAD: usize = 16 * 1024;

/// Reassembles messages into `SLOTS` buffers of type `B`, one transaction per slot.
///
/// Use [`crate::buf::ArrayBuf`] without an allocator or `Vec<u8>` with the `alloc` feature.
#[derive(Debug)]
pub struct Assembler<B: Buffer, const SLOTS: usize> {
    slots: [Slot<B>; SLOTS],
    config: AssemblerConfig,
}

impl<B: Buffer + Default, const SLOTS: usize> Assembler<B, SLOTS> {
    /// An empty assembler; `config.max_in_flight` is clamped to `SLOTS`.
    pub fn new(config: AssemblerConfig) -> Self {
        Assembler {
            slots: core::array::from_fn(|_| Slot {
                state: SlotState::Free,
                buf: B::default(),
            }),
            config: AssemblerConfig {
                max_in_flight: config.max_in_flight.min(SLOTS),
                ..config
            },
        }
    }

    /// The configuration in effect (with `max_in_flight` clamped).
    pub fn config(&self) -> AssemblerConfig {
        self.config
    }

    /// Changes the limits (e.g. once the large-message extension has been negotiated);
    /// `max_in_flight` is clamped to `SLOTS`. Transactions in progress keep their own totals.
    pub fn set_config(&mut self, config: AssemblerConfig) {
        self.config = AssemblerConfig {
            max_in_flight: config.max_in_flight.min(SLOTS),
            ..config
        };
    }

    /// Takes one container; returns the completed message's handle when this container finished
    /// it. CONTROL and undefined-type containers are ignored (`Ok(None)`).
    pub fn feed(&mut self, c: &Container<'_>) -> Result<Option<Completed>, AssembleError> {
        if c.is_long() {
            let max = if self.config.long_containers {
                MAX_LONG_CONTAINER_LEN - c.header_len()
            } else {
                MAX_CHUNK_LEN
            };
            if c.payload.len() > max {
                self.discard(c.tid);
                return Err(AssembleError::ContainerTooLong {
                    tid: c.tid,
                    payload_len: c.payload.len(),
                    max,
                });
            }
        }
        match c.kind {
            ContainerKind::First { total_length } => {
                self.feed_first(c.tid, usize::from(total_length), c.payload, false)
            }
            ContainerKind::LargeFirst { total_length } => {
                if !self.config.large_messages {
                    self.discard(c.tid);
                    return Err(AssembleError::LargeNotNegotiated {
                        tid: c.tid,
                        total_length: total_length as usize,
                    });
                }
                self.feed_first(c.tid, total_length as usize, c.payload, true)
            }
            ContainerKind::Subsequent => self.feed_subsequent(c.tid, c.seq, c.payload),
            ContainerKind::Control(_) | ContainerKind::Unknown => Ok(None),
        }
    }

    fn feed_first(
        &mut self,
        tid: u8,
        total: usize,
        payload: &[u8],
        large: bool,
    ) -> Result<Option<Completed>, AssembleError> {
        self.discard(tid);
        let Some(slot) = self.slots.iter().position(|s| s.state == SlotState::Free) else {
            return Err(AssembleError::NoFreeSlot { tid });
        };
        if self.in_flight() >= self.config.max_in_flight {
            return Err(AssembleError::NoFreeSlot { tid });
        }
        let Some(s) = self.slots.get_mut(slot) else {
            return Err(AssembleError::NoFreeSlot { tid });
        };
        let limit = self.config.max_message_len.min(s.buf.capacity_limit());
        if total > limit {
            return Err(AssembleError::TooLarge {
                tid,
                total_length: total,
                limit,
            });
        }
        s.buf.clear();
        // One allocation for typical messages; larger ones grow as their bytes arrive, so a
        // 6-byte FIRST cannot make us commit more than RESERVE_AHEAD bytes.
        if s.buf.try_reserve(total.min(RESERVE_AHEAD)).is_err() {
            return Err(AssembleError::Capacity { tid });
        }
        s.state = SlotState::Receiving {
            tid,
            large,
            received: 1,
            total,
        };
        Ok(s.append(tid, total, payload)?
            .then_some(Completed { tid, slot }))
    }

    fn feed_subsequent(
        &mut self,
        tid: u8,
        seq: u8,
        payload: &[u8],
    ) -> Result<Option<Completed>, AssembleError> {
        let Some((slot, s)) = self
            .slots
            .iter_mut()
            .enumerate()
            .find(|(_, s)| s.is_receiving(tid))
        else {
            return Err(AssembleError::UnknownTransaction { tid, seq });
        };
        let SlotState::Receiving {
            large,
            received,
            total,
            ..
        } = s.state
        else {
            return Err(AssembleError::UnknownTransaction { tid, seq });
        };
        // The next seq is `received` mod 256; a classic transaction ends at 256 containers.
        let expected = (received % 256) as u8;
        let exhausted = !large && received >= 256;
        if seq != expected || exhausted {
            s.drop_transaction();
            return Err(AssembleError::SequenceGap {
                tid,
                expected,
                got: seq,
            });
        }
        s.state = SlotState::Receiving {
            tid,
            large,
            received: received.saturating_add(1),
            total,
        };
        Ok(s.append(tid, total, payload)?
            .then_some(Completed { tid, slot }))
    }

    fn completed_slot(&self, done: Completed) -> Option<&Slot<B>> {
        self.slots
            .get(done.slot)
            .filter(|s| s.state == SlotState::Complete { tid: done.tid })
    }

    /// The completed message; empty if `done` was already released.
    pub fn message(&self, done: Completed) -> &[u8] {
        self.completed_slot(done).map_or(&[], |s| s.buf.as_slice())
    }

    /// The completed message, mutably (to decrypt in place); empty if `done` was released.
    pub fn message_mut(&mut self, done: Completed) -> &mut [u8] {
        match self.slots.get_mut(done.slot) {
            Some(s) if s.state == (SlotState::Complete { tid: done.tid }) => s.buf.as_mut_slice(),
            _ => &mut [],
        }
    }

    /// Takes a completed message's buffer and frees its slot, instead of
    /// [`Assembler::message`] and [`Assembler::release`]: the message leaves without a copy.
    /// The slot gets a new buffer that has reserved what the old one held, so the next message
    /// of that size reassembles without growing (for heap buffers, an allocation in place of the
    /// copy; a fixed-capacity buffer would move whole, so take only heap buffers). Empty if
    /// `done` was already released.
    pub fn take_message(&mut self, done: Completed) -> B
    where
        B: Default,
    {
        match self.slots.get_mut(done.slot) {
            Some(s) if s.state == (SlotState::Complete { tid: done.tid }) => {
                let held = s.buf.len() + s.buf.spare_capacity();
                let taken = core::mem::take(&mut s.buf);
                s.free();
                // Only a hint: a refusal leaves an empty buffer, which grows as messages arrive.
                let _ = s.buf.try_reserve(held);
                taken
            }
            _ => B::default(),
        }
    }

    /// Frees the slot of a completed message (no-op if already released).
    pub fn release(&mut self, done: Completed) {
        if let Some(s) = self.slots.get_mut(done.slot)
            && s.state == (SlotState::Complete { tid: done.tid })
        {
            s.free();
        }
    }

    /// Drops the transaction of `tid` that is in progress, if any. Completed messages with this
    /// tid are not touched (they belong to their [`Completed`] handle).
    pub fn discard(&mut self, tid: u8) {
        for s in self.slots.iter_mut().filter(|s| s.is_receiving(tid)) {
            s.drop_transaction();
        }
    }

    /// `true` if a transaction of `tid` is in progress (FIRST seen, not yet complete).
    pub fn is_receiving(&self, tid: u8) -> bool {
        self.slots.iter().any(|s| s.is_receiving(tid))
    }

    /// Drops everything, completed messages included, and frees heap memory.
    pub fn reset(&mut self) {
        for s in self.slots.iter_mut() {
            s.free();
            s.buf.release();
        }
    }

    /// Gives the heap memory of free slots back (buffers otherwise keep their capacity between
    /// messages). Call it when the connection goes idle.
    pub fn release_memory(&mut self) {
        for s in self.slots.iter_mut().filter(|s| s.state == SlotState::Free) {
            s.buf.release();
        }
    }

    /// Transactions in progress (FIRST seen, not yet complete).
    pub fn receiving(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s.state, SlotState::Receiving { .. }))
            .count()
    }

    /// The bytes the transactions in progress announced in their FIRST containers, together:
    /// what they hold once complete (a budget on this bounds reassembly memory before the bytes
    /// arrive).
    pub fn claimed(&self) -> usize {
        self.slots
            .iter()
            .map(|s| match s.state {
                SlotState::Receiving { total, .. } => total,
                _ => 0,
            })
            .fold(0, usize::saturating_add)
    }

    /// Slots in use: transactions in progress plus completed messages not yet released.
    pub fn in_flight(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.state != SlotState::Free)
            .count()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use crate::buf::ArrayBuf;
    use crate::split::{SplitCursor, first_chunk_capacity, max_message_len};
    use crate::wire::container::ControlCmd;
    extern crate std;
    use std::vec::Vec;

    /// Heap buffers with `alloc`; without it, fixed buffers (small enough for the test stack) and
    /// the roundtrip test skips longer messages.
    #[cfg(feature = "alloc")]
    type TestBuf = Vec<u8>;
    #[cfg(feature = "alloc")]
    const TEST_CAP: usize = 65_535;
    #[cfg(not(feature = "alloc"))]
    type TestBuf = ArrayBuf<TEST_CAP>;
    #[cfg(not(feature = "alloc"))]
    const TEST_CAP: usize = 4096;
    type VecAssembler<const S: usize> = Assembler<TestBuf, S>;

    fn feed_bytes<B: Buffer + Default, const S: usize>(
        a: &mut Assembler<B, S>,
        pdu: &[u8],
    ) -> Result<Option<Completed>, AssembleError> {
        a.feed(&Container::parse(pdu).unwrap())
    }

    #[test]
    fn mtu_23_vector_assembles() {
        let mut a = VecAssembler::<4>::new(AssemblerConfig::default());
        let c0 = hex::decode("2a000028000e00046563686f20000a1e42424242").unwrap();
        let c1 = hex::decode("2a01401042424242424242424242424242424242").unwrap();
        let c2 = hex::decode("2a02400a42424242424242424242").unwrap();
        assert_eq!(feed_bytes(&mut a, &c0), Ok(None));
        assert_eq!(feed_bytes(&mut a, &c1), Ok(None));
        let done = feed_bytes(&mut a, &c2).unwrap().unwrap();
        assert_eq!(done.tid, 0x2a);
        let mut expect = hex::decode("00046563686f20000a1e").unwrap();
        expect.extend([0x42; 30]);
        assert_eq!(a.message(done), &expect[..]);
        assert_eq!(a.in_flight(), 1);
        a.release(done);
        assert_eq!(a.in_flight(), 0);
        assert_eq!(a.message(done), b"");
    }

    #[cfg(feature = "alloc")]
    #[test]
    fn take_message_hands_the_buffer_over_and_keeps_the_slots_size() {
        let mut a = VecAssembler::<1>::new(AssemblerConfig::default());
        assert_eq!(feed_bytes(&mut a, b"\x01\x00\x00\x06\x00\x03abc"), Ok(None));
        let done = feed_bytes(&mut a, b"\x01\x01\x40\x03def").unwrap().unwrap();
        let taken = a.take_message(done);
        assert_eq!(taken, b"abcdef");
        // The slot is free, the message gone: taking or releasing it again does nothing.
        assert_eq!(a.in_flight(), 0);
        assert_eq!(a.message(done), b"");
        assert!(a.take_message(done).is_empty());
        a.release(done);
        // The slot's new buffer holds what the old one did, so the next message does not grow it.
        let slot = a.slots.first().unwrap();
        assert!(slot.buf.is_empty());
        assert!(
            slot.buf.capacity() >= taken.len(),
            "{}",
            slot.buf.capacity()
        );
        let ptr = slot.buf.as_ptr();
        let done = feed_bytes(&mut a, b"\x02\x00\x00\x06\x00\x06uvwxyz")
            .unwrap()
            .unwrap();
        assert_eq!(a.message(done), b"uvwxyz");
        assert_eq!(
            a.slots.first().unwrap().buf.as_ptr(),
            ptr,
            "not reallocated"
        );
        // A message in progress cannot be taken.
        a.release(done);
        assert_eq!(feed_bytes(&mut a, b"\x03\x00\x00\x06\x00\x03abc"), Ok(None));
        let unfinished = Completed { slot: 0, tid: 3 };
        assert!(a.take_message(unfinished).is_empty());
        assert_eq!(a.in_flight(), 1);
    }

    #[test]
    fn empty_message_completes_at_once() {
        let mut a = VecAssembler::<1>::new(AssemblerConfig::default());
        let done = feed_bytes(&mut a, &[0x07, 0, 0, 0, 0, 0]).unwrap().unwrap();
        assert_eq!((done.tid, a.message(done)), (7, &b""[..]));
    }

    #[test]
    fn extra_bytes_beyond_total_are_truncated() {
        let mut a = VecAssembler::<1>::new(AssemblerConfig::default());
        let done = feed_bytes(&mut a, b"\x01\x00\x00\x02\x00\x04abcd")
            .unwrap()
            .unwrap();
        assert_eq!(a.message(done), b"ab");
        a.release(done);
        assert_eq!(feed_bytes(&mut a, b"\x01\x00\x00\x03\x00\x02ab"), Ok(None));
        let done = feed_bytes(&mut a, b"\x01\x01\x40\x03cde").unwrap().unwrap();
        assert_eq!(a.message(done), b"abc");
    }

    #[test]
    fn gap_drops_the_transaction() {
        let mut a = VecAssembler::<2>::new(AssemblerConfig::default());
        assert_eq!(feed_bytes(&mut a, b"\x01\x00\x00\x06\x00\x02ab"), Ok(None));
        assert_eq!(
            feed_bytes(&mut a, b"\x01\x02\x40\x02cd"),
            Err(AssembleError::SequenceGap {
                tid: 1,
                expected: 1,
                got: 2
            })
        );
        assert_eq!(a.in_flight(), 0);
        // The dropped transaction is gone: its next container is unknown.
        assert_eq!(
            feed_bytes(&mut a, b"\x01\x01\x40\x02cd"),
            Err(AssembleError::UnknownTransaction { tid: 1, seq: 1 })
        );
        // A duplicate seq is a gap too.
        assert_eq!(feed_bytes(&mut a, b"\x02\x00\x00\x06\x00\x02ab"), Ok(None));
        assert_eq!(feed_bytes(&mut a, b"\x02\x01\x40\x02cd"), Ok(None));
        assert!(matches!(
            feed_bytes(&mut a, b"\x02\x01\x40\x02cd"),
            Err(AssembleError::SequenceGap { tid: 2, .. })
        ));
        assert!(!a.is_receiving(2));
    }

    #[test]
    fn too_large_rejected_at_first() {
        let config = AssemblerConfig {
            max_message_len: 100,
            max_in_flight: 4,
            large_messages: false,
            long_containers: false,
        };
        let mut a = VecAssembler::<2>::new(config);
        assert_eq!(
            feed_bytes(&mut a, b"\x05\x00\x00\x65\x00\x01x"),
            Err(AssembleError::TooLarge {
                tid: 5,
                total_length: 101,
                limit: 100
            })
        );
        assert_eq!(a.in_flight(), 0);
        assert_eq!(feed_bytes(&mut a, b"\x05\x00\x00\x64\x00\x01x"), Ok(None));
        // The buffer's capacity is a second limit.
        let mut a = Assembler::<ArrayBuf<8>, 1>::new(AssemblerConfig::default());
        assert_eq!(
            feed_bytes(&mut a, b"\x05\x00\x00\x09\x00\x01x"),
            Err(AssembleError::TooLarge {
                tid: 5,
                total_length: 9,
                limit: 8
            })
        );
        let done = feed_bytes(&mut a, b"\x05\x00\x00\x08\x00\x08abcdefgh")
            .unwrap()
            .unwrap();
        assert_eq!(a.message(done), b"abcdefgh");
    }

    #[test]
    fn restart_on_first_and_rejected_first_drops_old_state() {
        let mut a = VecAssembler::<2>::new(AssemblerConfig {
            max_message_len: 10,
            max_in_flight: 2,
            large_messages: false,
            long_containers: false,
        });
        assert_eq!(feed_bytes(&mut a, b"\x01\x00\x00\x04\x00\x02ab"), Ok(None));
        assert_eq!(feed_bytes(&mut a, b"\x01\x00\x00\x03\x00\x01x"), Ok(None));
        let done = feed_bytes(&mut a, b"\x01\x01\x40\x02yz").unwrap().unwrap();
        assert_eq!(a.message(done), b"xyz");
        a.release(done);
        assert_eq!(feed_bytes(&mut a, b"\x01\x00\x00\x04\x00\x02ab"), Ok(None));
        assert!(feed_bytes(&mut a, b"\x01\x00\x00\x0b\x00\x00").is_err());
        assert!(!a.is_receiving(1));
        assert_eq!(a.in_flight(), 0);
    }

    #[test]
    fn control_and_unknown_type_ignored() {
        let mut a = VecAssembler::<2>::new(AssemblerConfig::default());
        assert_eq!(feed_bytes(&mut a, b"\x01\x00\x00\x04\x00\x02ab"), Ok(None));
        // Python 0.8.0 would append "cd" here and complete; we ignore type 0b10.
        assert_eq!(feed_bytes(&mut a, b"\x01\x01\x80\x02cd"), Ok(None));
        assert_eq!(
            a.feed(&Container::control(1, ControlCmd::Timeout, &[])),
            Ok(None)
        );
        assert_eq!(feed_bytes(&mut a, b"\x01\x01\xc8\x02cd"), Ok(None));
        // On an idle assembler too (the C assembler reports an empty message).
        assert_eq!(feed_bytes(&mut a, b"\x09\x00\x80\x00"), Ok(None));
        let done = feed_bytes(&mut a, b"\x01\x01\x40\x02ef").unwrap().unwrap();
        assert_eq!(a.message(done), b"abef");
    }

    #[test]
    fn unknown_tid_ignored() {
        let mut a = VecAssembler::<2>::new(AssemblerConfig::default());
        assert_eq!(feed_bytes(&mut a, b"\x01\x00\x00\x04\x00\x02ab"), Ok(None));
        assert_eq!(
            feed_bytes(&mut a, b"\x02\x01\x40\x02cd"),
            Err(AssembleError::UnknownTransaction { tid: 2, seq: 1 })
        );
        let done = feed_bytes(&mut a, b"\x01\x01\x40\x02cd").unwrap().unwrap();
        assert_eq!(a.message(done), b"abcd");
    }

    #[test]
    fn slot_limit_and_discard() {
        let mut a = VecAssembler::<3>::new(AssemblerConfig {
            max_message_len: 100,
            max_in_flight: 2,
            large_messages: false,
            long_containers: false,
        });
        assert_eq!(a.config().max_in_flight, 2);
        assert_eq!(feed_bytes(&mut a, b"\x01\x00\x00\x04\x00\x02ab"), Ok(None));
        let done = feed_bytes(&mut a, b"\x02\x00\x00\x00\x00\x00")
            .unwrap()
            .unwrap();
        assert_eq!(
            feed_bytes(&mut a, b"\x03\x00\x00\x04\x00\x02ab"),
            Err(AssembleError::NoFreeSlot { tid: 3 })
        );
        a.discard(1);
        a.discard(2); // completed messages are not discarded
        assert_eq!(a.in_flight(), 1);
        assert_eq!(feed_bytes(&mut a, b"\x03\x00\x00\x04\x00\x02ab"), Ok(None));
        a.release(done);
        a.release(done); // no-op
        assert_eq!(a.in_flight(), 1);
        // A new transaction may reuse a tid whose completed message is still held.
        let mut b = VecAssembler::<2>::new(AssemblerConfig::default());
        let first = feed_bytes(&mut b, b"\x04\x00\x00\x01\x00\x01x")
            .unwrap()
            .unwrap();
        let second = feed_bytes(&mut b, b"\x04\x00\x00\x01\x00\x01y")
            .unwrap()
            .unwrap();
        assert_eq!(
            (b.message(first), b.message(second)),
            (&b"x"[..], &b"y"[..])
        );
        // SLOTS clamps max_in_flight.
        let c = VecAssembler::<1>::new(AssemblerConfig::default());
        assert_eq!(c.config().max_in_flight, 1);
    }

    #[cfg(feature = "alloc")]
    #[test]
    fn message_mut_and_reset_free_memory() {
        let mut a = VecAssembler::<2>::new(AssemblerConfig::default());
        let done = feed_bytes(&mut a, b"\x01\x00\x00\x02\x00\x02ab")
            .unwrap()
            .unwrap();
        a.message_mut(done).copy_from_slice(b"AB");
        assert_eq!(a.message(done), b"AB");
        assert_eq!(feed_bytes(&mut a, b"\x02\x00\x00\x04\x00\x02ab"), Ok(None));
        a.reset();
        assert_eq!(a.in_flight(), 0);
        assert!(a.slots.iter().all(|s| s.buf.capacity() == 0));
        assert_eq!(a.message_mut(done), b"");
    }

    #[cfg(feature = "alloc")]
    #[test]
    fn slots_keep_capacity_until_release_memory() {
        let mut a = VecAssembler::<2>::new(AssemblerConfig::default());
        feed_bytes(&mut a, b"\x01\x00\x00\x04\x00\x02ab").unwrap();
        let _ = feed_bytes(&mut a, b"\x01\x05\x40\x02cd");
        let done = feed_bytes(&mut a, b"\x02\x00\x00\x01\x00\x01z")
            .unwrap()
            .unwrap();
        a.release(done);
        // Capacity is kept for the next message...
        assert!(a.slots.iter().any(|s| s.buf.capacity() > 0));
        assert_eq!(a.in_flight(), 0);
        // ...and given back on request.
        a.release_memory();
        assert!(a.slots.iter().all(|s| s.buf.capacity() == 0));
    }

    #[test]
    fn seq_255_assembles() {
        // 256 containers at MTU 23 (fixes the C assembler's off-by-one).
        let len = max_message_len(23);
        let message: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut a = VecAssembler::<1>::new(AssemblerConfig::default());
        let mut cursor = SplitCursor::new(0x10, len, 23).unwrap();
        assert_eq!(cursor.containers_left(), 256);
        let mut out = [0u8; 20];
        let mut result = None;
        while let Some(n) = cursor.emit_next(&message, &mut out).unwrap() {
            assert!(result.is_none());
            result = a
                .feed(&Container::parse(out.get(..n).unwrap()).unwrap())
                .unwrap();
        }
        assert_eq!(a.message(result.unwrap()), &message[..]);
        // Nothing can follow seq 255: a seq-0 SUBSEQUENT after it is a gap.
        let mut a = VecAssembler::<1>::new(AssemblerConfig::default());
        feed_bytes(&mut a, b"\x01\x00\x00\x64\x00\x00").unwrap();
        for seq in 1..=255u8 {
            assert_eq!(a.feed(&Container::subsequent(1, seq, b"")), Ok(None));
        }
        assert_eq!(
            a.feed(&Container::subsequent(1, 0, b"x")),
            Err(AssembleError::SequenceGap {
                tid: 1,
                expected: 0,
                got: 0
            })
        );
    }

    /// Splits two messages and feeds their containers interleaved; both must come back intact.
    fn roundtrip_interleaved(att_mtu: usize, len: usize) {
        let m1: Vec<u8> = (0..len).map(|i| (i * 31 % 256) as u8).collect();
        let m2: Vec<u8> = (0..len / 2 + 1).map(|i| (i * 7 % 256) as u8).collect();
        let mut c1 = SplitCursor::new(0xfe, m1.len(), att_mtu).unwrap();
        let mut c2 = SplitCursor::new(0xff, m2.len(), att_mtu).unwrap();
        let mut a = VecAssembler::<2>::new(AssemblerConfig::default());
        let mut out = std::vec![0u8; att_mtu - 3];
        let (mut d1, mut d2) = (None, None);
        while !(c1.is_done() && c2.is_done()) {
            for (cursor, msg, done) in [(&mut c1, &m1, &mut d1), (&mut c2, &m2, &mut d2)] {
                if let Some(n) = cursor.emit_next(msg, &mut out).unwrap() {
                    assert!(n <= att_mtu - 3);
                    let c = Container::parse(out.get(..n).unwrap()).unwrap();
                    assert!(c.payload.len() <= 255);
                    if let Some(d) = a.feed(&c).unwrap() {
                        assert!(done.replace(d).is_none() && cursor.is_done());
                    }
                }
            }
        }
        assert_eq!(a.message(d1.unwrap()), &m1[..], "mtu {att_mtu} len {len}");
        assert_eq!(a.message(d2.unwrap()), &m2[..], "mtu {att_mtu} len {len}");
        a.release(d1.unwrap());
        a.release(d2.unwrap());
        assert_eq!(a.in_flight(), 0);
    }

    #[test]
    fn split_assemble_roundtrip() {
        for mtu in [23, 27, 185, 247, 262, 512] {
            let first = first_chunk_capacity(mtu);
            let max = max_message_len(mtu);
            for len in [0, 1, first - 1, first, first + 1, max] {
                if len > TEST_CAP {
                    continue;
                }
                roundtrip_interleaved(mtu, len);
            }
            assert!(SplitCursor::new(0, max + 1, mtu).is_err());
        }
    }

    #[test]
    fn array_buf_without_alloc() {
        let mut a = Assembler::<ArrayBuf<64>, 2>::new(AssemblerConfig::default());
        let message = [0xa5u8; 64];
        let mut cursor = SplitCursor::new(3, message.len(), 23).unwrap();
        let mut out = [0u8; 20];
        let mut done = None;
        while let Some(n) = cursor.emit_next(&message, &mut out).unwrap() {
            done = a
                .feed(&Container::parse(out.get(..n).unwrap()).unwrap())
                .unwrap();
        }
        assert_eq!(a.message(done.unwrap()), &message[..]);
    }

    fn large_config(max_message_len: usize) -> AssemblerConfig {
        AssemblerConfig {
            max_message_len,
            max_in_flight: 2,
            large_messages: true,
            long_containers: false,
        }
    }

    #[test]
    fn large_first_needs_the_extension() {
        let mut a = VecAssembler::<2>::new(AssemblerConfig::default());
        // A classic transaction of tid 1 in progress, then a LARGE FIRST for tid 1.
        assert_eq!(feed_bytes(&mut a, b"\x01\x00\x00\x04\x00\x02ab"), Ok(None));
        assert_eq!(
            feed_bytes(&mut a, b"\x01\x00\x01\x03\x00\x00\x00\x01x"),
            Err(AssembleError::LargeNotNegotiated {
                tid: 1,
                total_length: 3
            })
        );
        // Nothing is left of tid 1.
        assert!(!a.is_receiving(1));
        assert_eq!(a.in_flight(), 0);
        // Once negotiated, the same bytes start a transaction.
        a.set_config(large_config(100));
        assert_eq!(
            feed_bytes(&mut a, b"\x01\x00\x01\x03\x00\x00\x00\x01x"),
            Ok(None)
        );
        let done = feed_bytes(&mut a, b"\x01\x01\x40\x02yz").unwrap().unwrap();
        assert_eq!(a.message(done), b"xyz");
    }

    #[test]
    fn large_first_over_the_limit_and_seq_wrap() {
        let mut a = VecAssembler::<2>::new(large_config(1000));
        // 1,001 > 1,000: refused at the header.
        assert_eq!(
            feed_bytes(&mut a, b"\x02\x00\x01\xe9\x03\x00\x00\x00"),
            Err(AssembleError::TooLarge {
                tid: 2,
                total_length: 1001,
                limit: 1000
            })
        );
        // 300 bytes in 301 containers: empty LARGE FIRST, 299 empty SUBSEQUENTs whose seq goes
        // 1..=255, 0, 1, ..., then the 300 bytes with seq 300 % 256 = 44.
        feed_bytes(&mut a, b"\x02\x00\x01\x2c\x01\x00\x00\x00").unwrap();
        for i in 1..300u32 {
            assert_eq!(
                a.feed(&Container::subsequent(2, (i % 256) as u8, b"")),
                Ok(None),
                "seq {i}"
            );
        }
        // A wrong seq after the wrap is still a gap...
        let mut b = VecAssembler::<1>::new(large_config(1000));
        feed_bytes(&mut b, b"\x03\x00\x01\x05\x00\x00\x00\x00").unwrap();
        assert_eq!(
            b.feed(&Container::subsequent(3, 2, b"x")),
            Err(AssembleError::SequenceGap {
                tid: 3,
                expected: 1,
                got: 2
            })
        );
        // ...and the right one completes after 301 containers.
        let payload = [0x61u8; 255];
        assert_eq!(a.feed(&Container::subsequent(2, 44, &payload)), Ok(None));
        let done = a
            .feed(&Container::subsequent(2, 45, &payload[..45]))
            .unwrap()
            .unwrap();
        assert_eq!(a.message(done).len(), 300);
    }

    #[cfg(feature = "alloc")]
    #[test]
    fn large_first_reserves_incrementally() {
        let mut a = VecAssembler::<1>::new(large_config(crate::split::MAX_LARGE_MESSAGE_LEN));
        // An 8-byte header announcing 4 GiB - 1 commits RESERVE_AHEAD bytes, no more.
        feed_bytes(&mut a, b"\x04\x00\x01\xff\xff\xff\xff\x00").unwrap();
        let cap = a.slots.iter().map(|s| s.buf.capacity()).max().unwrap();
        assert!(cap <= RESERVE_AHEAD, "reserved {cap}");
        // As bytes arrive, capacity stays within RESERVE_AHEAD of them (no doubling).
        let chunk = [0u8; 255];
        for i in 1..=1000u32 {
            a.feed(&Container::subsequent(4, (i % 256) as u8, &chunk))
                .unwrap();
        }
        let len = a.slots.iter().map(|s| s.buf.len()).max().unwrap();
        let cap = a.slots.iter().map(|s| s.buf.capacity()).max().unwrap();
        assert_eq!(len, 255_000);
        assert!(cap <= len + RESERVE_AHEAD, "capacity {cap} for {len} bytes");
    }
}
