//! The load generator of `blerpc-bench scale`: one process (`blerpc-bench role scale-client
//! SPEC`, a hidden role of the benchmarks' binary) holding up to ~10,000 WebSocket connections
//! from its own 127.0.0.x source address, on a single-threaded tokio runtime.
//!
//! The controller talks to it over stdin/stdout, one JSON object per line:
//!
//! ```text
//! controller → client  {"Open":{"target":N}}  {"Pure":{"count":C,"interval_us":I}}
//!                      {"Rounds":{"duration_ms":D,"max_rounds":R}}  "Quit"
//! client → controller  {"Ready":..} {"Progress":..} {"Opened":..} {"Pure":..} {"Rounds":..}
//! ```
//!
//! Three variants: **ping** (a raw WebSocket client of our own: the HTTP upgrade, then masked
//! RFC 6455 ping frames with a 100-byte payload that the server's WebSocket library answers with
//! pongs; no bleRPC on the connection), **echo** (the same upgrade, then a `blerpc::Client`
//! over the upgraded stream: TIMEOUT, CAPABILITIES and the X25519/Ed25519 key exchange, then one
//! encrypted `echo` call of a 100-byte message per exchange) and **tcp**, the baseline (no
//! upgrade: 100 bytes written and read back from the raw echo server of [`super::echo`]).
//!
//! Latencies: the upgrade is timed from after the request is written to the end of the response
//! header (TCP connect excluded, as in the published tool); a ping from building its frame to
//! receiving the pong; an echo from encoding the request to the decoded response.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow};
use blerpc::client::PinPolicy;
use blerpc::link::ws::{self, WsOptions};
use blerpc::{Client, ClientConfig};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::wire::{
    Frames, XorShift, check_upgrade_response, numbered_payload, raw_message, upgrade_request,
};

/// What the connections carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum Variant {
    /// RFC 6455 ping/pong frames answered by the server's WebSocket library.
    Ping,
    /// An encrypted bleRPC `echo` call per exchange, each connection with its own session.
    Echo,
    /// The baseline: raw TCP, the payload written and read back from an echo server of the same
    /// shape (worker processes, one event loop each); no upgrade, no framing.
    Tcp,
}

impl Variant {
    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Ping => "ping",
            Variant::Echo => "echo",
            Variant::Tcp => "tcp",
        }
    }
}

/// One load-generator process's configuration (the `SPEC` of `blerpc-bench role scale-client
/// SPEC`, JSON).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClientSpec {
    /// Index of this process (0 runs the pure-latency measurement).
    pub index: usize,
    /// The server's address.
    pub server: SocketAddr,
    /// The WebSocket request path.
    pub path: String,
    /// Source address every connection binds (with `IP_BIND_ADDRESS_NO_PORT`).
    pub source: Ipv4Addr,
    /// What the connections carry.
    pub variant: Variant,
    /// Connections being opened at once.
    pub window: usize,
    /// Payload bytes of a ping or an echo message.
    pub payload: usize,
    /// The server's identity key in hex (echo variant: pinned).
    pub identity: Option<String>,
    /// Bound of every single step (connect, upgrade, setup, one exchange), in ms.
    pub timeout_ms: u64,
    /// The WebSocket read buffer of each echo-variant connection, in bytes.
    pub read_buffer: usize,
    /// The echo variant's setup order (`None`: the link's).
    #[serde(default)]
    pub setup_pipelining: Option<blerpc_cli::call::PipeliningArg>,
}

/// A command from the controller.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Command {
    /// Open connections until `target` are open (those already open stay open).
    Open {
        /// Connections this process should hold.
        target: usize,
    },
    /// Exchange `count` messages on the first connection, one every `interval_us` (0: back to
    /// back).
    Pure {
        /// Samples.
        count: usize,
        /// Pause between exchanges in µs.
        interval_us: u64,
    },
    /// Rounds (one exchange on every connection, waiting for all) until `duration_ms` has
    /// passed or `max_rounds` are done.
    Rounds {
        /// Bound on the whole phase.
        duration_ms: u64,
        /// Bound on the number of rounds.
        max_rounds: u64,
    },
    /// Close everything and exit.
    Quit,
}

/// A report to the controller.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Event {
    /// Started; the open-file limit in force.
    Ready {
        /// Soft open-file limit after raising it.
        nofile: u64,
    },
    /// Connections open so far during an `Open`.
    Progress {
        /// Open connections.
        opened: usize,
    },
    /// An `Open` finished.
    Opened {
        /// Open connections now.
        opened: usize,
        /// Connections that failed (connect, upgrade or setup).
        errors: usize,
        /// Each new connection's upgrade latency, ns.
        upgrade_ns: Vec<u64>,
        /// Each new connection's bleRPC setup (TIMEOUT, CAPABILITIES, key exchange), ns (echo).
        setup_ns: Vec<u64>,
        /// Wall time of the `Open`, ns.
        wall_ns: u64,
        /// The first error's text, if any.
        first_error: Option<String>,
    },
    /// A `Pure` finished.
    Pure {
        /// Each exchange's latency, ns.
        samples_ns: Vec<u64>,
        /// Failed exchanges.
        errors: usize,
    },
    /// `Rounds` finished.
    Rounds {
        /// Connections in each round.
        connections: usize,
        /// Wall time of each round, ns.
        round_ns: Vec<u64>,
        /// Per-message latency histogram, (value ns, count) pairs.
        histogram: Vec<(u64, u64)>,
        /// Failed exchanges.
        errors: usize,
        /// The first error's text, if any.
        first_error: Option<String>,
    },
}

/// A histogram of ns latencies (3 significant digits, up to an hour).
pub fn new_histogram() -> Histogram<u64> {
    // 1 ns .. 1 h at 3 significant digits is a valid configuration.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable_histogram()))
}

#[allow(clippy::panic)]
fn unreachable_histogram() -> Histogram<u64> {
    panic!("hdrhistogram rejected 3 significant digits")
}

/// The (value, count) pairs of a histogram, to send it across processes.
pub fn histogram_pairs(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

/// One open connection.
enum Conn {
    Raw(TcpStream),
    Rpc(Client),
    Tcp(TcpStream),
}

struct Generator {
    spec: ClientSpec,
    host: String,
    rng: XorShift,
    identity: Option<[u8; 32]>,
    conns: Vec<Conn>,
    /// Sequence number written into each payload, so a stale pong cannot pass for a new one.
    seq: u64,
}

async fn step_timeout<T>(
    limit: Duration,
    what: &'static str,
    fut: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| Err(format!("{what} timed out after {limit:?}")))
}

/// Connects from `source` (kernel-chosen port, `IP_BIND_ADDRESS_NO_PORT` so the port is picked
/// per destination at connect time) to `server`.
pub(crate) async fn connect_from(source: Ipv4Addr, server: SocketAddr) -> io::Result<TcpStream> {
    use socket2::{Domain, Protocol, Socket, Type};
    // Non-blocking from the start (SOCK_NONBLOCK): one system call fewer per connection.
    #[cfg(target_os = "linux")]
    let socket = Socket::new(
        Domain::IPV4,
        Type::STREAM.nonblocking(),
        Some(Protocol::TCP),
    )?;
    #[cfg(not(target_os = "linux"))]
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    #[cfg(target_os = "linux")]
    nix::sys::socket::setsockopt(
        &socket,
        nix::sys::socket::sockopt::IpBindAddressNoPort,
        &true,
    )
    .map_err(io::Error::from)?;
    socket.bind(&SocketAddr::new(source.into(), 0).into())?;
    #[cfg(not(target_os = "linux"))]
    socket.set_nonblocking(true)?;
    let socket = tokio::net::TcpSocket::from_std_stream(socket.into());
    let stream = socket.connect(server).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// The upgrade on a connected stream; returns the latency from after the request was written to
/// the end of the response header.
async fn upgrade(stream: &mut TcpStream, request: &str, accept: &str) -> Result<Duration, String> {
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("writing the upgrade request: {e}"))?;
    let start = Instant::now();
    let mut head = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    loop {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| format!("reading the upgrade response: {e}"))?;
        if n == 0 {
            return Err("the server closed during the upgrade".into());
        }
        head.extend_from_slice(chunk.get(..n).unwrap_or(&[]));
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            let elapsed = start.elapsed();
            if end + 4 != head.len() {
                return Err("bytes after the upgrade response header".into());
            }
            check_upgrade_response(&head, accept)?;
            return Ok(elapsed);
        }
        if head.len() > 4096 {
            return Err("upgrade response header longer than 4 KiB".into());
        }
    }
}

impl Generator {
    fn payload(&mut self) -> Vec<u8> {
        self.seq += 1;
        numbered_payload(self.seq, self.spec.payload)
    }

    /// Rounds of the ping and tcp variants on one epoll loop ([`super::rounds`]), in a
    /// blocking thread; `None` when a connection is a bleRPC client (the echo variant).
    async fn raw_rounds(
        &mut self,
        duration_ms: u64,
        max_rounds: u64,
    ) -> anyhow::Result<Option<Event>> {
        if self.conns.iter().any(|c| matches!(c, Conn::Rpc(_))) {
            return Ok(None);
        }
        let mut streams = Vec::with_capacity(self.conns.len());
        for conn in self.conns.drain(..) {
            if let Conn::Raw(s) | Conn::Tcp(s) = conn {
                streams.push(s.into_std()?);
            }
        }
        let mut frames = Frames {
            variant: self.spec.variant,
            payload: self.spec.payload,
            rng: XorShift(self.rng.next() | 1),
            seq: self.seq,
        };
        let limits = super::rounds::Limits {
            duration: Duration::from_millis(duration_ms),
            max_rounds,
            step: self.step(),
        };
        let opened = streams.len();
        let (outcome, frames) = tokio::task::spawn_blocking(move || {
            let mut progress = Output(std::io::stdout());
            let outcome =
                super::rounds::run(streams, &mut frames, limits, new_histogram(), &mut || {
                    let _ = progress.send(&Event::Progress { opened });
                });
            (outcome, frames)
        })
        .await?;
        let outcome = outcome?;
        self.seq = frames.seq;
        for s in outcome.streams {
            let s = TcpStream::from_std(s)?;
            self.conns.push(match self.spec.variant {
                Variant::Ping | Variant::Echo => Conn::Raw(s),
                Variant::Tcp => Conn::Tcp(s),
            });
        }
        Ok(Some(Event::Rounds {
            connections: outcome.connections,
            round_ns: outcome.round_ns,
            histogram: histogram_pairs(&outcome.histogram),
            errors: outcome.errors,
            first_error: outcome.first_error,
        }))
    }

    fn step(&self) -> Duration {
        Duration::from_millis(self.spec.timeout_ms.max(1))
    }

    /// Opens one connection: connect, upgrade, and (echo) the bleRPC setup.
    fn open_one(
        &mut self,
    ) -> impl std::future::Future<
        Output = Result<(Conn, Option<Duration>, Option<Duration>), String>,
    > + use<> {
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&self.rng.next().to_le_bytes());
        key[8..].copy_from_slice(&self.rng.next().to_le_bytes());
        let (request, accept) = upgrade_request(&self.host, &self.spec.path, key);
        let (source, server, variant, step, read_buffer) = (
            self.spec.source,
            self.spec.server,
            self.spec.variant,
            self.step(),
            self.spec.read_buffer,
        );
        let peer = format!("ws://{}{}", self.host, self.spec.path);
        let identity = self.identity;
        let setup_pipelining = self.spec.setup_pipelining;
        async move {
            let mut stream = step_timeout(step, "connect", async {
                connect_from(source, server)
                    .await
                    .map_err(|e| format!("connect: {e}"))
            })
            .await?;
            // The baseline has no upgrade: its connections are open once connected.
            let upgraded = if variant == Variant::Tcp {
                None
            } else {
                Some(step_timeout(step, "upgrade", upgrade(&mut stream, &request, &accept)).await?)
            };
            match variant {
                Variant::Ping => Ok((Conn::Raw(stream), upgraded, None)),
                Variant::Echo => {
                    let mut options = WsOptions::default();
                    options.tcp.read_buffer_size = read_buffer;
                    let link = ws::client_from_upgraded(stream, peer, &options).await;
                    let mut config = ClientConfig {
                        pinning: match identity {
                            Some(k) => PinPolicy::Trust(k),
                            None => PinPolicy::NoPin,
                        },
                        setup_pipelining: setup_pipelining.map(Into::into),
                        ..Default::default()
                    };
                    config.central.require_encryption = identity.is_some();
                    config.central.setup_timeout = step;
                    config.central.handshake_step_timeout = step;
                    config.central.call_timeout = step;
                    let start = Instant::now();
                    let client = step_timeout(step, "bleRPC setup", async {
                        Client::connect(link, config)
                            .await
                            .map_err(|e| format!("bleRPC setup: {e}"))
                    })
                    .await?;
                    Ok((Conn::Rpc(client), upgraded, Some(start.elapsed())))
                }
                Variant::Tcp => Ok((Conn::Tcp(stream), None, None)),
            }
        }
    }

    async fn open(&mut self, target: usize, out: &mut Output) -> anyhow::Result<()> {
        let start = Instant::now();
        let mut upgrade_ns = Vec::with_capacity(target.saturating_sub(self.conns.len()));
        let mut setup_ns = Vec::new();
        let mut errors = 0usize;
        let mut first_error = None;
        let mut in_flight = FuturesUnordered::new();
        let mut started = self.conns.len();
        let mut progress = tokio::time::interval(Duration::from_millis(500));
        progress.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            while started < target && in_flight.len() < self.spec.window.max(1) {
                in_flight.push(self.open_one());
                started += 1;
            }
            if in_flight.is_empty() {
                break;
            }
            tokio::select! {
                Some(done) = in_flight.next() => match done {
                    Ok((conn, up, setup)) => {
                        self.conns.push(conn);
                        if let Some(up) = up {
                            upgrade_ns.push(nanos(up));
                        }
                        if let Some(s) = setup {
                            setup_ns.push(nanos(s));
                        }
                    }
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert(e);
                    }
                },
                _ = progress.tick() => out.send(&Event::Progress { opened: self.conns.len() })?,
            }
        }
        out.send(&Event::Opened {
            opened: self.conns.len(),
            errors,
            upgrade_ns,
            setup_ns,
            wall_ns: nanos(start.elapsed()),
            first_error,
        })
    }

    async fn pure(
        &mut self,
        count: usize,
        interval_us: u64,
        out: &mut Output,
    ) -> anyhow::Result<()> {
        let mut samples_ns = Vec::with_capacity(count);
        let mut errors = 0usize;
        let step = self.step();
        let interval = Duration::from_micros(interval_us);
        let mut next = Instant::now();
        let mut frame = Vec::with_capacity(256);
        for _ in 0..count {
            if !interval.is_zero() {
                next += interval;
                tokio::time::sleep_until(next.into()).await;
            }
            let payload = self.payload();
            let mask = (self.rng.next() as u32).to_le_bytes();
            let Some(conn) = self.conns.first_mut() else {
                errors += 1;
                continue;
            };
            match exchange(conn, &payload, mask, &mut frame, step).await {
                Ok(d) => samples_ns.push(nanos(d)),
                Err(_) => errors += 1,
            }
        }
        out.send(&Event::Pure { samples_ns, errors })
    }

    async fn rounds(
        &mut self,
        duration_ms: u64,
        max_rounds: u64,
        out: &mut Output,
    ) -> anyhow::Result<()> {
        if let Some(event) = self.raw_rounds(duration_ms, max_rounds).await? {
            return out.send(&event);
        }
        let end = Instant::now() + Duration::from_millis(duration_ms);
        let mut histogram = new_histogram();
        let mut round_ns = Vec::new();
        let mut errors = 0usize;
        let mut first_error = None;
        let step = self.step();
        let mut rounds = 0u64;
        while rounds < max_rounds && Instant::now() < end {
            let payloads: Vec<(Vec<u8>, [u8; 4])> = (0..self.conns.len())
                .map(|_| (self.payload(), (self.rng.next() as u32).to_le_bytes()))
                .collect();
            let start = Instant::now();
            let mut all: FuturesUnordered<_> = self
                .conns
                .iter_mut()
                .zip(payloads.iter())
                .map(|(conn, (payload, mask))| async move {
                    let mut frame = Vec::new();
                    exchange(conn, payload, *mask, &mut frame, step).await
                })
                .collect();
            tokio::task::unconstrained(async {
                while let Some(r) = all.next().await {
                    match r {
                        Ok(d) => {
                            let _ = histogram.record(nanos(d).max(1));
                        }
                        Err(e) => {
                            errors += 1;
                            first_error.get_or_insert(e);
                        }
                    }
                }
            })
            .await;
            drop(all);
            round_ns.push(nanos(start.elapsed()));
            rounds += 1;
            out.send(&Event::Progress {
                opened: self.conns.len(),
            })?;
        }
        out.send(&Event::Rounds {
            connections: self.conns.len(),
            round_ns,
            histogram: histogram_pairs(&histogram),
            errors,
            first_error,
        })
    }
}

pub(super) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One timed exchange on `conn`: a ping answered by a pong, or an echo call.
async fn exchange(
    conn: &mut Conn,
    payload: &[u8],
    mask: [u8; 4],
    frame: &mut Vec<u8>,
    step: Duration,
) -> Result<Duration, String> {
    let is_ping = matches!(conn, Conn::Raw(_));
    match conn {
        Conn::Raw(stream) | Conn::Tcp(stream) => {
            let kind = if is_ping { Variant::Ping } else { Variant::Tcp };
            step_timeout(step, kind.name(), async {
                let start = Instant::now();
                let mut reply = Vec::new();
                raw_message(kind, payload, mask, frame, &mut reply);
                stream
                    .write_all(frame)
                    .await
                    .map_err(|e| format!("{} write: {e}", kind.name()))?;
                let mut got = vec![0u8; reply.len()];
                stream
                    .read_exact(&mut got)
                    .await
                    .map_err(|e| format!("{} read: {e}", kind.name()))?;
                let elapsed = start.elapsed();
                if got != reply {
                    return Err("the reply is not the one to this message".into());
                }
                Ok(elapsed)
            })
            .await
        }
        Conn::Rpc(client) => {
            let start = Instant::now();
            // EchoRequest { message = 1 }: tag 0x0a, a one-byte length (payload < 128), bytes.
            let mut request = Vec::with_capacity(payload.len() + 2);
            request.push(0x0a);
            request.push(payload.len().min(127) as u8);
            request.extend_from_slice(payload.get(..payload.len().min(127)).unwrap_or(&[]));
            let response = client
                .call("echo", request.clone())
                .await
                .map_err(|e| format!("echo: {e}"))?;
            let elapsed = start.elapsed();
            // EchoResponse has the same shape.
            if response != request {
                return Err("the echo came back different".into());
            }
            Ok(elapsed)
        }
    }
}

/// stdout, one JSON event per line.
struct Output(std::io::Stdout);

impl Output {
    fn send(&mut self, event: &Event) -> anyhow::Result<()> {
        use std::io::Write as _;
        let line = serde_json::to_string(event)?;
        let mut out = self.0.lock();
        writeln!(out, "{line}")?;
        out.flush()?;
        Ok(())
    }
}

/// Runs the load-generator role until `Quit` or the end of stdin.
pub fn run(spec_json: &str) -> anyhow::Result<bool> {
    blerpc::process::die_with_parent();
    let spec: ClientSpec =
        serde_json::from_str(spec_json).context("role scale-client: not a client spec")?;
    let (nofile, _) = blerpc::process::raise_nofile_limit().unwrap_or((0, 0));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let identity = match &spec.identity {
            Some(h) => Some(
                hex::decode(h)
                    .ok()
                    .and_then(|b| <[u8; 32]>::try_from(b).ok())
                    .ok_or_else(|| anyhow!("the identity is not 32 hex bytes"))?,
            ),
            None => None,
        };
        let seed = (u64::from(std::process::id()) << 20)
            ^ nanos(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default(),
            );
        let mut generator = Generator {
            host: spec.server.to_string(),
            rng: XorShift(seed | 1),
            identity,
            conns: Vec::new(),
            seq: 0,
            spec,
        };
        let mut out = Output(std::io::stdout());
        out.send(&Event::Ready { nofile })?;
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Some(line) = lines.next_line().await? {
            let command: Command =
                serde_json::from_str(&line).with_context(|| format!("not a command: {line}"))?;
            match command {
                Command::Open { target } => generator.open(target, &mut out).await?,
                Command::Pure { count, interval_us } => {
                    generator.pure(count, interval_us, &mut out).await?
                }
                Command::Rounds {
                    duration_ms,
                    max_rounds,
                } => generator.rounds(duration_ms, max_rounds, &mut out).await?,
                Command::Quit => break,
            }
        }
        // Closing is the kernel's job: exiting closes every socket at once.
        Ok(true)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::scale::wire::ping_frame;

    #[test]
    fn ping_frames_are_masked() {
        let mut out = Vec::new();
        ping_frame(b"abc", [1, 2, 3, 4], &mut out);
        assert_eq!(out, [0x89, 0x83, 1, 2, 3, 4, b'a' ^ 1, b'b' ^ 2, b'c' ^ 3]);
    }

    #[test]
    fn raw_messages_and_the_replies_they_await() {
        let (mut message, mut reply) = (Vec::new(), vec![9u8; 3]);
        raw_message(
            Variant::Ping,
            b"abc",
            [1, 2, 3, 4],
            &mut message,
            &mut reply,
        );
        assert_eq!(
            message,
            [0x89, 0x83, 1, 2, 3, 4, b'a' ^ 1, b'b' ^ 2, b'c' ^ 3]
        );
        assert_eq!(reply, [0x8A, 3, b'a', b'b', b'c']);
        raw_message(Variant::Tcp, b"abc", [1, 2, 3, 4], &mut message, &mut reply);
        assert_eq!(
            (message.as_slice(), reply.as_slice()),
            (&b"abc"[..], &b"abc"[..])
        );
        // A pong carries at most 125 bytes of the payload.
        raw_message(Variant::Ping, &[7; 200], [0; 4], &mut message, &mut reply);
        assert_eq!((reply.len(), reply[1]), (127, 125));
        assert_eq!(numbered_payload(0x1f, 20), b"000000000000001fxxxx");
        assert_eq!(numbered_payload(1, 0).len(), 8);
    }

    #[test]
    fn upgrade_responses_are_checked() {
        // RFC 6455 §1.3's example key and accept value.
        let key = [
            0x74, 0x68, 0x65, 0x20, 0x73, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x20, 0x6e, 0x6f, 0x6e,
            0x63, 0x65,
        ];
        let (request, accept) = upgrade_request("h:1", "/p", key);
        assert!(request.contains("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"));
        assert!(request.starts_with("GET /p HTTP/1.1\r\nHost: h:1\r\n"));
        assert_eq!(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        let ok =
            format!("HTTP/1.1 101 Switching Protocols\r\nsec-websocket-accept: {accept}\r\n\r\n");
        assert!(check_upgrade_response(ok.as_bytes(), &accept).is_ok());
        assert!(check_upgrade_response(b"HTTP/1.1 404 Not Found\r\n\r\n", &accept).is_err());
        let wrong = "HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: x\r\n\r\n";
        assert!(check_upgrade_response(wrong.as_bytes(), &accept).is_err());
    }
}
