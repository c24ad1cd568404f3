//! `calls`: what one unary call costs in CPU, with client and server in one thread.
//!
//! ```text
//! cargo run --release -p blerpc-bench -- calls [--calls 20000] [--reps 5] [--payloads 0,64,1024]
//!     [--variants bare,plain,e2e,mem-plain,mem-e2e]
//! ```
//!
//! Client and server are tasks of one current-thread tokio runtime, joined by a TCP connection on
//! 127.0.0.1. A call then never waits for another process or thread to be woken: its time is
//! the user-space work of both ends plus their system calls, without the scheduler's wake-ups
//! that dominate (and blur) `blerpc-bench loopback` on a small machine. Rows: bleRPC without and
//! with E2E encryption, and the bare DATA→ACK exchange of `blerpc-bench loopback` (a
//! length-prefixed frame answered by a 4-byte ACK) in the same runtime; and bleRPC over the
//! in-memory link, where a call makes no system call at all (its time is bleRPC's alone). Each row's figure is the
//! median over `--reps` interleaved repetitions of the mean time per call of `--calls` calls (after
//! a warm-up of 200 calls on the same connection); the last columns are the difference
//! from, and the ratio to, the bare row of the same payload.
//!
//! The bench binary enables tokio's `test-util` (the simulated BLE suites run on a paused
//! clock), which puts a mutex around tokio's clock reads: bleRPC pays a little for that here
//! (its timers read the clock), the bare exchange hardly. Use it to compare two versions of
//! bleRPC (the difference is the figure), not as an absolute; compare versions run alternately,
//! by their low quartile and median over many repetitions, as a shared machine moves whole runs.
//!
//! The crate's tests run every row with a few calls, as a smoke test of the rows' set-up and
//! ACK checks.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use blerpc::client::PinPolicy;
use blerpc::link::tcp::{TcpAcceptor, TcpLink, TcpOptions};
use blerpc::server::{BoxFuture, BoxStream, Bytes, CallKind, Dispatch, Status};
use blerpc::{Client, ClientConfig, Server, ServerConfig};
use prost::Message as _;

use crate::stats::median;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Calls on each connection before the timed ones.
const WARM_UP: usize = 200;

/// The identity seed of the E2E server.
const SEED: [u8; 32] = [0x5a; 32];

/// The largest payload the bench accepts (the bare server's frame bound too).
const MAX_PAYLOAD: usize = 1 << 20;

/// One call never takes this long here; a call that does is an error, not a hang.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// `data_write`: answers a request `{1: bytes data}` with `{1: uint32 length}`, as the demo
/// service does. prost's wrapper-type encodings (`Bytes` and `u32` as field 1) are exactly these
/// two messages, decoded and encoded as a generated service would.
struct Ack;

impl Dispatch for Ack {
    fn kind(&self, name: &str) -> Option<CallKind> {
        (name == "data_write").then_some(CallKind::Unary)
    }
    fn unary(&self, _: &str, request: Bytes) -> BoxFuture<Result<Vec<u8>, Status>> {
        Box::pin(async move {
            let data = Bytes::decode(request).map_err(Status::decode)?;
            let len = u32::try_from(data.len()).map_err(Status::decode)?;
            Ok(len.encode_to_vec())
        })
    }
    fn server_stream(&self, _: &str, _: Bytes) -> BoxStream<Result<Vec<u8>, Status>> {
        Box::pin(futures_util::stream::empty())
    }
    fn client_stream(&self, _: &str, _: BoxStream<Bytes>) -> BoxFuture<Result<Vec<u8>, Status>> {
        Box::pin(async { Err(Status::handler_failed("no uploads")) })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
/// A row of the table.
pub enum Variant {
    /// bleRPC without E2E encryption over TCP.
    Plain,
    /// bleRPC with E2E encryption over TCP.
    E2e,
    /// The bare DATA→ACK exchange over TCP.
    Bare,
    /// bleRPC without E2E encryption over the in-memory link: no system calls at all.
    MemPlain,
    /// bleRPC with E2E encryption over the in-memory link.
    MemE2e,
}

impl Variant {
    fn label(self) -> &'static str {
        match self {
            Variant::Plain => "bleRPC plain",
            Variant::E2e => "bleRPC E2E",
            Variant::Bare => "bare",
            Variant::MemPlain => "bleRPC plain, mem",
            Variant::MemE2e => "bleRPC E2E, mem",
        }
    }

    fn encrypted(self) -> bool {
        matches!(self, Variant::E2e | Variant::MemE2e)
    }
}

/// The in-memory link's ATT MTU: a 1 KiB request is one container, as over TCP with long
/// containers.
const MEM_ATT_MTU: usize = 4096;

/// One open connection of a row.
enum Conn {
    Blerpc {
        client: Client,
        payload: Bytes,
        /// The ACK expected for `payload` (`{1: length}`), built once.
        ack: Vec<u8>,
    },
    Bare {
        io: TcpStream,
        frame: Vec<u8>,
    },
}

impl Conn {
    async fn call(&mut self) -> io::Result<()> {
        match self {
            Conn::Blerpc {
                client,
                payload,
                ack,
            } => {
                let response = client
                    .call_message("data_write", payload)
                    .await
                    .map_err(io::Error::other)?;
                if response != *ack {
                    return Err(io::Error::other(format!("wrong ACK {response:02x?}")));
                }
                Ok(())
            }
            Conn::Bare { io, frame } => {
                io.write_all(frame).await?;
                let mut ack = [0u8; 4];
                io.read_exact(&mut ack).await?;
                let sent = frame.len() - 4;
                if u32::from_le_bytes(ack) as usize != sent {
                    return Err(io::Error::other("wrong ACK"));
                }
                Ok(())
            }
        }
    }

    async fn close(self) {
        match self {
            Conn::Blerpc { client, .. } => client.close().await,
            Conn::Bare { mut io, .. } => {
                let _ = io.shutdown().await;
            }
        }
    }
}

/// The bare server: `[len u32 LE][payload]` answered by `[len u32 LE]`, one frame at a time.
async fn serve_bare(listener: TcpListener) -> io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        // Buffered: a frame is one read system call, as a plain implementation would do it.
        let mut io = tokio::io::BufReader::with_capacity(128 * 1024, stream);
        tokio::spawn(async move {
            let mut buf = vec![0u8; MAX_PAYLOAD];
            loop {
                let mut header = [0u8; 4];
                if io.read_exact(&mut header).await.is_err() {
                    return;
                }
                let len = u32::from_le_bytes(header) as usize;
                let Some(body) = buf.get_mut(..len) else {
                    return;
                };
                if io.read_exact(body).await.is_err()
                    || io.get_mut().write_all(&header).await.is_err()
                {
                    return;
                }
            }
        });
    }
}

struct Servers {
    plain_server: Server,
    e2e_server: Server,
    plain: SocketAddr,
    e2e: SocketAddr,
    bare: SocketAddr,
    identity: [u8; 32],
}

async fn start_servers() -> anyhow::Result<Servers> {
    let mut plain_config = ServerConfig::default();
    plain_config.peripheral.require_encryption = false;
    let plain = Server::new(Ack, plain_config)?;
    let e2e = Server::new(
        Ack,
        ServerConfig {
            identity: Some(SEED),
            ..Default::default()
        },
    )?;
    let identity = e2e
        .identity_public()
        .ok_or_else(|| anyhow::anyhow!("no identity"))?;
    let mut addrs = Vec::new();
    for server in [plain.clone(), e2e.clone()] {
        let acceptor = TcpAcceptor::bind("127.0.0.1:0", TcpOptions::default()).await?;
        addrs.push(acceptor.local_addr()?);
        tokio::spawn(async move {
            let _ = server.serve(acceptor, std::future::pending::<()>()).await;
        });
    }
    let bare = TcpListener::bind("127.0.0.1:0").await?;
    let bare_addr = bare.local_addr()?;
    tokio::spawn(serve_bare(bare));
    Ok(Servers {
        plain_server: plain,
        e2e_server: e2e,
        plain: addrs[0],
        e2e: addrs[1],
        bare: bare_addr,
        identity,
    })
}

async fn open(servers: &Servers, variant: Variant, payload: &[u8]) -> anyhow::Result<Conn> {
    let config = ClientConfig::default();
    let client = match variant {
        Variant::MemPlain | Variant::MemE2e => {
            let (a, b) = blerpc::link::mem::pair(MEM_ATT_MTU);
            let server = if variant.encrypted() {
                servers.e2e_server.clone()
            } else {
                servers.plain_server.clone()
            };
            tokio::spawn(async move { server.serve_link(b).await });
            connect(a, servers, variant, config).await?
        }
        Variant::Plain | Variant::E2e | Variant::Bare => {
            let addr = match variant {
                Variant::Plain => servers.plain,
                Variant::E2e => servers.e2e,
                _ => servers.bare,
            };
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            if variant == Variant::Bare {
                let mut frame = u32::try_from(payload.len())?.to_le_bytes().to_vec();
                frame.extend_from_slice(payload);
                return Ok(Conn::Bare { io: stream, frame });
            }
            let link = TcpLink::from_stream(stream, &TcpOptions::default())?;
            connect(link, servers, variant, config).await?
        }
    };
    let ack = u32::try_from(payload.len())?.encode_to_vec();
    Ok(Conn::Blerpc {
        client,
        payload: Bytes::copy_from_slice(payload),
        ack,
    })
}

async fn connect<L: blerpc::link::Link>(
    link: L,
    servers: &Servers,
    variant: Variant,
    mut config: ClientConfig,
) -> anyhow::Result<Client> {
    if variant.encrypted() {
        config.pinning = PinPolicy::Trust(servers.identity);
    } else {
        config.pinning = PinPolicy::NoPin;
        config.central.require_encryption = false;
    }
    let client = Client::connect(link, config).await?;
    anyhow::ensure!(
        client.info().encrypted == variant.encrypted(),
        "the session's encryption is not what the row asks"
    );
    Ok(client)
}

/// Mean ns per call over `calls` calls on a fresh connection, after the warm-up.
async fn run_row(
    servers: &Servers,
    variant: Variant,
    payload: &[u8],
    calls: usize,
) -> anyhow::Result<f64> {
    let mut conn = open(servers, variant, payload).await?;
    for _ in 0..WARM_UP {
        tokio::time::timeout(CALL_TIMEOUT, conn.call()).await??;
    }
    let t = Instant::now();
    for _ in 0..calls {
        tokio::time::timeout(CALL_TIMEOUT, conn.call()).await??;
    }
    let per_call = t.elapsed().as_nanos() as f64 / calls as f64;
    conn.close().await;
    Ok(per_call)
}

/// The rows of a run without `--variants`: every one.
const DEFAULT_VARIANTS: &str = "bare,plain,e2e,mem-plain,mem-e2e";

/// `blerpc-bench calls` options.
#[derive(clap::Args, Debug, Clone)]
pub struct CallsArgs {
    /// Timed calls per row and repetition (after the warm-up).
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub calls: usize,
    /// Interleaved repetitions; each row shows the median.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub reps: usize,
    /// Payload sizes in bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0,64,1024")]
    pub payloads: Vec<usize>,
    /// Variants, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_VARIANTS)]
    pub variants: Vec<Variant>,
}

impl CallsArgs {
    fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.calls > 0 && self.reps > 0,
            "--calls and --reps must be at least 1"
        );
        anyhow::ensure!(
            self.payloads.iter().all(|p| *p <= MAX_PAYLOAD),
            "--payloads are at most {MAX_PAYLOAD} bytes"
        );
        Ok(())
    }
}

/// Runs `blerpc-bench calls`.
pub fn run(args: &CallsArgs) -> anyhow::Result<bool> {
    args.check()?;
    let variants = &args.variants;
    let rows: Vec<(usize, Variant)> = args
        .payloads
        .iter()
        .flat_map(|p| variants.iter().map(move |v| (*p, *v)))
        .collect();
    eprintln!(
        "calls: {} rows × {} reps, {} calls each after {WARM_UP} warm-up calls; one thread",
        rows.len(),
        args.reps,
        args.calls
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); rows.len()];
    rt.block_on(async {
        let servers = start_servers().await?;
        let started = Instant::now();
        for rep in 0..args.reps {
            for (i, (payload, variant)) in rows.iter().enumerate() {
                let data: Vec<u8> = (0..*payload).map(|i| i as u8).collect();
                let ns = run_row(&servers, *variant, &data, args.calls).await?;
                results[i].push(ns);
                eprintln!(
                    "[{:>5.1}s] rep {}/{}  {:>5} B  {:<13} {:>8.0} ns/call",
                    started.elapsed().as_secs_f64(),
                    rep + 1,
                    args.reps,
                    payload,
                    variant.label(),
                    ns
                );
            }
        }
        anyhow::Ok(())
    })?;
    println!();
    println!(
        "CPU per unary call, client and server in one thread over TCP on 127.0.0.1 \
         (median of {} reps × {} calls; mem rows: the in-memory link, no system calls)",
        args.reps, args.calls
    );
    println!();
    println!("| payload | variant | ns/call | over bare | ×bare |");
    println!("| ---: | --- | ---: | ---: | ---: |");
    let medians: Vec<f64> = results.iter().map(|r| median(r)).collect();
    for (i, (payload, variant)) in rows.iter().enumerate() {
        let bare = rows
            .iter()
            .position(|(p, v)| p == payload && *v == Variant::Bare)
            .map(|j| medians[j]);
        let (over, ratio) = match bare {
            Some(b) if matches!(variant, Variant::Plain | Variant::E2e) => (
                format!("{:+.0} ns", medians[i] - b),
                format!("{:.2}×", medians[i] / b),
            ),
            _ => ("—".into(), "—".into()),
        };
        println!(
            "| {payload} B | {} | {:.0} | {over} | {ratio} |",
            variant.label(),
            medians[i]
        );
    }
    Ok(true)
}
