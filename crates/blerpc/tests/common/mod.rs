//! A demo service for runtime tests (a raw echo, the runtime's own tests' commands), and helpers.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use blerpc::client::PinPolicy;
use blerpc::server::{BoxFuture, BoxStream, Bytes, CallKind, Dispatch, Status};
use blerpc::{ClientConfig, Server, ServerConfig};
use futures_util::StreamExt;

/// Identity seed of the test server.
pub const SEED: [u8; 32] = [0x42; 32];

pub use blerpc_sim::harness::msg::*;

/// A client of a fresh encrypted [`server`] over an in-memory link (MTU 247), its key trusted,
/// with `config` otherwise.
pub async fn connect_to_server(config: ClientConfig) -> blerpc::Client {
    let server = server(true);
    let key = server.identity_public().unwrap();
    let (a, b) = blerpc::link::mem::pair(247);
    tokio::spawn(async move { server.serve_link(b).await });
    blerpc::Client::connect(
        a,
        ClientConfig {
            pinning: PinPolicy::Trust(key),
            ..config
        },
    )
    .await
    .unwrap()
}

/// echo (returns the request), flash_read (a synthetic image), data_write (counts bytes),
/// counter_stream (count items), counter_upload (counts items).
pub struct Demo;

impl Dispatch for Demo {
    fn kind(&self, name: &str) -> Option<CallKind> {
        match name {
            "echo" | "flash_read" | "data_write" | "slow" | "deadline_left" | "hang" => {
                Some(CallKind::Unary)
            }
            "counter_stream" | "ticking_stream" => Some(CallKind::ServerStream),
            "counter_upload" | "failing_upload" => Some(CallKind::ClientStream),
            "chat" => Some(CallKind::BidiStream),
            _ => None,
        }
    }
    fn unary(&self, name: &str, request: Bytes) -> BoxFuture<Result<Vec<u8>, Status>> {
        let name = name.to_string();
        Box::pin(async move {
            match name.as_str() {
                "echo" => Ok(request.to_vec()),
                "slow" => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    Ok(request.to_vec())
                }
                // The milliseconds left until the request's deadline (u32 LE), or nothing.
                "deadline_left" => Ok(blerpc::server::deadline().map_or(Vec::new(), |d| {
                    let left = d.saturating_duration_since(tokio::time::Instant::now());
                    (left.as_millis() as u32).to_le_bytes().to_vec()
                })),
                // Never answers; counts its drop in HANG_DROPPED.
                "hang" => {
                    let _witness = DropCount(&HANG_DROPPED);
                    std::future::pending::<()>().await;
                    Ok(Vec::new())
                }
                "flash_read" => {
                    let (addr, len) = flash_read_req_of(&request).unwrap_or((0, 0));
                    let (addr, len) = (addr as usize, len as usize);
                    if len > 8192 {
                        return Err(Status::handler_failed("read longer than 8192"));
                    }
                    let data: Vec<u8> = (addr..addr + len).map(|i| i as u8).collect();
                    Ok(flash_read_reply(addr as u32, &data))
                }
                _ => Ok(data_write_reply(
                    data_write_req_of(&request).map_or(0, |d| d.len() as u32),
                )),
            }
        })
    }
    fn server_stream(&self, name: &str, request: Bytes) -> BoxStream<Result<Vec<u8>, Status>> {
        if name == "ticking_stream" {
            // An item every 20 ms, never ending: the milliseconds left until the request's
            // deadline (u32 LE), or nothing.
            return Box::pin(futures_util::stream::unfold((), |()| async {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                let left = blerpc::server::deadline().map_or(Vec::new(), |d| {
                    let left = d.saturating_duration_since(tokio::time::Instant::now());
                    (left.as_millis() as u32).to_le_bytes().to_vec()
                });
                Some((Ok(left), ()))
            }));
        }
        let count = counter_stream_req_of(&request).unwrap_or(0);
        Box::pin(futures_util::stream::iter(
            (0..count).map(|i| Ok(counter_item(i, i as i32 * 10))),
        ))
    }
    fn client_stream(
        &self,
        name: &str,
        items: BoxStream<Bytes>,
    ) -> BoxFuture<Result<Vec<u8>, Status>> {
        let fail = name == "failing_upload";
        Box::pin(async move {
            if fail {
                return Err(Status::handler_failed("refused at once"));
            }
            let n = items.count().await;
            Ok(upload_reply(n as u32))
        })
    }
    /// `chat`: each item echoed back as it arrives, a slow handler (1 ms an item).
    fn bidi_stream(&self, _: &str, items: BoxStream<Bytes>) -> BoxStream<Result<Vec<u8>, Status>> {
        Box::pin(items.then(|item| async move {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            Ok(item.to_vec())
        }))
    }
}

/// How many `hang` handlers were dropped (stopped by a cancel or their deadline).
pub static HANG_DROPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

struct DropCount(&'static std::sync::atomic::AtomicUsize);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A demo server: with the test identity (encryption required) or in plaintext.
pub fn server(encrypted: bool) -> Server {
    server_with(encrypted, ServerConfig::default())
}

/// As [`server`], without the per-address connection rate: a measurement opens many
/// connections from 127.0.0.1 at once.
pub fn server_unlimited(encrypted: bool) -> Server {
    server_with(
        encrypted,
        ServerConfig {
            connection_rate_per_address: None,
            ..ServerConfig::default()
        },
    )
}

fn server_with(encrypted: bool, mut config: ServerConfig) -> Server {
    if encrypted {
        config.identity = Some(SEED);
    } else {
        config.peripheral.require_encryption = false;
    }
    Server::new(Demo, config).unwrap()
}

/// A client configuration that pins `server`'s key, or runs in plaintext without one.
pub fn client_config(server: &Server) -> ClientConfig {
    let mut config = ClientConfig::default();
    match server.identity_public() {
        Some(key) => config.pinning = PinPolicy::Trust(key),
        None => {
            config.pinning = PinPolicy::NoPin;
            config.central.require_encryption = false;
        }
    }
    config
}

/// The client side of a WebSocket upgrade, by hand as `blerpc-bench scale` does it: the TCP stream
/// once the server's 101 response header has been read (nothing after it).
pub async fn ws_upgraded(addr: std::net::SocketAddr) -> tokio::net::TcpStream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .await
    .unwrap();
    let mut response = Vec::new();
    while !response.ends_with(b"\r\n\r\n") {
        let mut b = [0];
        s.read_exact(&mut b).await.unwrap();
        response.push(b[0]);
    }
    s
}

/// Heap per connection by allocation size, from two snapshots of live allocations counted per
/// size (index = size) around opening `n` connections: `(total bytes, rows of (size, count per
/// connection))`, largest contributions first, rows under 0.05 per connection left out.
pub fn heap_per_connection(
    before: &[isize],
    after: &[isize],
    n: usize,
) -> (f64, Vec<(usize, f64)>) {
    let mut rows: Vec<(usize, f64)> = before
        .iter()
        .zip(after)
        .enumerate()
        .map(|(size, (b, a))| (size, (a - b) as f64 / n as f64))
        .filter(|(_, per)| per.abs() >= 0.05)
        .collect();
    rows.sort_by(|x, y| ((y.0 as f64) * y.1).total_cmp(&((x.0 as f64) * x.1)));
    let total = rows.iter().map(|(s, p)| *s as f64 * p).sum();
    (total, rows)
}

/// Serves `server` from `acceptor` on a spawned task until the returned sender is dropped (or
/// used); the handle finishes when the server has shut down.
pub fn serve_in_background<A>(
    server: Server,
    acceptor: A,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
)
where
    A: blerpc::link::Acceptor + Send + 'static,
{
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        server
            .serve(acceptor, async {
                let _ = stop_rx.await;
            })
            .await
            .unwrap();
    });
    (stop_tx, task)
}

/// Echo (small and 64 KiB, past the classic limit), an 8 KiB read, a 20-item stream each way:
/// every call shape a link must carry.
pub async fn every_call_shape(client: &blerpc::Client) {
    let req = echo_req("hello");
    assert_eq!(client.call("echo", req.clone()).await.unwrap(), req);
    // Default configs carry the large-message extension: 65,536 bytes each way.
    let large: Vec<u8> = (0..65_536u32).map(|i| (i * 7) as u8).collect();
    assert!(client.call("echo", large.clone()).await.unwrap() == large);
    let read = flash_read_req(0, 8192);
    assert_eq!(
        client.call("flash_read", read).await.unwrap().len(),
        8192 + 3
    );
    let items: Vec<_> = client
        .server_stream("counter_stream", counter_stream_req(20))
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(items.len(), 20);
    for (i, item) in items.into_iter().enumerate() {
        assert_eq!(
            counter_item_of(&item.unwrap()),
            Some((i as u32, i as i32 * 10))
        );
    }
    let mut up = client.client_stream("counter_upload").await.unwrap();
    for i in 0..20u32 {
        up.send(counter_item(i, 0)).await.unwrap();
    }
    assert_eq!(upload_reply_of(&up.finish().await.unwrap()), Some(20));
}

/// An acceptor over an in-memory "listener": each link sent to the paired sender is accepted.
pub struct MemAcceptor(tokio::sync::mpsc::Receiver<blerpc::link::mem::MemLink>);

impl MemAcceptor {
    /// The listener's sending side (`backlog` links queued) and the acceptor.
    pub fn new(
        backlog: usize,
    ) -> (
        tokio::sync::mpsc::Sender<blerpc::link::mem::MemLink>,
        MemAcceptor,
    ) {
        let (tx, rx) = tokio::sync::mpsc::channel(backlog);
        (tx, MemAcceptor(rx))
    }
}

impl blerpc::link::Acceptor for MemAcceptor {
    type Link = blerpc::link::mem::MemLink;
    async fn accept(&mut self) -> std::io::Result<blerpc::link::mem::MemLink> {
        self.0
            .recv()
            .await
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "listener closed"))
    }
}

/// A CA, a server certificate it signed (for `localhost` and 127.0.0.1) and the key, as PEM
/// files in a temporary directory.
#[cfg(feature = "tls")]
pub struct Pki {
    _dir: tempfile::TempDir,
    /// The CA certificate.
    pub ca: std::path::PathBuf,
    /// The server certificate.
    pub cert: std::path::PathBuf,
    /// The server's private key.
    pub key: std::path::PathBuf,
    /// The server certificate, DER.
    pub leaf: rustls::pki_types::CertificateDer<'static>,
}

#[cfg(feature = "tls")]
static NEXT_CA: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[cfg(feature = "tls")]
impl Pki {
    /// A new CA and server certificate, both with keys of `alg`.
    pub fn new(alg: &'static rcgen::SignatureAlgorithm) -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        let dir = tempfile::tempdir().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(
            DnType::CommonName,
            format!(
                "blerpc test CA {}",
                NEXT_CA.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            ),
        );
        let ca_key = KeyPair::generate_for(alg).unwrap();
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate_for(alg).unwrap();
        let leaf = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        let path = |name: &str| dir.path().join(name);
        std::fs::write(path("ca.pem"), ca_cert.pem()).unwrap();
        std::fs::write(path("cert.pem"), leaf.pem()).unwrap();
        std::fs::write(path("key.pem"), key.serialize_pem()).unwrap();
        Pki {
            ca: path("ca.pem"),
            cert: path("cert.pem"),
            key: path("key.pem"),
            leaf: leaf.der().clone(),
            _dir: dir,
        }
    }
}
