//! The CAPABILITIES payload: the peripheral's size limits and feature flags.
//!
//! ```text
//! offset  0             2              4        6
//!         +-------------+--------------+--------+
//!         | max_request | max_response | flags  |      all u16 little-endian
//!         +-------------+--------------+--------+
//! flags: bit 0 = ENCRYPTION_SUPPORTED; blerpc-rs extensions: bit 1 = LARGE_MESSAGES,
//!        bit 2 = LONG_CONTAINERS, bit 3 = RELAY, bit 4 = CANCEL, bit 5 = DEADLINE, bit 6 = STREAMS,
//!        bit 7 = DIAGNOSTICS; bits 8..15 reserved (kept, not interpreted, named BIT_8 .. BIT_15)
//!
//! large-message extension (a peripheral's reply with LARGE_MESSAGES set, 14 bytes):
//! offset  0             2              4        6                  10                 14
//!         +-------------+--------------+--------+------------------+------------------+
//!         | max_request | max_response | flags  | max_request u32  | max_response u32 |
//!         +-------------+--------------+--------+------------------+------------------+
//!           min(limit, 65535) as u16     bit 1     the limits in force (wire bytes, LE)
//! ```
//!
//! The peripheral's response always carries at least 6 bytes (`0030ffff0100` is the nRF firmware:
//! 12288 / 65535 / encryption). Centrals send the 6-byte layout filled with zeros, except the C
//! central, which sends an empty request (see [`crate::wire::control`]). Like the C central,
//! [`Capabilities::parse`] accepts a 4-byte payload (flags then read as 0); bytes after the sixth
//! are ignored unless LARGE_MESSAGES is set.
//!
//! LARGE_MESSAGES (see `docs/protocol.md`, "Large messages"): a central that supports the
//! extension sets the bit in its 6-byte request (no other byte changes); a peripheral that
//! supports it too answers with the bit set **and** the 8 extension bytes above. A reply with the
//! bit set but fewer than 14 bytes is malformed ([`Capabilities::parse`] fails), so a truncated
//! extension can never be mistaken for a negotiated one. A reference peer never sets the bit, so
//! it never sends or receives an extension byte.

use super::{WireError, out_prefix, read_u16, read_u32};

/// Length of a complete CAPABILITIES payload.
pub const CAPABILITIES_LEN: usize = 6;
/// Length of a CAPABILITIES reply carrying the large-message extension.
pub const CAPABILITIES_LARGE_LEN: usize = 14;

/// The protocol names of the defined flag bits, indexed by bit: the one table they live in.
/// A flag constant is declared through `CapabilityFlags::named_bit`, whose const evaluation fails
/// (a compile error) for a bit without an entry here.
const FLAG_NAMES: [&str; 8] = [
    "ENCRYPTION_SUPPORTED",
    "LARGE_MESSAGES",
    "LONG_CONTAINERS",
    "RELAY",
    "CANCEL",
    "DEADLINE",
    "STREAMS",
    "DIAGNOSTICS",
];

/// The `flags` field of a CAPABILITIES payload. Unknown bits are retained.
///
/// [`CapabilityFlags::iter`] lists the set bits with their names and `Display` joins them with
/// `|`: `ENCRYPTION_SUPPORTED|LARGE_MESSAGES`, a bit this crate does not define as `BIT_n`
/// (`RELAY|BIT_15`), and no bit at all as the empty string.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CapabilityFlags(u16);

impl CapabilityFlags {
    /// Bit 0: the peripheral supports the encrypted session (KEY_EXCHANGE).
    pub const ENCRYPTION_SUPPORTED: Self = Self::named_bit(0);
    /// Bit 1 (blerpc-rs extension): the sender supports large messages (u32 lengths, see the
    /// module docs). In force only when both the central's request and the peripheral's reply
    /// set it.
    pub const LARGE_MESSAGES: Self = Self::named_bit(1);
    /// Bit 2 (blerpc-rs extension): the sender sends and accepts long containers (`u16`
    /// `payload_len`, up to
    /// [`MAX_LONG_CONTAINER_LEN`](crate::wire::container::MAX_LONG_CONTAINER_LEN) bytes). In force
    /// only when both the central's request and the peripheral's reply set it; no other byte
    /// changes.
    pub const LONG_CONTAINERS: Self = Self::named_bit(2);
    /// Bit 3 (blerpc-rs extension, peripherals only): the peripheral answers the device
    /// gateway's `blerpc.relay` command, opening a second connection for a relayed end-to-end
    /// session on request. Informational: it changes nothing else on the wire.
    pub const RELAY: Self = Self::named_bit(3);
    /// Bit 4 (blerpc-rs extension): the sender sends (central) or heeds (peripheral) the
    /// CANCEL control ([`ControlCmd::Cancel`](crate::wire::container::ControlCmd::Cancel)). In
    /// force only when both the central's request and the peripheral's reply set it.
    pub const CANCEL: Self = Self::named_bit(4);
    /// Bit 5 (blerpc-rs extension): the sender sends (central) or reads (peripheral) a
    /// request's deadline in its command header
    /// ([`DEADLINE_FLAG`](crate::wire::command::DEADLINE_FLAG)). In force only when both the
    /// central's request and the peripheral's reply set it.
    pub const DEADLINE: Self = Self::named_bit(5);
    /// Bit 6 (blerpc-rs extension): the sender opens (central) or serves (peripheral) streams
    /// with credit-based flow control and bidirectional streams: the request flags
    /// [`OPEN_FLAG`](crate::wire::command::OPEN_FLAG),
    /// [`ITEM_FLAG`](crate::wire::command::ITEM_FLAG) and
    /// [`BIDI_FLAG`](crate::wire::command::BIDI_FLAG) and the CREDIT control
    /// ([`ControlCmd::Credit`](crate::wire::container::ControlCmd::Credit)). In force only when
    /// both the central's request and the peripheral's reply set it.
    pub const STREAMS: Self = Self::named_bit(6);
    /// Bit 7 (blerpc-rs extension, peripherals only): the peripheral answers
    /// [`DIAGNOSTICS_COMMAND`](crate::wire::diagnostics::DIAGNOSTICS_COMMAND) with its
    /// [`Diagnostics`](crate::wire::diagnostics::Diagnostics). Informational, like RELAY: a
    /// central calls the command only on a peripheral that announced it.
    pub const DIAGNOSTICS: Self = Self::named_bit(7);
    /// No flag set.
    pub const EMPTY: Self = CapabilityFlags(0);

    /// The flag of a defined bit; a bit without a name in the name table does not compile.
    const fn named_bit(bit: usize) -> Self {
        assert!(bit < FLAG_NAMES.len(), "a capability flag needs a name");
        CapabilityFlags(1 << bit)
    }

    /// Wraps raw bits, keeping bits this crate does not know.
    pub const fn from_bits_retain(bits: u16) -> Self {
        CapabilityFlags(bits)
    }
    /// The raw bits.
    pub const fn bits(self) -> u16 {
        self.0
    }
    /// `true` if every bit of `other` is set in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
    /// The bits set in either.
    pub const fn union(self, other: Self) -> Self {
        CapabilityFlags(self.0 | other.0)
    }
    /// The set bits, lowest first, each with its name.
    pub const fn iter(self) -> CapabilityFlagsIter {
        CapabilityFlagsIter { rest: self.0 }
    }
}

/// The protocol names of the set bits, joined by `|` (see [`CapabilityFlags`]).
impl core::fmt::Display for CapabilityFlags {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, flag) in self.iter().enumerate() {
            if i > 0 {
                f.write_str("|")?;
            }
            core::fmt::Display::fmt(&flag, f)?;
        }
        Ok(())
    }
}

impl IntoIterator for CapabilityFlags {
    type Item = CapabilityFlag;
    type IntoIter = CapabilityFlagsIter;
    fn into_iter(self) -> CapabilityFlagsIter {
        self.iter()
    }
}

/// One set bit of a [`CapabilityFlags`], as [`CapabilityFlags::iter`] yields it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CapabilityFlag {
    bit: u8,
}

impl CapabilityFlag {
    /// The bit number, `0..=15`.
    pub const fn bit(self) -> u8 {
        self.bit
    }
    /// This flag alone, as a set.
    pub const fn flags(self) -> CapabilityFlags {
        CapabilityFlags(1 << self.bit)
    }
    /// The protocol name (`ENCRYPTION_SUPPORTED`, `LARGE_MESSAGES`, `LONG_CONTAINERS`,
    /// `RELAY`, `CANCEL`); `None` for a bit this crate does not define.
    pub fn name(self) -> Option<&'static str> {
        FLAG_NAMES.get(usize::from(self.bit)).copied()
    }
}

/// The protocol name, or `BIT_n` for a bit this crate does not define.
impl core::fmt::Display for CapabilityFlag {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "BIT_{}", self.bit),
        }
    }
}

/// The iterator of [`CapabilityFlags::iter`]: the set bits, lowest first.
#[derive(Clone, Debug)]
pub struct CapabilityFlagsIter {
    rest: u16,
}

impl Iterator for CapabilityFlagsIter {
    type Item = CapabilityFlag;
    fn next(&mut self) -> Option<CapabilityFlag> {
        if self.rest == 0 {
            return None;
        }
        // `trailing_zeros` of a non-zero u16 is below 16.
        let bit = self.rest.trailing_zeros() as u8;
        self.rest &= self.rest - 1;
        Some(CapabilityFlag { bit })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.rest.count_ones() as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for CapabilityFlagsIter {}

impl core::ops::BitOr for CapabilityFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        self.union(rhs)
    }
}

/// The limits a peripheral announces in the large-message extension of its CAPABILITIES reply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LargeLimits {
    /// The largest request the peripheral reassembles, in wire bytes (after encryption).
    pub max_request: u32,
    /// The largest response the peripheral sends, in wire bytes.
    pub max_response: u32,
}

/// A decoded CAPABILITIES payload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Capabilities {
    /// The largest request the peripheral can reassemble, in bytes on the wire (after encryption).
    pub max_request: u16,
    /// The largest response the peripheral will send, in bytes.
    pub max_response: u16,
    /// Feature flags.
    pub flags: CapabilityFlags,
    /// The large-message extension of a peripheral's reply (`Some` only with
    /// [`CapabilityFlags::LARGE_MESSAGES`]; always `None` in a central's request). On emit,
    /// `Some` also sets the flag.
    pub large: Option<LargeLimits>,
}

impl Capabilities {
    /// Decodes a peripheral's reply: at least 4 bytes; `flags` is 0 when fewer than 6 are
    /// present. With [`CapabilityFlags::LARGE_MESSAGES`] set, the 8 extension bytes must follow
    /// (a shorter payload is [`WireError::Truncated`]).
    pub fn parse(payload: &[u8]) -> Result<Self, WireError> {
        let mut caps = Self::parse_classic(payload)?;
        if caps.flags.contains(CapabilityFlags::LARGE_MESSAGES) {
            caps.large = Some(LargeLimits {
                max_request: read_u32(payload, 6, "max_request_ext")?,
                max_response: read_u32(payload, 10, "max_response_ext")?,
            });
        }
        Ok(caps)
    }

    /// Decodes the classic 6 bytes only (a central's request: the LARGE_MESSAGES bit is an
    /// announcement there and carries no extension bytes); anything after them is ignored.
    pub fn parse_classic(payload: &[u8]) -> Result<Self, WireError> {
        let max_request = read_u16(payload, 0, "max_request")?;
        let max_response = read_u16(payload, 2, "max_response")?;
        let flags = if payload.len() >= CAPABILITIES_LEN {
            read_u16(payload, 4, "flags")?
        } else {
            0
        };
        Ok(Capabilities {
            max_request,
            max_response,
            flags: CapabilityFlags::from_bits_retain(flags),
            large: None,
        })
    }

    /// Bytes [`Capabilities::emit`] writes: 6, or 14 with the large-message extension.
    pub fn encoded_len(&self) -> usize {
        if self.large.is_some() {
            CAPABILITIES_LARGE_LEN
        } else {
            CAPABILITIES_LEN
        }
    }

    /// The classic 6 bytes (the flags include LARGE_MESSAGES when `large` is `Some`).
    pub fn to_bytes(&self) -> [u8; CAPABILITIES_LEN] {
        let [a, b] = self.max_request.to_le_bytes();
        let [c, d] = self.max_response.to_le_bytes();
        let mut flags = self.flags;
        if self.large.is_some() {
            flags = flags | CapabilityFlags::LARGE_MESSAGES;
        }
        let [e, f] = flags.bits().to_le_bytes();
        [a, b, c, d, e, f]
    }

    /// Writes the payload ([`Capabilities::encoded_len`] bytes) to the start of `out`.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, WireError> {
        let len = self.encoded_len();
        let buf = out_prefix(out, len)?;
        let (classic, ext) = buf.split_at_mut(CAPABILITIES_LEN);
        classic.copy_from_slice(&self.to_bytes());
        if let Some(l) = self.large {
            let [a, b, c, d] = l.max_request.to_le_bytes();
            let [e, f, g, h] = l.max_response.to_le_bytes();
            ext.copy_from_slice(&[a, b, c, d, e, f, g, h]);
        }
        Ok(len)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    const NRF: Capabilities = Capabilities {
        max_request: 12288,
        max_response: 65535,
        flags: CapabilityFlags::ENCRYPTION_SUPPORTED,
        large: None,
    };

    #[test]
    fn parse_nrf_response() {
        assert_eq!(
            Capabilities::parse(&[0x00, 0x30, 0xff, 0xff, 0x01, 0x00]),
            Ok(NRF)
        );
        assert!(NRF.flags.contains(CapabilityFlags::ENCRYPTION_SUPPORTED));
    }

    #[test]
    fn emit_nrf_and_python_peripheral() {
        assert_eq!(NRF.to_bytes(), [0x00, 0x30, 0xff, 0xff, 0x01, 0x00]);
        let py = Capabilities {
            max_request: 65535,
            ..NRF
        };
        let mut out = [0xaa; 8];
        assert_eq!(py.emit(&mut out), Ok(6));
        assert_eq!(out, [0xff, 0xff, 0xff, 0xff, 0x01, 0x00, 0xaa, 0xaa]);
        assert_eq!(
            py.emit(&mut [0; 5]),
            Err(WireError::BufferTooSmall {
                needed: 6,
                available: 5
            })
        );
    }

    #[test]
    fn four_bytes_like_the_c_central_and_extra_ignored() {
        let caps = Capabilities::parse(&[0x00, 0x01, 0x00, 0x02]).unwrap();
        assert_eq!(caps.max_request, 256);
        assert_eq!(caps.max_response, 512);
        assert_eq!(caps.flags, CapabilityFlags::EMPTY);
        // Five bytes: flags still 0.
        assert_eq!(
            Capabilities::parse(&[0, 1, 0, 2, 1]).unwrap().flags,
            CapabilityFlags::EMPTY
        );
        // Trailing bytes are ignored; unknown flag bits are kept.
        let caps = Capabilities::parse(&[1, 0, 2, 0, 0x05, 0x80, 0xee]).unwrap();
        assert_eq!(caps.flags.bits(), 0x8005);
        assert!(caps.flags.contains(CapabilityFlags::ENCRYPTION_SUPPORTED));
    }

    #[test]
    fn too_short_is_truncated() {
        assert_eq!(
            Capabilities::parse(&[0x00, 0x30, 0xff]),
            Err(WireError::Truncated {
                field: "max_response",
                offset: 2,
                needed: 2,
                available: 1
            })
        );
        assert!(Capabilities::parse(&[]).is_err());
    }

    #[test]
    fn flag_algebra() {
        let f = CapabilityFlags::EMPTY | CapabilityFlags::from_bits_retain(0x4);
        assert_eq!(f.union(CapabilityFlags::ENCRYPTION_SUPPORTED).bits(), 0x5);
        assert!(f.contains(CapabilityFlags::EMPTY));
        assert!(!f.contains(CapabilityFlags::ENCRYPTION_SUPPORTED));
        assert_eq!(CapabilityFlags::default(), CapabilityFlags::EMPTY);
    }

    #[test]
    fn every_flag_has_its_name() {
        extern crate std;
        use std::string::ToString;
        use std::vec::Vec;
        // Each defined flag from its wire bytes (flags u16 LE at payload bytes 4-5), written out:
        // a constant declared without a name does not compile (`named_bit`), and every bit past
        // the named ones is `BIT_n`.
        let defined = [
            (
                [0x01, 0x00],
                CapabilityFlags::ENCRYPTION_SUPPORTED,
                "ENCRYPTION_SUPPORTED",
            ),
            (
                [0x02, 0x00],
                CapabilityFlags::LARGE_MESSAGES,
                "LARGE_MESSAGES",
            ),
            (
                [0x04, 0x00],
                CapabilityFlags::LONG_CONTAINERS,
                "LONG_CONTAINERS",
            ),
            ([0x08, 0x00], CapabilityFlags::RELAY, "RELAY"),
            ([0x10, 0x00], CapabilityFlags::CANCEL, "CANCEL"),
            ([0x20, 0x00], CapabilityFlags::DEADLINE, "DEADLINE"),
            ([0x40, 0x00], CapabilityFlags::STREAMS, "STREAMS"),
            ([0x80, 0x00], CapabilityFlags::DIAGNOSTICS, "DIAGNOSTICS"),
        ];
        assert_eq!(defined.len(), FLAG_NAMES.len());
        for (bit, ([lo, hi], flag, name)) in defined.into_iter().enumerate() {
            let caps = Capabilities::parse_classic(&[0, 0, 0, 0, lo, hi]).unwrap();
            assert_eq!(caps.flags, flag);
            let one: Vec<CapabilityFlag> = caps.flags.iter().collect();
            assert_eq!(one.len(), 1);
            assert_eq!(usize::from(one[0].bit()), bit);
            assert_eq!(one[0].flags(), flag);
            assert_eq!(one[0].name(), Some(name));
            assert_eq!(flag.to_string(), name);
        }
        for bit in FLAG_NAMES.len()..16 {
            let flags = CapabilityFlags::from_bits_retain(1 << bit);
            let [flag] = <[CapabilityFlag; 1]>::try_from(flags.iter().collect::<Vec<_>>()).unwrap();
            assert_eq!(flag.name(), None);
            assert_eq!(flags.to_string(), std::format!("BIT_{bit}"));
        }
    }

    #[test]
    fn flag_sets_display_joined() {
        extern crate std;
        use std::string::ToString;
        // The nRF firmware's flags, a blerpc-rs peripheral's, and reserved bits.
        let nrf = Capabilities::parse(&[0x00, 0x30, 0xff, 0xff, 0x01, 0x00]).unwrap();
        assert_eq!(nrf.flags.to_string(), "ENCRYPTION_SUPPORTED");
        let rs = Capabilities::parse_classic(&[0, 0, 0, 0, 0x7f, 0x00]).unwrap();
        assert_eq!(
            rs.flags.to_string(),
            "ENCRYPTION_SUPPORTED|LARGE_MESSAGES|LONG_CONTAINERS|RELAY|CANCEL|DEADLINE|STREAMS"
        );
        assert_eq!(rs.flags.iter().len(), 7);
        let odd = CapabilityFlags::from_bits_retain(0x8108);
        assert_eq!(odd.to_string(), "RELAY|BIT_8|BIT_15");
        assert_eq!(CapabilityFlags::EMPTY.to_string(), "");
        assert_eq!(CapabilityFlags::EMPTY.iter().next(), None);
        let all = CapabilityFlags::from_bits_retain(0xffff);
        assert_eq!(all.into_iter().map(|f| f.bit()).sum::<u8>(), (0..16).sum());
    }

    #[test]
    fn large_reply_parse_and_emit() {
        // 16 MiB both ways: u16 fields saturated, flags enc | large, then the two u32s.
        let bytes = [
            0xff, 0xff, 0xff, 0xff, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01,
        ];
        let caps = Capabilities {
            max_request: 0xffff,
            max_response: 0xffff,
            flags: CapabilityFlags::ENCRYPTION_SUPPORTED,
            large: Some(LargeLimits {
                max_request: 0x0100_0000,
                max_response: 0x0100_0000,
            }),
        };
        let parsed = Capabilities::parse(&bytes).unwrap();
        assert_eq!(parsed.large, caps.large);
        assert_eq!(parsed.flags.bits(), 0x0003);
        let mut out = [0u8; 16];
        assert_eq!(caps.emit(&mut out), Ok(14));
        assert_eq!(out.get(..14), Some(&bytes[..]));
        assert_eq!(caps.encoded_len(), CAPABILITIES_LARGE_LEN);
        assert_eq!(
            caps.emit(&mut [0; 13]),
            Err(WireError::BufferTooSmall {
                needed: 14,
                available: 13
            })
        );
    }

    #[test]
    fn large_bit_without_extension_is_truncated() {
        // A reply announcing the extension must carry all 14 bytes.
        assert_eq!(
            Capabilities::parse(&[0, 1, 0, 2, 0x02, 0x00]),
            Err(WireError::Truncated {
                field: "max_request_ext",
                offset: 6,
                needed: 4,
                available: 0
            })
        );
        assert_eq!(
            Capabilities::parse(&[0, 1, 0, 2, 0x02, 0x00, 1, 2, 3, 4, 5, 6, 7]),
            Err(WireError::Truncated {
                field: "max_response_ext",
                offset: 10,
                needed: 4,
                available: 3
            })
        );
        // A central's request announces with the bit alone; parse_classic ignores the rest.
        let req = Capabilities::parse_classic(&[0, 0, 0, 0, 0x02, 0x00]).unwrap();
        assert!(req.flags.contains(CapabilityFlags::LARGE_MESSAGES));
        assert_eq!(req.large, None);
        assert_eq!(req.to_bytes(), [0, 0, 0, 0, 0x02, 0x00]);
        // Extension bytes without the bit are trailing bytes: ignored.
        let caps = Capabilities::parse(&[0, 1, 0, 2, 0x01, 0x00, 9, 9, 9, 9, 9, 9, 9, 9]).unwrap();
        assert_eq!(caps.large, None);
    }
}
