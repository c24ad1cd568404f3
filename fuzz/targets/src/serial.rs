//! The serial link's receive side (`blerpc::link::serial`): COBS frames with a CRC-16, found
//! again after any damage.

use blerpc::link::serial::{
    CRC_LEN, DELIMITER, Deframer, FrameError, crc16, encode_frame, max_encoded_len,
};

use crate::input::Cursor;

/// What the reference model says one frame gives.
type Outcome = Result<Vec<u8>, FrameError>;

/// Reference COBS decoding (Cheshire & Baker): code byte `n` is followed by `n - 1` data bytes
/// and stands for a zero after them, unless it is 0xFF or ends the frame.
fn cobs_model(encoded: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < encoded.len() {
        let code = usize::from(encoded[i]);
        if code == 0 {
            return None;
        }
        let data = encoded.get(i + 1..i + code)?;
        out.extend_from_slice(data);
        i += code;
        if code < 0xFF && i < encoded.len() {
            out.push(0);
        }
    }
    Some(out)
}

/// The frames of `stream` as the documented rules decode them, and whether an unfinished frame
/// is left buffered at the end.
fn model(stream: &[u8], max_pdu: usize) -> (Vec<Outcome>, bool) {
    let max = max_encoded_len(max_pdu);
    let mut out = Vec::new();
    let mut segments: Vec<&[u8]> = stream.split(|&b| b == DELIMITER).collect();
    // The last segment has no delimiter after it (yet).
    let last = segments.pop().unwrap_or_default();
    for seg in segments.into_iter().filter(|s| !s.is_empty()) {
        out.push(if seg.len() > max {
            Err(FrameError::Oversized { max })
        } else {
            frame_model(seg, max_pdu)
        });
    }
    // An unfinished frame is dropped as soon as it outgrows the limit.
    if last.len() > max {
        out.push(Err(FrameError::Oversized { max }));
    }
    (out, !last.is_empty() && last.len() <= max)
}

fn frame_model(encoded: &[u8], max_pdu: usize) -> Outcome {
    let raw = cobs_model(encoded).ok_or(FrameError::Cobs)?;
    let Some(body_len) = raw.len().checked_sub(CRC_LEN) else {
        return Err(FrameError::TooShort(raw.len()));
    };
    if body_len > max_pdu {
        return Err(FrameError::PduTooLong {
            len: body_len,
            max: max_pdu,
        });
    }
    let (body, crc) = raw.split_at(body_len);
    let got = u16::from_le_bytes([crc[0], crc[1]]);
    let expected = crc16(body);
    if got != expected {
        return Err(FrameError::Crc { got, expected });
    }
    Ok(body.to_vec())
}

/// Feeds `stream` to a fresh [`Deframer`] `step` bytes at a time.
fn run(stream: &[u8], max_pdu: usize, step: usize) -> (Vec<Outcome>, bool) {
    let mut d = Deframer::new(max_pdu);
    let mut out = Vec::new();
    for piece in stream.chunks(step.max(1)) {
        let mut rest = piece;
        while !rest.is_empty() {
            let (used, outcome) = d.push(rest);
            assert!(
                used > 0 && used <= rest.len(),
                "push consumed {used} of {}",
                rest.len()
            );
            rest = &rest[used..];
            match outcome {
                Some(Ok(())) => out.push(Ok(d.pdu().to_vec())),
                Some(Err(e)) => out.push(Err(e)),
                None => assert!(rest.is_empty(), "push stopped early without a frame"),
            }
        }
    }
    (out, d.has_partial())
}

/// The serial deframer: `[max_pdu u16][step][mode]` then the stream. `max_pdu` is taken modulo
/// 520, `step` is how many bytes each read delivers (0 = everything at once). Mode bit 0 clear:
/// the rest is the raw line. Set: the rest is a program of `[op][chunk]` pairs that builds the
/// line: op % 4 = 0 a genuine frame of the chunk, 1 the chunk as raw noise, 2 a genuine frame
/// with the byte at `op / 4` (mod its length) flipped, 3 a genuine frame cut short by `op / 4`
/// bytes (mod its length).
///
/// Invariants:
/// - Every outcome (PDU, or the error that dropped the frame: invalid COBS, short, over the
///   PDU limit, CRC, oversized), and whether a partial frame is left, equal a reference model of the
///   documented framing (its own COBS decoder and the delimiter rules).
/// - Delivering the line in pieces of any size gives the same outcomes as all at once.
/// - A delivered PDU is at most `max_pdu` bytes and re-frames ([`encode_frame`]) to a frame
///   that delivers it again.
/// - Program mode: every genuine, undamaged frame whose PDU fits comes out, in order, whatever
///   damage surrounds it.
pub fn serial_deframer(data: &[u8]) {
    let mut cur = Cursor::new(data);
    let max_pdu = usize::from(cur.u16() % 520);
    let step = usize::from(cur.u8());
    let mode = cur.u8();
    let mut genuine = Vec::new();
    let stream = if mode & 1 == 0 {
        cur.rest().to_vec()
    } else {
        let mut line = Vec::new();
        while !cur.is_empty() {
            let op = cur.u8();
            let chunk = cur.chunk();
            let at = usize::from(op >> 2);
            match op & 3 {
                0 => {
                    encode_frame(chunk, &mut line);
                    if chunk.len() <= max_pdu {
                        genuine.push(chunk.to_vec());
                    }
                }
                1 => line.extend_from_slice(chunk),
                2 => {
                    let start = line.len();
                    encode_frame(chunk, &mut line);
                    let len = line.len() - start;
                    line[start + at % len] ^= 0x01 << (op & 7);
                }
                _ => {
                    let start = line.len();
                    encode_frame(chunk, &mut line);
                    let len = line.len() - start;
                    line.truncate(line.len() - at % len);
                }
            }
        }
        line
    };

    let whole = run(&stream, max_pdu, stream.len());
    assert_eq!(
        whole,
        model(&stream, max_pdu),
        "the deframer disagrees with the model"
    );
    if step != 0 {
        assert_eq!(
            run(&stream, max_pdu, step),
            whole,
            "reads of {step} bytes change the outcome"
        );
    }
    let pdus: Vec<&Vec<u8>> = whole.0.iter().filter_map(|o| o.as_ref().ok()).collect();
    for pdu in &pdus {
        assert!(
            pdu.len() <= max_pdu,
            "a {}-byte PDU through a {max_pdu} limit",
            pdu.len()
        );
        let mut frame = Vec::new();
        encode_frame(pdu, &mut frame);
        assert_eq!(
            run(&frame, max_pdu, frame.len()),
            (vec![Ok(pdu.to_vec())], false)
        );
    }
    // Genuine frames survive: they are a subsequence of what came out.
    let mut found = pdus.iter();
    for g in &genuine {
        assert!(
            found.any(|p| *p == g),
            "a genuine {}-byte frame was lost",
            g.len()
        );
    }
}
