//! The demo service's protobuf messages (`proto/blerpc.proto`, wire.md §1.7), encoded and
//! decoded without an allocator: decoded messages borrow the request bytes, encoders write into
//! a caller's buffer.
//!
//! Only what proto3 puts on the wire for these ten messages is needed: varint fields (wire type
//! 0) and length-delimited fields (wire type 2). Fields at their default value are omitted when
//! encoding (proto3); unknown fields are skipped when decoding, as every protobuf library does;
//! for a repeated scalar field the last value wins.
//!
//! ```text
//! field = key varint (field_number << 3 | wire_type) ‖ value
//!         wire_type 0: varint                 (uint32, int32: a negative int32 takes 10 bytes)
//!         wire_type 2: length varint ‖ bytes  (string, bytes)
//! ```

/// A message did not decode (truncated varint or field, a wire type these messages never use,
/// a string that is not UTF-8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ends inside a field.
    Truncated,
    /// A varint longer than 10 bytes.
    VarintTooLong,
    /// A wire type other than varint (0), 64-bit (1), length-delimited (2) or 32-bit (5).
    WireType(u8),
    /// A `string` field holds bytes that are not UTF-8.
    Utf8,
}

/// An output buffer too short for the encoded message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferTooShort;

/// The most bytes a varint takes.
pub const MAX_VARINT_LEN: usize = 10;

/// One decoded field value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// A fixed-width field (wire types 1 and 5): skipped by these messages.
    Fixed,
}

struct Fields<'a> {
    rest: &'a [u8],
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

fn take<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8], DecodeError> {
    if buf.len() < n {
        return Err(DecodeError::Truncated);
    }
    let (head, rest) = buf.split_at(n);
    *buf = rest;
    Ok(head)
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let field = (|| {
            let key = read_varint(&mut self.rest)?;
            let number = (key >> 3) as u32;
            let value = match (key & 7) as u8 {
                0 => Value::Varint(read_varint(&mut self.rest)?),
                1 => {
                    take(&mut self.rest, 8)?;
                    Value::Fixed
                }
                2 => {
                    let len = read_varint(&mut self.rest)?;
                    let len = usize::try_from(len).map_err(|_| DecodeError::Truncated)?;
                    Value::Bytes(take(&mut self.rest, len)?)
                }
                5 => {
                    take(&mut self.rest, 4)?;
                    Value::Fixed
                }
                other => return Err(DecodeError::WireType(other)),
            };
            Ok((number, value))
        })();
        if field.is_err() {
            self.rest = &[];
        }
        Some(field)
    }
}

fn fields(buf: &[u8]) -> Fields<'_> {
    Fields { rest: buf }
}

/// A writer over a caller's buffer.
struct Writer<'o> {
    out: &'o mut [u8],
    len: usize,
}

impl<'o> Writer<'o> {
    fn new(out: &'o mut [u8]) -> Self {
        Writer { out, len: 0 }
    }
    fn byte(&mut self, b: u8) -> Result<(), BufferTooShort> {
        let slot = self.out.get_mut(self.len).ok_or(BufferTooShort)?;
        *slot = b;
        self.len += 1;
        Ok(())
    }
    fn varint(&mut self, mut v: u64) -> Result<(), BufferTooShort> {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                return self.byte(b);
            }
            self.byte(b | 0x80)?;
        }
    }
    fn bytes(&mut self, b: &[u8]) -> Result<(), BufferTooShort> {
        let end = self.len + b.len();
        self.out
            .get_mut(self.len..end)
            .ok_or(BufferTooShort)?
            .copy_from_slice(b);
        self.len = end;
        Ok(())
    }
    /// A varint field; omitted at 0 (proto3).
    fn uint(&mut self, field: u32, v: u64) -> Result<(), BufferTooShort> {
        if v == 0 {
            return Ok(());
        }
        self.varint(u64::from(field) << 3)?;
        self.varint(v)
    }
    /// An `int32` field: negative values are sign-extended to 64 bits (10 bytes).
    fn int32(&mut self, field: u32, v: i32) -> Result<(), BufferTooShort> {
        self.uint(field, i64::from(v) as u64)
    }
    /// A length-delimited field; omitted when empty (proto3).
    fn len_delimited(&mut self, field: u32, b: &[u8]) -> Result<(), BufferTooShort> {
        if b.is_empty() {
            return Ok(());
        }
        self.varint(u64::from(field) << 3 | 2)?;
        self.varint(b.len() as u64)?;
        self.bytes(b)
    }
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

fn uint_len(field: u32, v: u64) -> usize {
    if v == 0 {
        0
    } else {
        varint_len(u64::from(field) << 3) + varint_len(v)
    }
}

fn len_delimited_len(field: u32, n: usize) -> usize {
    if n == 0 {
        0
    } else {
        varint_len(u64::from(field) << 3 | 2) + varint_len(n as u64) + n
    }
}

fn as_u32(v: u64) -> u32 {
    // Protobuf truncates a varint to the field's width.
    v as u32
}

fn as_i32(v: u64) -> i32 {
    v as u32 as i32
}

/// `EchoRequest` and `EchoResponse`: `1: string message`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Echo<'a> {
    /// The text.
    pub message: &'a str,
}

impl<'a> Echo<'a> {
    /// Decodes the message.
    pub fn decode(buf: &'a [u8]) -> Result<Self, DecodeError> {
        let mut m = Echo::default();
        for f in fields(buf) {
            if let (1, Value::Bytes(b)) = f? {
                m.message = core::str::from_utf8(b).map_err(|_| DecodeError::Utf8)?;
            }
        }
        Ok(m)
    }
    /// The encoded length.
    pub fn encoded_len(&self) -> usize {
        len_delimited_len(1, self.message.len())
    }
    /// Encodes into `out`, returning the length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, BufferTooShort> {
        let mut w = Writer::new(out);
        w.len_delimited(1, self.message.as_bytes())?;
        Ok(w.len)
    }
}

/// `FlashReadRequest`: `1: uint32 address, 2: uint32 length`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlashReadRequest {
    /// The first address to read.
    pub address: u32,
    /// How many bytes.
    pub length: u32,
}

impl FlashReadRequest {
    /// Decodes the message.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut m = FlashReadRequest::default();
        for f in fields(buf) {
            match f? {
                (1, Value::Varint(v)) => m.address = as_u32(v),
                (2, Value::Varint(v)) => m.length = as_u32(v),
                _ => {}
            }
        }
        Ok(m)
    }
    /// Encodes into `out`, returning the length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, BufferTooShort> {
        let mut w = Writer::new(out);
        w.uint(1, self.address.into())?;
        w.uint(2, self.length.into())?;
        Ok(w.len)
    }
}

/// `FlashReadResponse`: `1: uint32 address, 2: bytes data`. The data is written by the caller
/// (straight from flash into the outbox): [`FlashReadResponse::encode_header`] writes
/// everything before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlashReadResponse<'a> {
    /// The address the data starts at.
    pub address: u32,
    /// The bytes read.
    pub data: &'a [u8],
}

impl<'a> FlashReadResponse<'a> {
    /// Decodes the message.
    pub fn decode(buf: &'a [u8]) -> Result<Self, DecodeError> {
        let mut m = FlashReadResponse::default();
        for f in fields(buf) {
            match f? {
                (1, Value::Varint(v)) => m.address = as_u32(v),
                (2, Value::Bytes(b)) => m.data = b,
                _ => {}
            }
        }
        Ok(m)
    }
    /// The length of everything before the data bytes when `data_len` bytes follow.
    pub fn header_len(address: u32, data_len: usize) -> usize {
        uint_len(1, address.into()) + len_delimited_len(2, data_len) - data_len
    }
    /// Writes the fields before the data bytes (`address`, then the key and length of `data`)
    /// into `out`, returning the length; `data_len` bytes of data follow.
    pub fn encode_header(
        address: u32,
        data_len: usize,
        out: &mut [u8],
    ) -> Result<usize, BufferTooShort> {
        let mut w = Writer::new(out);
        w.uint(1, address.into())?;
        if data_len > 0 {
            w.varint(2 << 3 | 2)?;
            w.varint(data_len as u64)?;
        }
        Ok(w.len)
    }
}

/// `DataWriteRequest`: `1: bytes data`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataWriteRequest<'a> {
    /// The bytes written.
    pub data: &'a [u8],
}

impl<'a> DataWriteRequest<'a> {
    /// Decodes the message.
    pub fn decode(buf: &'a [u8]) -> Result<Self, DecodeError> {
        let mut m = DataWriteRequest::default();
        for f in fields(buf) {
            if let (1, Value::Bytes(b)) = f? {
                m.data = b;
            }
        }
        Ok(m)
    }
    /// Encodes into `out`, returning the length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, BufferTooShort> {
        let mut w = Writer::new(out);
        w.len_delimited(1, self.data)?;
        Ok(w.len)
    }
}

/// A message made of one `uint32` field 1: `DataWriteResponse { length }`,
/// `CounterStreamRequest { count }`, `CounterUploadResponse { received_count }`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// The field's value.
    pub value: u32,
}

impl Count {
    /// Decodes the message.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut m = Count::default();
        for f in fields(buf) {
            if let (1, Value::Varint(v)) = f? {
                m.value = as_u32(v);
            }
        }
        Ok(m)
    }
    /// Encodes into `out`, returning the length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, BufferTooShort> {
        let mut w = Writer::new(out);
        w.uint(1, self.value.into())?;
        Ok(w.len)
    }
}

/// `CounterStreamResponse` and `CounterUploadRequest`: `1: uint32 seq, 2: int32 value`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counter {
    /// The item's index.
    pub seq: u32,
    /// Its value (`seq × 10` in the demo).
    pub value: i32,
}

impl Counter {
    /// The longest encoding: two keys, a 5-byte `uint32` and a 10-byte negative `int32`.
    pub const MAX_LEN: usize = 1 + 5 + 1 + MAX_VARINT_LEN;

    /// Decodes the message.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut m = Counter::default();
        for f in fields(buf) {
            match f? {
                (1, Value::Varint(v)) => m.seq = as_u32(v),
                (2, Value::Varint(v)) => m.value = as_i32(v),
                _ => {}
            }
        }
        Ok(m)
    }
    /// Encodes into `out`, returning the length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, BufferTooShort> {
        let mut w = Writer::new(out);
        w.uint(1, self.seq.into())?;
        w.int32(2, self.value)?;
        Ok(w.len)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    // Byte literals from wire.md §6.2 (encoded by the reference's protobuf library).
    #[test]
    fn echo_both_ways() {
        let bytes = b"\x0a\x05hello";
        assert_eq!(Echo::decode(bytes).unwrap().message, "hello");
        let mut out = [0u8; 16];
        let n = Echo { message: "hello" }.encode(&mut out).unwrap();
        assert_eq!(&out[..n], bytes);
        assert_eq!(Echo { message: "" }.encode(&mut out).unwrap(), 0);
        assert_eq!(Echo::decode(b"").unwrap().message, "");
        assert_eq!(Echo::decode(b"\x0a\x02\xff\xfe"), Err(DecodeError::Utf8));
    }

    #[test]
    fn flash_read_request_both_ways() {
        let bytes = b"\x10\x80\x40"; // {address: 0, length: 8192}
        let m = FlashReadRequest::decode(bytes).unwrap();
        assert_eq!((m.address, m.length), (0, 8192));
        let mut out = [0u8; 16];
        let n = m.encode(&mut out).unwrap();
        assert_eq!(&out[..n], bytes);
    }

    #[test]
    fn flash_read_response_header_and_data() {
        let mut out = [0u8; 16];
        let n = FlashReadResponse::encode_header(16, 3, &mut out).unwrap();
        assert_eq!(n, FlashReadResponse::header_len(16, 3));
        out[n..n + 3].copy_from_slice(b"abc");
        assert_eq!(&out[..n + 3], b"\x08\x10\x12\x03abc");
        let m = FlashReadResponse::decode(&out[..n + 3]).unwrap();
        assert_eq!((m.address, m.data), (16, &b"abc"[..]));
    }

    #[test]
    fn counters_both_ways() {
        // counter_stream {seq:1, value:10} and the zero item (both fields omitted).
        let mut out = [0u8; Counter::MAX_LEN];
        let n = Counter { seq: 1, value: 10 }.encode(&mut out).unwrap();
        assert_eq!(&out[..n], b"\x08\x01\x10\x0a");
        assert_eq!(Counter { seq: 0, value: 0 }.encode(&mut out).unwrap(), 0);
        let n = Counter {
            seq: u32::MAX,
            value: -1,
        }
        .encode(&mut out)
        .unwrap();
        assert_eq!(n, Counter::MAX_LEN);
        assert_eq!(
            Counter::decode(&out[..n]).unwrap(),
            Counter {
                seq: u32::MAX,
                value: -1
            }
        );
        let n = Count { value: 20 }.encode(&mut out).unwrap();
        assert_eq!(&out[..n], b"\x08\x14");
    }

    #[test]
    fn unknown_fields_are_skipped_and_garbage_is_an_error() {
        // field 3 varint, field 4 fixed64, field 5 fixed32, then message "x".
        let bytes = b"\x18\x01\x21\0\0\0\0\0\0\0\0\x2d\0\0\0\0\x0a\x01x";
        assert_eq!(Echo::decode(bytes).unwrap().message, "x");
        assert_eq!(Echo::decode(b"\x0a\x05he"), Err(DecodeError::Truncated));
        assert_eq!(Echo::decode(b"\x0b"), Err(DecodeError::WireType(3)));
        assert_eq!(
            Count::decode(&[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
            ]),
            Err(DecodeError::VarintTooLong)
        );
        assert_eq!(Count::decode(b"\x08"), Err(DecodeError::Truncated));
    }

    #[test]
    fn output_too_short_is_an_error() {
        let mut out = [0u8; 3];
        assert_eq!(
            Echo { message: "hello" }.encode(&mut out),
            Err(BufferTooShort)
        );
    }
}
