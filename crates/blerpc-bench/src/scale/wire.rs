//! The load generator's own WebSocket client, as the published tool has one: the HTTP upgrade
//! request and its check, masked ping frames and the pongs they must get back, and numbered
//! payloads so a stale reply cannot pass for a new one.

use super::client::Variant;

/// The payload of message number `seq`: its 16 hex digits, then `x` up to `len` bytes (at
/// least 8), so a stale reply cannot pass for a new one.
pub(super) fn numbered_payload(seq: u64, len: usize) -> Vec<u8> {
    let len = len.max(8);
    let mut p = vec![b'x'; len];
    for (d, s) in p.iter_mut().zip(format!("{seq:016x}").bytes()) {
        *d = s;
    }
    p.truncate(len);
    p
}

/// The ping and tcp variants' messages for [`super::rounds`]: a masked ping frame answered by
/// its pong, or raw bytes answered by themselves.
pub(super) struct Frames {
    pub(super) variant: Variant,
    pub(super) payload: usize,
    pub(super) rng: XorShift,
    pub(super) seq: u64,
}

impl super::rounds::Exchange for Frames {
    fn next(&mut self, message: &mut Vec<u8>, reply: &mut Vec<u8>) {
        self.seq += 1;
        let payload = numbered_payload(self.seq, self.payload);
        let mask = (self.rng.next() as u32).to_le_bytes();
        raw_message(self.variant, &payload, mask, message, reply);
    }
}

/// The bytes a raw connection sends for `payload` and the exact reply it must get: a masked
/// ping frame and its pong (`0x8A`, the unmasked length, the same payload, at most 125 bytes)
/// for `Ping`, the payload itself both ways otherwise (the tcp variant's echo).
pub(super) fn raw_message(
    variant: Variant,
    payload: &[u8],
    mask: [u8; 4],
    message: &mut Vec<u8>,
    reply: &mut Vec<u8>,
) {
    reply.clear();
    if variant == Variant::Ping {
        ping_frame(payload, mask, message);
        let body = payload.get(..payload.len().min(125)).unwrap_or(&[]);
        reply.push(0x8A);
        reply.push(body.len() as u8);
        reply.extend_from_slice(body);
    } else {
        message.clear();
        message.extend_from_slice(payload);
        reply.extend_from_slice(payload);
    }
}

/// Small, fast, good-enough randomness for WebSocket masks and keys (not security relevant: the
/// mask only keeps intermediaries from caching; the key only proves the server speaks WebSocket).
pub(super) struct XorShift(pub(super) u64);

impl XorShift {
    pub(super) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// The client's upgrade request and the `Sec-WebSocket-Accept` value the server must answer.
pub(super) fn upgrade_request(host: &str, path: &str, key_bytes: [u8; 16]) -> (String, String) {
    let key = data_encoding::BASE64.encode(&key_bytes);
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    (
        format!(
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ),
        accept,
    )
}

/// Checks a complete response header: `101`, and the expected accept key.
pub(super) fn check_upgrade_response(head: &[u8], accept: &str) -> Result<(), String> {
    let text = std::str::from_utf8(head).map_err(|_| "non-UTF-8 upgrade response".to_string())?;
    let status = text.lines().next().unwrap_or("");
    if !status.starts_with("HTTP/1.1 101") {
        return Err(format!("upgrade refused: {status}"));
    }
    let ok = text.lines().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("sec-websocket-accept") && v.trim() == accept
        })
    });
    if ok {
        Ok(())
    } else {
        Err("wrong or missing Sec-WebSocket-Accept".into())
    }
}

/// A masked client ping frame (FIN, opcode 0x9) carrying `payload` (at most 125 bytes).
pub(super) fn ping_frame(payload: &[u8], mask: [u8; 4], out: &mut Vec<u8>) {
    out.clear();
    out.push(0x89);
    out.push(0x80 | (payload.len().min(125) as u8));
    out.extend_from_slice(&mask);
    out.extend(
        payload
            .iter()
            .take(125)
            .zip(mask.iter().cycle())
            .map(|(b, m)| b ^ m),
    );
}
