//! The wire codec the generated messages use: proto3 scalars, `string` and `bytes`, encoded into
//! a caller's buffer and decoded from a borrowed one, with no allocator. Emitted by
//! `blerpc-build` (`Builder::no_alloc`) into each generated file, so the generated code needs no
//! runtime crate.
//!
//! ```text
//! field = key varint (field_number << 3 | wire_type) ‖ value
//!         wire_type 0: varint                 (int32/64, uint32/64, sint32/64 zigzag, bool, enum)
//!         wire_type 1: 8 bytes little-endian  (fixed64, sfixed64, double)
//!         wire_type 2: length varint ‖ bytes  (string, bytes)
//!         wire_type 5: 4 bytes little-endian  (fixed32, sfixed32, float)
//! ```
//!
//! Decoding follows the protobuf libraries: unknown fields are skipped, a known field that
//! arrives with another wire type is skipped as unknown (as upb, the reference's library, does),
//! and for a repeated scalar the last value wins. Encoding omits fields at their default value
//! (proto3 implicit presence) and writes fields in field-number order.

/// How a command's calls flow: the shape of its `rpc` (after the side file).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// One request, one response.
    Unary,
    /// One request, then a stream of responses (peripheral to central).
    ServerStream,
    /// A stream of requests (central to peripheral), then one response.
    ClientStream,
    /// A stream each way at once (the streams extension: `docs/protocol.md` "Streams").
    BidiStream,
}

/// A message did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ends inside a field.
    Truncated,
    /// A varint longer than 10 bytes.
    VarintTooLong,
    /// A wire type that is not varint (0), 64-bit (1), length-delimited (2) or 32-bit (5):
    /// the deprecated groups (3, 4) or garbage (6, 7).
    WireType(u8),
    /// Field number 0, which protobuf reserves.
    FieldZero,
    /// A `string` field that is not UTF-8.
    Utf8,
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DecodeError::Truncated => f.write_str("the message ends inside a field"),
            DecodeError::VarintTooLong => f.write_str("a varint longer than 10 bytes"),
            DecodeError::WireType(t) => write!(f, "wire type {t} is not supported"),
            DecodeError::FieldZero => f.write_str("field number 0"),
            DecodeError::Utf8 => f.write_str("a string field is not UTF-8"),
        }
    }
}

/// The output buffer is shorter than the encoded message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferTooShort;

impl core::fmt::Display for BufferTooShort {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("the output buffer is shorter than the encoded message")
    }
}

/// The most bytes a varint takes.
pub const MAX_VARINT_LEN: usize = 10;

/// The content of a `bytes` field when encoding: a slice, or any source that can write a known
/// number of bytes into place (e.g. a flash read straight into an outbox, with no copy in
/// between). Decoded messages hold `&[u8]`.
pub trait BytesField {
    /// How many bytes [`BytesField::write_to`] writes.
    fn field_len(&self) -> usize;
    /// Writes exactly [`BytesField::field_len`] bytes into `out` (that long).
    fn write_to(&self, out: &mut [u8]);
}

impl BytesField for &[u8] {
    fn field_len(&self) -> usize {
        self.len()
    }
    fn write_to(&self, out: &mut [u8]) {
        out.copy_from_slice(self);
    }
}

impl<const N: usize> BytesField for &[u8; N] {
    fn field_len(&self) -> usize {
        N
    }
    fn write_to(&self, out: &mut [u8]) {
        out.copy_from_slice(self.as_slice());
    }
}

/// One field as read from the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 2.
    Bytes(&'a [u8]),
    /// Wire type 5.
    Fixed32(u32),
}

/// The fields of an encoded message, in wire order: `(field number, value)`. After an error
/// the iterator ends.
#[derive(Clone, Debug)]
pub struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    /// The fields of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Fields { rest: buf }
    }

    fn field(&mut self) -> Result<(u32, Value<'a>), DecodeError> {
        let key = read_varint(&mut self.rest)?;
        let number = u32::try_from(key >> 3).map_err(|_| DecodeError::FieldZero)?;
        if number == 0 {
            return Err(DecodeError::FieldZero);
        }
        let value = match (key & 7) as u8 {
            0 => Value::Varint(read_varint(&mut self.rest)?),
            1 => Value::Fixed64(u64::from_le_bytes(take_array(&mut self.rest)?)),
            2 => {
                let len = read_varint(&mut self.rest)?;
                let len = usize::try_from(len).map_err(|_| DecodeError::Truncated)?;
                if self.rest.len() < len {
                    return Err(DecodeError::Truncated);
                }
                let (head, rest) = self.rest.split_at(len);
                self.rest = rest;
                Value::Bytes(head)
            }
            5 => Value::Fixed32(u32::from_le_bytes(take_array(&mut self.rest)?)),
            other => return Err(DecodeError::WireType(other)),
        };
        Ok((number, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let field = self.field();
        if field.is_err() {
            self.rest = &[];
        }
        Some(field)
    }
}

fn read_varint(buf: &mut &[u8]) -> Result<u64, DecodeError> {
    let mut value = 0u64;
    for i in 0..MAX_VARINT_LEN {
        let (&b, rest) = buf.split_first().ok_or(DecodeError::Truncated)?;
        *buf = rest;
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(DecodeError::VarintTooLong)
}

fn take_array<const N: usize>(buf: &mut &[u8]) -> Result<[u8; N], DecodeError> {
    let (head, rest) = buf.split_first_chunk::<N>().ok_or(DecodeError::Truncated)?;
    *buf = rest;
    Ok(*head)
}

/// A `string` field's value.
pub fn str_value(b: &[u8]) -> Result<&str, DecodeError> {
    core::str::from_utf8(b).map_err(|_| DecodeError::Utf8)
}

/// The zigzag decoding of a `sint32`/`sint64` varint.
pub const fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The zigzag encoding of a `sint32`/`sint64` value.
pub const fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The encoded length of `v` as a varint.
pub const fn varint_len(v: u64) -> usize {
    let mut n = 1;
    let mut v = v >> 7;
    while v != 0 {
        n += 1;
        v >>= 7;
    }
    n
}

/// The length of a field's key.
pub const fn key_len(field: u32) -> usize {
    varint_len((field as u64) << 3)
}

/// The length of a varint field holding `v` (present: written even at 0).
pub const fn varint_field_len(field: u32, v: u64) -> usize {
    key_len(field) + varint_len(v)
}

/// The length of a length-delimited field of `n` bytes (present: written even when empty).
pub const fn len_field_len(field: u32, n: usize) -> usize {
    key_len(field) + varint_len(n as u64) + n
}

/// Writes fields into a caller's buffer.
#[derive(Debug)]
pub struct Writer<'o> {
    out: &'o mut [u8],
    len: usize,
}

impl<'o> Writer<'o> {
    /// A writer at the start of `out`.
    pub fn new(out: &'o mut [u8]) -> Self {
        Writer { out, len: 0 }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` before the first byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn take(&mut self, n: usize) -> Result<&mut [u8], BufferTooShort> {
        let end = self.len.checked_add(n).ok_or(BufferTooShort)?;
        let slot = self.out.get_mut(self.len..end).ok_or(BufferTooShort)?;
        self.len = end;
        Ok(slot)
    }

    fn varint(&mut self, mut v: u64) -> Result<(), BufferTooShort> {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            let last = v == 0;
            if let Some(slot) = self.take(1)?.first_mut() {
                *slot = if last { b } else { b | 0x80 };
            }
            if last {
                return Ok(());
            }
        }
    }

    fn key(&mut self, field: u32, wire_type: u8) -> Result<(), BufferTooShort> {
        self.varint(u64::from(field) << 3 | u64::from(wire_type))
    }

    /// A varint field (wire type 0).
    pub fn varint_field(&mut self, field: u32, v: u64) -> Result<(), BufferTooShort> {
        self.key(field, 0)?;
        self.varint(v)
    }

    /// A 64-bit field (wire type 1).
    pub fn fixed64_field(&mut self, field: u32, v: u64) -> Result<(), BufferTooShort> {
        self.key(field, 1)?;
        self.take(8)?.copy_from_slice(&v.to_le_bytes());
        Ok(())
    }

    /// A 32-bit field (wire type 5).
    pub fn fixed32_field(&mut self, field: u32, v: u32) -> Result<(), BufferTooShort> {
        self.key(field, 5)?;
        self.take(4)?.copy_from_slice(&v.to_le_bytes());
        Ok(())
    }

    /// A length-delimited field (wire type 2) whose content `value` writes in place.
    pub fn bytes_field(
        &mut self,
        field: u32,
        value: &impl BytesField,
    ) -> Result<(), BufferTooShort> {
        let n = value.field_len();
        self.key(field, 2)?;
        self.varint(n as u64)?;
        value.write_to(self.take(n)?);
        Ok(())
    }

    /// A `string` field (wire type 2).
    pub fn str_field(&mut self, field: u32, value: &str) -> Result<(), BufferTooShort> {
        self.bytes_field(field, &value.as_bytes())
    }
}
