//! Byte buffers the core stores messages in, so one code path serves a heap-less MCU and a host.
//!
//! [`Buffer`] is implemented by [`ArrayBuf<N>`] (a fixed `[u8; N]`, no allocator) and, with the
//! `alloc` feature, by `Vec<u8>`, which grows on demand and gives its memory back with
//! [`Buffer::release`]. The hard limits (largest message, queue bytes) are enforced by the core's
//! configuration; a buffer's own capacity is a second, physical limit that can only make them
//! smaller.

/// A buffer could not grow to the requested length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapacityError {
    /// The length that was asked for.
    pub requested: usize,
    /// The most this buffer can ever hold.
    pub capacity: usize,
}

impl core::fmt::Display for CapacityError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "buffer capacity {} bytes, {} requested",
            self.capacity, self.requested
        )
    }
}

#[cfg(feature = "std")]
impl std::error::Error for CapacityError {}

/// A growable byte buffer with a hard capacity.
pub trait Buffer {
    /// The initialised bytes.
    fn as_slice(&self) -> &[u8];
    /// The initialised bytes, mutably.
    fn as_mut_slice(&mut self) -> &mut [u8];
    /// The most bytes this buffer can ever hold (`usize::MAX` when only memory bounds it).
    fn capacity_limit(&self) -> usize;
    /// Sets the length to `len`, zero-filling new bytes.
    fn try_resize(&mut self, len: usize) -> Result<(), CapacityError>;
    /// Shortens the buffer to `len` bytes (no-op if it is shorter).
    fn truncate(&mut self, len: usize);
    /// Empties the buffer and, where the storage is heap memory, frees it.
    fn release(&mut self);

    /// Number of initialised bytes.
    fn len(&self) -> usize {
        self.as_slice().len()
    }
    /// `true` if no bytes are stored.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Bytes that can be appended without allocating (what is left of a fixed buffer).
    fn spare_capacity(&self) -> usize {
        self.capacity_limit().saturating_sub(self.len())
    }
    /// Empties the buffer, keeping its storage.
    fn clear(&mut self) {
        self.truncate(0);
    }
    /// Makes room for `additional` more bytes without changing the length (a hint: fixed
    /// buffers ignore it; `Vec` allocates once instead of growing step by step).
    fn try_reserve(&mut self, additional: usize) -> Result<(), CapacityError> {
        let _ = additional;
        Ok(())
    }
    /// Appends `bytes`.
    fn try_extend(&mut self, bytes: &[u8]) -> Result<(), CapacityError> {
        let start = self.len();
        let end = start.checked_add(bytes.len()).ok_or(CapacityError {
            requested: usize::MAX,
            capacity: self.capacity_limit(),
        })?;
        self.try_resize(end)?;
        if let Some(dst) = self.as_mut_slice().get_mut(start..end) {
            dst.copy_from_slice(bytes);
        }
        Ok(())
    }
}

/// A fixed-capacity buffer of `N` bytes that needs no allocator.
#[derive(Clone)]
pub struct ArrayBuf<const N: usize> {
    data: [u8; N],
    len: usize,
}

impl<const N: usize> ArrayBuf<N> {
    /// An empty buffer.
    pub const fn new() -> Self {
        ArrayBuf {
            data: [0; N],
            len: 0,
        }
    }
}

impl<const N: usize> Default for ArrayBuf<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> core::fmt::Debug for ArrayBuf<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ArrayBuf")
            .field("capacity", &N)
            .field("len", &self.len)
            .finish()
    }
}

impl<const N: usize> Buffer for ArrayBuf<N> {
    fn as_slice(&self) -> &[u8] {
        self.data.get(..self.len).unwrap_or(&[])
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        self.data.get_mut(..self.len).unwrap_or(&mut [])
    }
    fn capacity_limit(&self) -> usize {
        N
    }
    fn try_resize(&mut self, len: usize) -> Result<(), CapacityError> {
        if len > N {
            return Err(CapacityError {
                requested: len,
                capacity: N,
            });
        }
        if let Some(fresh) = self.data.get_mut(self.len..len) {
            fresh.fill(0);
        }
        self.len = len;
        Ok(())
    }
    fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
    fn try_extend(&mut self, bytes: &[u8]) -> Result<(), CapacityError> {
        let end = self.len.saturating_add(bytes.len());
        let dst = self.data.get_mut(self.len..end).ok_or(CapacityError {
            requested: end,
            capacity: N,
        })?;
        dst.copy_from_slice(bytes);
        self.len = end;
        Ok(())
    }
    fn release(&mut self) {
        // Fixed storage cannot be freed; new bytes are zero-filled by `try_resize`, so stale
        // content is never exposed through this API.
        self.len = 0;
    }
}

#[cfg(feature = "alloc")]
impl Buffer for alloc::vec::Vec<u8> {
    fn as_slice(&self) -> &[u8] {
        self
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        self
    }
    fn capacity_limit(&self) -> usize {
        usize::MAX
    }
    fn try_resize(&mut self, len: usize) -> Result<(), CapacityError> {
        if len > self.len() {
            self.try_reserve(len - self.len())
                .map_err(|_| CapacityError {
                    requested: len,
                    capacity: self.capacity(),
                })?;
        }
        self.resize(len, 0);
        Ok(())
    }
    fn truncate(&mut self, len: usize) {
        alloc::vec::Vec::truncate(self, len);
    }
    fn release(&mut self) {
        *self = alloc::vec::Vec::new();
    }
    fn spare_capacity(&self) -> usize {
        self.capacity().saturating_sub(self.len())
    }
    fn try_reserve(&mut self, additional: usize) -> Result<(), CapacityError> {
        alloc::vec::Vec::try_reserve_exact(self, additional).map_err(|_| CapacityError {
            requested: self.len().saturating_add(additional),
            capacity: self.capacity(),
        })
    }
    fn try_extend(&mut self, bytes: &[u8]) -> Result<(), CapacityError> {
        alloc::vec::Vec::try_reserve(self, bytes.len()).map_err(|_| CapacityError {
            requested: self.len().saturating_add(bytes.len()),
            capacity: self.capacity(),
        })?;
        self.extend_from_slice(bytes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_buf_enforces_capacity_and_zero_fills() {
        let mut b = ArrayBuf::<4>::new();
        b.try_extend(&[1, 2, 3]).unwrap();
        assert_eq!(b.as_slice(), &[1, 2, 3]);
        assert_eq!(
            b.try_extend(&[4, 5]),
            Err(CapacityError {
                requested: 5,
                capacity: 4
            })
        );
        b.truncate(1);
        b.try_resize(3).unwrap();
        assert_eq!(b.as_slice(), &[1, 0, 0]);
        b.release();
        assert!(b.is_empty());
    }

    #[cfg(feature = "alloc")]
    #[test]
    fn vec_release_frees_memory() {
        let mut v: alloc::vec::Vec<u8> = alloc::vec::Vec::new();
        v.try_extend(&[9; 100]).unwrap();
        assert_eq!(v.len(), 100);
        v.release();
        assert_eq!(v.capacity(), 0);
    }
}
