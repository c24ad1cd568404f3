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
    /// Appends `bytes`. `Vec<u8>` copies a large slice in pieces where one `memcpy` would hit a
    /// slow case of glibc's `rep movsb` (AMD Zen, a destination 1 to 63 bytes past the source
    /// modulo 4 KiB, as a fresh buffer of a message's size is): use it to copy a received
    /// message out.
    fn try_extend(&mut self, bytes: &[u8]) -> Result<(), CapacityError> {
        let start = self.len();
        let end = start.checked_add(bytes.len()).ok_or(CapacityError {
            requested: usize::MAX,
            capacity: self.capacity_limit(),
        })?;
        self.try_resize(end)?;
        if let Some(dst) = self.as_mut_slice().get_mut(start..end) {
            let _ = copy_bytes(dst, bytes);
        }
        Ok(())
    }
}

// How the buffers copy. Large copies between heap buffers are made in pieces where glibc's
// `memcpy` is slow: up to at least glibc 2.36 it copies blocks from about 2 KiB up to the L2
// cache size with `rep movsb` on CPUs that announce fast string moves, and on AMD Zen that
// instruction is many times slower when the destination lies 1 to 63 bytes past the source
// modulo 4 KiB. Two heap buffers of the same size sit exactly 16 bytes apart modulo 4 KiB (glibc's
// chunk header), so copying a large message into a fresh buffer of its size hits it every time.
// Pieces below glibc's `rep movsb` threshold are copied with vector moves at full speed on every
// CPU. Elsewhere the pieces only cost (0.75x a `memcpy` of 1 MiB at distance 16 on an Intel
// Xeon), so they are used only where `slow_rep_movsb` finds an AMD Zen CPU. `Vec<u8>`'s
// `Buffer::try_extend` and `Container::emit` copy this way; `blerpc-bench copy` measures it on the
// CPU at hand.

/// Copies at or below this many bytes go to `copy_from_slice` whole; longer ones are checked
/// for the slow case.
pub(crate) const COPY_CHUNK: usize = 1024;

/// `true` when copying `len` bytes from `src` to `dst` would hit the slow case of `rep movsb`
/// on a CPU that has it ([`slow_rep_movsb`]).
pub(crate) fn copy_is_slow_case(dst: *const u8, src: *const u8, len: usize) -> bool {
    slow_distance(dst, src, len) && slow_rep_movsb()
}

/// `true` when the copy is the slow case's shape: more than [`COPY_CHUNK`] bytes, with the
/// destination 1 to 63 bytes past the source modulo 4 KiB.
fn slow_distance(dst: *const u8, src: *const u8, len: usize) -> bool {
    // Only addresses are compared; nothing is dereferenced.
    let distance = (dst as usize).wrapping_sub(src as usize) % 4096;
    len > COPY_CHUNK && (1..64).contains(&distance)
}

/// `true` on a CPU whose `rep movsb` has the slow case: AMD Zen (family 17h and later), found
/// with `cpuid` once and remembered.
fn slow_rep_movsb() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use core::sync::atomic::{AtomicU8, Ordering};
        /// 0: not asked yet; 1: slow; 2: not slow.
        static KNOWN: AtomicU8 = AtomicU8::new(0);
        match KNOWN.load(Ordering::Relaxed) {
            1 => true,
            2 => false,
            _ => {
                let slow = amd_zen();
                KNOWN.store(if slow { 1 } else { 2 }, Ordering::Relaxed);
                slow
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `cpuid`: the vendor is "AuthenticAMD" and the family 17h (Zen) or later.
#[cfg(target_arch = "x86_64")]
fn amd_zen() -> bool {
    use core::arch::x86_64::__cpuid;
    let vendor = __cpuid(0);
    let amd = [vendor.ebx, vendor.edx, vendor.ecx]
        == [
            u32::from_le_bytes(*b"Auth"),
            u32::from_le_bytes(*b"enti"),
            u32::from_le_bytes(*b"cAMD"),
        ];
    let eax = __cpuid(1).eax;
    let base = (eax >> 8) & 0xf;
    let family = if base == 0xf {
        base + ((eax >> 20) & 0xff)
    } else {
        base
    };
    amd && family >= 0x17
}

/// Copies the first `min(dst.len(), src.len())` bytes of `src` into `dst` and returns that count,
/// in [`COPY_CHUNK`]-byte pieces in the slow case.
pub(crate) fn copy_bytes(dst: &mut [u8], src: &[u8]) -> usize {
    let n = dst.len().min(src.len());
    let (Some(dst), Some(src)) = (dst.get_mut(..n), src.get(..n)) else {
        return 0;
    };
    if copy_is_slow_case(dst.as_ptr(), src.as_ptr(), n) {
        copy_in_pieces(dst, src);
    } else {
        dst.copy_from_slice(src);
    }
    n
}

/// Copies `src` into `dst` (of the same length) in [`COPY_CHUNK`]-byte pieces.
fn copy_in_pieces(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.chunks_mut(COPY_CHUNK).zip(src.chunks(COPY_CHUNK)) {
        d.copy_from_slice(s);
    }
}

/// Appends `src` to `v` the way [`copy_bytes`] copies: in pieces where one large `memcpy` would
/// be slow.
#[cfg(feature = "alloc")]
pub(crate) fn extend_bytes(v: &mut alloc::vec::Vec<u8>, src: &[u8]) {
    if src.len() <= COPY_CHUNK {
        // Never the slow case; most calls (one container's payload) end here.
        v.extend_from_slice(src);
        return;
    }
    v.reserve(src.len());
    let dst = v.as_ptr().wrapping_add(v.len());
    if copy_is_slow_case(dst, src.as_ptr(), src.len()) {
        extend_in_pieces(v, src);
    } else {
        v.extend_from_slice(src);
    }
}

/// Appends `src` to `v` in [`COPY_CHUNK`]-byte pieces.
#[cfg(feature = "alloc")]
fn extend_in_pieces(v: &mut alloc::vec::Vec<u8>, src: &[u8]) {
    for piece in src.chunks(COPY_CHUNK) {
        v.extend_from_slice(piece);
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
        let _ = copy_bytes(dst, bytes);
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
        extend_bytes(self, bytes);
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

    #[test]
    fn copy_bytes_copies_every_byte_at_every_distance() {
        // Source and destination in one array, so every distance modulo 4 KiB below 128 is
        // tried, the slow case (1..64) included, at lengths on both sides of a piece.
        let mut arena = [0u8; 3 * 4096 + 256];
        for len in [0, 1, COPY_CHUNK - 1, COPY_CHUNK, COPY_CHUNK + 1, 4097] {
            for distance in 0..128 {
                // The destination starts `distance` bytes past the source modulo 4 KiB, and
                // holds a byte the source never has before the copy.
                let (src_part, dst_part) = arena.split_at_mut(8192);
                for (i, b) in src_part.iter_mut().enumerate() {
                    *b = (i % 251) as u8;
                }
                dst_part.fill(0xEE);
                let src = &src_part[..len];
                let expected: [u8; 4097] =
                    core::array::from_fn(|i| src.get(i).copied().unwrap_or(0));
                let dst = &mut dst_part[distance..distance + len + 3];
                assert_eq!(
                    slow_distance(dst.as_ptr(), src.as_ptr(), len),
                    len > COPY_CHUNK && (1..64).contains(&distance)
                );
                let n = copy_bytes(dst, src);
                assert_eq!(n, len);
                // The piecewise path whatever the CPU takes.
                let mut again = [0u8; 4097];
                copy_in_pieces(&mut again[..len], src);
                assert_eq!(&again[..len], &expected[..len]);
                assert_eq!(
                    &dst[..len],
                    &expected[..len],
                    "len {len} distance {distance}"
                );
                assert_eq!(dst[len..], [0xEE; 3], "wrote past the source's length");
            }
        }
    }

    #[test]
    fn copy_bytes_copies_the_shorter_length() {
        let mut dst = [0u8; 3];
        assert_eq!(copy_bytes(&mut dst, &[1, 2, 3, 4, 5]), 3);
        assert_eq!(dst, [1, 2, 3]);
        let mut dst = [9u8; 4];
        assert_eq!(copy_bytes(&mut dst, &[7]), 1);
        assert_eq!(dst, [7, 9, 9, 9]);
    }

    #[test]
    fn slow_case_is_one_to_sixty_three_bytes_ahead_modulo_a_page() {
        let base = 0x10_0000usize as *const u8;
        let at = |off: usize| base.wrapping_add(off);
        assert!(slow_distance(at(65_552), at(0), 65_536));
        assert!(slow_distance(at(4096 + 63), at(0), 2048));
        assert!(!slow_distance(at(4096 + 64), at(0), 2048));
        assert!(!slow_distance(at(8192), at(0), 65_536));
        assert!(!slow_distance(at(65_552), at(0), COPY_CHUNK));
        // Destination before the source: the distance wraps, not the slow case.
        assert!(!slow_distance(at(0), at(16), 65_536));
        // The CPU decides the rest.
        assert_eq!(
            copy_is_slow_case(at(65_552), at(0), 65_536),
            slow_rep_movsb()
        );
    }

    #[cfg(feature = "alloc")]
    #[test]
    fn extend_bytes_keeps_every_byte() {
        let src: alloc::vec::Vec<u8> = (0..70_000u32).map(|i| (i % 253) as u8).collect();
        for prefix in [0usize, 1, 16, 4095] {
            let mut v = alloc::vec![0xAA; prefix];
            extend_bytes(&mut v, &src);
            assert_eq!(&v[..prefix], &alloc::vec![0xAA; prefix][..]);
            assert_eq!(&v[prefix..], &src[..]);
        }
        let mut v = alloc::vec::Vec::new();
        v.try_extend(&src).unwrap();
        assert_eq!(v, src);
    }

    #[cfg(feature = "alloc")]
    #[test]
    fn the_piecewise_path_keeps_every_byte_at_the_slow_distance() {
        // The destination's address is fixed once the Vec has its capacity; the source is put
        // where the append lands 16 bytes past it modulo 4 KiB, where an AMD Zen CPU takes the
        // piecewise path (taken here whatever the CPU).
        let len = 3 * COPY_CHUNK + 17;
        let mut v: alloc::vec::Vec<u8> = alloc::vec::Vec::with_capacity(len + 5);
        v.extend_from_slice(&[0xAA; 5]);
        let dst = v.as_ptr() as usize + v.len();
        let arena: alloc::vec::Vec<u8> = (0..len + 8192).map(|i| (i % 239) as u8).collect();
        let off = dst.wrapping_sub(16).wrapping_sub(arena.as_ptr() as usize) % 4096;
        let src = &arena[off..off + len];
        assert!(slow_distance(dst as *const u8, src.as_ptr(), len));
        extend_in_pieces(&mut v, src);
        assert_eq!(&v[..5], &[0xAA; 5]);
        assert_eq!(&v[5..], src);
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
