//! The attacks: each opens its sockets from several 127.x source addresses (so per-address
//! limits and the open-file limit are exercised as from many hosts; the address flood from one)
//! and runs until stopped, counting what it did and when the server closed each socket. Those
//! on `blerpc serve`'s device port are here; those on the gateway's HTTP port in
//! [`super::http_attacks`].
//!
//! The containers are written byte by byte here (an attacker's bytes, not a peer's): the header
//! is `tid, seq, flags, …` as `../shared/spec/wire.md` §3 gives it.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand_core::RngCore as _;
use serde::Serialize;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::watch;

use super::http_attacks::HttpTarget;

/// One attack of the suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attack {
    /// Connections that never send a byte (plain TCP: the setup deadline; WS and TLS: the
    /// handshake slots).
    Silent,
    /// CAPABILITIES with both extensions, then four 16 MiB LARGE FIRST claims and their data,
    /// without a key exchange.
    PreAuthMemory,
    /// A TIMEOUT request, then three bytes of a container and nothing more.
    SlowContainer,
    /// Key-exchange step 1 as fast as the server answers, reconnecting when closed.
    KxFlood,
    /// Random bytes.
    RandomBytes,
    /// FIRST containers under every one of the 256 tids, before any key exchange.
    ManyTids,
    /// Connect, send a TIMEOUT request, close, again, as fast as possible.
    ReopenStorm,
    /// HTTP: half a request head, then a header line a second, never its end (reconnecting
    /// when closed, as every HTTP attack does).
    Slowloris,
    /// HTTP: one whole request (`GET /healthz`), then the kept connection idles.
    IdleKeepAlive,
    /// HTTP: silent connections from one address, twice its per-address cap.
    AddressFlood,
    /// HTTP: dashboard event streams (`GET /v1/events`), a quarter more than their cap.
    EventStreams,
    /// HTTP: a call whose 1,000-byte body comes a byte a second.
    SlowBody,
    /// HTTP: a request head sent without end, as fast as taken.
    OversizedHead,
    /// HTTP: a call announcing a 1 GiB body, sent as fast as taken.
    OversizedBody,
}

impl Attack {
    /// Every attack on the device port, in the order the suite runs them.
    pub const ALL: [Attack; 7] = [
        Attack::Silent,
        Attack::PreAuthMemory,
        Attack::SlowContainer,
        Attack::KxFlood,
        Attack::RandomBytes,
        Attack::ManyTids,
        Attack::ReopenStorm,
    ];

    /// Every attack on the gateway's HTTP port, in the order the suite runs them.
    pub const HTTP: [Attack; 7] = [
        Attack::Slowloris,
        Attack::IdleKeepAlive,
        Attack::AddressFlood,
        Attack::EventStreams,
        Attack::SlowBody,
        Attack::OversizedHead,
        Attack::OversizedBody,
    ];

    /// The name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Attack::Silent => "silent",
            Attack::PreAuthMemory => "pre-auth-memory",
            Attack::SlowContainer => "slow-container",
            Attack::KxFlood => "kx-flood",
            Attack::RandomBytes => "random-bytes",
            Attack::ManyTids => "many-tids",
            Attack::ReopenStorm => "reopen-storm",
            Attack::Slowloris => "slowloris",
            Attack::IdleKeepAlive => "idle-keep-alive",
            Attack::AddressFlood => "address-flood",
            Attack::EventStreams => "event-streams",
            Attack::SlowBody => "slow-body",
            Attack::OversizedHead => "oversized-head",
            Attack::OversizedBody => "oversized-body",
        }
    }

    /// Whether it attacks the gateway's HTTP port.
    pub fn is_http(self) -> bool {
        Attack::HTTP.contains(&self)
    }

    /// Sockets the attack holds for `sockets` in the profile (floods and storms use fewer,
    /// busier ones), against a gateway that allows `per_address` connections from one address
    /// and `event_streams` streams.
    pub fn sockets(self, sockets: usize, per_address: usize, event_streams: usize) -> usize {
        match self {
            Attack::KxFlood | Attack::ReopenStorm => (sockets / 50).clamp(2, 64),
            Attack::PreAuthMemory => (sockets / 10).clamp(4, 256),
            Attack::RandomBytes => (sockets / 10).clamp(4, 512),
            Attack::OversizedHead | Attack::OversizedBody => (sockets / 100).clamp(2, 16),
            Attack::AddressFlood => 2 * per_address,
            Attack::EventStreams => event_streams + event_streams / 4,
            _ => sockets,
        }
    }
}

/// What an attack did.
#[derive(Debug, Default)]
pub struct Tally {
    /// Connections opened.
    pub opened: AtomicU64,
    /// Connections that could not be opened.
    pub connect_errors: AtomicU64,
    /// Connections the server closed (EOF or reset).
    pub closed_by_server: AtomicU64,
    /// Bytes written.
    pub sent: AtomicU64,
    /// Microseconds from connect to the server's close, for each closed connection (summed;
    /// with `closed_by_server` the mean) and the longest.
    pub close_us_sum: AtomicU64,
    /// The longest time a connection stayed open before the server closed it.
    pub close_us_max: AtomicU64,
    /// When each connection was opened, and when each of those the server closed was opened.
    pub opened_at: std::sync::Mutex<(Vec<Instant>, Vec<Instant>)>,
    /// The connections still open (not closed by the server), by local address, with when each
    /// was opened (not for reopen storms).
    pub live: std::sync::Mutex<std::collections::HashMap<SocketAddr, Instant>>,
    /// HTTP attacks: the answers' statuses, counted (0: closed without an answer).
    pub statuses: std::sync::Mutex<std::collections::BTreeMap<u16, u64>>,
}

impl Tally {
    /// Connections opened by `by`, and how many of them the server closed.
    pub fn opened_before(&self, by: Instant) -> (usize, usize) {
        let Ok(t) = self.opened_at.lock() else {
            return (0, 0);
        };
        let count = |v: &Vec<Instant>| v.iter().filter(|t| **t <= by).count();
        (count(&t.0), count(&t.1))
    }
}

impl Tally {
    /// The still-open connections opened by `by` (their local addresses).
    pub fn live_before(&self, by: Instant) -> Vec<SocketAddr> {
        self.live
            .lock()
            .map(|l| {
                l.iter()
                    .filter(|(_, t)| **t <= by)
                    .map(|(a, _)| *a)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Counts an HTTP answer's status (`None`: closed without one).
    pub(super) fn answered(&self, status: Option<u16>) {
        if let Ok(mut s) = self.statuses.lock() {
            *s.entry(status.unwrap_or(0)).or_default() += 1;
        }
    }

    fn closed(&self, since: Instant, local: Option<SocketAddr>) {
        if let Ok(mut t) = self.opened_at.lock() {
            t.1.push(since);
        }
        if let (Some(local), Ok(mut l)) = (local, self.live.lock()) {
            l.remove(&local);
        }
        let us = since.elapsed().as_micros() as u64;
        self.closed_by_server.fetch_add(1, Ordering::Relaxed);
        self.close_us_sum.fetch_add(us, Ordering::Relaxed);
        self.close_us_max.fetch_max(us, Ordering::Relaxed);
    }
}

/// Source addresses the attack's sockets are spread over (127.B.0.2 …, B the attack's block).
const SOURCES: u8 = 16;

/// The next attack's block of source addresses: every attack run gets fresh addresses, so the
/// penalties one earned do not carry into the next (and the legitimate client's 127.0.0.1 is in
/// none).
static NEXT_BLOCK: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

async fn connect_from(block: u8, n: usize, target: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    let last = 2 + (n % usize::from(SOURCES)) as u8;
    socket.bind(SocketAddr::from((Ipv4Addr::new(127, block, 0, last), 0)))?;
    socket.connect(target).await
}

/// Runs `attack` with `sockets` connections against `target` (for the HTTP attacks, at
/// `http`) until `stop` turns true.
pub async fn run(
    attack: Attack,
    target: SocketAddr,
    http: Arc<HttpTarget>,
    sockets: usize,
    tally: Arc<Tally>,
    stop: watch::Receiver<bool>,
) {
    let mut tasks = tokio::task::JoinSet::new();
    let block = 1 + NEXT_BLOCK.fetch_add(1, Ordering::Relaxed) % 250;
    for n in 0..sockets {
        let (tally, mut stop, http) = (tally.clone(), stop.clone(), http.clone());
        tasks.spawn(async move {
            let work = one(attack, block, n, target, &http, tally);
            tokio::select! {
                () = work => {}
                _ = stop.wait_for(|s| *s) => {}
            }
        });
        // Open at a steady pace rather than all in one burst (the backlog would drop SYNs).
        if n % 64 == 63 {
            tokio::task::yield_now().await;
        }
    }
    while tasks.join_next().await.is_some() {}
}

/// One socket's part (or, for floods and storms, one worker's loop).
async fn one(
    attack: Attack,
    block: u8,
    n: usize,
    target: SocketAddr,
    http: &HttpTarget,
    tally: Arc<Tally>,
) {
    // The address flood comes from one address.
    let source = if attack == Attack::AddressFlood { 0 } else { n };
    loop {
        let Ok(mut s) = connect_from(block, source, target).await else {
            tally.connect_errors.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        tally.opened.fetch_add(1, Ordering::Relaxed);
        let since = Instant::now();
        let local = s.local_addr().ok();
        if attack != Attack::ReopenStorm {
            if let Ok(mut t) = tally.opened_at.lock() {
                t.0.push(since);
            }
            if let (Some(local), Ok(mut l)) = (local, tally.live.lock()) {
                l.insert(local, since);
            }
        }
        if attack.is_http() {
            // Until the gateway closes it; then again, after a pause.
            super::http_attacks::one(attack, &mut s, http, &tally).await;
            tally.closed(since, local);
            let pause = if attack == Attack::AddressFlood {
                100
            } else {
                10
            };
            tokio::time::sleep(Duration::from_millis(pause)).await;
            continue;
        }
        let again = match attack {
            Attack::Silent => {
                wait_close(&mut s).await;
                false
            }
            Attack::PreAuthMemory => pre_auth_memory(&mut s, &tally).await,
            Attack::SlowContainer => {
                // TIMEOUT request, then 3 of a FIRST container's 6 header bytes.
                send(&mut s, &[0x00, 0x00, 0xc4, 0x00, 0x05, 0x00, 0x00], &tally).await;
                wait_close(&mut s).await;
                false
            }
            Attack::KxFlood => {
                kx_flood(&mut s, &tally).await;
                true
            }
            Attack::RandomBytes => {
                random_bytes(&mut s, n, &tally).await;
                false
            }
            Attack::ManyTids => {
                for tid in 0..=255u8 {
                    // FIRST: total 1,000 bytes, 100 of them here.
                    let mut pdu = vec![tid, 0x00, 0x00, 0xe8, 0x03, 100];
                    pdu.extend_from_slice(&[0xab; 100]);
                    if !send(&mut s, &pdu, &tally).await {
                        break;
                    }
                }
                wait_close(&mut s).await;
                false
            }
            Attack::ReopenStorm => {
                send(&mut s, &[0x00, 0x00, 0xc4, 0x00], &tally).await;
                drop(s);
                tokio::task::yield_now().await;
                continue;
            }
            _ => false,
        };
        tally.closed(since, local);
        if !again {
            // Closed by the server: the socket's part is done (it does not come back).
            std::future::pending::<()>().await;
        }
    }
}

async fn send(s: &mut TcpStream, bytes: &[u8], tally: &Tally) -> bool {
    tally.sent.fetch_add(bytes.len() as u64, Ordering::Relaxed);
    s.write_all(bytes).await.is_ok()
}

/// Reads (and discards) until the server closes the connection.
async fn wait_close(s: &mut TcpStream) {
    let mut buf = [0u8; 512];
    while let Ok(n) = s.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
}

async fn pre_auth_memory(s: &mut TcpStream, tally: &Tally) -> bool {
    // CAPABILITIES announcing large messages and long containers (flags 0x0006).
    let mut out = vec![0x01, 0x00, 0xd0, 0x06, 0, 0, 0, 0, 0x06, 0x00];
    let total = (16u32 << 20).to_le_bytes();
    for tid in 0x10..0x14u8 {
        // LARGE FIRST (flags 0x01): 16 MiB announced, 200 bytes here.
        out.extend_from_slice(&[tid, 0x00, 0x01, total[0], total[1], total[2], total[3], 200]);
        out.extend_from_slice(&[0x5a; 200]);
    }
    if !send(s, &out, tally).await {
        return false;
    }
    // Then SUBSEQUENT containers for them, 241 bytes each, as fast as the server takes them
    // (its replies are read and dropped so the socket never blocks on them).
    let (mut r, mut w) = s.split();
    let drain = async {
        let mut buf = [0u8; 512];
        while let Ok(n) = r.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    };
    let flood = async {
        let mut seq = 1u8;
        loop {
            let mut chunk = Vec::with_capacity(4 * 245);
            for tid in 0x10..0x14u8 {
                chunk.extend_from_slice(&[tid, seq, 0x40, 241]);
                chunk.extend_from_slice(&[0x5a; 241]);
            }
            tally.sent.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            if w.write_all(&chunk).await.is_err() {
                break;
            }
            seq = seq.wrapping_add(1);
        }
    };
    tokio::select! {
        () = drain => {}
        () = flood => {}
    }
    false
}

async fn kx_flood(s: &mut TcpStream, tally: &Tally) {
    let mut buf = [0u8; 1024];
    for tid in 0..=255u8 {
        // KEY_EXCHANGE step 1 (cmd 0x6: flags 0xd8) with an arbitrary X25519 key.
        let mut pdu = vec![tid, 0x00, 0xd8, 33, 0x01];
        pdu.extend_from_slice(&[tid | 1; 32]);
        if !send(s, &pdu, tally).await {
            return;
        }
        // Wait for the answer (step 2 or an ERROR) so each attempt costs the server its work.
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

async fn random_bytes(s: &mut TcpStream, n: usize, tally: &Tally) {
    let mut rng = <rand_chacha::ChaCha8Rng as rand_core::SeedableRng>::seed_from_u64(n as u64);
    let mut buf = vec![0u8; 4096];
    let mut sink = [0u8; 512];
    loop {
        rng.fill_bytes(&mut buf);
        if !send(s, &buf, tally).await {
            return;
        }
        // Whatever the server answers, and whether it has closed.
        let answer = tokio::time::timeout(Duration::from_millis(10), s.read(&mut sink)).await;
        if let Ok(Ok(0) | Err(_)) = answer {
            return;
        }
    }
}

/// The remote addresses of the ESTABLISHED TCP sockets whose local end is `server` (the
/// server's side of its connections, accepted or still in the listen backlog), from
/// `/proc/net/tcp`. A client socket whose address is not among them was never completed on the
/// server's side (its final ACK was dropped: a full backlog, or the penalty filter), so the
/// server holds nothing for it.
pub fn server_side_established(
    server: SocketAddr,
) -> std::io::Result<std::collections::HashSet<SocketAddr>> {
    let table = std::fs::read_to_string("/proc/net/tcp")?;
    let parse = |s: &str| -> Option<SocketAddr> {
        let (ip, port) = s.split_once(':')?;
        let ip = u32::from_str_radix(ip, 16).ok()?;
        let port = u16::from_str_radix(port, 16).ok()?;
        // The address is in network byte order, printed as a host-order word.
        Some(SocketAddr::from((Ipv4Addr::from(u32::from_be(ip)), port)))
    };
    Ok(table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (local, remote, state) = (parse(f.get(1)?)?, parse(f.get(2)?)?, *f.get(3)?);
            (local == server && state == "01").then_some(remote)
        })
        .collect())
}
