//! The CAPABILITIES payload: the peripheral's size limits and feature flags.
//!
//! ```text
//! offset  0             2              4        6
//!         +-------------+--------------+--------+
//!         | max_request | max_response | flags  |      all u16 little-endian
//!         +-------------+--------------+--------+
//! flags: bit 0 = ENCRYPTION_SUPPORTED, bits 1..15 reserved (kept, not interpreted)
//! ```
//!
//! The peripheral's response always carries all 6 bytes (`0030ffff0100` is the nRF firmware:
//! 12288 / 65535 / encryption). Centrals send the same layout filled with zeros, except the C
//! central, which sends an empty request (see [`crate::wire::control`]). Like the C central,
//! [`Capabilities::parse`] accepts a 4-byte payload (flags then read as 0); bytes after the sixth
//! are ignored.

use super::{WireError, out_prefix, read_u16};

/// Length of a complete CAPABILITIES payload.
pub const CAPABILITIES_LEN: usize = 6;

/// The `flags` field of a CAPABILITIES payload. Unknown bits are retained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CapabilityFlags(u16);

impl CapabilityFlags {
    /// Bit 0: the peripheral supports the encrypted session (KEY_EXCHANGE).
    pub const ENCRYPTION_SUPPORTED: Self = CapabilityFlags(0x0001);
    /// No flag set.
    pub const EMPTY: Self = CapabilityFlags(0);

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
}

impl core::ops::BitOr for CapabilityFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        self.union(rhs)
    }
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
}

impl Capabilities {
    /// Decodes a payload of at least 4 bytes; `flags` is 0 when fewer than 6 are present.
    pub fn parse(payload: &[u8]) -> Result<Self, WireError> {
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
        })
    }

    /// The 6-byte payload.
    pub fn to_bytes(&self) -> [u8; CAPABILITIES_LEN] {
        let [a, b] = self.max_request.to_le_bytes();
        let [c, d] = self.max_response.to_le_bytes();
        let [e, f] = self.flags.bits().to_le_bytes();
        [a, b, c, d, e, f]
    }

    /// Writes the 6-byte payload to the start of `out` and returns 6.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, WireError> {
        out_prefix(out, CAPABILITIES_LEN)?.copy_from_slice(&self.to_bytes());
        Ok(CAPABILITIES_LEN)
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
        let caps = Capabilities::parse(&[1, 0, 2, 0, 0x03, 0x80, 0xee]).unwrap();
        assert_eq!(caps.flags.bits(), 0x8003);
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
}
