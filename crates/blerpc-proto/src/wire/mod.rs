//! Wire codecs: every byte layout bleRPC puts on a link, as pure `parse` / `emit` functions.
//!
//! - [`container`]: the container header (FIRST / SUBSEQUENT / CONTROL), one per link PDU.
//! - [`control`]: the payloads of CONTROL containers (TIMEOUT, STREAM_END_*, CAPABILITIES, ERROR,
//!   KEY_EXCHANGE).
//! - [`capabilities`]: the 6-byte CAPABILITIES payload (14 bytes with the large-message extension).
//! - [`error_code`]: the one-byte ERROR codes, the reference's and ours.
//! - [`command`]: the command packet carried (after reassembly and decryption) by data containers.
//! - [`key_exchange`]: the four KEY_EXCHANGE step payloads.
//!
//! All multi-byte fields are little-endian. Parsers borrow from their input, never allocate, never
//! panic, and report the field and byte offset that is wrong in a [`WireError`].

pub mod capabilities;
pub mod command;
pub mod container;
pub mod control;
pub mod error_code;
pub mod key_exchange;

/// A byte sequence that does not parse, or a value that cannot be emitted.
///
/// `field` names the wire field (as in the layout diagrams, e.g. `"payload_len"`), and `offset` is
/// the byte offset of that field in the buffer that was being parsed, so a dissector can point at
/// the exact byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// The input ends before `field` is complete.
    Truncated {
        /// The field that is cut short.
        field: &'static str,
        /// Offset of the field's first byte.
        offset: usize,
        /// Bytes the field needs from `offset`.
        needed: usize,
        /// Bytes actually available from `offset`.
        available: usize,
    },
    /// `field` holds a value the protocol does not allow.
    InvalidValue {
        /// The offending field.
        field: &'static str,
        /// Offset of the field's first byte.
        offset: usize,
        /// The value found (widened).
        value: u32,
    },
    /// A value is longer than its length field can express or than the protocol allows.
    TooLong {
        /// The field whose length is exceeded.
        field: &'static str,
        /// The length that was asked for.
        len: usize,
        /// The maximum allowed.
        max: usize,
    },
    /// The output buffer given to `emit` is too small.
    BufferTooSmall {
        /// Bytes `emit` needs.
        needed: usize,
        /// Bytes the buffer has.
        available: usize,
    },
}

impl core::fmt::Display for WireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            WireError::Truncated {
                field,
                offset,
                needed,
                available,
            } => write!(
                f,
                "field `{field}` at byte {offset} is truncated: needs {needed} bytes, {available} available"
            ),
            WireError::InvalidValue {
                field,
                offset,
                value,
            } => {
                write!(
                    f,
                    "field `{field}` at byte {offset} has invalid value {value:#x}"
                )
            }
            WireError::TooLong { field, len, max } => {
                write!(f, "`{field}` is {len} bytes long, at most {max} allowed")
            }
            WireError::BufferTooSmall { needed, available } => {
                write!(
                    f,
                    "output buffer too small: {needed} bytes needed, {available} available"
                )
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for WireError {}

/// Reads `N` bytes at `offset` as an array, or reports `field` as truncated.
pub(crate) fn read_array<const N: usize>(
    input: &[u8],
    offset: usize,
    field: &'static str,
) -> Result<[u8; N], WireError> {
    input
        .get(offset..)
        .and_then(|rest| rest.get(..N))
        .and_then(|s| <[u8; N]>::try_from(s).ok())
        .ok_or(WireError::Truncated {
            field,
            offset,
            needed: N,
            available: input.len().saturating_sub(offset),
        })
}

/// Reads a little-endian `u16` at `offset`.
pub(crate) fn read_u16(input: &[u8], offset: usize, field: &'static str) -> Result<u16, WireError> {
    read_array::<2>(input, offset, field).map(u16::from_le_bytes)
}

/// Reads a little-endian `u32` at `offset`.
pub(crate) fn read_u32(input: &[u8], offset: usize, field: &'static str) -> Result<u32, WireError> {
    read_array::<4>(input, offset, field).map(u32::from_le_bytes)
}

/// Reads one byte at `offset`.
pub(crate) fn read_u8(input: &[u8], offset: usize, field: &'static str) -> Result<u8, WireError> {
    read_array::<1>(input, offset, field).map(|[b]| b)
}

/// Borrows `len` bytes at `offset`.
pub(crate) fn read_slice<'a>(
    input: &'a [u8],
    offset: usize,
    len: usize,
    field: &'static str,
) -> Result<&'a [u8], WireError> {
    input
        .get(offset..)
        .and_then(|rest| rest.get(..len))
        .ok_or(WireError::Truncated {
            field,
            offset,
            needed: len,
            available: input.len().saturating_sub(offset),
        })
}

/// Checks that `out` holds `needed` bytes and returns that prefix.
pub(crate) fn out_prefix(out: &mut [u8], needed: usize) -> Result<&mut [u8], WireError> {
    let available = out.len();
    out.get_mut(..needed)
        .ok_or(WireError::BufferTooSmall { needed, available })
}
