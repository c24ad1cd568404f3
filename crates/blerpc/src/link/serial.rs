//! Serial link: bleRPC over a UART, a USB CDC-ACM port or Bluetooth SPP (RFCOMM) on a tty.
//!
//! A serial line is a byte stream with no message boundaries and, unlike TCP, no integrity: bytes
//! can be lost, flipped or invented by line noise. Each PDU (one container) therefore travels as
//! one **frame** that a receiver can find again after any damage and check before use.
//!
//! # Frame layout
//!
//! ```text
//! 00 | COBS( container ‖ crc16_le ) | 00
//! ```
//!
//! - `container`: one PDU, at most `att_mtu - 3` bytes (244 at the default ATT MTU of 247).
//! - `crc16_le`: CRC-16/CCITT-FALSE (poly `0x1021`, init `0xFFFF`, no reflection, no final XOR;
//!   check value `0x29B1` for `"123456789"`) of the container, **little-endian** like every other
//!   multi-byte field in bleRPC.
//! - COBS (Consistent Overhead Byte Stuffing, Cheshire & Baker 1999) removes every `0x00` from
//!   `container ‖ crc`, at a cost of one byte per 254 (one byte for any container up to 244 bytes).
//! - `00` delimits frames. The sender writes it **before and after** every frame, so noise between
//!   two frames is always fenced off into a frame of its own and never corrupts the next one.
//!   Back-to-back frames show `00 00` between them; an empty frame is skipped silently.
//!
//! Example: the TIMEOUT reply `00 00 c4 02 64 00` (tid 0, CONTROL TIMEOUT, 100 ms) has CRC
//! `0xDECB`, so `container ‖ crc` is `00 00 c4 02 64 00 cb de` and the bytes on the line are
//!
//! ```text
//! 00 01 01 04 c4 02 64 03 cb de 00
//! ```
//!
//! # Damage
//!
//! The receiver collects bytes up to the next `00`, undoes COBS and checks the CRC. A frame that
//! does not decode, grows beyond the largest valid frame for the receiver's MTU, decodes to a
//! PDU longer than `att_mtu - 3`, or fails the CRC is **dropped**: counted in [`SerialStats`],
//! logged at `warn`, and the receiver resynchronises at the next `00`. A dropped PDU is simply
//! missing to the protocol above, which reacts as it does to any lost container: the reassembly
//! of that transaction fails (sequence gap) and the call times out, or a single-container
//! request is never answered and times out.
//!
//! CRC-16 detects every error of up to 3 bits and every burst up to 16 bits in a frame; random
//! garbage passes with probability 2⁻¹⁶ per frame and reaches the protocol as a malformed
//! container, which the core drops (and which end-to-end encryption rejects).
//!
//! # Platforms and permissions
//!
//! - **Linux**: `/dev/ttyUSB*`, `/dev/ttyACM*`, `/dev/ttyS*`, `/dev/rfcomm*` (Bluetooth SPP, bound
//!   with `rfcomm bind` or `bluetoothctl`). The user needs to be in the `dialout` group (or
//!   `uucp` on Arch). The port is opened exclusively (`TIOCEXCL`) in raw mode, 8N1.
//! - **macOS**: use the `/dev/cu.*` device, not `/dev/tty.*` (which waits for carrier detect).
//!   SPP ports appear as `/dev/cu.<name>` after pairing in System Settings.
//! - **Windows**: `COM3`, or `\\.\COM10` for ports above 9. SPP ports are the "outgoing" COM port
//!   created when pairing.
//! - Pseudo-terminals work too (tests use them); the baud rate is ignored there.
//!
//! Hardware flow control (RTS/CTS) is off by default; enable it with
//! [`SerialOptions::rts_cts`] for high baud rates on UARTs that wire it.
//!
//! The peer id (used for identity pinning) is `serial://` followed by the path, e.g.
//! `serial:///dev/ttyUSB0`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};

use super::{DEFAULT_STREAM_ATT_MTU, Link, LinkError, LinkRx, LinkTx};

/// The baud rate [`SerialOptions`] uses unless configured.
pub const DEFAULT_BAUD_RATE: u32 = 115_200;

/// Frames [`SerialTx`] queues before [`LinkTx::is_full`] asks for a flush.
pub const DEFAULT_QUEUE_FRAMES: usize = 64;

/// The frame delimiter.
pub const DELIMITER: u8 = 0x00;

/// Bytes of CRC after the container.
pub const CRC_LEN: usize = 2;

/// Bytes read from the port at once.
const READ_CHUNK: usize = 1024;

/// Options of a [`SerialLink`].
#[derive(Clone, Debug)]
pub struct SerialOptions {
    /// Baud rate of the port ([`SerialLink::open`] only). Default 115,200.
    pub baud_rate: u32,
    /// ATT MTU: PDUs are at most `att_mtu - 3` bytes; longer incoming frames are dropped. Both
    /// ends must agree. Default 247.
    pub att_mtu: usize,
    /// Hardware flow control (RTS/CTS) ([`SerialLink::open`] only). Default off.
    pub rts_cts: bool,
    /// Frames queued before the link reports itself full. Default 64.
    pub queue_frames: usize,
    /// The peer id reported by the link. Default: `serial://<path>` for [`SerialLink::open`],
    /// `serial://stream` for [`SerialLink::new`].
    pub peer_id: Option<String>,
}

impl Default for SerialOptions {
    fn default() -> Self {
        SerialOptions {
            baud_rate: DEFAULT_BAUD_RATE,
            att_mtu: DEFAULT_STREAM_ATT_MTU,
            rts_cts: false,
            queue_frames: DEFAULT_QUEUE_FRAMES,
            peer_id: None,
        }
    }
}

/// Why a received frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The COBS encoding is invalid (a code byte points past the end of the frame).
    #[error("invalid COBS encoding")]
    Cobs,
    /// The frame is shorter than its CRC.
    #[error("frame of {0} bytes is shorter than its CRC")]
    TooShort(usize),
    /// The CRC does not match the container.
    #[error("CRC mismatch: frame says {got:#06x}, container gives {expected:#06x}")]
    Crc {
        /// The CRC in the frame.
        got: u16,
        /// The CRC of the received container.
        expected: u16,
    },
    /// The frame grew beyond the largest valid encoded frame before its delimiter.
    #[error("frame longer than {max} encoded bytes")]
    Oversized {
        /// The largest valid encoded frame (without delimiters).
        max: usize,
    },
    /// The frame is within the encoded bound but decodes to a PDU longer than the receiver's
    /// limit (COBS overhead is one byte per 254, so the encoded bound alone lets a frame with
    /// zeros in it carry a few bytes more). Counted with [`FrameError::Oversized`].
    #[error("PDU of {len} bytes is longer than the limit of {max}")]
    PduTooLong {
        /// The decoded PDU's length.
        len: usize,
        /// The receiver's limit (`att_mtu - 3`).
        max: usize,
    },
}

/// CRC-16/CCITT-FALSE (IBM-3740 in the `crc` catalogue: poly `0x1021`, init `0xFFFF`, MSB
/// first, no final XOR), sixteen lookup tables at a time.
const CRC16: crc::Crc<u16, crc::Table<16>> =
    crc::Crc::<u16, crc::Table<16>>::new(&crc::CRC_16_IBM_3740);

/// CRC-16/CCITT-FALSE of `data` (poly `0x1021`, init `0xFFFF`, MSB first, no final XOR).
pub fn crc16(data: &[u8]) -> u16 {
    CRC16.checksum(data)
}

/// The longest COBS encoding of `len` bytes.
pub const fn cobs_max_len(len: usize) -> usize {
    cobs::max_encoding_length(len)
}

/// The longest frame (COBS bytes, without delimiters) carrying a PDU of at most `max_pdu` bytes.
pub const fn max_encoded_len(max_pdu: usize) -> usize {
    cobs_max_len(max_pdu + CRC_LEN)
}

/// Decodes COBS `data` (no delimiter inside) into `out`, replacing its contents.
fn cobs_decode(data: &[u8], out: &mut Vec<u8>) -> Result<(), FrameError> {
    out.clear();
    out.resize(data.len(), 0);
    let report = cobs::decode(data, out).map_err(|_| FrameError::Cobs)?;
    out.truncate(report.frame_size());
    Ok(())
}

/// Appends the frame of `pdu` to `out`: `00 COBS(pdu ‖ crc16_le) 00`.
pub fn encode_frame(pdu: &[u8], out: &mut Vec<u8>) {
    let mut raw = Vec::with_capacity(pdu.len() + CRC_LEN);
    raw.extend_from_slice(pdu);
    raw.extend_from_slice(&crc16(pdu).to_le_bytes());
    let start = out.len();
    out.resize(start + cobs_max_len(raw.len()) + 2, 0);
    let Some(body) = out.get_mut(start + 1..) else {
        return;
    };
    let n = cobs::encode(&raw, body);
    out.truncate(start + 1 + n);
    out.push(DELIMITER);
}

/// A sans-IO frame decoder: feed it bytes as they arrive, take PDUs out.
#[derive(Debug)]
pub struct Deframer {
    frame: Vec<u8>,
    pdu: Vec<u8>,
    max_pdu: usize,
    max_encoded: usize,
    discarding: bool,
}

impl Deframer {
    /// A decoder for PDUs of at most `max_pdu` bytes.
    pub fn new(max_pdu: usize) -> Self {
        let max_encoded = max_encoded_len(max_pdu);
        Deframer {
            frame: Vec::with_capacity(max_encoded),
            pdu: Vec::with_capacity(max_pdu + CRC_LEN),
            max_pdu,
            max_encoded,
            discarding: false,
        }
    }

    /// Consumes bytes from `input` up to the end of the next non-empty frame. Returns how many
    /// bytes were consumed and, if a frame ended, its outcome: `Ok(())` means [`Deframer::pdu`]
    /// holds the PDU; an error means the frame was dropped. `None` means every byte was consumed
    /// and the frame is not complete yet.
    pub fn push(&mut self, input: &[u8]) -> (usize, Option<Result<(), FrameError>>) {
        for (i, &byte) in input.iter().enumerate() {
            if byte != DELIMITER {
                if self.discarding {
                    continue;
                }
                if self.frame.len() >= self.max_encoded {
                    // Drop what we have and skip to the next delimiter.
                    self.frame.clear();
                    self.discarding = true;
                    return (
                        i + 1,
                        Some(Err(FrameError::Oversized {
                            max: self.max_encoded,
                        })),
                    );
                }
                self.frame.push(byte);
                continue;
            }
            if self.discarding {
                self.discarding = false;
                continue;
            }
            if self.frame.is_empty() {
                continue;
            }
            let outcome = self.finish();
            self.frame.clear();
            return (i + 1, Some(outcome));
        }
        (input.len(), None)
    }

    fn finish(&mut self) -> Result<(), FrameError> {
        cobs_decode(&self.frame, &mut self.pdu)?;
        let len = self.pdu.len();
        let Some(body_len) = len.checked_sub(CRC_LEN) else {
            return Err(FrameError::TooShort(len));
        };
        if body_len > self.max_pdu {
            return Err(FrameError::PduTooLong {
                len: body_len,
                max: self.max_pdu,
            });
        }
        let (body, crc) = self.pdu.split_at(body_len);
        let got = u16::from_le_bytes([
            crc.first().copied().unwrap_or(0),
            crc.get(1).copied().unwrap_or(0),
        ]);
        let expected = crc16(body);
        if got != expected {
            return Err(FrameError::Crc { got, expected });
        }
        self.pdu.truncate(body_len);
        Ok(())
    }

    /// The PDU of the last frame [`Deframer::push`] returned `Ok` for.
    pub fn pdu(&self) -> &[u8] {
        &self.pdu
    }

    /// `true` when bytes of an unfinished frame are buffered.
    pub fn has_partial(&self) -> bool {
        !self.frame.is_empty()
    }
}

/// Counters of a serial link's receive side, shared with its [`SerialRx`]. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct SerialStats(Arc<Counters>);

#[derive(Debug, Default)]
struct Counters {
    received: AtomicU64,
    cobs: AtomicU64,
    crc: AtomicU64,
    oversized: AtomicU64,
    truncated: AtomicU64,
}

/// A snapshot of [`SerialStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SerialCounters {
    /// Frames delivered as PDUs.
    pub received: u64,
    /// Frames dropped for invalid COBS or being shorter than the CRC.
    pub cobs_errors: u64,
    /// Frames dropped for a CRC mismatch.
    pub crc_errors: u64,
    /// Frames dropped for exceeding the largest valid frame or the PDU limit.
    pub oversized: u64,
    /// Unfinished frames dropped when the stream ended.
    pub truncated: u64,
}

impl SerialCounters {
    /// Every dropped frame.
    pub fn dropped(&self) -> u64 {
        self.cobs_errors + self.crc_errors + self.oversized + self.truncated
    }
}

impl SerialStats {
    /// The current counters.
    pub fn get(&self) -> SerialCounters {
        let c = &self.0;
        SerialCounters {
            received: c.received.load(Ordering::Relaxed),
            cobs_errors: c.cobs.load(Ordering::Relaxed),
            crc_errors: c.crc.load(Ordering::Relaxed),
            oversized: c.oversized.load(Ordering::Relaxed),
            truncated: c.truncated.load(Ordering::Relaxed),
        }
    }

    fn count(&self, e: &FrameError) {
        let c = match e {
            FrameError::Cobs | FrameError::TooShort(_) => &self.0.cobs,
            FrameError::Crc { .. } => &self.0.crc,
            FrameError::Oversized { .. } | FrameError::PduTooLong { .. } => &self.0.oversized,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// A serial link over any byte stream: a tty ([`SerialLink::open`]), a pseudo-terminal, or an
/// in-memory pipe ([`SerialLink::new`]).
#[derive(Debug)]
pub struct SerialLink<IO> {
    io: IO,
    att_mtu: usize,
    queue_frames: usize,
    peer_id: String,
    stats: SerialStats,
}

impl<IO> SerialLink<IO>
where
    IO: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    /// A serial link over `io`. `options.baud_rate` and `options.rts_cts` are not used (the
    /// stream is already configured).
    pub fn new(io: IO, options: SerialOptions) -> Self {
        SerialLink {
            io,
            att_mtu: options.att_mtu,
            queue_frames: options.queue_frames.max(1),
            peer_id: options
                .peer_id
                .unwrap_or_else(|| "serial://stream".to_string()),
            stats: SerialStats::default(),
        }
    }

    /// The receive counters (delivered and dropped frames). Keep a clone before
    /// [`Link::split`] to watch a running link.
    pub fn stats(&self) -> SerialStats {
        self.stats.clone()
    }
}

/// A serial link on an operating-system serial port (what [`SerialLink::open`] returns).
pub type SerialPortLink = SerialLink<tokio_serial::SerialStream>;

impl SerialLink<tokio_serial::SerialStream> {
    /// Opens the serial port at `path` (e.g. `/dev/ttyUSB0`, `COM3`) in raw 8N1 mode at
    /// `options.baud_rate`. Must be called inside a tokio runtime.
    pub fn open(path: &str, options: SerialOptions) -> Result<Self, LinkError> {
        use tokio_serial::SerialPortBuilderExt;
        let flow = if options.rts_cts {
            tokio_serial::FlowControl::Hardware
        } else {
            tokio_serial::FlowControl::None
        };
        let port = tokio_serial::new(path, options.baud_rate)
            .data_bits(tokio_serial::DataBits::Eight)
            .parity(tokio_serial::Parity::None)
            .stop_bits(tokio_serial::StopBits::One)
            .flow_control(flow)
            .open_native_async()
            .map_err(|e| LinkError::Io(std::io::Error::from(e)))?;
        let peer_id = options
            .peer_id
            .clone()
            .unwrap_or_else(|| format!("serial://{path}"));
        Ok(SerialLink::new(
            port,
            SerialOptions {
                peer_id: Some(peer_id),
                ..options
            },
        ))
    }
}

impl<IO> Link for SerialLink<IO>
where
    IO: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    type Tx = SerialTx<IO>;
    type Rx = SerialRx<IO>;

    fn att_mtu(&self) -> usize {
        self.att_mtu
    }

    fn peer_id(&self) -> String {
        self.peer_id.clone()
    }

    fn split(self) -> (SerialTx<IO>, SerialRx<IO>) {
        let max_pdu = self.att_mtu.saturating_sub(3);
        let (read, write) = tokio::io::split(self.io);
        (
            SerialTx {
                io: write,
                out: Vec::new(),
                written: 0,
                frames: 0,
                limit: self.queue_frames,
                max_pdu,
                closed: false,
            },
            SerialRx {
                io: read,
                buf: vec![0; READ_CHUNK].into_boxed_slice(),
                pos: 0,
                filled: 0,
                deframer: Deframer::new(max_pdu),
                stats: self.stats,
                peer_id: self.peer_id,
                eof: false,
            },
        )
    }
}

/// Transmit half of a [`SerialLink`].
#[derive(Debug)]
pub struct SerialTx<IO> {
    io: WriteHalf<IO>,
    /// Encoded frames not yet written, from `written` on.
    out: Vec<u8>,
    written: usize,
    frames: usize,
    limit: usize,
    max_pdu: usize,
    closed: bool,
}

impl<IO> LinkTx for SerialTx<IO>
where
    IO: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    fn queue(&mut self, pdu: &[u8]) -> Result<(), LinkError> {
        if pdu.len() > self.max_pdu {
            return Err(LinkError::TooLarge {
                len: pdu.len(),
                max: self.max_pdu,
            });
        }
        if self.closed {
            return Err(LinkError::Closed);
        }
        encode_frame(pdu, &mut self.out);
        self.frames += 1;
        Ok(())
    }

    fn is_full(&self) -> bool {
        self.frames >= self.limit
    }

    fn has_pending(&self) -> bool {
        self.written < self.out.len()
    }

    async fn flush(&mut self) -> Result<(), LinkError> {
        // `write` is cancel-safe and progress lives in `self.written`, so a dropped flush
        // resumes where it stopped.
        while let Some(rest) = self.out.get(self.written..).filter(|r| !r.is_empty()) {
            let n = self.io.write(rest).await?;
            if n == 0 {
                self.closed = true;
                return Err(LinkError::Closed);
            }
            self.written += n;
        }
        self.out.clear();
        self.written = 0;
        self.frames = 0;
        self.io.flush().await?;
        Ok(())
    }

    async fn close(&mut self) -> Result<(), LinkError> {
        let flushed = self.flush().await;
        self.closed = true;
        let shut = self.io.shutdown().await;
        flushed?;
        shut?;
        Ok(())
    }
}

/// Receive half of a [`SerialLink`].
#[derive(Debug)]
pub struct SerialRx<IO> {
    io: ReadHalf<IO>,
    buf: Box<[u8]>,
    pos: usize,
    filled: usize,
    deframer: Deframer,
    stats: SerialStats,
    peer_id: String,
    eof: bool,
}

impl<IO> SerialRx<IO> {
    /// The receive counters.
    pub fn stats(&self) -> SerialStats {
        self.stats.clone()
    }
}

impl<IO> LinkRx for SerialRx<IO>
where
    IO: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    async fn recv(&mut self) -> Result<Option<&[u8]>, LinkError> {
        // Cancel-safe: bytes are read into `buf` only once it has been consumed, and all
        // decoding state lives in `self`.
        loop {
            if self.eof {
                return Ok(None);
            }
            let input = self.buf.get(self.pos..self.filled).unwrap_or(&[]);
            if !input.is_empty() {
                let (used, outcome) = self.deframer.push(input);
                self.pos += used;
                match outcome {
                    Some(Ok(())) => {
                        self.stats.0.received.fetch_add(1, Ordering::Relaxed);
                        return Ok(Some(self.deframer.pdu()));
                    }
                    Some(Err(e)) => {
                        self.stats.count(&e);
                        tracing::warn!(peer = %self.peer_id, "serial frame dropped: {e}");
                    }
                    None => {}
                }
                continue;
            }
            let n = self.io.read(&mut self.buf).await?;
            if n == 0 {
                self.eof = true;
                if self.deframer.has_partial() {
                    self.stats.0.truncated.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(peer = %self.peer_id, "unfinished serial frame at end of stream");
                }
                return Ok(None);
            }
            self.pos = 0;
            self.filled = n;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn decode_all(bytes: &[u8], max_pdu: usize) -> (Vec<Vec<u8>>, Vec<FrameError>) {
        let mut d = Deframer::new(max_pdu);
        let (mut ok, mut bad) = (Vec::new(), Vec::new());
        let mut rest = bytes;
        while !rest.is_empty() {
            let (n, out) = d.push(rest);
            rest = &rest[n..];
            match out {
                Some(Ok(())) => ok.push(d.pdu().to_vec()),
                Some(Err(e)) => bad.push(e),
                None => {}
            }
        }
        (ok, bad)
    }

    #[test]
    fn crc_check_value() {
        assert_eq!(crc16(b"123456789"), 0x29B1);
        assert_eq!(crc16(&[]), 0xFFFF);
    }

    #[test]
    fn the_documented_example() {
        let pdu = [0x00, 0x00, 0xc4, 0x02, 0x64, 0x00];
        assert_eq!(crc16(&pdu), 0xDECB);
        let mut out = Vec::new();
        encode_frame(&pdu, &mut out);
        assert_eq!(
            out,
            [
                0x00, 0x01, 0x01, 0x04, 0xc4, 0x02, 0x64, 0x03, 0xcb, 0xde, 0x00
            ]
        );
        assert_eq!(decode_all(&out, 244), (vec![pdu.to_vec()], vec![]));
    }

    #[test]
    fn cobs_byte_literals() {
        let cases: &[(&[u8], &[u8])] = &[
            (&[], &[0x01]),
            (&[0x00], &[0x01, 0x01]),
            (&[0x00, 0x00], &[0x01, 0x01, 0x01]),
            (&[0x11, 0x22, 0x00, 0x33], &[0x03, 0x11, 0x22, 0x02, 0x33]),
            (&[0x11, 0x00], &[0x02, 0x11, 0x01]),
        ];
        for (raw, enc) in cases {
            let out = cobs::encode_vec(raw);
            assert_eq!(&out, enc, "encode {raw:02x?}");
            let mut back = Vec::new();
            cobs_decode(enc, &mut back).unwrap();
            assert_eq!(&back, raw, "decode {enc:02x?}");
        }
        // 254 non-zero bytes: one full block, and no empty final block after it; a peer that
        // writes that block (0x01) is understood too.
        let raw: Vec<u8> = (1..=254).map(|i| i as u8).collect();
        let out = cobs::encode_vec(&raw);
        assert_eq!(out.len(), 255);
        assert_eq!((out[0], &out[1..]), (0xFF, &raw[..]));
        let mut back = Vec::new();
        cobs_decode(&out, &mut back).unwrap();
        assert_eq!(back, raw);
        let mut with_final_block = out.clone();
        with_final_block.push(0x01);
        cobs_decode(&with_final_block, &mut back).unwrap();
        assert_eq!(back, raw);
        assert_eq!(cobs_decode(&[0x05, 0x01], &mut back), Err(FrameError::Cobs));
    }

    #[test]
    fn every_length_round_trips_and_stays_within_the_bound() {
        for len in 0..=600usize {
            let pdu: Vec<u8> = (0..len).map(|i| (i % 7) as u8 * 40).collect();
            let mut out = Vec::new();
            encode_frame(&pdu, &mut out);
            assert!(out.len() - 2 <= max_encoded_len(len), "len {len}");
            assert!(!out[1..out.len() - 1].contains(&0));
            assert_eq!(decode_all(&out, 600), (vec![pdu], vec![]));
        }
    }

    #[test]
    fn every_single_bit_flip_is_caught_and_the_next_frame_survives() {
        let pdu: Vec<u8> = (0..244u16).map(|i| (i * 37 % 256) as u8).collect();
        let mut frame = Vec::new();
        encode_frame(&pdu, &mut frame);
        let mut next = Vec::new();
        encode_frame(b"next", &mut next);
        for bit in 8..(frame.len() - 1) * 8 {
            let mut bytes = frame.clone();
            bytes[bit / 8] ^= 1 << (bit % 8);
            bytes.extend_from_slice(&next);
            let (ok, bad) = decode_all(&bytes, 244);
            assert_eq!(ok, vec![b"next".to_vec()], "bit {bit}");
            assert!(!bad.is_empty(), "bit {bit}");
        }
    }

    #[test]
    fn oversized_frames_are_dropped_and_the_receiver_resyncs() {
        let mut bytes = vec![0x00];
        bytes.extend(std::iter::repeat_n(0x55, 1000));
        encode_frame(&[1, 2, 3], &mut bytes);
        let (ok, bad) = decode_all(&bytes, 20);
        assert_eq!(ok, vec![vec![1, 2, 3]]);
        assert_eq!(bad, vec![FrameError::Oversized { max: 23 }]);
        // A PDU just over the receiver's limit is oversized, one at the limit passes.
        let mut bytes = Vec::new();
        encode_frame(&[9; 21], &mut bytes);
        encode_frame(&[8; 20], &mut bytes);
        let (ok, bad) = decode_all(&bytes, 20);
        assert_eq!(ok, vec![vec![8; 20]]);
        assert_eq!(bad.len(), 1);
    }

    #[test]
    fn a_frame_within_the_encoded_bound_but_over_the_pdu_limit_is_dropped() {
        // 257 bytes with a zero early on encode to 260 bytes: the encoded bound for a 256-byte
        // limit (258 with the CRC: 258 + 2 blocks). Found by the serial_deframer fuzz target.
        let mut pdu = vec![0x03; 257];
        pdu[8] = 0;
        let mut frame = Vec::new();
        encode_frame(&pdu, &mut frame);
        assert_eq!(frame.len() - 2, max_encoded_len(256));
        let (ok, bad) = decode_all(&frame, 256);
        assert!(ok.is_empty());
        assert_eq!(bad, vec![FrameError::PduTooLong { len: 257, max: 256 }]);
        assert_eq!(decode_all(&frame, 257), (vec![pdu], vec![]));
    }

    #[test]
    fn short_and_garbage_frames_are_dropped() {
        let (ok, bad) = decode_all(&[0x00, 0x02, 0x11, 0x00, 0x00, 0x00], 20);
        assert!(ok.is_empty());
        assert_eq!(bad, vec![FrameError::TooShort(1)]);
        let (ok, bad) = decode_all(&[0x04, 0x11, 0x00], 20);
        assert!(ok.is_empty());
        assert_eq!(bad, vec![FrameError::Cobs]);
    }

    #[tokio::test]
    async fn pdus_cross_a_pipe_in_order_and_eof_ends_the_link() {
        let (a, b) = tokio::io::duplex(64);
        let a = SerialLink::new(a, SerialOptions::default());
        let b = SerialLink::new(b, SerialOptions::default());
        let stats = b.stats();
        let (mut atx, _arx) = a.split();
        let (_btx, mut brx) = b.split();
        let big = vec![0u8; 244];
        atx.queue(b"one").unwrap();
        atx.queue(&big).unwrap();
        atx.queue(&[]).unwrap();
        assert!(matches!(
            atx.queue(&[0; 245]),
            Err(LinkError::TooLarge { len: 245, max: 244 })
        ));
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(p) = brx.recv().await.unwrap() {
                got.push(p.to_vec());
            }
            got
        });
        atx.close().await.unwrap();
        assert_eq!(reader.await.unwrap(), vec![b"one".to_vec(), big, vec![]]);
        assert_eq!(stats.get().received, 3);
        assert_eq!(stats.get().dropped(), 0);
    }

    #[tokio::test]
    async fn is_full_reports_the_queue_limit_and_a_dropped_flush_loses_nothing() {
        let (a, b) = tokio::io::duplex(16);
        let options = SerialOptions {
            queue_frames: 4,
            ..Default::default()
        };
        let (mut atx, _arx) = SerialLink::new(a, options.clone()).split();
        let (_btx, mut brx) = SerialLink::new(b, options).split();
        for i in 0..4u8 {
            assert!(!atx.is_full());
            atx.queue(&[i; 10]).unwrap();
        }
        assert!(atx.is_full());
        // The pipe holds 16 bytes: the flush stalls; dropping it keeps the rest queued.
        let stalled = tokio::time::timeout(std::time::Duration::from_millis(20), atx.flush()).await;
        assert!(stalled.is_err());
        assert!(atx.has_pending());
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..4 {
                got.push(brx.recv().await.unwrap().unwrap().to_vec());
            }
            got
        });
        atx.flush().await.unwrap();
        assert!(!atx.is_full() && !atx.has_pending());
        let want: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i; 10]).collect();
        assert_eq!(reader.await.unwrap(), want);
    }
}
