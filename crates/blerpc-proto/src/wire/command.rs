//! The command packet: the message a transaction carries once reassembled (and decrypted).
//!
//! ```text
//! offset 0        1          2                2+n            4+n
//!        +--------+----------+----------------+--------------+----------------------+
//!        | type   | name_len | name (n bytes) | data_len u16 | data (data_len bytes) |
//!        +--------+----------+----------------+--------------+----------------------+
//! type:  bit 7 = 0 request / 1 response; bits 6..0 reserved (0 on emit, ignored on parse)
//! name:  the routing key, e.g. "echo", "flash_read" (ASCII in the reference; UTF-8 accepted)
//! data:  the protobuf-encoded request or response message, little-endian length
//!
//! large-message extension (only where negotiated; see docs/protocol.md):
//!        +-------------+----------+----------------+--------------+----------------------+
//!        | type | 0x01 | name_len | name (n bytes) | data_len u32 | data (data_len bytes) |
//!        +-------------+----------+----------------+--------------+----------------------+
//! type bit 0 = LARGE_DATA: data_len is a u32, used exactly when data_len > 65,535
//!
//! deadline extension (requests only, only where negotiated):
//!        +-------------+----------+----------------+--------------------+------------+------+
//!        | type | 0x02 | name_len | name (n bytes) | deadline_ms varint | data_len   | data |
//!        +-------------+----------+----------------+--------------------+------------+------+
//! type bit 1 = DEADLINE: the milliseconds the central still waits for the answer, counted
//! from when the request was queued, as a protobuf varint of a u32 (1 to 5 bytes, the
//! shortest form only: 2 bytes up to 16.383 s); data_len as above (u16, or u32 with bit 0)
//!
//! streams extension (requests only, only where negotiated): each set bit adds its field after
//! the name, in this order: deadline_ms varint (bit 1), window u16 (bit 2), stream u8 (bit 3)
//! type bit 2 = OPEN:   the request opens a stream whose peripheral→central items are credited;
//!                      window = the items the central accepts before it grants more (>= 1)
//! type bit 4 = BIDI:   with OPEN only: the stream is bidirectional (items follow both ways)
//! type bit 3 = ITEM:   the request is an item of the bidirectional stream opened by request
//!                      tid `stream` (never with OPEN)
//! e.g. 14 04 "chat" 08 00 00 00: open bidirectional stream "chat", window 8, no data
//! ```
//!
//! The extended form is read only by [`Command::parse_large`] (a connection with the extension
//! in force); [`Command::parse`] keeps the reference behaviour of ignoring bits 6..0. Senders
//! use it only when the data does not fit the classic `u16`, and [`Command::parse_large`]
//! rejects an extended header whose length would have fitted, so every command has exactly one
//! encoding.
//!
//! Unlike the reference's Python decoder (which slices silently), [`Command::parse`] requires all
//! `data_len` bytes to be present, as the C and TypeScript decoders do. Bytes after the data are
//! tolerated and ignored.

use super::{
    MAX_VARINT_U32_LEN, WireError, emit_varint_u32, err_num, out_prefix, read_slice, read_u8,
    read_u16, read_u32, read_varint_u32,
};

/// The longest command name (`name_len` is a `u8`).
pub const MAX_NAME_LEN: usize = 255;
/// The longest data (`data_len` is a `u16`).
pub const MAX_DATA_LEN: usize = 65535;

/// The longest data with the large-message extension (`data_len` is a `u32`).
pub const MAX_LARGE_DATA_LEN: usize = u32::MAX as usize;
/// Type-byte bit 0 of an extended command: `data_len` is a `u32` (large-message extension).
pub const LARGE_DATA_FLAG: u8 = 0x01;
/// Type-byte bit 1 of a request carrying its deadline (deadline extension): the milliseconds
/// follow the name as a varint (a `u32`, shortest form).
pub const DEADLINE_FLAG: u8 = 0x02;
/// The most bytes the deadline adds to a request's header (2 up to 16,383 ms, 3 up to about
/// 35 minutes).
pub const MAX_DEADLINE_LEN: usize = MAX_VARINT_U32_LEN;
/// Type-byte bit 2 of a request opening a stream with credited items (streams extension): a
/// `u16` window follows the name (after the deadline).
pub const OPEN_FLAG: u8 = 0x04;
/// Type-byte bit 3 of a request that is an item of a bidirectional stream (streams
/// extension): the `u8` stream id (the open request's tid) follows the name (after the
/// deadline).
pub const ITEM_FLAG: u8 = 0x08;
/// Type-byte bit 4, only with [`OPEN_FLAG`]: the stream opened is bidirectional.
pub const BIDI_FLAG: u8 = 0x10;
/// The request flags of the deadline and streams extensions: what
/// [`Command::parse_extended`]'s `agreed` mask selects from.
pub const REQUEST_FLAGS: u8 = DEADLINE_FLAG | OPEN_FLAG | ITEM_FLAG | BIDI_FLAG;
/// The longest run of extension fields after a request's name (deadline, window, stream).
pub const MAX_FIELDS_LEN: usize = MAX_DEADLINE_LEN + 2 + 1;

const RESPONSE_BIT: u8 = 0x80;

/// Whether a command is a request or a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CommandType {
    /// Central to peripheral: invoke the handler `name`.
    Request,
    /// Peripheral to central: the result of `name` (or one stream item).
    Response,
}

impl CommandType {
    /// The type byte emitted (`0x00` or `0x80`).
    pub const fn to_byte(self) -> u8 {
        match self {
            CommandType::Request => 0x00,
            CommandType::Response => RESPONSE_BIT,
        }
    }
    /// Decodes the type from bit 7 only.
    pub const fn from_byte(b: u8) -> Self {
        if b & RESPONSE_BIT != 0 {
            CommandType::Response
        } else {
            CommandType::Request
        }
    }
    /// The type's protocol name: `REQUEST` or `RESPONSE`.
    pub const fn as_str(self) -> &'static str {
        match self {
            CommandType::Request => "REQUEST",
            CommandType::Response => "RESPONSE",
        }
    }
}

/// The protocol name ([`CommandType::as_str`]).
impl core::fmt::Display for CommandType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A command packet, borrowing its name and data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Command<'a> {
    /// Request or response.
    pub kind: CommandType,
    /// The command name (≤ [`MAX_NAME_LEN`] bytes).
    pub name: &'a str,
    /// The protobuf data (≤ [`MAX_DATA_LEN`] bytes).
    pub data: &'a [u8],
}

impl<'a> Command<'a> {
    /// Parses a command packet. The name must be UTF-8 and all `data_len` bytes must be present.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, WireError> {
        let kind = CommandType::from_byte(read_u8(bytes, 0, "type")?);
        let name_len = usize::from(read_u8(bytes, 1, "name_len")?);
        let name = parse_name(bytes, name_len)?;
        let data_len = usize::from(read_u16(bytes, 2 + name_len, "data_len")?);
        let data = read_slice(bytes, 4 + name_len, data_len, "data")?;
        Ok(Command { kind, name, data })
    }

    /// Parses a command on a connection where the large-message extension is in force: a type
    /// byte with [`LARGE_DATA_FLAG`] set announces a `u32` `data_len`, which must exceed 65,535
    /// (otherwise [`WireError::InvalidValue`] on `data_len`: the classic form is the only
    /// encoding of shorter data). Without the flag this is [`Command::parse`].
    pub fn parse_large(bytes: &'a [u8]) -> Result<Self, WireError> {
        let type_byte = read_u8(bytes, 0, "type")?;
        if type_byte & LARGE_DATA_FLAG == 0 {
            return Self::parse(bytes);
        }
        let kind = CommandType::from_byte(type_byte);
        let name_len = usize::from(read_u8(bytes, 1, "name_len")?);
        let name = parse_name(bytes, name_len)?;
        let data_len = read_u32(bytes, 2 + name_len, "data_len")?;
        if data_len as usize <= MAX_DATA_LEN {
            return Err(WireError::InvalidValue {
                field: "data_len",
                offset: err_num(2 + name_len),
                value: data_len,
            });
        }
        let data = read_slice(bytes, 6 + name_len, data_len as usize, "data")?;
        Ok(Command { kind, name, data })
    }

    /// Parses a command on a connection with the extensions given in force: `large` (the
    /// large-message extension, as [`Command::parse_large`]) and `agreed`, the request flags
    /// of [`REQUEST_FLAGS`] in force ([`DEADLINE_FLAG`] with the deadline extension, the
    /// stream flags with the streams extension). A flag not in `agreed` is ignored, as the
    /// reference ignores bits 6..0; an agreed flag on a response, [`BIDI_FLAG`] without
    /// [`OPEN_FLAG`], [`ITEM_FLAG`] with it, and a window of 0 are
    /// [`WireError::InvalidValue`].
    pub fn parse_extended(
        bytes: &'a [u8],
        large: bool,
        agreed: u8,
    ) -> Result<Extended<'a>, WireError> {
        let type_byte = read_u8(bytes, 0, "type")?;
        let flags = type_byte & agreed & REQUEST_FLAGS;
        if flags == 0 {
            let command = if large {
                Self::parse_large(bytes)?
            } else {
                Self::parse(bytes)?
            };
            let header_len = if large {
                Self::header_len_large(command.name.len(), command.data.len())
            } else {
                Self::header_len(command.name.len())
            };
            return Ok(Extended {
                command,
                fields: RequestFields::NONE,
                header_len,
            });
        }
        let kind = CommandType::from_byte(type_byte);
        let open = flags & OPEN_FLAG != 0;
        let invalid_type = WireError::InvalidValue {
            field: "type",
            offset: 0,
            value: u32::from(type_byte),
        };
        if kind != CommandType::Request
            || (flags & BIDI_FLAG != 0 && !open)
            || (open && flags & ITEM_FLAG != 0)
        {
            return Err(invalid_type);
        }
        let name_len = usize::from(read_u8(bytes, 1, "name_len")?);
        let name = parse_name(bytes, name_len)?;
        let mut at = 2 + name_len;
        let mut fields = RequestFields::NONE;
        if flags & DEADLINE_FLAG != 0 {
            let (ms, len) = read_varint_u32(bytes, at, "deadline_ms")?;
            fields.deadline_ms = Some(ms);
            at += len;
        }
        if open {
            let window = read_u16(bytes, at, "window")?;
            if window == 0 {
                return Err(WireError::InvalidValue {
                    field: "window",
                    offset: err_num(at),
                    value: 0,
                });
            }
            fields.open = Some(StreamOpen {
                window,
                bidi: flags & BIDI_FLAG != 0,
            });
            at += 2;
        }
        if flags & ITEM_FLAG != 0 {
            fields.item_of = Some(read_u8(bytes, at, "stream")?);
            at += 1;
        }
        let (data_len, len_len) = if large && type_byte & LARGE_DATA_FLAG != 0 {
            let data_len = read_u32(bytes, at, "data_len")?;
            if data_len as usize <= MAX_DATA_LEN {
                return Err(WireError::InvalidValue {
                    field: "data_len",
                    offset: err_num(at),
                    value: data_len,
                });
            }
            (data_len as usize, 4)
        } else {
            (usize::from(read_u16(bytes, at, "data_len")?), 2)
        };
        let data = read_slice(bytes, at + len_len, data_len, "data")?;
        Ok(Extended {
            command: Command { kind, name, data },
            fields,
            header_len: at + len_len,
        })
    }

    /// A request for `name` carrying `data`.
    pub const fn request(name: &'a str, data: &'a [u8]) -> Self {
        Command {
            kind: CommandType::Request,
            name,
            data,
        }
    }

    /// A response from `name` carrying `data`.
    pub const fn response(name: &'a str, data: &'a [u8]) -> Self {
        Command {
            kind: CommandType::Response,
            name,
            data,
        }
    }

    /// Header length for a name of `name_len` bytes: type, name_len, name, data_len.
    pub const fn header_len(name_len: usize) -> usize {
        1 + 1 + name_len + 2
    }

    /// Header length with the large-message extension: the classic [`Command::header_len`] for
    /// data up to 65,535 bytes, two bytes more (a `u32` `data_len`) beyond.
    pub const fn header_len_large(name_len: usize, data_len: usize) -> usize {
        if data_len > MAX_DATA_LEN {
            Self::header_len(name_len) + 2
        } else {
            Self::header_len(name_len)
        }
    }

    /// Bytes [`Command::emit`] writes.
    pub fn emitted_len(&self) -> usize {
        Self::header_len(self.name.len()) + self.data.len()
    }

    /// Bytes [`Command::emit_large`] writes.
    pub fn emitted_len_large(&self) -> usize {
        Self::header_len_large(self.name.len(), self.data.len()) + self.data.len()
    }

    /// Like [`Command::emit`], with the extended header when the data exceeds 65,535 bytes
    /// (only for a connection where the large-message extension is in force).
    pub fn emit_large(&self, out: &mut [u8]) -> Result<usize, WireError> {
        let header = Self::emit_header_large(self.kind, self.name, self.data.len(), out)?;
        let len = header + self.data.len();
        out_prefix(out, len)?
            .get_mut(header..)
            .ok_or(WireError::BufferTooSmall {
                needed: err_num(len),
                available: err_num(header),
            })?
            .copy_from_slice(self.data);
        Ok(len)
    }

    /// Like [`Command::emit_header`], with the extended header (type bit 0, `u32` `data_len`)
    /// when `data_len` exceeds 65,535; classic otherwise. Returns the header length.
    pub fn emit_header_large(
        kind: CommandType,
        name: &str,
        data_len: usize,
        out: &mut [u8],
    ) -> Result<usize, WireError> {
        if data_len <= MAX_DATA_LEN {
            return Self::emit_header(kind, name, data_len, out);
        }
        let data_len = u32::try_from(data_len).map_err(|_| WireError::TooLong {
            field: "data",
            len: err_num(data_len),
            max: err_num(MAX_LARGE_DATA_LEN),
        })?;
        emit_header_parts(
            kind.to_byte() | LARGE_DATA_FLAG,
            name,
            &data_len.to_le_bytes(),
            out,
        )
    }

    /// Writes the packet to the start of `out` and returns its length.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, WireError> {
        let header = Self::emit_header(self.kind, self.name, self.data.len(), out)?;
        let len = header + self.data.len();
        out_prefix(out, len)?
            .get_mut(header..)
            .ok_or(WireError::BufferTooSmall {
                needed: err_num(len),
                available: err_num(header),
            })?
            .copy_from_slice(self.data);
        Ok(len)
    }

    /// Writes only the header for `data_len` bytes of data, so the caller can encode the data in
    /// place right after it. Returns the header length.
    pub fn emit_header(
        kind: CommandType,
        name: &str,
        data_len: usize,
        out: &mut [u8],
    ) -> Result<usize, WireError> {
        let data_len = u16::try_from(data_len).map_err(|_| WireError::TooLong {
            field: "data",
            len: err_num(data_len),
            max: err_num(MAX_DATA_LEN),
        })?;
        emit_header_parts(kind.to_byte(), name, &data_len.to_le_bytes(), out)
    }
}

/// A command as [`Command::parse_extended`] found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extended<'a> {
    /// The command.
    pub command: Command<'a>,
    /// The extension fields the request carried after its name.
    pub fields: RequestFields,
    /// The header's length: where the data starts.
    pub header_len: usize,
}

/// A stream's opening, as a request with [`OPEN_FLAG`] carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamOpen {
    /// Peripheral→central items the central accepts before it grants more (at least 1).
    pub window: u16,
    /// The stream is bidirectional ([`BIDI_FLAG`]): the central sends items too.
    pub bidi: bool,
}

/// The extension fields a request carries after its name (the deadline and streams
/// extensions), in wire order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestFields {
    /// [`DEADLINE_FLAG`]: the milliseconds the central still waits, from the request's arrival.
    pub deadline_ms: Option<u32>,
    /// [`OPEN_FLAG`] (and [`BIDI_FLAG`]): the request opens a stream.
    pub open: Option<StreamOpen>,
    /// [`ITEM_FLAG`]: the request is an item of the bidirectional stream with this id.
    pub item_of: Option<u8>,
}

impl RequestFields {
    /// No field: a classic request.
    pub const NONE: Self = RequestFields {
        deadline_ms: None,
        open: None,
        item_of: None,
    };

    /// The type-byte flags these fields set.
    pub const fn flags(&self) -> u8 {
        let mut flags = 0;
        if self.deadline_ms.is_some() {
            flags |= DEADLINE_FLAG;
        }
        if let Some(open) = self.open {
            flags |= OPEN_FLAG;
            if open.bidi {
                flags |= BIDI_FLAG;
            }
        }
        if self.item_of.is_some() {
            flags |= ITEM_FLAG;
        }
        flags
    }

    /// Writes the fields in wire order to the start of `out`; returns their length.
    pub fn emit(&self, out: &mut [u8; MAX_FIELDS_LEN]) -> usize {
        let mut len = 0;
        let mut put = |bytes: &[u8]| {
            if let Some(dst) = out.get_mut(len..len + bytes.len()) {
                dst.copy_from_slice(bytes);
                len += bytes.len();
            }
        };
        if let Some(ms) = self.deadline_ms {
            let mut varint = [0; MAX_VARINT_U32_LEN];
            let n = emit_varint_u32(ms, &mut varint);
            put(varint.get(..n).unwrap_or_default());
        }
        if let Some(open) = self.open {
            put(&open.window.to_le_bytes());
        }
        if let Some(stream) = self.item_of {
            put(&[stream]);
        }
        len
    }
}

/// The parts of a stored request command (as [`Command::emit_header_large`] writes it) with
/// the extension `fields` inserted after its name: the type byte with their flags, then the
/// command's bytes up to the end of the name, the fields ([`RequestFields::emit`] into
/// `scratch`), and the rest. Queued as they are (no copy of the command); `None` if `command`
/// is shorter than its header says.
pub fn with_fields<'c>(
    command: &'c [u8],
    fields: &RequestFields,
    type_byte: &'c mut [u8; 1],
    scratch: &'c mut [u8; MAX_FIELDS_LEN],
) -> Option<[&'c [u8]; 4]> {
    let name_end = 2 + usize::from(*command.get(1)?);
    type_byte[0] = command.first()? | fields.flags();
    let len = fields.emit(scratch);
    Some([
        type_byte,
        command.get(1..name_end)?,
        scratch.get(..len)?,
        command.get(name_end..)?,
    ])
}

/// Writes `type_byte`, the name's length, the name and `data_len` (2 or 4 bytes, little-endian)
/// to the start of `out`; returns the header's length. Slice copies, not a byte at a time: a
/// header is written for every command sent.
fn emit_header_parts(
    type_byte: u8,
    name: &str,
    data_len: &[u8],
    out: &mut [u8],
) -> Result<usize, WireError> {
    let name_len = u8::try_from(name.len()).map_err(|_| WireError::TooLong {
        field: "name",
        len: err_num(name.len()),
        max: err_num(MAX_NAME_LEN),
    })?;
    let len = 2 + name.len() + data_len.len();
    let buf = out_prefix(out, len)?;
    let (head, rest) = buf.split_at_mut(2);
    let (name_out, len_out) = rest.split_at_mut(name.len());
    head.copy_from_slice(&[type_byte, name_len]);
    name_out.copy_from_slice(name.as_bytes());
    len_out.copy_from_slice(data_len);
    Ok(len)
}

/// The UTF-8 name at offset 2.
fn parse_name(bytes: &[u8], name_len: usize) -> Result<&str, WireError> {
    let name_bytes = read_slice(bytes, 2, name_len, "name")?;
    core::str::from_utf8(name_bytes).map_err(|e| {
        let at = e.valid_up_to();
        WireError::InvalidValue {
            field: "name",
            offset: err_num(2 + at),
            value: name_bytes.get(at).copied().map_or(0, u32::from),
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    fn emit_vec(c: &Command<'_>) -> Vec<u8> {
        let mut out = std::vec![0u8; c.emitted_len()];
        assert_eq!(c.emit(&mut out), Ok(c.emitted_len()));
        out
    }

    fn hex(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    #[test]
    fn command_types_are_named() {
        use std::string::ToString;
        // Type byte bit 7; the other bits do not change the type (as the reference reads it).
        for (bytes, name) in [
            (&b"\x00\x04echo\x00\x00"[..], "REQUEST"),
            (&b"\x7f\x04echo\x00\x00"[..], "REQUEST"),
            (&b"\x80\x04echo\x00\x00"[..], "RESPONSE"),
        ] {
            let kind = Command::parse(bytes).unwrap().kind;
            assert_eq!((kind.as_str(), kind.to_string().as_str()), (name, name));
        }
    }

    #[test]
    fn reference_vectors() {
        let vectors = [
            (
                "00046563686f07000a0568656c6c6f",
                Command::request("echo", b"\x0a\x05hello"),
            ),
            (
                "80046563686f07000a0568656c6c6f",
                Command::response("echo", b"\x0a\x05hello"),
            ),
            ("00046563686f0000", Command::request("echo", b"")),
            (
                "000a666c6173685f726561640300108040",
                Command::request("flash_read", &[0x10, 0x80, 0x40]),
            ),
            (
                "000e636f756e7465725f73747265616d02000814",
                Command::request("counter_stream", &[0x08, 0x14]),
            ),
            (
                "800e636f756e7465725f73747265616d04000801100a",
                Command::response("counter_stream", &[0x08, 0x01, 0x10, 0x0a]),
            ),
            (
                "800e636f756e7465725f73747265616d0000",
                Command::response("counter_stream", &[]),
            ),
            (
                "800e636f756e7465725f75706c6f616402000814",
                Command::response("counter_upload", &[0x08, 0x14]),
            ),
        ];
        for (h, cmd) in vectors {
            let bytes = hex(h);
            assert_eq!(Command::parse(&bytes), Ok(cmd), "{h}");
            assert_eq!(emit_vec(&cmd), bytes, "{h}");
        }
    }

    #[test]
    fn type_from_bit_7_only_and_trailing_bytes() {
        assert_eq!(
            Command::parse(&[0x7f, 0x01, b'a', 0x00, 0x00]),
            Ok(Command::request("a", b""))
        );
        assert_eq!(
            Command::parse(&[0x81, 0x01, b'a', 0x01, 0x00, 0x09, 0xee]),
            Ok(Command::response("a", &[0x09]))
        );
    }

    #[test]
    fn short_data_is_truncated_not_sliced() {
        // Python decodes this to data = b"xy"; we reject it like C and TS.
        assert_eq!(
            Command::parse(&[0x00, 0x01, b'a', 0x05, 0x00, b'x', b'y']),
            Err(WireError::Truncated {
                field: "data",
                offset: 5,
                needed: 5,
                available: 2
            })
        );
        assert!(matches!(
            Command::parse(&[0x00, 0x04, b'e', b'c']),
            Err(WireError::Truncated { field: "name", .. })
        ));
        assert!(matches!(
            Command::parse(&[0x00, 0x01, b'a', 0x05]),
            Err(WireError::Truncated {
                field: "data_len",
                ..
            })
        ));
        assert!(matches!(
            Command::parse(&[0x00]),
            Err(WireError::Truncated { .. })
        ));
        assert!(Command::parse(&[]).is_err());
    }

    #[test]
    fn name_must_be_utf8() {
        assert_eq!(
            Command::parse(&[0x00, 0x02, b'a', 0xff, 0x00, 0x00]),
            Err(WireError::InvalidValue {
                field: "name",
                offset: 3,
                value: 0xff
            })
        );
        let bytes = hex("0002c3a90000");
        assert_eq!(Command::parse(&bytes), Ok(Command::request("é", b"")));
        assert_eq!(emit_vec(&Command::request("é", b"")), bytes);
    }

    #[test]
    fn emit_limits() {
        let long = "x".repeat(256);
        assert_eq!(
            Command::request(&long, b"").emit(&mut [0; 300]),
            Err(WireError::TooLong {
                field: "name",
                len: 256,
                max: 255
            })
        );
        assert_eq!(
            Command::emit_header(CommandType::Request, "a", 65536, &mut [0; 8]),
            Err(WireError::TooLong {
                field: "data",
                len: 65536,
                max: 65535
            })
        );
        assert_eq!(
            Command::request("echo", b"abc").emit(&mut [0; 10]),
            Err(WireError::BufferTooSmall {
                needed: 11,
                available: 10
            })
        );
        let name = "n".repeat(255);
        let data = std::vec![7u8; 65535];
        let cmd = Command::response(&name, &data);
        let bytes = emit_vec(&cmd);
        assert_eq!(bytes.len(), Command::header_len(255) + 65535);
        assert_eq!(Command::parse(&bytes), Ok(cmd));
    }

    #[test]
    fn header_edges() {
        // An empty name: type, 0, data_len.
        let mut out = [0xeeu8; 6];
        assert_eq!(
            Command::emit_header(CommandType::Request, "", 258, &mut out),
            Ok(4)
        );
        assert_eq!(out, *b"\x00\x00\x02\x01\xee\xee");
        // The large header writes nothing past its 8 bytes either.
        let mut out = [0xeeu8; 9];
        assert_eq!(
            Command::emit_header_large(CommandType::Response, "ab", 0x0102_0304, &mut out),
            Ok(8)
        );
        assert_eq!(out, *b"\x81\x02ab\x04\x03\x02\x01\xee");
        // One byte short, classic and large: refused, the buffer untouched.
        let mut out = [0xeeu8; 7];
        assert_eq!(
            Command::emit_header(CommandType::Request, "abcd", 1, &mut out),
            Err(WireError::BufferTooSmall {
                needed: 8,
                available: 7
            })
        );
        assert_eq!(out, [0xee; 7]);
        assert_eq!(
            Command::emit_header_large(CommandType::Request, "abcd", 65_536, &mut [0; 9]),
            Err(WireError::BufferTooSmall {
                needed: 10,
                available: 9
            })
        );
        // A name of 256 bytes, through either header.
        let long = "x".repeat(256);
        for result in [
            Command::emit_header(CommandType::Request, &long, 1, &mut [0; 300]),
            Command::emit_header_large(CommandType::Request, &long, 65_536, &mut [0; 300]),
        ] {
            assert_eq!(
                result,
                Err(WireError::TooLong {
                    field: "name",
                    len: 256,
                    max: 255
                })
            );
        }
    }

    #[test]
    fn header_then_data_in_place() {
        let mut out = [0u8; 16];
        let n = Command::emit_header(CommandType::Response, "echo", 7, &mut out).unwrap();
        assert_eq!(n, Command::header_len(4));
        out.get_mut(n..n + 7)
            .unwrap()
            .copy_from_slice(b"\x0a\x05hello");
        assert_eq!(
            out.get(..n + 7).unwrap(),
            hex("80046563686f07000a0568656c6c6f")
        );
    }

    #[test]
    fn large_command_vector() {
        // REQUEST "echo" with 65,536 data bytes: 01 04 "echo" 00 00 01 00 data.
        let data = std::vec![0x5au8; 65_536];
        let cmd = Command::request("echo", &data);
        let mut out = std::vec![0u8; cmd.emitted_len_large()];
        assert_eq!(cmd.emit_large(&mut out), Ok(10 + 65_536));
        assert_eq!(out.get(..10), Some(&hex("01046563686f00000100")[..]));
        assert_eq!(Command::parse_large(&out), Ok(cmd));
        assert_eq!(Command::header_len_large(4, 65_536), 10);
        // The classic parser cannot read it (it takes data_len = 0 and the rest as trailing).
        assert_eq!(Command::parse(&out).map(|c| c.data.len()), Ok(0));
        // A RESPONSE sets bit 7 too: 0x81.
        let resp = Command::response("e", &data);
        let mut out = std::vec![0u8; resp.emitted_len_large()];
        resp.emit_large(&mut out).unwrap();
        assert_eq!(out.get(..7), Some(&hex("81016500000100")[..]));
        assert_eq!(Command::parse_large(&out), Ok(resp));
        // Up to 65,535 the classic header is emitted, even by emit_large.
        let small = Command::request("echo", b"hi");
        let mut out = [0u8; 10];
        assert_eq!(small.emit_large(&mut out), Ok(10));
        assert_eq!(out, *b"\x00\x04echo\x02\x00hi");
        assert_eq!(Command::parse_large(&out), Ok(small));
    }

    #[test]
    fn large_command_errors() {
        // Non-canonical: the extended form for data that fits a u16.
        assert_eq!(
            Command::parse_large(&hex("01046563686fffff0000")),
            Err(WireError::InvalidValue {
                field: "data_len",
                offset: 6,
                value: 0xffff
            })
        );
        // Truncated data_len and data.
        assert_eq!(
            Command::parse_large(&hex("01046563686f000001")),
            Err(WireError::Truncated {
                field: "data_len",
                offset: 6,
                needed: 4,
                available: 3
            })
        );
        assert_eq!(
            Command::parse_large(&hex("01046563686f00000100aabb")),
            Err(WireError::Truncated {
                field: "data",
                offset: 10,
                needed: 65_536,
                available: 2
            })
        );
        // The classic emitter refuses what only the extension can carry.
        assert!(matches!(
            Command::emit_header(CommandType::Request, "echo", 65_536, &mut [0; 16]),
            Err(WireError::TooLong { field: "data", .. })
        ));
    }

    #[test]
    fn deadline_vectors() {
        // echo "hello" with 300 ms left (varint ac 02): 02 04 "echo" ac02 0700 0a0568656c6c6f
        let bytes = hex("02046563686fac0207000a0568656c6c6f");
        let e = Command::parse_extended(&bytes, false, DEADLINE_FLAG).unwrap();
        assert_eq!(e.command, Command::request("echo", b"\x0a\x05hello"));
        assert_eq!((e.fields.deadline_ms, e.header_len), (Some(300), 10));
        // The same bytes where the extension is not in force read as the reference reads them:
        // bit 1 ignored, the deadline's two bytes taken for data_len (0x02ac = 684), which the
        // 9 bytes after them do not hold.
        assert_eq!(
            Command::parse_extended(&bytes, false, 0),
            Err(WireError::Truncated {
                field: "data",
                offset: 8,
                needed: 684,
                available: 9
            })
        );
        // One byte up to 127 ms, five for u32::MAX.
        for (ms, varint, header_len) in [
            (0, "00", 9),
            (127, "7f", 9),
            (16_383, "ff7f", 10),
            (16_384, "808001", 11),
            (u32::MAX, "ffffffff0f", 13),
        ] {
            let bytes = hex(&std::format!("02046563686f{varint}0000"));
            let e = Command::parse_extended(&bytes, false, DEADLINE_FLAG).unwrap();
            assert_eq!((e.fields.deadline_ms, e.header_len), (Some(ms), header_len));
        }
        // No flag: the classic command, no deadline.
        let plain = hex("00046563686f07000a0568656c6c6f");
        let e = Command::parse_extended(&plain, true, REQUEST_FLAGS).unwrap();
        assert_eq!(
            (e.command, e.fields, e.header_len),
            (
                Command::request("echo", b"\x0a\x05hello"),
                RequestFields::NONE,
                8
            )
        );
        // With a large-message header: 03 04 "echo" deadline (1000: e8 07), data_len u32
        // (65,536).
        let mut large = hex("03046563686fe80700000100");
        large.resize(large.len() + 65_536, 0xaa);
        let e = Command::parse_extended(&large, true, DEADLINE_FLAG).unwrap();
        assert_eq!(
            (e.fields.deadline_ms, e.header_len, e.command.data.len()),
            (Some(1000), 12, 65_536)
        );
    }

    #[test]
    fn deadline_errors() {
        // On a response the flag is refused (only requests carry a deadline).
        assert_eq!(
            Command::parse_extended(&hex("82046563686fac020000"), false, DEADLINE_FLAG),
            Err(WireError::InvalidValue {
                field: "type",
                offset: 0,
                value: 0x82
            })
        );
        // A deadline cut short (its first byte says another follows).
        assert_eq!(
            Command::parse_extended(&hex("02046563686fac"), false, DEADLINE_FLAG),
            Err(WireError::Truncated {
                field: "deadline_ms",
                offset: 6,
                needed: 2,
                available: 1
            })
        );
        // A longer varint than the value needs (0 in two bytes, 300 in three), one above
        // u32::MAX, and six bytes: refused, so each deadline has one encoding.
        for varint in ["8000", "ac8200", "ffffffff10", "ffffffffff01"] {
            let bytes = hex(&std::format!("02046563686f{varint}0000"));
            assert!(
                matches!(
                    Command::parse_extended(&bytes, false, DEADLINE_FLAG),
                    Err(WireError::InvalidValue {
                        field: "deadline_ms",
                        offset: 6,
                        ..
                    })
                ),
                "{varint}"
            );
        }
        // A large header for data that fits the classic one: one encoding per command.
        assert!(matches!(
            Command::parse_extended(&hex("03046563686fac02ffff0000"), true, DEADLINE_FLAG),
            Err(WireError::InvalidValue {
                field: "data_len",
                offset: 8,
                ..
            })
        ));
    }

    #[test]
    fn a_stored_request_gains_its_fields_without_a_copy() {
        let stored = hex("00046563686f07000a0568656c6c6f");
        let (mut type_byte, mut scratch) = ([0], [0; MAX_FIELDS_LEN]);
        let fields = RequestFields {
            deadline_ms: Some(300),
            ..RequestFields::NONE
        };
        let parts = with_fields(&stored, &fields, &mut type_byte, &mut scratch).unwrap();
        let sent: Vec<u8> = parts.concat();
        assert_eq!(sent, hex("02046563686fac0207000a0568656c6c6f"));
        // The longest deadline, and the fields' room for it.
        let longest = RequestFields {
            deadline_ms: Some(u32::MAX),
            open: Some(StreamOpen {
                window: 1,
                bidi: false,
            }),
            item_of: None,
        };
        let sent: Vec<u8> = with_fields(&stored, &longest, &mut type_byte, &mut scratch)
            .unwrap()
            .concat();
        assert_eq!(sent, hex("06046563686fffffffff0f010007000a0568656c6c6f"));
        // A bidirectional open with a deadline: 16 = DEADLINE|OPEN|BIDI, then ms, window.
        let open = RequestFields {
            deadline_ms: Some(300),
            open: Some(StreamOpen {
                window: 8,
                bidi: true,
            }),
            item_of: None,
        };
        let stored = hex("0004636861740000");
        let sent: Vec<u8> = with_fields(&stored, &open, &mut type_byte, &mut scratch)
            .unwrap()
            .concat();
        assert_eq!(sent, hex("160463686174ac0208000000"));
        let short = hex("0009ec");
        assert!(with_fields(&short, &fields, &mut [0], &mut scratch).is_none());
    }

    #[test]
    fn stream_vectors() {
        let agreed = REQUEST_FLAGS;
        // Open bidirectional "chat", window 8, no data: 14 04 "chat" 0800 0000.
        let bytes = hex("14046368617408000000");
        let e = Command::parse_extended(&bytes, false, agreed).unwrap();
        let open = StreamOpen {
            window: 8,
            bidi: true,
        };
        assert_eq!(
            (e.command, e.fields.open, e.header_len),
            (Command::request("chat", b""), Some(open), 10)
        );
        // A server stream opened with a window of 32: 04 ... 2000, data 08 05.
        let bytes = hex("040463686174200002000805");
        let e = Command::parse_extended(&bytes, false, agreed).unwrap();
        let open = StreamOpen {
            window: 32,
            bidi: false,
        };
        assert_eq!(
            (e.fields.open, e.command.data),
            (Some(open), &b"\x08\x05"[..])
        );
        // An item of stream 5: 08 04 "chat" 05, data_len 2, 0a00.
        let bytes = hex("0804636861740502000a00");
        let e = Command::parse_extended(&bytes, false, agreed).unwrap();
        assert_eq!(
            (e.fields.item_of, e.command.data, e.header_len),
            (Some(5), &b"\x0a\x00"[..], 9)
        );
        // Round trip through the emitter.
        let fields = RequestFields {
            item_of: Some(5),
            ..RequestFields::NONE
        };
        let stored = hex("00046368617402000a00");
        let (mut t, mut scratch) = ([0], [0; MAX_FIELDS_LEN]);
        let sent: Vec<u8> = with_fields(&stored, &fields, &mut t, &mut scratch)
            .unwrap()
            .concat();
        assert_eq!(sent, hex("0804636861740502000a00"));
        // Not agreed: the flags are ignored as the reference ignores them (window read as
        // data_len 8, whose 8 bytes are not there).
        assert!(matches!(
            Command::parse_extended(&hex("14046368617408000000"), false, DEADLINE_FLAG),
            Err(WireError::Truncated { field: "data", .. })
        ));
    }

    #[test]
    fn stream_errors() {
        let invalid = |hex_str: &str, field: &'static str| {
            let bytes = hex(hex_str);
            let r = Command::parse_extended(&bytes, false, REQUEST_FLAGS);
            assert!(
                matches!(r, Err(WireError::InvalidValue { field: f, .. }) if f == field),
                "{hex_str}: {r:?}"
            );
        };
        // BIDI without OPEN, ITEM with OPEN, a flag on a response, a window of 0.
        invalid("1004636861740000", "type");
        invalid("0c04636861740800000000", "type");
        invalid("84046368617408000000", "type");
        invalid("04046368617400000000", "window");
        // Cut short: the window, the stream id.
        assert!(matches!(
            Command::parse_extended(&hex("0404636861740800"), false, REQUEST_FLAGS),
            Err(WireError::Truncated {
                field: "data_len",
                ..
            })
        ));
        assert!(matches!(
            Command::parse_extended(&hex("080463686174"), false, REQUEST_FLAGS),
            Err(WireError::Truncated {
                field: "stream",
                ..
            })
        ));
    }
}
