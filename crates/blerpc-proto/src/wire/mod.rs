//! Wire codecs: every byte layout bleRPC puts on a link, as pure `parse` / `emit` functions.
//!
//! - [`container`]: the container header (FIRST / SUBSEQUENT / CONTROL), one per link PDU.
//! - [`control`]: the payloads of CONTROL containers (TIMEOUT, STREAM_END_*, CAPABILITIES, ERROR,
//!   KEY_EXCHANGE).
//! - [`capabilities`]: the 6-byte CAPABILITIES payload (14 bytes with the large-message extension).
//! - [`error_code`]: the one-byte ERROR codes, the reference's and ours.
//! - [`command`]: the command packet carried (after reassembly and decryption) by data containers.
//! - [`key_exchange`]: the four KEY_EXCHANGE step payloads.
//! - [`diagnostics`]: the diagnostics extension's message (what a peripheral says about itself
//!   and its link).
//!
//! All multi-byte fields are little-endian. Parsers borrow from their input, never allocate, never
//! panic, and report the field and byte offset that is wrong in a [`WireError`].

pub mod capabilities;
pub mod command;
pub mod container;
pub mod control;
pub mod diagnostics;
pub mod error_code;
pub mod key_exchange;

/// A byte sequence that does not parse, or a value that cannot be emitted.
///
/// `field` names the wire field (as in the layout diagrams, e.g. `"payload_len"`), and `offset` is
/// the byte offset of that field in the buffer that was being parsed, so a dissector can point at
/// the exact byte.
///
/// Offsets and lengths are `u32` (a value above `u32::MAX` would be reported as `u32::MAX`;
/// nothing the protocol carries comes near it): the error is 32 bytes instead of 48, and every
/// queued connection event is sized by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// The input ends before `field` is complete.
    Truncated {
        /// The field that is cut short.
        field: &'static str,
        /// Offset of the field's first byte.
        offset: u32,
        /// Bytes the field needs from `offset`.
        needed: u32,
        /// Bytes actually available from `offset`.
        available: u32,
    },
    /// `field` holds a value the protocol does not allow.
    InvalidValue {
        /// The offending field.
        field: &'static str,
        /// Offset of the field's first byte.
        offset: u32,
        /// The value found (widened).
        value: u32,
    },
    /// A value is longer than its length field can express or than the protocol allows.
    TooLong {
        /// The field whose length is exceeded.
        field: &'static str,
        /// The length that was asked for.
        len: u32,
        /// The maximum allowed.
        max: u32,
    },
    /// The output buffer given to `emit` is too small.
    BufferTooSmall {
        /// Bytes `emit` needs.
        needed: u32,
        /// Bytes the buffer has.
        available: u32,
    },
}

/// A length or offset as a [`WireError`] holds it. `u32` keeps the error small, and with it every
/// event queue that can hold one (the connections' records are as large as their largest
/// warning); nothing this crate parses or emits comes near 4 GiB, and a larger value saturates
/// at `u32::MAX`.
pub(crate) fn err_num(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
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
            offset: err_num(offset),
            needed: err_num(N),
            available: err_num(input.len().saturating_sub(offset)),
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

/// The longest varint of a `u32` ([`read_varint_u32`]).
pub(crate) const MAX_VARINT_U32_LEN: usize = 5;

/// Reads an unsigned LEB128 varint (protobuf's: 7 bits a byte, least significant first, the
/// top bit set on every byte but the last) of at most 32 bits at `offset`; returns it and its
/// length. Refused: a value above `u32::MAX`, and a longer encoding than the value needs (a
/// last byte of 0 after the first), so each value has exactly one encoding.
pub(crate) fn read_varint_u32(
    input: &[u8],
    offset: usize,
    field: &'static str,
) -> Result<(u32, usize), WireError> {
    let mut value: u64 = 0;
    for i in 0..MAX_VARINT_U32_LEN {
        let byte = read_u8(input, offset + i, field).map_err(|_| WireError::Truncated {
            field,
            offset: err_num(offset),
            needed: err_num(i + 1),
            available: err_num(input.len().saturating_sub(offset)),
        })?;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            let invalid = (i > 0 && byte == 0) || value > u64::from(u32::MAX);
            return match u32::try_from(value) {
                Ok(v) if !invalid => Ok((v, i + 1)),
                _ => Err(WireError::InvalidValue {
                    field,
                    offset: err_num(offset),
                    value: u32::try_from(value).unwrap_or(u32::MAX),
                }),
            };
        }
    }
    Err(WireError::InvalidValue {
        field,
        offset: err_num(offset),
        value: u32::MAX,
    })
}

/// Writes `value` as an unsigned LEB128 varint (as [`read_varint_u32`] reads it) to the start
/// of `out`; returns its length (1 to [`MAX_VARINT_U32_LEN`]).
pub(crate) fn emit_varint_u32(mut value: u32, out: &mut [u8; MAX_VARINT_U32_LEN]) -> usize {
    let mut len = 0;
    for slot in out.iter_mut() {
        let low = (value & 0x7f) as u8;
        value >>= 7;
        len += 1;
        if value == 0 {
            *slot = low;
            break;
        }
        *slot = low | 0x80;
    }
    len
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
            offset: err_num(offset),
            needed: err_num(len),
            available: err_num(input.len().saturating_sub(offset)),
        })
}

/// Checks that `out` holds `needed` bytes and returns that prefix.
pub(crate) fn out_prefix(out: &mut [u8], needed: usize) -> Result<&mut [u8], WireError> {
    let available = out.len();
    out.get_mut(..needed).ok_or(WireError::BufferTooSmall {
        needed: err_num(needed),
        available: err_num(available),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn wire_error_is_32_bytes() {
        // The connections' event records are as large as their largest warning, which holds a
        // `WireError`: 16 records per connection on both sides.
        assert_eq!(core::mem::size_of::<WireError>(), 32);
        // 48 and 56 when the numbers were `usize`.
        assert_eq!(core::mem::size_of::<crate::connection::Warning>(), 40);
    }

    #[test]
    fn numbers_saturate() {
        assert_eq!(err_num(0), 0);
        assert_eq!(err_num(65_535), 65_535);
        assert_eq!(err_num(u32::MAX as usize), u32::MAX);
        #[cfg(target_pointer_width = "64")]
        assert_eq!(err_num(u32::MAX as usize + 1), u32::MAX);
    }

    #[test]
    fn a_varint_round_trips_at_every_length_in_its_shortest_form() {
        for (value, bytes) in [
            (0u32, &[0x00][..]),
            (1, &[0x01]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (16_383, &[0xff, 0x7f]),
            (16_384, &[0x80, 0x80, 0x01]),
            (2_097_152, &[0x80, 0x80, 0x80, 0x01]),
            (268_435_456, &[0x80, 0x80, 0x80, 0x80, 0x01]),
            (u32::MAX, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ] {
            let mut out = [0; MAX_VARINT_U32_LEN];
            let n = emit_varint_u32(value, &mut out);
            assert_eq!(&out[..n], bytes, "{value}");
            // Read at an offset, with a byte after it that is not its own.
            let mut input = [0xee; 8];
            input[1..=n].copy_from_slice(bytes);
            assert_eq!(read_varint_u32(&input, 1, "v"), Ok((value, n)), "{value}");
        }
    }

    #[test]
    fn a_varint_that_is_cut_short_too_long_or_too_large_is_refused() {
        let invalid = |input: &[u8], value: u32| {
            assert_eq!(
                read_varint_u32(input, 0, "v"),
                Err(WireError::InvalidValue {
                    field: "v",
                    offset: 0,
                    value
                }),
                "{input:02x?}"
            );
        };
        invalid(&[0x80, 0x00], 0);
        invalid(&[0xac, 0x82, 0x00], 300);
        invalid(&[0xff, 0xff, 0xff, 0xff, 0x10], u32::MAX);
        invalid(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01], u32::MAX);
        assert_eq!(
            read_varint_u32(&[0x05, 0xac, 0x82], 1, "v"),
            Err(WireError::Truncated {
                field: "v",
                offset: 1,
                needed: 3,
                available: 2
            })
        );
        assert_eq!(
            read_varint_u32(&[], 0, "v"),
            Err(WireError::Truncated {
                field: "v",
                offset: 0,
                needed: 1,
                available: 0
            })
        );
    }
}
