//! Splitting a message into containers that each fit one link PDU.
//!
//! ```text
//! message (total_length bytes, at most 65535)
//! +---------------------+------------------------+------------------------+-----+
//! | chunk 0 (≤ first)   | chunk 1 (≤ subsequent) | chunk 2 (≤ subsequent) | ... |   ≤ 256 chunks
//! +---------------------+------------------------+------------------------+-----+
//!   FIRST      [tid][seq 0][0x00][total_length u16][payload_len][chunk 0]   (6-byte header)
//!   SUBSEQUENT [tid][seq 1][0x40][payload_len][chunk 1]                      (4-byte header)
//!   SUBSEQUENT [tid][seq 2][0x40][payload_len][chunk 2]  ...
//!
//! eff        = att_mtu - 3                      (ATT opcode + handle)
//! first      = min(eff - 6, 255)                MTU 23: 14    MTU 247: 238
//! subsequent = min(eff - 4, 255)                MTU 23: 16    MTU 247: 240
//! max        = min(first + 255 * subsequent, 65535)             MTU 247: 61 438, MTU ≥ 264: 65 280
//! ```
//!
//! With the large-message extension in force ([`SplitCursor::new_large`]), a message that does
//! not fit the classic limits above starts with a LARGE FIRST container instead:
//!
//! ```text
//!   LARGE FIRST [tid][seq 0][0x01][total_length u32][payload_len][chunk 0]    (8-byte header)
//!   SUBSEQUENT  [tid][seq 1][0x40]...  ... [seq 255] [seq 0] [seq 1] ...      seq wraps mod 256
//!
//! first (large) = min(eff - 8, 255)             MTU 23: 12    MTU 247: 236
//! max (large)   = 4,294,967,295 (u32), bounded in practice by the negotiated limits
//! ```
//!
//! Messages that fit classically are split classically even then, so small messages look the
//! same on a negotiated link as on any other.
//!
//! With the long-container extension in force ([`SplitCursor::new_long`], links without an ATT
//! MTU), every container may be up to [`MAX_LONG_CONTAINER_LEN`] bytes, whatever the ATT MTU:
//!
//! ```text
//!   FIRST       [tid][seq 0][0x02][total_length u16][payload_len u16][chunk 0]   (7-byte header)
//!   LARGE FIRST [tid][seq 0][0x03][total_length u32][payload_len u16][chunk 0]   (9-byte header)
//!   SUBSEQUENT  [tid][seq n][0x42][payload_len u16][chunk n]                     (5-byte header)
//!
//! first = 16,377   large first = 16,375   subsequent = 16,379   (16,384 - header)
//! ```
//!
//! A chunk of 255 bytes or fewer (a short message, the last chunk) keeps the classic header. A
//! message of up to 65,535 bytes is one classic transaction (at most 5 containers); larger ones
//! need the large-message extension as well.
//!
//! Every chunk is capped at 255 bytes (`payload_len` is a `u8`), as in the C reference, so an ATT
//! MTU above 262 still produces valid frames (the reference's other splitters emit corrupt ones).
//! An empty message is one FIRST container with `total_length = 0`. The smallest usable ATT MTU is
//! [`SplitCursor::MIN_ATT_MTU`] (10); BLE itself never goes below 23.
//!
//! [`SplitCursor`] does not borrow the message, so a connection can keep the message in its own
//! queue and emit one container per `poll_transmit`. [`Splitter`] is the same with the message
//! borrowed, and [`split_to_vec`] (feature `alloc`) collects every container.

use crate::wire::container::{
    ATT_OVERHEAD, Container, FIRST_HEADER_LEN, HEADER_LEN, LARGE_FIRST_HEADER_LEN, MAX_CHUNK_LEN,
    MAX_LONG_CONTAINER_LEN,
};
use crate::wire::{WireError, err_num};

/// The largest `total_length` (a `u16`).
const MAX_TOTAL_LEN: usize = u16::MAX as usize;
/// Containers per message: seq is a `u8`.
const MAX_CONTAINERS: usize = 256;
/// The largest `total_length` of a LARGE FIRST container (a `u32`).
pub const MAX_LARGE_MESSAGE_LEN: usize = u32::MAX as usize;

/// Bytes a container may use on a link with this ATT MTU (`att_mtu - 3`, saturating at 0).
pub fn effective_mtu(att_mtu: usize) -> usize {
    att_mtu.saturating_sub(ATT_OVERHEAD)
}

/// Message bytes the FIRST container carries at this ATT MTU: `min(eff - 6, 255)`.
pub fn first_chunk_capacity(att_mtu: usize) -> usize {
    effective_mtu(att_mtu)
        .saturating_sub(FIRST_HEADER_LEN)
        .min(MAX_CHUNK_LEN)
}

/// Message bytes a LARGE FIRST container carries at this ATT MTU: `min(eff - 8, 255)`.
pub fn large_first_chunk_capacity(att_mtu: usize) -> usize {
    effective_mtu(att_mtu)
        .saturating_sub(LARGE_FIRST_HEADER_LEN)
        .min(MAX_CHUNK_LEN)
}

/// `true` when a message of `message_len` bytes needs a LARGE FIRST container at this MTU
/// (more than 65,535 bytes or more than 256 containers): only possible with the large-message
/// extension in force.
pub fn needs_large_first(message_len: usize, att_mtu: usize) -> bool {
    message_len > max_message_len(att_mtu)
}

/// Message bytes each SUBSEQUENT container carries at this ATT MTU: `min(eff - 4, 255)`.
pub fn subsequent_chunk_capacity(att_mtu: usize) -> usize {
    effective_mtu(att_mtu)
        .saturating_sub(HEADER_LEN)
        .min(MAX_CHUNK_LEN)
}

/// The largest message that fits in 256 containers at this ATT MTU (and in a `u16`).
///
/// 61 438 bytes at MTU 247; 65 280 (256 × 255) from MTU 264 up, since chunks are capped at 255, so
/// the `u16` bound never binds. Meaningless below [`SplitCursor::MIN_ATT_MTU`].
pub fn max_message_len(att_mtu: usize) -> usize {
    let subsequent = subsequent_chunk_capacity(att_mtu) * (MAX_CONTAINERS - 1);
    (first_chunk_capacity(att_mtu) + subsequent).min(MAX_TOTAL_LEN)
}

/// The largest message one classic transaction (`u16` `total_length`, 256 containers) carries:
/// [`max_message_len`] at this ATT MTU, or 65,535 with long containers in force.
pub fn classic_max_message_len(att_mtu: usize, long_containers: bool) -> usize {
    if long_containers {
        MAX_TOTAL_LEN
    } else {
        max_message_len(att_mtu)
    }
}

/// Number of containers a message of `message_len` bytes needs at this ATT MTU.
pub fn container_count(message_len: usize, att_mtu: usize) -> Result<usize, SplitError> {
    check(message_len, att_mtu)?;
    let first = first_chunk_capacity(att_mtu);
    let rest = message_len.saturating_sub(first);
    Ok(1 + rest.div_ceil(subsequent_chunk_capacity(att_mtu)))
}

/// Number of containers a message of `message_len` bytes takes as a connection's outbox splits
/// it: classic containers at this ATT MTU, or with the large-message (`large`) and
/// long-container (`long`) extensions as they are in force.
pub fn containers_with(
    message_len: usize,
    att_mtu: usize,
    large: bool,
    long: bool,
) -> Result<usize, SplitError> {
    Ok(SplitCursor::with_extensions(0, message_len, att_mtu, large, long)?.containers_left())
}

fn check(message_len: usize, att_mtu: usize) -> Result<(), SplitError> {
    if att_mtu < SplitCursor::MIN_ATT_MTU {
        return Err(SplitError::MtuTooSmall {
            att_mtu,
            min: SplitCursor::MIN_ATT_MTU,
        });
    }
    let max = max_message_len(att_mtu);
    if message_len > max {
        return Err(SplitError::MessageTooLarge {
            len: message_len,
            max,
        });
    }
    Ok(())
}

/// A message cannot be split at this MTU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SplitError {
    /// The ATT MTU leaves no room for a FIRST container with one byte of payload.
    MtuTooSmall {
        /// The MTU given.
        att_mtu: usize,
        /// The smallest usable MTU ([`SplitCursor::MIN_ATT_MTU`]).
        min: usize,
    },
    /// The message needs more than 256 containers or more than 65 535 bytes (more than
    /// `u32::MAX` bytes with the large-message extension).
    MessageTooLarge {
        /// The message length.
        len: usize,
        /// [`max_message_len`] at this MTU.
        max: usize,
    },
}

impl core::fmt::Display for SplitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            SplitError::MtuTooSmall { att_mtu, min } => {
                write!(
                    f,
                    "ATT MTU {att_mtu} is too small to split into (minimum {min})"
                )
            }
            SplitError::MessageTooLarge { len, max } => {
                write!(
                    f,
                    "message of {len} bytes is too large (at most {max} at this MTU)"
                )
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for SplitError {}

/// A split in progress that does not borrow the message (so a connection can keep the message in
/// its own queue).
///
/// Give the same message (of the length passed to [`SplitCursor::new`]) to every
/// [`SplitCursor::emit_next`] call.
#[derive(Clone, Debug)]
pub struct SplitCursor {
    tid: u8,
    total: u32,
    /// LARGE FIRST header, seq wrapping mod 256.
    large: bool,
    first_cap: usize,
    subsequent_cap: usize,
    /// Containers emitted so far (the seq of the next one).
    emitted: usize,
    /// Message bytes emitted so far.
    offset: usize,
    count: usize,
}

impl SplitCursor {
    /// The smallest ATT MTU that carries a FIRST container with one byte of payload
    /// (`eff - 6 >= 1`, as the C splitter requires). Real BLE links never go below 23.
    pub const MIN_ATT_MTU: usize = ATT_OVERHEAD + FIRST_HEADER_LEN + 1;
    /// The smallest ATT MTU that carries a LARGE FIRST container with one byte of payload.
    pub const MIN_LARGE_ATT_MTU: usize = ATT_OVERHEAD + LARGE_FIRST_HEADER_LEN + 1;

    /// Plans the split of a `message_len`-byte message for transaction `tid`.
    pub fn new(tid: u8, message_len: usize, att_mtu: usize) -> Result<Self, SplitError> {
        let count = container_count(message_len, att_mtu)?;
        let total = u16::try_from(message_len).map_err(|_| SplitError::MessageTooLarge {
            len: message_len,
            max: MAX_TOTAL_LEN,
        })?;
        Ok(SplitCursor {
            tid,
            total: u32::from(total),
            large: false,
            first_cap: first_chunk_capacity(att_mtu),
            subsequent_cap: subsequent_chunk_capacity(att_mtu),
            emitted: 0,
            offset: 0,
            count,
        })
    }

    /// Plans the split with the large-message extension in force: classic (as
    /// [`SplitCursor::new`]) when the message fits a classic transaction, otherwise a LARGE FIRST
    /// container (`u32` total, 8-byte header) followed by SUBSEQUENT containers whose seq wraps
    /// mod 256.
    pub fn new_large(tid: u8, message_len: usize, att_mtu: usize) -> Result<Self, SplitError> {
        if att_mtu < Self::MIN_LARGE_ATT_MTU {
            return Err(SplitError::MtuTooSmall {
                att_mtu,
                min: Self::MIN_LARGE_ATT_MTU,
            });
        }
        if !needs_large_first(message_len, att_mtu) {
            return Self::new(tid, message_len, att_mtu);
        }
        let total = u32::try_from(message_len).map_err(|_| SplitError::MessageTooLarge {
            len: message_len,
            max: MAX_LARGE_MESSAGE_LEN,
        })?;
        Ok(Self::plan(
            tid,
            total,
            true,
            large_first_chunk_capacity(att_mtu),
            subsequent_chunk_capacity(att_mtu),
        ))
    }

    /// A split of `total` bytes with these chunk capacities (the first container's, then every
    /// other's), starting with a LARGE FIRST when `large`.
    fn plan(tid: u8, total: u32, large: bool, first_cap: usize, subsequent_cap: usize) -> Self {
        let rest = (total as usize).saturating_sub(first_cap);
        SplitCursor {
            tid,
            total,
            large,
            first_cap,
            subsequent_cap,
            emitted: 0,
            offset: 0,
            count: 1 + rest.div_ceil(subsequent_cap),
        }
    }

    /// Plans the split with the long-container extension in force: containers of up to
    /// [`MAX_LONG_CONTAINER_LEN`] bytes (LONG headers for chunks above 255 bytes), whatever the
    /// ATT MTU. With `large` (the large-message extension also in force) a message above 65,535
    /// bytes starts with a LARGE FIRST container; without it, such a message is refused.
    pub fn new_long(tid: u8, message_len: usize, large: bool) -> Result<Self, SplitError> {
        // The LONG headers are one byte longer than the classic ones.
        let first_cap = MAX_LONG_CONTAINER_LEN - FIRST_HEADER_LEN - 1;
        let subsequent_cap = MAX_LONG_CONTAINER_LEN - HEADER_LEN - 1;
        let classic_max = (first_cap + subsequent_cap * (MAX_CONTAINERS - 1)).min(MAX_TOTAL_LEN);
        if message_len <= classic_max {
            // At most 65,535 bytes: fits the u32.
            let total = message_len as u32;
            return Ok(Self::plan(tid, total, false, first_cap, subsequent_cap));
        }
        let max = if large {
            MAX_LARGE_MESSAGE_LEN
        } else {
            classic_max
        };
        let total = u32::try_from(message_len).ok().filter(|_| large).ok_or(
            SplitError::MessageTooLarge {
                len: message_len,
                max,
            },
        )?;
        let first_cap = MAX_LONG_CONTAINER_LEN - LARGE_FIRST_HEADER_LEN - 1;
        Ok(Self::plan(tid, total, true, first_cap, subsequent_cap))
    }

    /// Plans the split as a connection does with the extensions in force:
    /// [`SplitCursor::new_long`] with the long-container extension (`long`), else
    /// [`SplitCursor::new_large`] with the large-message extension (`large`), else
    /// [`SplitCursor::new`].
    pub fn with_extensions(
        tid: u8,
        message_len: usize,
        att_mtu: usize,
        large: bool,
        long: bool,
    ) -> Result<Self, SplitError> {
        if long {
            Self::new_long(tid, message_len, large)
        } else if large {
            Self::new_large(tid, message_len, att_mtu)
        } else {
            Self::new(tid, message_len, att_mtu)
        }
    }

    /// `true` when this split starts with a LARGE FIRST container.
    pub fn is_large(&self) -> bool {
        self.large
    }

    /// The transaction id every container carries.
    pub fn tid(&self) -> u8 {
        self.tid
    }

    /// The message length given to [`SplitCursor::new`].
    pub fn message_len(&self) -> usize {
        self.total as usize
    }

    /// `true` once every container has been emitted.
    pub fn is_done(&self) -> bool {
        self.emitted >= self.count
    }

    /// Containers still to emit.
    pub fn containers_left(&self) -> usize {
        self.count.saturating_sub(self.emitted)
    }

    /// (header length, chunk length) of the next container.
    fn next_parts(&self) -> Option<(usize, usize)> {
        if self.is_done() {
            return None;
        }
        let remaining = self.message_len().saturating_sub(self.offset);
        let (header, chunk) = if self.emitted == 0 && self.large {
            (LARGE_FIRST_HEADER_LEN, remaining.min(self.first_cap))
        } else if self.emitted == 0 {
            (FIRST_HEADER_LEN, remaining.min(self.first_cap))
        } else {
            (HEADER_LEN, remaining.min(self.subsequent_cap))
        };
        // A LONG container (long-container extension) has a two-byte payload_len.
        Some((header + usize::from(chunk > MAX_CHUNK_LEN), chunk))
    }

    /// Size of the next container, or `None` when done.
    pub fn next_len(&self) -> Option<usize> {
        self.next_parts().map(|(header, chunk)| header + chunk)
    }

    /// Writes the next container into `out` and returns its length; `Ok(None)` when done.
    ///
    /// On error (a message of the wrong length, or `out` shorter than
    /// [`SplitCursor::next_len`]) nothing advances, so the call can be retried.
    pub fn emit_next(
        &mut self,
        message: &[u8],
        out: &mut [u8],
    ) -> Result<Option<usize>, WireError> {
        if message.len() != self.message_len() {
            return Err(WireError::InvalidValue {
                field: "message_len",
                offset: 0,
                value: u32::try_from(message.len()).unwrap_or(u32::MAX),
            });
        }
        let Some((_, chunk_len)) = self.next_parts() else {
            return Ok(None);
        };
        let chunk = message
            .get(self.offset..)
            .and_then(|rest| rest.get(..chunk_len))
            .ok_or(WireError::Truncated {
                field: "message",
                offset: err_num(self.offset),
                needed: err_num(chunk_len),
                available: err_num(message.len().saturating_sub(self.offset)),
            })?;
        let classic_seq = u8::try_from(self.emitted);
        let container = match classic_seq {
            _ if self.large && self.emitted == 0 => {
                Container::large_first(self.tid, self.total, chunk)
            }
            // Large transactions: seq wraps mod 256 (links are ordered).
            _ if self.large => Container::subsequent(self.tid, (self.emitted % 256) as u8, chunk),
            Ok(0) => Container::first(self.tid, self.total as u16, chunk),
            Ok(seq) => Container::subsequent(self.tid, seq, chunk),
            Err(_) => {
                return Err(WireError::TooLong {
                    field: "seq",
                    len: err_num(self.emitted),
                    max: err_num(MAX_CONTAINERS - 1),
                });
            }
        };
        let len = container.emit(out)?;
        self.emitted += 1;
        self.offset += chunk_len;
        Ok(Some(len))
    }
}

/// A split borrowing its message: [`SplitCursor`] plus the message.
#[derive(Clone, Debug)]
pub struct Splitter<'m> {
    cursor: SplitCursor,
    message: &'m [u8],
}

impl<'m> Splitter<'m> {
    /// Plans the split of `message` for transaction `tid`.
    pub fn new(tid: u8, message: &'m [u8], att_mtu: usize) -> Result<Self, SplitError> {
        Ok(Splitter {
            cursor: SplitCursor::new(tid, message.len(), att_mtu)?,
            message,
        })
    }

    /// The underlying cursor (containers left, next length, ...).
    pub fn cursor(&self) -> &SplitCursor {
        &self.cursor
    }

    /// Writes the next container into `out` and returns its length.
    ///
    /// `None` when every container has been emitted, and also when `out` is shorter than
    /// [`SplitCursor::next_len`] (nothing advances then); an `out` of `att_mtu - 3` bytes always
    /// fits. Use [`Splitter::try_next_into`] to tell the two apart.
    pub fn next_into(&mut self, out: &mut [u8]) -> Option<usize> {
        self.try_next_into(out).ok().flatten()
    }

    /// Like [`Splitter::next_into`], but reports a too-small `out` as an error.
    pub fn try_next_into(&mut self, out: &mut [u8]) -> Result<Option<usize>, WireError> {
        self.cursor.emit_next(self.message, out)
    }
}

/// Splits `message` into containers, one `Vec` each.
#[cfg(feature = "alloc")]
pub fn split_to_vec(
    tid: u8,
    message: &[u8],
    att_mtu: usize,
) -> Result<alloc::vec::Vec<alloc::vec::Vec<u8>>, SplitError> {
    let mut cursor = SplitCursor::new(tid, message.len(), att_mtu)?;
    let mut out = alloc::vec::Vec::with_capacity(cursor.containers_left());
    while let Some(len) = cursor.next_len() {
        let mut buf = alloc::vec![0u8; len];
        match cursor.emit_next(message, &mut buf) {
            Ok(Some(_)) => out.push(buf),
            // Unreachable: the buffer has next_len() bytes and the message the planned length.
            Ok(None) | Err(_) => break,
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    extern crate std;
    use sha2::{Digest, Sha256};
    use std::vec::Vec;

    fn hex(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    fn split(tid: u8, message: &[u8], att_mtu: usize) -> Vec<Vec<u8>> {
        let mut splitter = Splitter::new(tid, message, att_mtu).unwrap();
        let mut out = Vec::new();
        let mut buf = std::vec![0u8; effective_mtu(att_mtu)];
        while let Some(n) = splitter.next_into(&mut buf) {
            out.push(buf.get(..n).unwrap().to_vec());
        }
        assert!(splitter.cursor().is_done());
        out
    }

    /// Every container of a long split, as bytes.
    fn split_long(tid: u8, message: &[u8], large: bool) -> Vec<Vec<u8>> {
        let mut cursor = SplitCursor::new_long(tid, message.len(), large).unwrap();
        let mut out = Vec::new();
        let mut buf = std::vec![0u8; MAX_LONG_CONTAINER_LEN];
        while let Some(want) = cursor.next_len() {
            let n = cursor.emit_next(message, &mut buf).unwrap().unwrap();
            assert_eq!(n, want);
            out.push(buf.get(..n).unwrap().to_vec());
        }
        out
    }

    #[test]
    fn long_split_plans() {
        // Up to 255 bytes: one classic FIRST.
        let m: Vec<u8> = (0..255u8).collect();
        let c = split_long(1, &m, false);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].get(..6), Some(&[1, 0, 0x00, 0xff, 0x00, 0xff][..]));
        // 256 bytes: one LONG FIRST [01 00 02 0001 0001].
        let m = std::vec![7u8; 256];
        let c = split_long(1, &m, false);
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].get(..7),
            Some(&[1, 0, 0x02, 0x00, 0x01, 0x00, 0x01][..])
        );
        assert_eq!(c[0].len(), 7 + 256);
        // 16,378 bytes: a full LONG FIRST (16,377) and a 1-byte classic SUBSEQUENT.
        let m = std::vec![7u8; 16_378];
        let c = split_long(2, &m, false);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].len(), MAX_LONG_CONTAINER_LEN);
        assert_eq!(c[1], [2, 1, 0x40, 1, 7]);
        // 65,535 bytes: classic transaction, 5 containers; the last 21 bytes keep the classic
        // header.
        let m = std::vec![3u8; 65_535];
        let c = split_long(3, &m, false);
        let lens: Vec<usize> = c.iter().map(Vec::len).collect();
        assert_eq!(lens, [16_384, 16_384, 16_384, 16_384, 4 + 21]);
        assert_eq!(c[4].get(..4), Some(&[3, 4, 0x40, 21][..]));
        // 65,536 bytes: refused without the large-message extension, a LONG LARGE FIRST with it.
        assert_eq!(
            SplitCursor::new_long(0, 65_536, false).err(),
            Some(SplitError::MessageTooLarge {
                len: 65_536,
                max: 65_535
            })
        );
        let m = std::vec![5u8; 65_536];
        let c = split_long(4, &m, true);
        assert_eq!(c.len(), 5);
        assert_eq!(
            c[0].get(..9),
            Some(&[4, 0, 0x03, 0x00, 0x00, 0x01, 0x00, 0xf7, 0x3f][..])
        );
        assert_eq!(c[4].len(), 4 + (65_536 - 16_375 - 3 * 16_379));
        // 5 MB: seq wraps after 255.
        let m = std::vec![1u8; 5_000_000];
        let c = split_long(5, &m, true);
        assert_eq!(c.len(), 1 + (5_000_000 - 16_375usize).div_ceil(16_379));
        assert_eq!((c[256][1], c[257][1]), (0, 1));
        // Empty message: one empty classic FIRST.
        assert_eq!(split_long(6, &[], false), [std::vec![6, 0, 0, 0, 0, 0]]);
    }

    #[test]
    fn capacities() {
        assert_eq!(effective_mtu(23), 20);
        assert_eq!(effective_mtu(2), 0);
        assert_eq!(
            (first_chunk_capacity(23), subsequent_chunk_capacity(23)),
            (14, 16)
        );
        assert_eq!(
            (first_chunk_capacity(247), subsequent_chunk_capacity(247)),
            (238, 240)
        );
        assert_eq!(
            (first_chunk_capacity(512), subsequent_chunk_capacity(512)),
            (255, 255)
        );
        assert_eq!(max_message_len(247), 61_438);
        assert_eq!(max_message_len(23), 14 + 255 * 16);
        assert_eq!(max_message_len(262), 253 + 255 * 255);
        assert_eq!(max_message_len(264), 65_280);
        assert_eq!(max_message_len(4096), 65_280);
        assert_eq!(max_message_len(10), 1 + 255 * 3);
        assert_eq!(first_chunk_capacity(5), 0);
    }

    #[test]
    fn counts_and_limits() {
        assert_eq!(container_count(0, 23), Ok(1));
        assert_eq!(container_count(14, 23), Ok(1));
        assert_eq!(container_count(15, 23), Ok(2));
        assert_eq!(container_count(30, 23), Ok(2));
        assert_eq!(container_count(31, 23), Ok(3));
        assert_eq!(container_count(61_438, 247), Ok(256));
        assert_eq!(
            container_count(61_439, 247),
            Err(SplitError::MessageTooLarge {
                len: 61_439,
                max: 61_438
            })
        );
        assert_eq!(
            container_count(65_536, 1024),
            Err(SplitError::MessageTooLarge {
                len: 65_536,
                max: 65_280
            })
        );
        assert_eq!(
            container_count(1, 9),
            Err(SplitError::MtuTooSmall {
                att_mtu: 9,
                min: 10
            })
        );
        assert_eq!(container_count(1, 10), Ok(1));
        assert_eq!(container_count(2, 10), Ok(2));
    }

    #[test]
    fn mtu_23_vector() {
        let mut message = hex("00046563686f20000a1e");
        message.extend([0x42; 30]);
        let containers = split(0x2a, &message, 23);
        assert_eq!(
            containers,
            [
                hex("2a000028000e00046563686f20000a1e42424242"),
                hex("2a01401042424242424242424242424242424242"),
                hex("2a02400a42424242424242424242"),
            ]
        );
    }

    #[test]
    fn mtu_247_500_bytes_vector() {
        let message: Vec<u8> = (0..500).map(|i| (i % 256) as u8).collect();
        let containers = split(0x2a, &message, 247);
        let expect = [
            (244, "2a0000f401ee", 0x00u8, "6718bf9c3c0e78c5"),
            (244, "2a0140f0", 0xee, "9add5021066b992f"),
            (26, "2a024016", 0xde, "55e689fe66789438"),
        ];
        assert_eq!(containers.len(), 3);
        for (c, (len, header, first_byte, sha)) in containers.iter().zip(expect) {
            let h = hex(header);
            assert_eq!(c.len(), len);
            assert_eq!(c.get(..h.len()), Some(&h[..]));
            assert_eq!(c.get(h.len()), Some(&first_byte));
            assert_eq!(Sha256::digest(c).get(..8).unwrap(), hex(sha));
        }
    }

    #[test]
    fn empty_message_is_one_first() {
        assert_eq!(split(7, &[], 23), [hex("070000000000")]);
        let cursor = SplitCursor::new(7, 0, 23).unwrap();
        assert_eq!((cursor.containers_left(), cursor.next_len()), (1, Some(6)));
    }

    #[test]
    fn chunks_capped_at_255_above_mtu_262() {
        // The reference Python splitter yields [254, 256, 90] at MTU 263 and fails to serialize.
        let message = [0x5a; 600];
        let lens: Vec<usize> = split(1, &message, 263).iter().map(Vec::len).collect();
        assert_eq!(lens, [6 + 254, 4 + 255, 4 + 91]);
        let lens: Vec<usize> = split(1, &message, 262).iter().map(Vec::len).collect();
        assert_eq!(lens, [6 + 253, 4 + 255, 4 + 92]);
        let lens: Vec<usize> = split(1, &message, 1024).iter().map(Vec::len).collect();
        assert_eq!(lens, [6 + 255, 4 + 255, 4 + 90]);
    }

    #[test]
    fn max_message_uses_seq_255() {
        let message = std::vec![1u8; 61_438];
        let containers = split(3, &message, 247);
        assert_eq!(containers.len(), 256);
        assert_eq!(
            containers.last().unwrap().get(..4),
            Some(&[3, 255, 0x40, 240][..])
        );
    }

    #[test]
    fn cursor_does_not_advance_on_error() {
        let message = [9u8; 20];
        let mut cursor = SplitCursor::new(4, message.len(), 23).unwrap();
        assert_eq!(cursor.tid(), 4);
        assert_eq!(cursor.next_len(), Some(20));
        assert_eq!(
            cursor.emit_next(&message, &mut [0; 19]),
            Err(WireError::BufferTooSmall {
                needed: 20,
                available: 19
            })
        );
        assert!(matches!(
            cursor.emit_next(&message[..19], &mut [0; 20]),
            Err(WireError::InvalidValue {
                field: "message_len",
                ..
            })
        ));
        let mut out = [0u8; 20];
        assert_eq!(cursor.emit_next(&message, &mut out), Ok(Some(20)));
        assert_eq!(out.get(..6), Some(&[4, 0, 0, 20, 0, 14][..]));
        assert_eq!(cursor.containers_left(), 1);
        assert_eq!(cursor.emit_next(&message, &mut out), Ok(Some(10)));
        assert_eq!(out.get(..4), Some(&[4, 1, 0x40, 6][..]));
        assert!(cursor.is_done());
        assert_eq!(cursor.next_len(), None);
        assert_eq!(cursor.emit_next(&message, &mut out), Ok(None));
    }

    #[test]
    fn splitter_reports_small_buffer() {
        let mut s = Splitter::new(0, b"hello", 23).unwrap();
        assert_eq!(s.next_into(&mut [0; 4]), None);
        assert!(s.try_next_into(&mut [0; 4]).is_err());
        assert_eq!(s.next_into(&mut [0; 20]), Some(11));
        assert_eq!(s.next_into(&mut [0; 20]), None);
    }

    #[cfg(feature = "alloc")]
    #[test]
    fn split_to_vec_matches_cursor() {
        let message: Vec<u8> = (0..700u32).map(|i| (i * 7) as u8).collect();
        for mtu in [10, 23, 185, 247, 512] {
            assert_eq!(
                split_to_vec(9, &message, mtu).unwrap(),
                split(9, &message, mtu)
            );
        }
        assert!(split_to_vec(9, &message, 9).is_err());
    }

    #[test]
    fn large_split_at_mtu_23() {
        assert_eq!(large_first_chunk_capacity(23), 12);
        assert_eq!(large_first_chunk_capacity(247), 236);
        assert_eq!(large_first_chunk_capacity(512), 255);
        assert!(needs_large_first(61_439, 247));
        assert!(!needs_large_first(61_438, 247));
        // 70,000 bytes at MTU 23: LARGE FIRST with 12 bytes, then 16 per SUBSEQUENT.
        let message: Vec<u8> = (0..70_000u32).map(|i| (i % 253) as u8).collect();
        let mut cursor = SplitCursor::new_large(0x2a, message.len(), 23).unwrap();
        assert!(cursor.is_large());
        assert_eq!(
            cursor.containers_left(),
            1 + (70_000usize - 12).div_ceil(16)
        );
        let mut out = [0u8; 20];
        let mut containers = Vec::new();
        while let Some(n) = cursor.emit_next(&message, &mut out).unwrap() {
            containers.push(out.get(..n).unwrap().to_vec());
        }
        // 2a 00 01 | 70 11 01 00 (70,000 LE) | 0c, then bytes 0..12.
        assert_eq!(
            containers[0].get(..8),
            Some(&[0x2a, 0x00, 0x01, 0x70, 0x11, 0x01, 0x00, 0x0c][..])
        );
        assert_eq!(containers[0].get(8..), message.get(..12));
        // seq wraps: container 255 has seq 255, container 256 seq 0, 257 seq 1.
        assert_eq!(containers[255].get(..4), Some(&[0x2a, 0xff, 0x40, 16][..]));
        assert_eq!(containers[256].get(..4), Some(&[0x2a, 0x00, 0x40, 16][..]));
        assert_eq!(containers[257].get(..4), Some(&[0x2a, 0x01, 0x40, 16][..]));
        let rebuilt: Vec<u8> = containers
            .iter()
            .enumerate()
            .flat_map(|(i, c)| c.get(if i == 0 { 8 } else { 4 }..).unwrap().to_vec())
            .collect();
        assert_eq!(rebuilt, message);
        // (70,000 - 12) = 4,374 * 16 + 4: the last container carries 4 bytes.
        assert_eq!(containers.last().unwrap().len(), 8);
    }

    #[test]
    fn large_split_is_classic_when_the_message_fits() {
        let message = [7u8; 500];
        let mut classic = Splitter::new(1, &message, 247).unwrap();
        let mut large = SplitCursor::new_large(1, message.len(), 247).unwrap();
        assert!(!large.is_large());
        let (mut a, mut b) = ([0u8; 244], [0u8; 244]);
        while let Some(n) = classic.next_into(&mut a) {
            assert_eq!(large.emit_next(&message, &mut b), Ok(Some(n)));
            assert_eq!(a, b);
        }
        assert!(large.is_done());
        // 65,536 bytes always need the large form; the u32 bound is the only size limit.
        assert!(SplitCursor::new(1, 65_536, 4096).is_err());
        let c = SplitCursor::new_large(1, 65_536, 4096).unwrap();
        assert!(c.is_large());
        assert_eq!(c.containers_left(), 1 + (65_536usize - 255).div_ceil(255));
        assert_eq!(
            SplitCursor::new_large(1, 100, 11).map(|_| ()),
            Err(SplitError::MtuTooSmall {
                att_mtu: 11,
                min: 12
            })
        );
    }
}
