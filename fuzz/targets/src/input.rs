//! Structured fuzz input: [`Cursor`] reads front to back and yields zeros once the input is
//! exhausted, so every byte string is a valid program; [`encode_chunk`] writes what
//! [`Cursor::chunk`] reads (the seed generators use it).

/// Reads fuzz input front to back; past the end every read returns zeros / empty slices.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    data: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Cursor { data }
    }
    /// `true` once every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    /// The next byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }
    /// The next two bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    /// The next four bytes, little-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    /// Up to `n` bytes.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }
    /// A length-prefixed chunk: `[len]` (0..=254) or `[255][extra]` (255..=510), then the bytes.
    pub fn chunk(&mut self) -> &'a [u8] {
        let mut n = usize::from(self.u8());
        if n == 255 {
            n += usize::from(self.u8());
        }
        self.bytes(n)
    }
    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        core::mem::take(&mut self.data)
    }
}

/// Writes a chunk the way [`Cursor::chunk`] reads it (at most 510 bytes are kept).
pub fn encode_chunk(bytes: &[u8], out: &mut Vec<u8>) {
    let bytes = &bytes[..bytes.len().min(510)];
    if bytes.len() >= 255 {
        out.push(255);
        out.push((bytes.len() - 255) as u8);
    } else {
        out.push(bytes.len() as u8);
    }
    out.extend_from_slice(bytes);
}
