//! The diagnostics extension's message: what a peripheral says about itself and its link when a
//! central calls [`DIAGNOSTICS_COMMAND`] (announced by
//! [`CapabilityFlags::DIAGNOSTICS`](super::capabilities::CapabilityFlags::DIAGNOSTICS), so a
//! reference peripheral is never sent it).
//!
//! The request is empty; the response is this protobuf message (`proto/diagnostics.proto`),
//! every field optional: a peripheral writes what it knows and names each field it cannot give
//! in `unavailable` with the reason.
//!
//! ```text
//! field  type     name                    field  type     name
//!   1    uint32   conn_interval_us          11   uint64   connections
//!   2    uint32   peripheral_latency        12   uint64   calls
//!   3    uint32   supervision_timeout_ms    13   message  errors {1 code uint32, 2 count uint64}*
//!   4    uint32   phy (1 1M, 2 2M, 3 Coded) 14   uint64   busy
//!   5    uint32   data_length               15   uint64   reassembly_drops
//!   6    uint32   att_mtu                   16   uint64   link_losses
//!   7    sint32   rssi_dbm                  17   uint32   ram_high_water
//!   8    uint64   uptime_ms                 18   uint32   outbox_high_water
//!   9    string   build_id                  19   uint32   reassembly_high_water
//!  10    string   version                   20   message  unavailable {1 field uint32, 2 reason string}*
//! e.g. 30 f7 01 40 88 27 a2 01 0a 08 01 12 06 6e 6f 20 42 4c 45
//!      att_mtu 247, uptime 5,000 ms, conn_interval_us unavailable: "no BLE"
//! ```
//!
//! [`Diagnostics::emit`] writes the fields in field order; [`Diagnostics::parse`] reads any
//! order, skips fields it does not know (a newer peripheral's), borrows strings and lists from
//! its input, and never allocates or panics.

use super::WireError;

/// The command a central calls for a peripheral's [`Diagnostics`]: an empty request. The dot
/// keeps it apart from every protobuf rpc name.
pub const DIAGNOSTICS_COMMAND: &str = "blerpc.diagnostics";

/// A field of [`Diagnostics`], by its protobuf field number: what `unavailable` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Field {
    /// The connection interval, µs.
    ConnIntervalUs,
    /// The peripheral latency, in connection events.
    PeripheralLatency,
    /// The supervision timeout, ms.
    SupervisionTimeoutMs,
    /// The PHY.
    Phy,
    /// The LL data length (octets a packet carries).
    DataLength,
    /// The ATT MTU.
    AttMtu,
    /// The received signal strength, dBm.
    RssiDbm,
    /// Time since boot, ms.
    UptimeMs,
    /// The build's id.
    BuildId,
    /// The software version.
    Version,
    /// Connections accepted since boot.
    Connections,
    /// Calls answered since boot.
    Calls,
    /// ERROR answers by code.
    Errors,
    /// BUSY answers.
    Busy,
    /// Messages dropped while reassembling.
    ReassemblyDrops,
    /// Connections lost without a close (supervision timeout, link error).
    LinkLosses,
    /// The most RAM in use (stack and static), bytes.
    RamHighWater,
    /// The most bytes queued in a connection's outbox.
    OutboxHighWater,
    /// The most bytes held reassembling.
    ReassemblyHighWater,
    /// A field number this crate does not name.
    Other(u32),
}

impl Field {
    /// Every named field, in field-number order.
    pub const ALL: [Field; 19] = [
        Field::ConnIntervalUs,
        Field::PeripheralLatency,
        Field::SupervisionTimeoutMs,
        Field::Phy,
        Field::DataLength,
        Field::AttMtu,
        Field::RssiDbm,
        Field::UptimeMs,
        Field::BuildId,
        Field::Version,
        Field::Connections,
        Field::Calls,
        Field::Errors,
        Field::Busy,
        Field::ReassemblyDrops,
        Field::LinkLosses,
        Field::RamHighWater,
        Field::OutboxHighWater,
        Field::ReassemblyHighWater,
    ];

    /// The protobuf field number.
    pub fn number(self) -> u32 {
        match self {
            Field::Other(n) => n,
            named => Field::ALL
                .iter()
                .position(|f| *f == named)
                .map_or(0, |i| i as u32 + 1),
        }
    }

    /// The field of protobuf field number `n`.
    pub fn from_number(n: u32) -> Field {
        n.checked_sub(1)
            .and_then(|i| Field::ALL.get(i as usize).copied())
            .unwrap_or(Field::Other(n))
    }

    /// The field's name in `proto/diagnostics.proto` (and JSON); `None` for [`Field::Other`].
    pub fn name(self) -> Option<&'static str> {
        const NAMES: [&str; 19] = [
            "conn_interval_us",
            "peripheral_latency",
            "supervision_timeout_ms",
            "phy",
            "data_length",
            "att_mtu",
            "rssi_dbm",
            "uptime_ms",
            "build_id",
            "version",
            "connections",
            "calls",
            "errors",
            "busy",
            "reassembly_drops",
            "link_losses",
            "ram_high_water",
            "outbox_high_water",
            "reassembly_high_water",
        ];
        (self.number() as usize)
            .checked_sub(1)
            .and_then(|i| NAMES.get(i).copied())
    }
}

/// The field number of `unavailable`.
const UNAVAILABLE: u32 = 20;

/// A repeated field: the entries to write, or the message they were read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum List<'a, T> {
    /// Entries to emit.
    Items(&'a [T]),
    /// A parsed message (already validated): its entries are read as they are iterated.
    Wire(&'a [u8]),
}

impl<T> Default for List<'_, T> {
    fn default() -> Self {
        List::Items(&[])
    }
}

/// One entry of `errors`: ERROR answers with `code` (the one-byte wire code), `count` of them.
pub type ErrorCount = (u8, u64);

/// One entry of `unavailable`: the field, and why the peripheral cannot give it.
pub type Unavailable<'a> = (Field, &'a str);

/// A link's parameters as its BLE stack reports them now; `None` where it does not. What a
/// runtime's link and the firmware's BLE host hand the diagnostics answer
/// ([`Diagnostics::with_link`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkFields {
    /// The connection interval, µs.
    pub conn_interval_us: Option<u32>,
    /// The peripheral latency, in connection events.
    pub peripheral_latency: Option<u32>,
    /// The supervision timeout, ms.
    pub supervision_timeout_ms: Option<u32>,
    /// The PHY (transmit): 1 = LE 1M, 2 = LE 2M, 3 = LE Coded.
    pub phy: Option<u32>,
    /// The LL data length (transmit octets a packet carries).
    pub data_length: Option<u32>,
    /// The received signal strength, dBm.
    pub rssi_dbm: Option<i32>,
}

impl LinkFields {
    /// The fields the stack did not report: what the answer names in `unavailable`.
    pub fn missing(&self) -> impl Iterator<Item = Field> {
        [
            (Field::ConnIntervalUs, self.conn_interval_us.is_none()),
            (Field::PeripheralLatency, self.peripheral_latency.is_none()),
            (
                Field::SupervisionTimeoutMs,
                self.supervision_timeout_ms.is_none(),
            ),
            (Field::Phy, self.phy.is_none()),
            (Field::DataLength, self.data_length.is_none()),
            (Field::RssiDbm, self.rssi_dbm.is_none()),
        ]
        .into_iter()
        .filter_map(|(field, missing)| missing.then_some(field))
    }
}

/// A peripheral's diagnostics (see the module docs): `None` is a field not given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)] // Each field is documented by its `Field` and the module's table.
pub struct Diagnostics<'a> {
    pub conn_interval_us: Option<u32>,
    pub peripheral_latency: Option<u32>,
    pub supervision_timeout_ms: Option<u32>,
    /// 1 = LE 1M, 2 = LE 2M, 3 = LE Coded.
    pub phy: Option<u32>,
    pub data_length: Option<u32>,
    pub att_mtu: Option<u32>,
    pub rssi_dbm: Option<i32>,
    pub uptime_ms: Option<u64>,
    pub build_id: Option<&'a str>,
    pub version: Option<&'a str>,
    pub connections: Option<u64>,
    pub calls: Option<u64>,
    pub errors: List<'a, ErrorCount>,
    pub busy: Option<u64>,
    pub reassembly_drops: Option<u64>,
    pub link_losses: Option<u64>,
    pub ram_high_water: Option<u32>,
    pub outbox_high_water: Option<u32>,
    pub reassembly_high_water: Option<u32>,
    pub unavailable: List<'a, Unavailable<'a>>,
}

impl<'a> Diagnostics<'a> {
    /// Reads a diagnostics message. Unknown fields are skipped; a field of the wrong wire type,
    /// a string that is not UTF-8, a varint beyond 64 bits or a cut field is an error.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, WireError> {
        let mut d = Diagnostics {
            errors: List::Wire(bytes),
            unavailable: List::Wire(bytes),
            ..Diagnostics::default()
        };
        let mut r = Reader { bytes, at: 0 };
        while let Some((number, value)) = r.field()? {
            let int = |v: Value<'a>| match v {
                Value::Varint(n) => Ok(n),
                _ => Err(wrong_type(number)),
            };
            let u32_of = |v| int(v).map(|n| n as u32);
            match number {
                1 => d.conn_interval_us = Some(u32_of(value)?),
                2 => d.peripheral_latency = Some(u32_of(value)?),
                3 => d.supervision_timeout_ms = Some(u32_of(value)?),
                4 => d.phy = Some(u32_of(value)?),
                5 => d.data_length = Some(u32_of(value)?),
                6 => d.att_mtu = Some(u32_of(value)?),
                7 => {
                    let z = int(value)? as u32;
                    d.rssi_dbm = Some(((z >> 1) as i32) ^ -((z & 1) as i32));
                }
                8 => d.uptime_ms = Some(int(value)?),
                9 => d.build_id = Some(text(number, value)?),
                10 => d.version = Some(text(number, value)?),
                11 => d.connections = Some(int(value)?),
                12 => d.calls = Some(int(value)?),
                13 => {
                    error_count(bytes_of(number, value)?)?;
                }
                14 => d.busy = Some(int(value)?),
                15 => d.reassembly_drops = Some(int(value)?),
                16 => d.link_losses = Some(int(value)?),
                17 => d.ram_high_water = Some(u32_of(value)?),
                18 => d.outbox_high_water = Some(u32_of(value)?),
                19 => d.reassembly_high_water = Some(u32_of(value)?),
                UNAVAILABLE => {
                    unavailable(bytes_of(number, value)?)?;
                }
                _ => {}
            }
        }
        Ok(d)
    }

    /// These diagnostics with the link fields of `link`.
    pub fn with_link(self, link: &LinkFields) -> Self {
        Diagnostics {
            conn_interval_us: link.conn_interval_us,
            peripheral_latency: link.peripheral_latency,
            supervision_timeout_ms: link.supervision_timeout_ms,
            phy: link.phy,
            data_length: link.data_length,
            rssi_dbm: link.rssi_dbm,
            ..self
        }
    }

    /// The `errors` entries.
    pub fn errors(&self) -> impl Iterator<Item = ErrorCount> + 'a {
        entries(self.errors, 13, |b| error_count(b).ok())
    }

    /// The `unavailable` entries.
    pub fn unavailable(&self) -> impl Iterator<Item = Unavailable<'a>> + 'a {
        entries(self.unavailable, UNAVAILABLE, |b| unavailable(b).ok())
    }

    /// Why `field` is unavailable, if the message says.
    pub fn reason(&self, field: Field) -> Option<&'a str> {
        self.unavailable()
            .find(|(f, _)| *f == field)
            .map(|(_, why)| why)
    }

    /// Writes the message into `out`, fields in number order; returns its length.
    /// [`WireError::TooLong`] when `out` is too short.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, WireError> {
        let mut w = Writer { out, at: 0 };
        let u32s = [
            (1, self.conn_interval_us),
            (2, self.peripheral_latency),
            (3, self.supervision_timeout_ms),
            (4, self.phy),
            (5, self.data_length),
            (6, self.att_mtu),
        ];
        for (n, v) in u32s {
            w.varint_field(n, v.map(u64::from))?;
        }
        let zigzag = self
            .rssi_dbm
            .map(|v| u64::from(((v << 1) ^ (v >> 31)) as u32));
        w.varint_field(7, zigzag)?;
        w.varint_field(8, self.uptime_ms)?;
        w.bytes_field(9, self.build_id.map(str::as_bytes))?;
        w.bytes_field(10, self.version.map(str::as_bytes))?;
        w.varint_field(11, self.connections)?;
        w.varint_field(12, self.calls)?;
        for (code, count) in self.errors() {
            let len = 1 + varint_len(u64::from(code)) + 1 + varint_len(count);
            w.tag(13, 2)?;
            w.varint(len as u64)?;
            w.varint_field(1, Some(u64::from(code)))?;
            w.varint_field(2, Some(count))?;
        }
        w.varint_field(14, self.busy)?;
        w.varint_field(15, self.reassembly_drops)?;
        w.varint_field(16, self.link_losses)?;
        w.varint_field(17, self.ram_high_water.map(u64::from))?;
        w.varint_field(18, self.outbox_high_water.map(u64::from))?;
        w.varint_field(19, self.reassembly_high_water.map(u64::from))?;
        for (field, reason) in self.unavailable() {
            let number = u64::from(field.number());
            let len = 1 + varint_len(number) + 1 + varint_len(reason.len() as u64) + reason.len();
            w.tag(UNAVAILABLE, 2)?;
            w.varint(len as u64)?;
            w.varint_field(1, Some(number))?;
            w.bytes_field(2, Some(reason.as_bytes()))?;
        }
        Ok(w.at)
    }
}

/// The entries of a repeated field: the given ones, or those under `number` in a message.
fn entries<'a, T: Copy + 'a>(
    list: List<'a, T>,
    number: u32,
    read: fn(&'a [u8]) -> Option<T>,
) -> impl Iterator<Item = T> + 'a {
    let (items, wire) = match list {
        List::Items(items) => (items, &[][..]),
        List::Wire(bytes) => (&[][..], bytes),
    };
    let mut r = Reader { bytes: wire, at: 0 };
    let from_wire = core::iter::from_fn(move || {
        loop {
            match r.field() {
                Ok(Some((n, Value::Bytes(b)))) if n == number => return read(b),
                Ok(Some(_)) => {}
                _ => return None,
            }
        }
    });
    items.iter().copied().chain(from_wire)
}

/// An `errors` entry.
fn error_count(bytes: &[u8]) -> Result<ErrorCount, WireError> {
    let (mut code, mut count) = (0u8, 0u64);
    let mut r = Reader { bytes, at: 0 };
    while let Some((n, v)) = r.field()? {
        match (n, v) {
            (1, Value::Varint(c)) => {
                code = u8::try_from(c).map_err(|_| WireError::InvalidValue {
                    field: "errors.code",
                    offset: 0,
                    value: c as u32,
                })?
            }
            (2, Value::Varint(c)) => count = c,
            (1 | 2, _) => return Err(wrong_type(13)),
            _ => {}
        }
    }
    Ok((code, count))
}

/// An `unavailable` entry.
fn unavailable(bytes: &[u8]) -> Result<Unavailable<'_>, WireError> {
    let (mut field, mut reason) = (Field::Other(0), "");
    let mut r = Reader { bytes, at: 0 };
    while let Some((n, v)) = r.field()? {
        match (n, v) {
            (1, Value::Varint(f)) => field = Field::from_number(f as u32),
            (2, v @ Value::Bytes(_)) => reason = text(UNAVAILABLE, v)?,
            (1 | 2, _) => return Err(wrong_type(UNAVAILABLE)),
            _ => {}
        }
    }
    Ok((field, reason))
}

fn wrong_type(number: u32) -> WireError {
    WireError::InvalidValue {
        field: "wire type",
        offset: 0,
        value: number,
    }
}

fn bytes_of(number: u32, v: Value<'_>) -> Result<&[u8], WireError> {
    match v {
        Value::Bytes(b) => Ok(b),
        _ => Err(wrong_type(number)),
    }
}

fn text(number: u32, v: Value<'_>) -> Result<&str, WireError> {
    core::str::from_utf8(bytes_of(number, v)?).map_err(|e| WireError::InvalidValue {
        field: "string",
        offset: e.valid_up_to() as u32,
        value: number,
    })
}

/// A field's value by wire type.
#[derive(Clone, Copy)]
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self, field: &'static str) -> Result<u64, WireError> {
        let mut v = 0u64;
        for i in 0..10 {
            let Some(&b) = self.bytes.get(self.at) else {
                return Err(WireError::Truncated {
                    field,
                    offset: self.at as u32,
                    needed: 1,
                    available: 0,
                });
            };
            self.at += 1;
            if i == 9 && b > 1 {
                return Err(WireError::InvalidValue {
                    field,
                    offset: self.at as u32 - 1,
                    value: u32::from(b),
                });
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Ok(v)
    }

    fn take(&mut self, len: u64, field: &'static str) -> Result<&'a [u8], WireError> {
        let rest = self.bytes.get(self.at..).unwrap_or(&[]);
        let Some(b) = usize::try_from(len).ok().and_then(|l| rest.get(..l)) else {
            return Err(WireError::Truncated {
                field,
                offset: self.at as u32,
                needed: u32::try_from(len).unwrap_or(u32::MAX),
                available: rest.len() as u32,
            });
        };
        self.at += b.len();
        Ok(b)
    }

    /// The next field, `None` at the end.
    fn field(&mut self) -> Result<Option<(u32, Value<'a>)>, WireError> {
        if self.at >= self.bytes.len() {
            return Ok(None);
        }
        let tag_at = self.at as u32;
        let tag = self.varint("tag")?;
        let number = u32::try_from(tag >> 3).unwrap_or(0);
        if number == 0 {
            return Err(WireError::InvalidValue {
                field: "tag",
                offset: tag_at,
                value: tag as u32,
            });
        }
        let value = match tag & 7 {
            0 => Value::Varint(self.varint("varint")?),
            1 => {
                self.take(8, "fixed64")?;
                Value::Fixed
            }
            2 => {
                let len = self.varint("length")?;
                Value::Bytes(self.take(len, "bytes")?)
            }
            5 => {
                self.take(4, "fixed32")?;
                Value::Fixed
            }
            other => {
                return Err(WireError::InvalidValue {
                    field: "wire type",
                    offset: tag_at,
                    value: other as u32,
                });
            }
        };
        Ok(Some((number, value)))
    }
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

struct Writer<'o> {
    out: &'o mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), WireError> {
        let end = self.at + bytes.len();
        let Some(dst) = self.out.get_mut(self.at..end) else {
            return Err(WireError::TooLong {
                field: "diagnostics",
                len: end as u32,
                max: self.out.len() as u32,
            });
        };
        dst.copy_from_slice(bytes);
        self.at = end;
        Ok(())
    }

    fn varint(&mut self, mut v: u64) -> Result<(), WireError> {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                return self.put(&[byte]);
            }
            self.put(&[byte | 0x80])?;
        }
    }

    fn tag(&mut self, number: u32, wire_type: u8) -> Result<(), WireError> {
        self.varint((u64::from(number) << 3) | u64::from(wire_type))
    }

    fn varint_field(&mut self, number: u32, v: Option<u64>) -> Result<(), WireError> {
        match v {
            Some(v) => {
                self.tag(number, 0)?;
                self.varint(v)
            }
            None => Ok(()),
        }
    }

    fn bytes_field(&mut self, number: u32, v: Option<&[u8]>) -> Result<(), WireError> {
        match v {
            Some(b) => {
                self.tag(number, 2)?;
                self.varint(b.len() as u64)?;
                self.put(b)
            }
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn hex(s: &str) -> alloc::vec::Vec<u8> {
        let s: alloc::string::String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn the_module_example_round_trips() {
        let d = Diagnostics {
            att_mtu: Some(247),
            uptime_ms: Some(5000),
            unavailable: List::Items(&[(Field::ConnIntervalUs, "no BLE")]),
            ..Diagnostics::default()
        };
        let mut out = [0u8; 64];
        let n = d.emit(&mut out).unwrap();
        let bytes = hex("30 f7 01 40 88 27 a2 01 0a 08 01 12 06 6e 6f 20 42 4c 45");
        assert_eq!(&out[..n], &bytes[..]);
        let back = Diagnostics::parse(&bytes).unwrap();
        assert_eq!(back.att_mtu, Some(247));
        assert_eq!(back.uptime_ms, Some(5000));
        assert_eq!(back.conn_interval_us, None);
        assert_eq!(back.reason(Field::ConnIntervalUs), Some("no BLE"));
        assert_eq!(back.reason(Field::Phy), None);
    }

    #[test]
    fn every_field_round_trips() {
        let d = Diagnostics {
            conn_interval_us: Some(15_000),
            peripheral_latency: Some(0),
            supervision_timeout_ms: Some(4_000),
            phy: Some(2),
            data_length: Some(251),
            att_mtu: Some(247),
            rssi_dbm: Some(-67),
            uptime_ms: Some(u64::MAX),
            build_id: Some("abc123"),
            version: Some("0.5.0"),
            connections: Some(3),
            calls: Some(1_000),
            errors: List::Items(&[(0x02, 7), (0x04, 1)]),
            busy: Some(7),
            reassembly_drops: Some(0),
            link_losses: Some(1),
            ram_high_water: Some(63_304),
            outbox_high_water: Some(8_235),
            reassembly_high_water: Some(12_288),
            unavailable: List::Items(&[(Field::RssiDbm, "not given by the stack")]),
        };
        let mut out = [0u8; 256];
        let n = d.emit(&mut out).unwrap();
        let back = Diagnostics::parse(&out[..n]).unwrap();
        assert_eq!(
            Diagnostics {
                errors: d.errors,
                unavailable: d.unavailable,
                ..back
            },
            d
        );
        assert!(back.errors().eq([(0x02, 7), (0x04, 1)]));
        assert!(
            back.unavailable()
                .eq([(Field::RssiDbm, "not given by the stack")])
        );
        // -67 dBm zigzags to 133: 38 85 01.
        assert!(out[..n].windows(3).any(|w| w == [0x38, 0x85, 0x01]));
        // Too short a buffer is an error, not a panic.
        assert!(matches!(
            d.emit(&mut out[..n - 1]),
            Err(WireError::TooLong { .. })
        ));
    }

    #[test]
    fn unknown_fields_are_skipped_and_bad_ones_refused() {
        // Field 99 (varint), field 21 (fixed32), then att_mtu 23.
        let bytes = hex("98 06 01 ad 01 01 02 03 04 30 17");
        let d = Diagnostics::parse(&bytes).unwrap();
        assert_eq!(d.att_mtu, Some(23));
        // att_mtu as a string: the wrong wire type.
        assert!(Diagnostics::parse(&hex("32 01 41")).is_err());
        // A cut string, a cut varint, field number 0, wire type 3, a varint beyond 64 bits.
        for bad in [
            "4a 05 61 62",
            "30 f7",
            "00 01",
            "33",
            "30 ff ff ff ff ff ff ff ff ff 7f",
        ] {
            assert!(Diagnostics::parse(&hex(bad)).is_err(), "{bad}");
        }
        // A build id that is not UTF-8.
        assert!(Diagnostics::parse(&hex("4a 01 ff")).is_err());
        assert_eq!(
            Diagnostics::parse(&[]).unwrap(),
            Diagnostics {
                errors: List::Wire(&[]),
                unavailable: List::Wire(&[]),
                ..Diagnostics::default()
            }
        );
    }

    #[test]
    fn a_link_fills_its_fields_and_names_what_it_lacks() {
        let link = LinkFields {
            conn_interval_us: Some(15_000),
            phy: Some(2),
            ..LinkFields::default()
        };
        let d = Diagnostics::default().with_link(&link);
        assert_eq!((d.conn_interval_us, d.phy), (Some(15_000), Some(2)));
        assert!(link.missing().eq([
            Field::PeripheralLatency,
            Field::SupervisionTimeoutMs,
            Field::DataLength,
            Field::RssiDbm
        ]));
    }

    #[test]
    fn fields_are_named_by_number() {
        for (i, f) in Field::ALL.iter().enumerate() {
            assert_eq!(f.number(), i as u32 + 1);
            assert_eq!(Field::from_number(i as u32 + 1), *f);
        }
        assert_eq!(Field::AttMtu.name(), Some("att_mtu"));
        assert_eq!(
            Field::ReassemblyHighWater.name(),
            Some("reassembly_high_water")
        );
        assert_eq!(Field::from_number(40), Field::Other(40));
        assert_eq!(Field::Other(40).name(), None);
    }
}
