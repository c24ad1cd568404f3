//! The client side of one benchmark run: connects (timing each step), sends one warm-up call,
//! then times every DATA→ACK round trip, for bleRPC (the demo service's `data_write`, whose
//! response acknowledges the length received) or the bare baseline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use blerpc::client::PinPolicy;
use blerpc::link::tcp::{TcpLink, TcpOptions};
use blerpc::link::tls::{self, TlsClientConfig};
use blerpc::{Client, ClientConfig};
use blerpc_demo::pb;
use blerpc_proto::connection::CallError;
use bytes::Bytes;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::bare::BareClient;
use super::grpc::GrpcClient;
use super::server::Endpoints;

/// Every round trip is bounded by this; a run stops at its first failure.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Connecting (TCP, TLS, bleRPC setup) is bounded by this.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// The link under the messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// Plain TCP.
    Tcp,
    /// TLS 1.3 (rustls, *ring*) with an RSA-2048 certificate the client verifies.
    Tls,
}

impl Transport {
    /// `TCP` / `TLS`.
    pub fn label(self) -> &'static str {
        match self {
            Transport::Tcp => "TCP",
            Transport::Tls => "TLS",
        }
    }
}

/// What carries the messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// bleRPC with end-to-end encryption (the default).
    BlerpcE2e,
    /// bleRPC without end-to-end encryption.
    BlerpcPlain,
    /// The bare length-prefixed DATA→ACK baseline.
    Bare,
    /// The bare baseline with each DATA and ACK sealed with AES-128-GCM as bleRPC seals a
    /// message: the cipher's own cost, the least any E2E-encrypted exchange pays.
    BareAead,
    /// gRPC with tonic at its defaults (HTTP/2; TLS through rustls): what users pick instead.
    Grpc,
}

impl Variant {
    /// Every variant, in the order the tables show them.
    pub const ALL: [Variant; 5] = [
        Variant::BlerpcE2e,
        Variant::BlerpcPlain,
        Variant::Bare,
        Variant::BareAead,
        Variant::Grpc,
    ];

    /// A short label.
    pub fn label(self) -> &'static str {
        match self {
            Variant::BlerpcE2e => "bleRPC E2E",
            Variant::BlerpcPlain => "bleRPC plain",
            Variant::Bare => "bare",
            Variant::BareAead => "bare + AES-GCM",
            Variant::Grpc => "gRPC (tonic)",
        }
    }
}

/// Where and how the client connects.
#[derive(Clone, Debug)]
pub struct Target {
    /// The server process's endpoints.
    pub endpoints: Endpoints,
    /// Its bleRPC identity key (pinned).
    pub identity: [u8; 32],
    /// Trust for TLS: the local CA.
    pub tls: TlsClientConfig,
    /// The same CA as PEM (the gRPC client's trust).
    pub ca_pem: String,
    /// bleRPC clients announce the long-container extension (`--classic-containers` clears it).
    pub long_containers: bool,
    /// The clients' setup order (`None`: the link's).
    pub setup_pipelining: Option<blerpc::blerpc_proto::connection::SetupPipelining>,
}

/// The connection steps of one client, each timed on its own.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct SetupTimes {
    /// TCP connect.
    pub tcp_connect_ms: f64,
    /// TLS handshake (certificate verified against the CA), TLS only.
    pub tls_handshake_ms: Option<f64>,
    /// Whether that handshake resumed an earlier session (TLS 1.3 session ticket, no
    /// certificate signature or verification), TLS only.
    pub tls_resumed: Option<bool>,
    /// bleRPC setup: TIMEOUT, CAPABILITIES and, with E2E, the key exchange; bleRPC only.
    pub blerpc_setup_ms: Option<f64>,
    /// The first (warm-up) call.
    pub first_call_ms: f64,
}

/// The raw result of one run (one row, one repetition).
#[derive(Debug, Default)]
pub struct RunResult {
    /// Every timed round trip, ns.
    pub latencies_ns: Vec<u64>,
    /// Wall time of the timed loop (all clients), s.
    pub wall_s: f64,
    /// Failed calls or connections (a run stops at its first failure per client).
    pub errors: usize,
    /// The first failure, as text.
    pub first_error: Option<String>,
    /// Why bleRPC cannot carry this payload (the row is reported as not supported).
    pub unsupported: Option<String>,
    /// Per client, its setup steps.
    pub setup: Vec<SetupTimes>,
}

enum Conn {
    Blerpc {
        client: Client,
        api: pb::BlerpcClient,
        /// The payload as the `Bytes` the request's `data` field is: each call sends it
        /// without copying it, as the bare clients write theirs.
        payload: Bytes,
    },
    BareTcp(BareClient<TcpStream>),
    BareTls(Box<BareClient<TlsStream<TcpStream>>>),
    Grpc(GrpcClient),
}

/// A bare client on `io`, sealed or not.
async fn bare_client<S: AsyncRead + AsyncWrite + Unpin>(
    io: S,
    payload: &[u8],
    sealed: bool,
) -> Result<BareClient<S>, String> {
    if sealed {
        BareClient::sealed(io, payload).await
    } else {
        BareClient::new(io, payload)
    }
    .map_err(|e| e.to_string())
}

/// Why a call failed: the payload cannot be carried at all, or any other failure.
enum CallFailure {
    Unsupported(String),
    Failed(String),
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl Conn {
    async fn open(
        target: &Target,
        tls_config: &TlsClientConfig,
        transport: Transport,
        variant: Variant,
        payload: &Arc<Vec<u8>>,
    ) -> Result<(Conn, SetupTimes), String> {
        let e = &target.endpoints;
        let port = match (transport, variant) {
            (Transport::Tcp, Variant::BlerpcE2e) => e.blerpc_tcp,
            (Transport::Tcp, Variant::BlerpcPlain) => e.blerpc_tcp_plain,
            (Transport::Tcp, Variant::Bare) => e.bare_tcp,
            (Transport::Tcp, Variant::BareAead) => e.bare_aead_tcp,
            (Transport::Tls, Variant::BlerpcE2e) => e.blerpc_tls,
            (Transport::Tls, Variant::BlerpcPlain) => e.blerpc_tls_plain,
            (Transport::Tls, Variant::Bare) => e.bare_tls,
            (Transport::Tls, Variant::BareAead) => e.bare_aead_tls,
            (Transport::Tcp, Variant::Grpc) => e.grpc_tcp,
            (Transport::Tls, Variant::Grpc) => e.grpc_tls,
        };
        if variant == Variant::Grpc {
            return Self::grpc(target, transport, port, payload).await;
        }
        let mut setup = SetupTimes::default();
        let t0 = Instant::now();
        let stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| format!("TCP connect to 127.0.0.1:{port}: {e}"))?;
        stream
            .set_nodelay(true)
            .map_err(|e| format!("TCP_NODELAY: {e}"))?;
        setup.tcp_connect_ms = ms(t0.elapsed());
        let options = TcpOptions {
            long_containers: target.long_containers,
            ..TcpOptions::default()
        };
        let sealed = variant == Variant::BareAead;
        let conn = match (transport, variant) {
            (Transport::Tcp, Variant::Bare | Variant::BareAead) => {
                Conn::BareTcp(bare_client(stream, payload, sealed).await?)
            }
            (Transport::Tls, Variant::Bare | Variant::BareAead) => {
                let t = Instant::now();
                let name = rustls::pki_types::ServerName::try_from("localhost")
                    .map_err(|e| e.to_string())?;
                let s = tokio_rustls::TlsConnector::from(tls_config.rustls().clone())
                    .connect(name, stream)
                    .await
                    .map_err(|e| format!("TLS handshake: {e}"))?;
                setup.tls_handshake_ms = Some(ms(t.elapsed()));
                setup.tls_resumed = Some(resumed(s.get_ref().1));
                Conn::BareTls(Box::new(bare_client(s, payload, sealed).await?))
            }
            (Transport::Tcp, _) => {
                let link = TcpLink::from_stream(stream, &options).map_err(|e| e.to_string())?;
                Self::blerpc(link, variant, target, payload, &mut setup).await?
            }
            (Transport::Tls, _) => {
                let t = Instant::now();
                // The certificate is issued for `localhost`: the client checks chain and name.
                let link = tls::handshake_stream("localhost", stream, tls_config, &options)
                    .await
                    .map_err(|e| e.to_string())?;
                setup.tls_handshake_ms = Some(ms(t.elapsed()));
                setup.tls_resumed = Some(resumed(link.get_ref().get_ref().1));
                Self::blerpc(link, variant, target, payload, &mut setup).await?
            }
        };
        Ok((conn, setup))
    }

    /// A gRPC channel: tonic connects (TCP, TLS, the HTTP/2 preface) in one step, timed as the
    /// TCP connect.
    async fn grpc(
        target: &Target,
        transport: Transport,
        port: u16,
        payload: &Arc<Vec<u8>>,
    ) -> Result<(Conn, SetupTimes), String> {
        let t = Instant::now();
        let ca = (transport == Transport::Tls).then_some(target.ca_pem.as_str());
        let client = GrpcClient::connect(
            std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            ca,
            Bytes::from(payload.as_ref().clone()),
            CONNECT_TIMEOUT,
        )
        .await?;
        let setup = SetupTimes {
            tcp_connect_ms: ms(t.elapsed()),
            ..SetupTimes::default()
        };
        Ok((Conn::Grpc(client), setup))
    }

    async fn blerpc<L: blerpc::link::Link>(
        link: L,
        variant: Variant,
        target: &Target,
        payload: &Arc<Vec<u8>>,
        setup: &mut SetupTimes,
    ) -> Result<Conn, String> {
        let e2e = variant == Variant::BlerpcE2e;
        let mut config = ClientConfig {
            pinning: if e2e {
                PinPolicy::Trust(target.identity)
            } else {
                PinPolicy::NoPin
            },
            setup_pipelining: target.setup_pipelining,
            ..Default::default()
        };
        config.central.require_encryption = e2e;
        let t = Instant::now();
        let client = Client::connect(link, config)
            .await
            .map_err(|e| format!("bleRPC setup: {e}"))?;
        setup.blerpc_setup_ms = Some(ms(t.elapsed()));
        if client.info().encrypted != e2e {
            return Err(format!(
                "the connection is {}encrypted; expected the opposite",
                if e2e { "not " } else { "" }
            ));
        }
        Ok(Conn::Blerpc {
            api: pb::BlerpcClient::new(client.clone()),
            client,
            payload: Bytes::from(payload.as_ref().clone()),
        })
    }

    async fn call(&mut self) -> Result<(), CallFailure> {
        match self {
            Conn::Blerpc { api, payload, .. } => blerpc_call(api, payload).await,
            Conn::BareTcp(c) => c
                .call()
                .await
                .map_err(|e| CallFailure::Failed(e.to_string())),
            Conn::BareTls(c) => c
                .call()
                .await
                .map_err(|e| CallFailure::Failed(e.to_string())),
            Conn::Grpc(c) => c.call().await.map_err(CallFailure::Failed),
        }
    }

    async fn timed_call(&mut self) -> Result<u64, CallFailure> {
        timed(self.call()).await
    }

    async fn close(self) {
        match self {
            Conn::Blerpc { client, .. } => client.close().await,
            Conn::BareTcp(c) => c.close().await,
            Conn::BareTls(c) => c.close().await,
            Conn::Grpc(c) => drop(c),
        }
    }
}

/// One bleRPC `data_write` of `payload`, checked against its ACK.
async fn blerpc_call(api: &pb::BlerpcClient, payload: &Bytes) -> Result<(), CallFailure> {
    let request = pb::DataWriteRequest {
        data: payload.clone(),
    };
    match api.data_write(request).await {
        Ok(ack) if ack.length as usize == payload.len() => Ok(()),
        Ok(ack) => Err(CallFailure::Failed(format!(
            "ACK for {} bytes, sent {}",
            ack.length,
            payload.len()
        ))),
        Err(e)
            if matches!(
                e.call_error(),
                Some(CallError::DataTooLong { .. } | CallError::RequestTooLarge { .. })
            ) =>
        {
            Err(CallFailure::Unsupported(e.to_string()))
        }
        Err(e) => Err(CallFailure::Failed(e.to_string())),
    }
}

/// One call's round trip in ns, bounded by [`CALL_TIMEOUT`].
async fn timed(call: impl Future<Output = Result<(), CallFailure>>) -> Result<u64, CallFailure> {
    let t = Instant::now();
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(Ok(())) => Ok(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(CallFailure::Failed(format!(
            "no ACK within {CALL_TIMEOUT:?}"
        ))),
    }
}

/// `messages` calls on one connection with up to `window` in flight at once: bleRPC runs
/// `window` callers on the same client (each one call at a time, so the window stays full), the
/// bare client writes frames ahead of their ACKs. Each message's latency is its own round trip.
async fn pipelined_loop(
    conn: &mut Conn,
    messages: usize,
    window: usize,
) -> Result<Vec<u64>, (Vec<u64>, String)> {
    let window = window.clamp(1, messages.max(1));
    match conn {
        Conn::Blerpc { api, payload, .. } => {
            let (api, payload) = (&*api, &*payload);
            let callers = (0..window).map(|i| {
                caller(i, share(messages, window, i), move || {
                    blerpc_call(api, payload)
                })
            });
            gather(futures_util::future::join_all(callers).await, messages)
        }
        Conn::BareTcp(c) => bare_pipelined(c, messages, window).await,
        Conn::BareTls(c) => bare_pipelined(c, messages, window).await,
        // `window` callers on clones of one channel: HTTP/2 streams on one connection.
        Conn::Grpc(c) => {
            let callers = (0..window).map(|i| {
                let c = c.clone();
                caller(i, share(messages, window, i), move || {
                    let c = c.clone();
                    async move { c.call().await.map_err(CallFailure::Failed) }
                })
            });
            gather(futures_util::future::join_all(callers).await, messages)
        }
    }
}

/// Caller `i`'s share of `messages` split over `window` callers.
fn share(messages: usize, window: usize, i: usize) -> usize {
    messages / window + usize::from(i < messages % window)
}

/// Caller `i`: `count` timed calls one after the other, stopping at the first failure.
async fn caller<F, C>(i: usize, count: usize, mut call: C) -> CallerResult
where
    C: FnMut() -> F,
    F: Future<Output = Result<(), CallFailure>>,
{
    let mut latencies = Vec::with_capacity(count);
    for n in 0..count {
        match timed(call()).await {
            Ok(ns) => latencies.push(ns),
            Err(CallFailure::Failed(e) | CallFailure::Unsupported(e)) => {
                return Err((latencies, format!("caller {i}, message {}: {e}", n + 1)));
            }
        }
    }
    Ok(latencies)
}

/// A caller's latencies, or those it had when it failed and why.
type CallerResult = Result<Vec<u64>, (Vec<u64>, String)>;

/// The latencies of concurrent callers, and the first error among them.
fn gather(results: Vec<CallerResult>, messages: usize) -> CallerResult {
    let mut all = Vec::with_capacity(messages);
    let mut error = None;
    for r in results {
        match r {
            Ok(l) => all.extend(l),
            Err((l, e)) => {
                all.extend(l);
                error.get_or_insert(e);
            }
        }
    }
    match error {
        None => Ok(all),
        Some(e) => Err((all, e)),
    }
}

async fn bare_pipelined<S>(
    c: &mut BareClient<S>,
    messages: usize,
    window: usize,
) -> Result<Vec<u64>, (Vec<u64>, String)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    // Every write and every wait for an ACK is bounded like one call.
    c.pipelined(messages, window, CALL_TIMEOUT)
        .await
        .map_err(|e| (Vec::new(), e.to_string()))
}

/// One client's connection, warm-up and `messages` timed calls (the loop starts at `start`).
struct ClientRun {
    latencies_ns: Vec<u64>,
    end: Instant,
    error: Option<String>,
}

async fn timed_loop(
    conn: &mut Conn,
    messages: usize,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<Vec<u64>, (Vec<u64>, String)> {
    let mut latencies = Vec::with_capacity(messages);
    for i in 0..messages {
        match conn.timed_call().await {
            Ok(ns) => latencies.push(ns),
            Err(CallFailure::Failed(e) | CallFailure::Unsupported(e)) => {
                return Err((latencies, format!("message {}: {e}", i + 1)));
            }
        }
        if i % 256 == 255 {
            progress(i + 1);
        }
    }
    Ok(latencies)
}

/// `true` when a client connection's handshake resumed a session.
fn resumed(conn: &rustls::CommonState) -> bool {
    conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
}

/// `config` with its own session store: `Some(n)` keeps up to `n` sessions for resumption,
/// `None` never resumes (every handshake full).
fn with_sessions(config: &TlsClientConfig, sessions: Option<usize>) -> TlsClientConfig {
    let mut rustls_config = (**config.rustls()).clone();
    rustls_config.resumption = match sessions {
        Some(n) => rustls::client::Resumption::in_memory_sessions(n),
        None => rustls::client::Resumption::disabled(),
    };
    TlsClientConfig::from_rustls(Arc::new(rustls_config))
}

/// Connects, warms up (first call), returns the connection ready for the timed loop.
async fn prepare(
    target: &Target,
    tls_config: &TlsClientConfig,
    transport: Transport,
    variant: Variant,
    payload: &Arc<Vec<u8>>,
) -> Result<(Conn, SetupTimes), CallFailure> {
    let (mut conn, mut setup) = tokio::time::timeout(
        CONNECT_TIMEOUT,
        Conn::open(target, tls_config, transport, variant, payload),
    )
    .await
    .map_err(|_| CallFailure::Failed(format!("connecting took over {CONNECT_TIMEOUT:?}")))?
    .map_err(CallFailure::Failed)?;
    match conn.timed_call().await {
        Ok(ns) => setup.first_call_ms = ns as f64 / 1e6,
        Err(e) => {
            conn.close().await;
            return Err(e);
        }
    }
    Ok((conn, setup))
}

/// Runs one row with `clients` concurrent clients sending `messages` in total (spread evenly),
/// each after its own warm-up call, with `window` calls in flight per client (1: one call at a
/// time; more: one client only). `progress` gets the messages done so far.
#[expect(
    clippy::too_many_arguments,
    reason = "one row's parameters, named at the call site"
)]
pub async fn run(
    target: &Target,
    transport: Transport,
    variant: Variant,
    payload: &Arc<Vec<u8>>,
    clients: usize,
    window: usize,
    messages: usize,
    progress: &(dyn Fn(usize) + Sync),
) -> RunResult {
    let clients = clients.clamp(1, messages.max(1));
    let mut result = RunResult::default();
    let mut conns = Vec::with_capacity(clients);
    // Every client's TLS handshake is a full one (no session kept between connections); the
    // first client's configuration keeps its session, and one more connection with it, made
    // after its warm-up call has read the server's session tickets and closed at once, times a
    // resumed handshake.
    let full = with_sessions(&target.tls, None);
    let resumable = with_sessions(&target.tls, Some(4));
    for i in 0..clients {
        let config = if i == 0 { &resumable } else { &full };
        match prepare(target, config, transport, variant, payload).await {
            Ok((conn, setup)) => {
                result.setup.push(setup);
                conns.push(conn);
                if i == 0 && transport == Transport::Tls {
                    match prepare(target, &resumable, transport, variant, payload).await {
                        Ok((again, setup)) => {
                            result.setup.push(setup);
                            again.close().await;
                        }
                        Err(CallFailure::Failed(e) | CallFailure::Unsupported(e)) => {
                            result.errors += 1;
                            result.first_error = Some(e);
                            break;
                        }
                    }
                }
            }
            Err(CallFailure::Unsupported(why)) => {
                result.unsupported = Some(why);
                break;
            }
            Err(CallFailure::Failed(e)) => {
                result.errors += 1;
                result.first_error = Some(e);
                break;
            }
        }
    }
    if result.unsupported.is_some() || result.errors > 0 {
        for c in conns {
            c.close().await;
        }
        return result;
    }
    let start = Instant::now();
    let runs: Vec<ClientRun> = if clients == 1 {
        let mut conn = conns.pop();
        let mut out = Vec::new();
        if let Some(conn) = conn.as_mut() {
            let r = if window > 1 {
                pipelined_loop(conn, messages, window).await
            } else {
                timed_loop(conn, messages, progress).await
            };
            out.push(client_run(r));
        }
        if let Some(conn) = conn {
            conn.close().await;
        }
        out
    } else {
        let mut set = tokio::task::JoinSet::new();
        for (i, mut conn) in conns.into_iter().enumerate() {
            let share = messages / clients + usize::from(i < messages % clients);
            set.spawn(async move {
                let run = client_run(timed_loop(&mut conn, share, &no_progress).await);
                conn.close().await;
                run
            });
        }
        let mut out = Vec::with_capacity(clients);
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok(run) => {
                    out.push(run);
                    progress(out.iter().map(|r| r.latencies_ns.len()).sum());
                }
                Err(e) => out.push(ClientRun {
                    latencies_ns: Vec::new(),
                    end: Instant::now(),
                    error: Some(format!("client task failed: {e}")),
                }),
            }
        }
        out
    };
    let end = runs.iter().map(|r| r.end).max().unwrap_or(start);
    result.wall_s = end.duration_since(start).as_secs_f64();
    for run in runs {
        result.latencies_ns.extend(run.latencies_ns);
        if let Some(e) = run.error {
            result.errors += 1;
            result.first_error.get_or_insert(e);
        }
    }
    result
}

fn no_progress(_: usize) {}

fn client_run(r: Result<Vec<u64>, (Vec<u64>, String)>) -> ClientRun {
    let end = Instant::now();
    match r {
        Ok(latencies_ns) => ClientRun {
            latencies_ns,
            end,
            error: None,
        },
        Err((latencies_ns, e)) => ClientRun {
            latencies_ns,
            end,
            error: Some(e),
        },
    }
}
