//! The flash `flash_read` reads, the part of it that may be read, and the identity seed's place
//! outside that part.
//!
//! The reference firmware lets `flash_read` read the whole flash by default and compiles the
//! identity seed into `.rodata`, so a central can read the key back (its audit finding, wire.md
//! §5.2). Here the readable range is explicit, and [`DemoFlash::new`] refuses a range that
//! overlaps the identity's location, so the check happens once, at start-up, not per read.

use core::ops::Range;

/// Memory the demo service reads from: on a microcontroller its own memory-mapped flash
/// ([`MappedFlash`]), in tests a byte array ([`SliceFlash`]).
pub trait Flash {
    /// Where the flash ends: addresses `0..size()` exist.
    fn size(&self) -> u32;
    /// Copies `out.len()` bytes at `address` into `out`. Only called for ranges inside
    /// `0..size()` (checked by [`DemoFlash`]).
    fn read(&self, address: u32, out: &mut [u8]);
}

/// The memory-mapped flash of the microcontroller this runs on: nRF52840 flash and nRF54L15
/// RRAM both sit at address 0 and read like memory.
#[derive(Clone, Copy, Debug)]
pub struct MappedFlash {
    size: u32,
}

impl MappedFlash {
    /// The flash of `size` bytes mapped at address 0.
    ///
    /// # Safety
    /// Addresses `0..size` must be readable memory for the whole life of the program (the
    /// chip's flash; never a peripheral's registers).
    pub const unsafe fn new(size: u32) -> Self {
        MappedFlash { size }
    }
}

impl Flash for MappedFlash {
    fn size(&self) -> u32 {
        self.size
    }
    fn read(&self, address: u32, out: &mut [u8]) {
        for (i, b) in out.iter_mut().enumerate() {
            let at = (address as usize).wrapping_add(i) as *const u8;
            // SAFETY: `new`'s contract makes 0..size readable, and DemoFlash only asks for
            // ranges inside it. Volatile: address 0 is a valid flash address here, and the
            // compiler must not assume anything about what it holds.
            *b = unsafe { core::ptr::read_volatile(at) };
        }
    }
}

/// A flash image held in a byte slice (tests, the QEMU image, the Linux build; the host demo's
/// owned image is [`FlashImage`](crate::FlashImage)).
#[derive(Clone, Copy, Debug)]
pub struct SliceFlash(pub &'static [u8]);

impl Flash for SliceFlash {
    fn size(&self) -> u32 {
        slice_size(self.0)
    }
    fn read(&self, address: u32, out: &mut [u8]) {
        read_slice(self.0, address, out);
    }
}

/// The size of a flash held in `bytes`.
pub(crate) fn slice_size(bytes: &[u8]) -> u32 {
    u32::try_from(bytes.len()).unwrap_or(u32::MAX)
}

/// Reads a flash held in `bytes` (zeros past its end; [`DemoFlash`] never asks for those).
pub(crate) fn read_slice(bytes: &[u8], address: u32, out: &mut [u8]) {
    let start = address as usize;
    match bytes.get(start..start + out.len()) {
        Some(src) => out.copy_from_slice(src),
        None => out.fill(0),
    }
}

/// A layout refused at start-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutError {
    /// The readable range is not inside the flash.
    ReadableOutsideFlash {
        /// The range.
        readable: (u32, u32),
        /// The flash size.
        size: u32,
    },
    /// The identity seed's location lies (partly) in the readable range: `flash_read` would
    /// hand out the private key.
    IdentityReadable {
        /// The seed's location.
        identity: (u32, u32),
        /// The readable range.
        readable: (u32, u32),
    },
}

impl core::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LayoutError::ReadableOutsideFlash {
                readable: (start, end),
                size,
            } => write!(
                f,
                "readable range {start:#x}..{end:#x} is outside the {size}-byte flash"
            ),
            LayoutError::IdentityReadable {
                identity: (is, ie),
                readable: (rs, re),
            } => write!(
                f,
                "the identity seed at {is:#x}..{ie:#x} lies in the readable range {rs:#x}..{re:#x}"
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for LayoutError {}

/// A flash with the range `flash_read` may read.
#[derive(Clone, Debug)]
pub struct DemoFlash<F> {
    pub(crate) flash: F,
    pub(crate) readable: Range<u32>,
}

impl<F: Flash> DemoFlash<F> {
    /// `flash` readable over `readable`, which must lie inside it and must not overlap
    /// `identity`, where the identity seed is stored.
    pub fn new(flash: F, readable: Range<u32>, identity: Range<u32>) -> Result<Self, LayoutError> {
        let pair = |r: &Range<u32>| (r.start, r.end);
        if readable.start > readable.end || readable.end > flash.size() {
            return Err(LayoutError::ReadableOutsideFlash {
                readable: pair(&readable),
                size: flash.size(),
            });
        }
        let overlap = identity.start < readable.end && readable.start < identity.end;
        if overlap && !identity.is_empty() && !readable.is_empty() {
            return Err(LayoutError::IdentityReadable {
                identity: pair(&identity),
                readable: pair(&readable),
            });
        }
        Ok(DemoFlash { flash, readable })
    }

    /// The readable range.
    pub fn readable(&self) -> Range<u32> {
        self.readable.clone()
    }

    /// `true` if `length` bytes at `address` lie entirely inside the readable range.
    pub fn can_read(&self, address: u32, length: u32) -> bool {
        match address.checked_add(length) {
            Some(end) => address >= self.readable.start && end <= self.readable.end,
            None => false,
        }
    }

    /// Copies the bytes at `address` into `out` if they lie inside the readable range.
    pub fn read(&self, address: u32, out: &mut [u8]) -> bool {
        let Ok(len) = u32::try_from(out.len()) else {
            return false;
        };
        if !self.can_read(address, len) {
            return false;
        }
        self.flash.read(address, out);
        true
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// 64 bytes, byte `i` = `i`.
    pub(crate) static IMAGE: [u8; 64] = {
        let mut a = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            a[i] = i as u8;
            i += 1;
        }
        a
    };

    #[test]
    fn reads_stay_inside_the_readable_range() {
        let f = DemoFlash::new(SliceFlash(&IMAGE), 8..40, 48..64).unwrap();
        let mut out = [0u8; 4];
        assert!(f.read(8, &mut out));
        assert_eq!(out, [8, 9, 10, 11]);
        assert!(f.read(36, &mut out));
        assert!(!f.read(37, &mut out));
        assert!(!f.read(4, &mut out));
        assert!(!f.can_read(u32::MAX, 2));
    }

    #[test]
    fn a_readable_identity_is_refused() {
        assert_eq!(
            DemoFlash::new(SliceFlash(&IMAGE), 0..64, 48..64).err(),
            Some(LayoutError::IdentityReadable {
                identity: (48, 64),
                readable: (0, 64)
            })
        );
        assert!(DemoFlash::new(SliceFlash(&IMAGE), 0..65, 70..80).is_err());
        assert!(DemoFlash::new(SliceFlash(&IMAGE), 0..48, 48..64).is_ok());
    }
}
