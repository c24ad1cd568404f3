//! The bare baseline: a plain length-prefixed DATA→ACK exchange over a tokio TCP stream or a
//! tokio-rustls stream, with nothing of bleRPC in it.
//!
//! ```text
//! DATA  client → server:  [len u32 LE][len bytes of payload]
//! ACK   server → client:  [len u32 LE]   (the payload length received)
//! ```
//!
//! Written to be as cheap as a plain implementation reasonably gets: the client writes a
//! prebuilt frame with one `write_all` and reads the 4-byte ACK (with one system call when it
//! has arrived); the server reads into one
//! buffer (many frames per read when they are queued), answers every complete frame and writes
//! its ACKs with one write. `TCP_NODELAY` is set on both ends, as on the bleRPC links.
//!
//! **Sealed** (the `bare + AES-GCM` baseline): the same exchange with each DATA and each ACK
//! sealed as a bleRPC session seals a message ([`Session`]: `[counter u32][AES-128-GCM
//! ciphertext][tag]`, the nonce from the counter and the direction, replayed or forged frames
//! refused), with the host's AES-GCM ([`DefaultProvider`]). The client opens the connection by
//! sending a fresh random 16-byte key in the clear: no key exchange, no identity, no security;
//! what it measures is the cipher's cost on the round trip, the least any E2E-encrypted protocol
//! pays. The client seals its frame in place before each write (each call's plaintext is the
//! previous call's ciphertext: the same work as sealing a fresh message, without the copy a
//! caller's message would need), and the server opens each frame in place.
//!
//! ```text
//! KEY   client → server:  [16-byte AES-128 key]                  (once, first)
//! DATA  client → server:  [len u32 LE][counter u32][len − 20 bytes of ciphertext][tag]
//! ACK   server → client:  [counter u32][4 bytes of ciphertext: plaintext length u32 LE][tag]
//! ```

use std::io;

use blerpc_proto::Role;
use blerpc_proto::crypto::{CryptoProvider as _, DefaultProvider, SessionKey};
use blerpc_proto::session::{SESSION_OVERHEAD, Session};
use rand_core::{OsRng, RngCore as _};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// One end's cipher state in the sealed baseline.
type Cipher = Session<<DefaultProvider as blerpc_proto::crypto::CryptoProvider>::Aead>;

/// The length of the key a sealed connection starts with.
const KEY_LEN: usize = 16;

/// A plain ACK's length; a sealed one adds [`SESSION_OVERHEAD`].
const ACK_LEN: usize = 4;

fn cipher(key: [u8; KEY_LEN], role: Role) -> io::Result<Cipher> {
    let aead = DefaultProvider::default()
        .aead(&SessionKey::from_bytes(key))
        .map_err(|e| io::Error::other(format!("AES-GCM key: {e}")))?;
    Ok(Session::new(aead, role))
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// The largest DATA frame the server accepts (a bound, far above the benchmark's payloads).
pub const MAX_FRAME: usize = 16 << 20;

/// Serves DATA→ACK on `io` until the peer closes it; `sealed`: the sealed exchange, which
/// starts with the client's key.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin>(mut io: S, sealed: bool) -> io::Result<()> {
    let mut session = if sealed {
        let mut key = [0u8; KEY_LEN];
        match io.read_exact(&mut key).await {
            Ok(_) => Some(cipher(key, Role::Peripheral)?),
            // A peer that leaves before sending a key ends the connection as a close does.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    let mut buf = vec![0u8; 128 * 1024];
    let (mut start, mut end) = (0usize, 0usize);
    let mut acks = Vec::with_capacity(64);
    loop {
        // Answer every complete frame in the buffer.
        loop {
            let pending = buf.get(start..end).unwrap_or(&[]);
            let Some(header) = pending.first_chunk::<4>() else {
                break;
            };
            let len = u32::from_le_bytes(*header) as usize;
            if len > MAX_FRAME {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a {len}-byte frame is over the {MAX_FRAME}-byte limit"),
                ));
            }
            if pending.len() < 4 + len {
                if buf.len() < 4 + len {
                    buf.resize(4 + len, 0);
                }
                break;
            }
            let body = buf.get_mut(start + 4..start + 4 + len).unwrap_or_default();
            start += 4 + len;
            match session.as_mut() {
                None => acks.extend_from_slice(&(len as u32).to_le_bytes()),
                Some(session) => {
                    let plain = session
                        .open_in_place(body)
                        .map_err(|e| invalid(format!("a DATA frame does not open: {e}")))?;
                    let at = acks.len();
                    acks.extend_from_slice(&[0; 4]);
                    acks.extend_from_slice(&(plain.len() as u32).to_le_bytes());
                    acks.extend_from_slice(&[0; SESSION_OVERHEAD - 4]);
                    session
                        .seal_in_place(acks.get_mut(at..).unwrap_or_default())
                        .map_err(|e| io::Error::other(format!("sealing an ACK: {e}")))?;
                }
            }
        }
        if !acks.is_empty() {
            io.write_all(&acks).await?;
            io.flush().await?;
            acks.clear();
        }
        if start == end {
            start = 0;
            end = 0;
        } else if end == buf.len() {
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
        }
        let Some(space) = buf.get_mut(end..) else {
            return Err(io::Error::other("receive buffer overrun"));
        };
        match io.read(space).await {
            Ok(0) => return Ok(()),
            Ok(n) => end += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
                ) =>
            {
                return Ok(());
            }
            Err(e) => return Err(e),
        }
    }
}

/// The client side: sends one prebuilt DATA frame per call and waits for its ACK.
#[derive(Debug)]
pub struct BareClient<S> {
    io: S,
    frame: Vec<u8>,
    payload_len: u32,
    /// The sealed exchange's cipher.
    session: Option<Cipher>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> BareClient<S> {
    /// A client on `io` whose calls carry `payload`.
    pub fn new(io: S, payload: &[u8]) -> io::Result<Self> {
        let payload_len = u32::try_from(payload.len())
            .ok()
            .filter(|&n| n as usize <= MAX_FRAME)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "payload too large"))?;
        let mut frame = Vec::with_capacity(4 + payload.len());
        frame.extend_from_slice(&payload_len.to_le_bytes());
        frame.extend_from_slice(payload);
        Ok(BareClient {
            io,
            frame,
            payload_len,
            session: None,
        })
    }

    /// A client of the sealed exchange on `io`: sends a fresh random key first.
    pub async fn sealed(mut io: S, payload: &[u8]) -> io::Result<Self> {
        let sealed_len = u32::try_from(payload.len().saturating_add(SESSION_OVERHEAD))
            .ok()
            .filter(|&n| n as usize <= MAX_FRAME)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "payload too large"))?;
        let mut key = [0u8; KEY_LEN];
        OsRng.fill_bytes(&mut key);
        io.write_all(&key).await?;
        let mut frame = Vec::with_capacity(4 + sealed_len as usize);
        frame.extend_from_slice(&sealed_len.to_le_bytes());
        frame.extend_from_slice(&[0; 4]);
        frame.extend_from_slice(payload);
        frame.extend_from_slice(&[0; SESSION_OVERHEAD - 4]);
        Ok(BareClient {
            io,
            frame,
            payload_len: sealed_len - SESSION_OVERHEAD as u32,
            session: Some(cipher(key, Role::Central)?),
        })
    }

    /// An ACK's length on the wire.
    fn ack_len(&self) -> usize {
        if self.session.is_some() {
            ACK_LEN + SESSION_OVERHEAD
        } else {
            ACK_LEN
        }
    }

    /// Seals the frame for the next write (sealed exchange only).
    fn seal(&mut self) -> io::Result<()> {
        if let Some(session) = self.session.as_mut() {
            session
                .seal_in_place(self.frame.get_mut(4..).unwrap_or_default())
                .map_err(|e| io::Error::other(format!("sealing a DATA frame: {e}")))?;
        }
        Ok(())
    }

    /// Checks one ACK (opening it first in the sealed exchange): it must confirm the payload
    /// length.
    fn check_ack(&mut self, ack: &mut [u8]) -> io::Result<()> {
        let value = match self.session.as_mut() {
            None => ack,
            Some(session) => {
                let plain = session
                    .open_in_place(ack)
                    .map_err(|e| invalid(format!("an ACK does not open: {e}")))?;
                ack.get_mut(plain).unwrap_or_default()
            }
        };
        let Some(got) = value.first_chunk::<4>() else {
            return Err(invalid(format!(
                "{} bytes where a 4-byte ACK was expected",
                value.len()
            )));
        };
        let got = u32::from_le_bytes(*got);
        if got != self.payload_len {
            return Err(invalid(format!(
                "ACK for {got} bytes, sent {}",
                self.payload_len
            )));
        }
        Ok(())
    }

    /// One DATA→ACK round trip; fails if the ACK does not confirm the payload length.
    pub async fn call(&mut self) -> io::Result<()> {
        self.seal()?;
        self.io.write_all(&self.frame).await?;
        self.io.flush().await?;
        // Read into more room than the ACK needs: a read that does not fill the buffer tells
        // tokio the socket is drained, so the next call does not start with a read that can
        // only fail with EAGAIN (`read_exact` into 4 bytes would make one per call).
        let ack_len = self.ack_len();
        let mut buf = [0u8; 64];
        let mut have = 0;
        while have < ack_len {
            let Some(space) = buf.get_mut(have..) else {
                break;
            };
            match self.io.read(space).await? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => have += n,
            }
        }
        if have != ack_len {
            return Err(invalid(format!(
                "{have} bytes where a {ack_len}-byte ACK was expected"
            )));
        }
        self.check_ack(buf.get_mut(..ack_len).unwrap_or_default())
    }

    /// `messages` DATA frames with up to `window` of them unacknowledged at once; returns each
    /// message's round trip (from its write to its ACK), ns. The frames are written one after
    /// the other and the ACKs read as they come; the server answers queued frames in order.
    /// Each write and each wait for an ACK is bounded by `stall` (`TimedOut` past it).
    pub async fn pipelined(
        &mut self,
        messages: usize,
        window: usize,
        stall: std::time::Duration,
    ) -> io::Result<Vec<u64>> {
        let timed_out = |what: &str| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{what} took over {stall:?}"),
            )
        };
        let window = window.max(1);
        let mut sent_at = std::collections::VecDeque::with_capacity(window);
        let mut latencies = Vec::with_capacity(messages);
        let mut buf = [0u8; 4096];
        let mut have = 0;
        let mut sent = 0;
        while latencies.len() < messages {
            while sent < messages && sent_at.len() < window {
                self.seal()?;
                tokio::time::timeout(stall, async {
                    self.io.write_all(&self.frame).await?;
                    self.io.flush().await
                })
                .await
                .map_err(|_| timed_out("a DATA write"))??;
                sent_at.push_back(std::time::Instant::now());
                sent += 1;
            }
            let Some(space) = buf.get_mut(have..) else {
                return Err(io::Error::other("ACK buffer overrun"));
            };
            match tokio::time::timeout(stall, self.io.read(space))
                .await
                .map_err(|_| timed_out("waiting for an ACK"))??
            {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => have += n,
            }
            let mut off = 0;
            let ack_len = self.ack_len();
            while let Some(ack) = buf.get_mut(off..have).and_then(|b| b.get_mut(..ack_len)) {
                self.check_ack(ack)?;
                let Some(t) = sent_at.pop_front() else {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "an ACK for a frame that was not sent",
                    ));
                };
                latencies.push(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
                off += ack_len;
            }
            buf.copy_within(off..have, 0);
            have -= off;
        }
        Ok(latencies)
    }

    /// Closes the stream (FIN, and close_notify on TLS).
    pub async fn close(mut self) {
        let _ = self.io.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn round_trips_and_rejects_oversized_frames() {
        let (a, b) = tokio::io::duplex(4096);
        let server = tokio::spawn(serve(b, false));
        for payload in [vec![], vec![7u8; 64], vec![1u8; 70_000]] {
            let (a2, b2) = tokio::io::duplex(4096);
            let s = tokio::spawn(serve(b2, false));
            let mut c = BareClient::new(a2, &payload).unwrap();
            for _ in 0..3 {
                c.call().await.unwrap();
            }
            c.close().await;
            s.await.unwrap().unwrap();
        }
        let mut a = a;
        a.write_all(&u32::MAX.to_le_bytes()).await.unwrap();
        let e = server.await.unwrap().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }

    #[tokio::test]
    async fn pipelined_calls_are_each_acknowledged() {
        let (a, b) = tokio::io::duplex(1 << 16);
        let server = tokio::spawn(serve(b, false));
        let mut c = BareClient::new(a, &[5u8; 3000]).unwrap();
        let lat = c
            .pipelined(50, 4, std::time::Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(lat.len(), 50);
        c.close().await;
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_silent_server_is_a_timeout_not_a_hang() {
        let (a, _b) = tokio::io::duplex(1 << 16);
        let mut c = BareClient::new(a, &[5u8; 100]).unwrap();
        let e = c
            .pipelined(10, 4, std::time::Duration::from_millis(50))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    }

    #[tokio::test]
    async fn answers_queued_frames_in_one_go() {
        let (mut a, b) = tokio::io::duplex(4096);
        let server = tokio::spawn(serve(b, false));
        let mut frames = Vec::new();
        for len in [0u32, 3, 5] {
            frames.extend_from_slice(&len.to_le_bytes());
            frames.extend(std::iter::repeat_n(9u8, len as usize));
        }
        a.write_all(&frames).await.unwrap();
        let mut acks = [0u8; 12];
        a.read_exact(&mut acks).await.unwrap();
        assert_eq!(acks, [0, 0, 0, 0, 3, 0, 0, 0, 5, 0, 0, 0]);
        drop(a);
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn sealed_round_trips_in_both_modes() {
        for payload in [vec![], vec![7u8; 64], vec![1u8; 70_000]] {
            let (a, b) = tokio::io::duplex(4096);
            let s = tokio::spawn(serve(b, true));
            let mut c = BareClient::sealed(a, &payload).await.unwrap();
            for _ in 0..3 {
                c.call().await.unwrap();
            }
            let lat = c
                .pipelined(20, 4, std::time::Duration::from_secs(10))
                .await
                .unwrap();
            assert_eq!(lat.len(), 20);
            c.close().await;
            s.await.unwrap().unwrap();
        }
    }

    /// A sealed DATA frame for `payload` under `key`, with the counter `counter` (the
    /// session seals `counter` messages first).
    fn sealed_frame(key: [u8; KEY_LEN], counter: u32, payload: &[u8]) -> Vec<u8> {
        let mut session = cipher(key, Role::Central).unwrap();
        for _ in 0..counter {
            session.seal_in_place(&mut [0; SESSION_OVERHEAD]).unwrap();
        }
        let mut body = vec![0u8; 4];
        body.extend_from_slice(payload);
        body.extend_from_slice(&[0; SESSION_OVERHEAD - 4]);
        session.seal_in_place(&mut body).unwrap();
        let mut frame = (body.len() as u32).to_le_bytes().to_vec();
        frame.extend_from_slice(&body);
        frame
    }

    #[tokio::test]
    async fn the_sealed_server_refuses_forged_and_replayed_frames() {
        let key = [3u8; KEY_LEN];
        // Forged: one ciphertext bit flipped.
        let (mut a, b) = tokio::io::duplex(4096);
        let s = tokio::spawn(serve(b, true));
        let mut frame = sealed_frame(key, 0, b"hello");
        frame[9] ^= 1;
        a.write_all(&key).await.unwrap();
        a.write_all(&frame).await.unwrap();
        let e = s.await.unwrap().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("does not open"), "{e}");
        // Replayed: the same frame twice; the first is acknowledged (24 bytes), not the second.
        let (mut a, b) = tokio::io::duplex(4096);
        let s = tokio::spawn(serve(b, true));
        let frame = sealed_frame(key, 5, b"hello");
        a.write_all(&key).await.unwrap();
        a.write_all(&frame).await.unwrap();
        let mut ack = [0u8; ACK_LEN + SESSION_OVERHEAD];
        a.read_exact(&mut ack).await.unwrap();
        let mut client = cipher(key, Role::Central).unwrap();
        let plain = client.open_in_place(&mut ack).unwrap();
        assert_eq!(ack[plain], 5u32.to_le_bytes());
        a.write_all(&frame).await.unwrap();
        let e = s.await.unwrap().unwrap_err();
        assert!(e.to_string().contains("replay"), "{e}");
        // Too short to be sealed at all.
        let (mut a, b) = tokio::io::duplex(4096);
        let s = tokio::spawn(serve(b, true));
        a.write_all(&key).await.unwrap();
        a.write_all(&[3, 0, 0, 0, 1, 2, 3]).await.unwrap();
        assert_eq!(
            s.await.unwrap().unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        // Gone before the key: a clean end.
        let (a, b) = tokio::io::duplex(4096);
        drop(a);
        serve(b, true).await.unwrap();
    }
}
