//! Reads the vector file `build.rs` writes: records `[kind u8][name][u32 body length][fields]`, byte
//! strings as `u32 len + bytes`, lists as `u16 count + items`, integers little-endian.
#![allow(missing_docs)] // the kinds are build.rs's constants; the methods read what they name

use crate::Fail;

// The record kinds (the same constants as build.rs).
pub const KIND_SPLIT: u8 = 1;
pub const KIND_SPLIT_ERROR: u8 = 2;
pub const KIND_CONTROL: u8 = 3;
pub const KIND_COMMAND: u8 = 4;
pub const KIND_ENCRYPT: u8 = 5;
pub const KIND_NONCE: u8 = 6;
pub const KIND_EXHAUST: u8 = 7;
pub const KIND_DECRYPT: u8 = 8;
pub const KIND_EXCHANGE: u8 = 9;
pub const KIND_ASSEMBLY: u8 = 10;

/// A cursor over the embedded vector file.
#[derive(Clone, Copy)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

const TRUNCATED: Fail = Fail("the vector file is truncated");

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Fail> {
        if self.rest.len() < n {
            return Err(TRUNCATED);
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], Fail> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
    pub fn u8(&mut self) -> Result<u8, Fail> {
        Ok(self.array::<1>()?[0])
    }
    pub fn u16(&mut self) -> Result<u16, Fail> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub fn u32(&mut self) -> Result<u32, Fail> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    /// A `u32`-length-prefixed byte string.
    pub fn bytes(&mut self) -> Result<&'a [u8], Fail> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    /// A `u16`-length-prefixed UTF-8 string.
    pub fn str(&mut self) -> Result<&'a str, Fail> {
        let n = usize::from(self.u16()?);
        core::str::from_utf8(self.take(n)?).map_err(|_| Fail("a name is not UTF-8"))
    }
}
