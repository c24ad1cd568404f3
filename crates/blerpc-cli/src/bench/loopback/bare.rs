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

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest DATA frame the server accepts (a bound, far above the benchmark's payloads).
pub const MAX_FRAME: usize = 16 << 20;

/// Serves DATA→ACK on `io` until the peer closes it.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin>(mut io: S) -> io::Result<()> {
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
            start += 4 + len;
            acks.extend_from_slice(&(len as u32).to_le_bytes());
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
        })
    }

    /// One DATA→ACK round trip; fails if the ACK does not confirm the payload length.
    pub async fn call(&mut self) -> io::Result<()> {
        self.io.write_all(&self.frame).await?;
        self.io.flush().await?;
        // Read into more room than the ACK needs: a read that does not fill the buffer tells
        // tokio the socket is drained, so the next call does not start with a read that can
        // only fail with EAGAIN (`read_exact` into 4 bytes would make one per call).
        let mut buf = [0u8; 64];
        let mut have = 0;
        while have < 4 {
            let Some(space) = buf.get_mut(have..) else {
                break;
            };
            match self.io.read(space).await? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => have += n,
            }
        }
        let (Some(ack), 4) = (buf.first_chunk::<4>(), have) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{have} bytes where a 4-byte ACK was expected"),
            ));
        };
        let got = u32::from_le_bytes(*ack);
        if got != self.payload_len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("ACK for {got} bytes, sent {}", self.payload_len),
            ));
        }
        Ok(())
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
            while let Some(ack) = buf.get(off..have).and_then(|b| b.first_chunk::<4>()) {
                let got = u32::from_le_bytes(*ack);
                if got != self.payload_len {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("ACK for {got} bytes, sent {}", self.payload_len),
                    ));
                }
                let Some(t) = sent_at.pop_front() else {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "an ACK for a frame that was not sent",
                    ));
                };
                latencies.push(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
                off += 4;
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
        let server = tokio::spawn(serve(b));
        for payload in [vec![], vec![7u8; 64], vec![1u8; 70_000]] {
            let (a2, b2) = tokio::io::duplex(4096);
            let s = tokio::spawn(serve(b2));
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
        let server = tokio::spawn(serve(b));
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
        let server = tokio::spawn(serve(b));
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
}
