//! Payloads the vectors describe instead of listing: `{"pattern", "len", "sha256", "hex"?}`
//! (`gen.py`: `mod251`, `mod256` or `hex`) and `{"len", "mul", "add", "sha256"}` (`long.py`:
//! byte *i* = (*i* × mul + add) mod 256), rebuilt into a buffer and checked against their hash.

use blerpc_proto::buf::Buffer;
use sha2::{Digest, Sha256};

use crate::fail::{Fail, same_bytes, same_len};
use crate::{Node, Stop, fits, sized};

/// Fills `out` with byte *i* = (*i* × `mul` + `add`) mod 256.
pub(crate) fn fill_pattern(out: &mut [u8], mul: u64, add: u64) {
    // Mod 256 commutes with the arithmetic: only the low bytes matter.
    let (mul, add) = (mul as u8, add as u8);
    for (i, b) in out.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(mul).wrapping_add(add);
    }
}

/// `len` bytes of the pattern (*i* × `mul` + `add`) mod 256 in `buf`.
pub(crate) fn pattern<M: Buffer + Default>(
    buf: &mut M,
    len: usize,
    mul: u64,
    add: u64,
) -> Result<&[u8], Stop> {
    let out = sized(buf, len)?;
    fill_pattern(out, mul, add);
    Ok(out)
}

/// The SHA-256 of `bytes`.
pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Rebuilds a `gen.py` payload descriptor into `buf`; its length and hash must match.
pub(crate) fn payload<'b, M: Buffer + Default>(
    desc: Node<'_>,
    buf: &'b mut M,
) -> Result<&'b [u8], Stop> {
    let len = fits(buf, desc.u64("len")?)?;
    let out = sized(buf, len)?;
    match desc.str("pattern")? {
        "mod251" => out
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = (i % 251) as u8),
        "mod256" => fill_pattern(out, 1, 0),
        "hex" => {
            let bytes = desc.bytes("hex")?;
            same_len("payload length", bytes.len(), len)?;
            out.copy_from_slice(bytes);
        }
        _ => return Err(Fail::field("unknown payload pattern", "pattern").into()),
    }
    same_bytes("payload sha256", &sha256(out), desc.bytes("sha256")?)?;
    Ok(out)
}

/// Rebuilds a `long.py` pattern descriptor into `buf`; its hash must match.
pub(crate) fn long_pattern<'b, M: Buffer + Default>(
    desc: Node<'_>,
    buf: &'b mut M,
) -> Result<&'b [u8], Stop> {
    let len = fits(buf, desc.u64("len")?)?;
    let out = pattern(buf, len, desc.u64("mul")?, desc.u64("add")?)?;
    same_bytes("pattern sha256", &sha256(out), desc.bytes("sha256")?)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_wrap_mod_256() {
        let mut out = [0u8; 6];
        fill_pattern(&mut out, 31, 7);
        assert_eq!(out, [7, 38, 69, 100, 131, 162]);
        let mut out = [0u8; 258];
        fill_pattern(&mut out, 1, 0);
        assert_eq!((out[255], out[256], out[257]), (255, 0, 1));
        fill_pattern(&mut out[..10], 7, 0);
        assert_eq!(out[..10], [0, 7, 14, 21, 28, 35, 42, 49, 56, 63]);
        // i = 37: 37 * 7 = 259 = 3 mod 256.
        fill_pattern(&mut out[..38], 7, 0);
        assert_eq!(out[37], 3);
    }
}
