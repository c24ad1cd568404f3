//! The constants of the binary vector format ([`crate::tree`] has the layout), shared by the
//! converter (`build.rs` includes this file) and the reader.

/// The first bytes of the file.
pub const MAGIC: &[u8; 8] = b"BLRPCVT1";

/// JSON `null`.
pub const NULL: u8 = 0;
/// JSON `false`.
pub const FALSE: u8 = 1;
/// JSON `true`.
pub const TRUE: u8 = 2;
/// A non-negative integer: `u64`.
pub const UINT: u8 = 3;
/// A negative integer: `i64`.
pub const NEG: u8 = 4;
/// A string that is not hex: `len:u32` and UTF-8.
pub const TEXT: u8 = 5;
/// A hex string, decoded: `len:u32` and the bytes.
pub const BYTES: u8 = 6;
/// A list: `count:u32 size:u32` and the items.
pub const LIST: u8 = 7;
/// An object: `count:u32 size:u32` and `(key_len:u8 key value)*`.
pub const OBJECT: u8 = 8;
