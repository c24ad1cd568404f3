//! The host demo's flash (feature `std`): an image in memory, synthetic or read from a file, as
//! a [`DemoFlash`] all readable until [`FlashImage::with_readable`] narrows it. A host has no
//! identity location in that image, so instead of [`DemoFlash::new`]'s location check,
//! [`FlashImage::ensure_not_exposed`] searches the readable bytes for the seed itself.

use std::ops::Range;
use std::sync::Arc;

use crate::flash::{self, DemoFlash, Flash};

/// The bytes of a host flash image (cheap to clone: shared).
#[derive(Clone)]
pub struct ImageBytes(Arc<[u8]>);

impl std::fmt::Debug for ImageBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ImageBytes({} bytes)", self.0.len())
    }
}

impl Flash for ImageBytes {
    fn size(&self) -> u32 {
        flash::slice_size(&self.0)
    }
    fn read(&self, address: u32, out: &mut [u8]) {
        flash::read_slice(&self.0, address, out);
    }
}

/// The flash the host demo serves, and the part of it `flash_read` may expose.
pub type FlashImage = DemoFlash<ImageBytes>;

/// A flash image refused at start-up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlashError {
    /// The readable range does not lie inside the image.
    #[error("readable range {start:#x}..{end:#x} is outside the {size}-byte image")]
    Range {
        /// Range start.
        start: u32,
        /// Range end.
        end: u32,
        /// Image size.
        size: usize,
    },
    /// The identity seed appears in the readable range: `flash_read` would leak it (the
    /// reference firmware's audit finding).
    #[error("the identity key appears in the readable flash at {offset:#x}; refusing to serve it")]
    SecretExposed {
        /// Where it was found.
        offset: usize,
    },
    /// The image file could not be read.
    #[error("flash image {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

impl FlashImage {
    fn all_readable(bytes: Arc<[u8]>) -> Self {
        let end = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        DemoFlash {
            flash: ImageBytes(bytes),
            readable: 0..end,
        }
    }

    /// A synthetic image of `size` bytes (byte `i` is `(i * 31 + 7) mod 256`), all readable.
    pub fn synthetic(size: usize) -> Self {
        Self::all_readable(
            (0..size)
                .map(|i| (i.wrapping_mul(31).wrapping_add(7)) as u8)
                .collect(),
        )
    }

    /// The image stored in `path`, all readable.
    pub fn from_file(path: &std::path::Path) -> Result<Self, FlashError> {
        let bytes = std::fs::read(path).map_err(|source| FlashError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Self::all_readable(bytes.into()))
    }

    /// Restricts `flash_read` to `range`.
    pub fn with_readable(self, range: Range<u32>) -> Result<Self, FlashError> {
        let size = self.flash.0.len();
        DemoFlash::new(self.flash, range.clone(), 0..0).map_err(|_| FlashError::Range {
            start: range.start,
            end: range.end,
            size,
        })
    }

    /// Fails if `secret` (e.g. the identity seed) occurs in the readable range.
    pub fn ensure_not_exposed(&self, secret: &[u8]) -> Result<(), FlashError> {
        if secret.is_empty() {
            return Ok(());
        }
        let readable = self
            .flash
            .0
            .get(self.readable.start as usize..self.readable.end as usize)
            .unwrap_or(&[]);
        match readable.windows(secret.len()).position(|w| w == secret) {
            Some(at) => Err(FlashError::SecretExposed {
                offset: self.readable.start as usize + at,
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reads_are_bounds_checked_against_the_readable_range() {
        let f = FlashImage::synthetic(4096)
            .with_readable(1024..2048)
            .unwrap();
        let mut out = [0u8; 1024];
        assert!(f.read(1024, &mut out));
        assert_eq!(out[0], (1024usize * 31 + 7) as u8);
        assert!(!f.read(1000, &mut out[..100]));
        assert!(!f.read(2000, &mut out[..100]));
        assert!(!f.can_read(u32::MAX, 2));
        assert!(FlashImage::synthetic(10).with_readable(0..11).is_err());
    }

    #[test]
    fn an_image_holding_the_identity_key_is_refused() {
        let mut bytes = vec![0u8; 4096];
        let seed = [0x5a; 32];
        bytes[100..132].copy_from_slice(&seed);
        let dir = std::env::temp_dir().join(format!("blerpc-flash-{}", std::process::id()));
        std::fs::write(&dir, &bytes).unwrap();
        let f = FlashImage::from_file(&dir).unwrap();
        assert!(matches!(
            f.ensure_not_exposed(&seed),
            Err(FlashError::SecretExposed { offset: 100 })
        ));
        // Excluding that part of the flash from the readable range makes it safe.
        let f = f.with_readable(1024..4096).unwrap();
        assert!(f.ensure_not_exposed(&seed).is_ok());
        let _ = std::fs::remove_file(dir);
    }
}
