//! A few protobuf helpers for the demo messages (varint and length-delimited fields only), so
//! the harness needs no generated code.

/// Appends `v` as a varint.
pub fn varint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// A varint field, omitted when zero (proto3).
pub fn pb_uint(field: u32, v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    if v != 0 {
        varint(u64::from(field << 3), &mut out);
        varint(v, &mut out);
    }
    out
}

/// A length-delimited field, omitted when empty (proto3).
pub fn pb_bytes(field: u32, v: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    if !v.is_empty() {
        varint(u64::from(field << 3 | 2), &mut out);
        varint(v.len() as u64, &mut out);
        out.extend_from_slice(v);
    }
    out
}

fn read_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The fields of a message: `(number, Ok(varint) | Err(bytes))`, up to the first it cannot read.
fn fields(buf: &[u8]) -> Vec<(u32, Result<u64, Vec<u8>>)> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < buf.len() {
        let Some(key) = read_varint(buf, &mut pos) else {
            break;
        };
        let number = u32::try_from(key >> 3).unwrap_or(0);
        match key & 7 {
            0 => {
                let Some(v) = read_varint(buf, &mut pos) else {
                    break;
                };
                out.push((number, Ok(v)));
            }
            2 => {
                let Some(len) = read_varint(buf, &mut pos) else {
                    break;
                };
                let Some(end) = usize::try_from(len).ok().and_then(|l| pos.checked_add(l)) else {
                    break;
                };
                let Some(b) = buf.get(pos..end) else { break };
                out.push((number, Err(b.to_vec())));
                pos = end;
            }
            _ => break,
        }
    }
    out
}

/// The varint field `field`, if present.
pub fn pb_get_uint(buf: &[u8], field: u32) -> Option<u64> {
    fields(buf)
        .into_iter()
        .find_map(|(f, v)| if f == field { v.ok() } else { None })
}

/// The length-delimited field `field`, if present.
pub fn pb_get_bytes(buf: &[u8], field: u32) -> Option<Vec<u8>> {
    fields(buf)
        .into_iter()
        .find_map(|(f, v)| if f == field { v.err() } else { None })
}

/// `EchoRequest { message }`.
pub fn echo_req(msg: &str) -> Vec<u8> {
    pb_bytes(1, msg.as_bytes())
}

/// The `big` handler's response of `len` bytes.
pub fn big_response(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// The first four bytes as a little-endian `u32`.
pub(crate) fn le_u32(b: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(..4)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let mut m = pb_uint(1, 300);
        m.extend(pb_bytes(2, b"hi"));
        assert_eq!(m, [0x08, 0xac, 0x02, 0x12, 0x02, b'h', b'i']);
        assert_eq!(pb_get_uint(&m, 1), Some(300));
        assert_eq!(pb_get_bytes(&m, 2), Some(b"hi".to_vec()));
        assert_eq!(pb_get_uint(&m, 3), None);
        // A length past the end stops the reader instead of panicking.
        assert_eq!(pb_get_bytes(&[0x12, 0xff, 0x01, 0x00], 2), None);
    }
}
