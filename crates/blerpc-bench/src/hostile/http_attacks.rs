//! The attacks on the gateway's HTTP port (`--link http`): each hostile connection sends a
//! request head (whole, half, or far too large), then stalls, trickles or floods, and reads
//! whatever the gateway answers until it closes the connection; the status of the answer (or
//! none) is tallied. The bytes are an attacker's, written here by hand (HTTP/1.1, RFC 9112).

use std::sync::LazyLock;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::attacks::{Attack, Tally};

/// What the HTTP attacks aim at: the gateway's HTTP address, its device and a bearer token
/// (the authenticated attacks are a backend gone wrong, or a stolen token).
#[derive(Clone, Debug, Default)]
pub struct HttpTarget {
    /// The device's id (hex).
    pub device: String,
    /// A bearer token the gateway accepts.
    pub token: String,
}

/// What the connection does after its head.
enum Then {
    /// Nothing more.
    Stall,
    /// These bytes once a second.
    Trickle(&'static [u8]),
    /// These bytes as fast as the gateway takes them.
    Flood(&'static [u8]),
}

/// 64 KiB of header lines (an oversized head's continuation).
static HEADER_PAD: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let line = format!("X-Pad: {}\r\n", "a".repeat(1016));
    line.repeat(64).into_bytes()
});

/// 64 KiB of body.
static BODY_PAD: LazyLock<Vec<u8>> = LazyLock::new(|| vec![b'a'; 64 << 10]);

/// One connection's part in `attack` (an HTTP attack), until the gateway closes it: the
/// status it answered, if it did.
pub(super) async fn one(attack: Attack, s: &mut TcpStream, t: &HttpTarget, tally: &Tally) {
    let call = format!("/v1/devices/{}/calls/echo", t.device);
    let auth = format!("Authorization: Bearer {}\r\n", t.token);
    let (head, then) = match attack {
        // Half a head, then one more header line a second: never the blank line that ends it.
        Attack::Slowloris => (
            format!("POST {call} HTTP/1.1\r\nHost: gateway\r\n"),
            Then::Trickle(b"X-Slow: 1\r\n"),
        ),
        // One whole request, answered, then the kept connection idles.
        Attack::IdleKeepAlive => (
            "GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n".to_string(),
            Then::Stall,
        ),
        // Connections that hold their place and send nothing.
        Attack::AddressFlood => (String::new(), Then::Stall),
        // A dashboard stream, read for as long as the gateway sends it.
        Attack::EventStreams => (
            format!("GET /v1/events HTTP/1.1\r\nHost: gateway\r\n{auth}\r\n"),
            Then::Stall,
        ),
        // A call whose 1,000-byte body comes a byte a second.
        Attack::SlowBody => (
            format!(
                "POST {call} HTTP/1.1\r\nHost: gateway\r\n{auth}Content-Type: application/json\r\n\
                 Content-Length: 1000\r\n\r\n{{\"message\":\""
            ),
            Then::Trickle(b"a"),
        ),
        // A head that never ends, as fast as it is taken.
        Attack::OversizedHead => (
            "GET /healthz HTTP/1.1\r\nHost: gateway\r\n".to_string(),
            Then::Flood(&HEADER_PAD),
        ),
        // A call announcing a 1 GiB body, sent as fast as it is taken.
        Attack::OversizedBody => (
            format!(
                "POST {call} HTTP/1.1\r\nHost: gateway\r\n{auth}Content-Type: application/json\r\n\
                 Content-Length: 1073741824\r\n\r\n"
            ),
            Then::Flood(&BODY_PAD),
        ),
        _ => return,
    };
    let status = exchange(s, head.as_bytes(), then, tally).await;
    tally.answered(status);
}

/// Sends `head`, then does `then` while reading the gateway's answer until it closes the
/// connection: the answer's status, if there was one.
async fn exchange(s: &mut TcpStream, head: &[u8], then: Then, tally: &Tally) -> Option<u16> {
    let (mut r, mut w) = s.split();
    let sent = |n: usize| {
        tally
            .sent
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed)
    };
    let writing = async {
        if !head.is_empty() {
            sent(head.len());
            if w.write_all(head).await.is_err() {
                return std::future::pending().await;
            }
        }
        loop {
            let more = match then {
                Then::Stall => break,
                Then::Trickle(bytes) => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    bytes
                }
                Then::Flood(bytes) => bytes,
            };
            sent(more.len());
            if w.write_all(more).await.is_err() {
                break;
            }
        }
        std::future::pending::<()>().await;
    };
    let reading = async {
        let mut first = Vec::new();
        let mut buf = vec![0u8; 8192];
        while let Ok(n) = r.read(&mut buf).await {
            if n == 0 {
                break;
            }
            if first.len() < 12 {
                first.extend_from_slice(&buf[..n.min(12)]);
            }
        }
        // `HTTP/1.1 408 …`
        std::str::from_utf8(first.get(9..12)?).ok()?.parse().ok()
    };
    tokio::select! {
        status = reading => status,
        () = writing => None,
    }
}
