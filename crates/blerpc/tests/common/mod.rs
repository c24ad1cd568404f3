//! A hand-written demo service (raw protobuf) for runtime tests, and helpers.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use blerpc::client::PinPolicy;
use blerpc::server::{BoxFuture, BoxStream, Bytes, CallKind, Dispatch, Status};
use blerpc::{ClientConfig, Server, ServerConfig};
use futures_util::StreamExt;

/// Identity seed of the test server.
pub const SEED: [u8; 32] = [0x42; 32];

pub fn varint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

pub fn pb_uint(field: u32, v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    if v != 0 {
        varint(u64::from(field << 3), &mut out);
        varint(v, &mut out);
    }
    out
}

pub fn pb_bytes(field: u32, v: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    if !v.is_empty() {
        varint(u64::from(field << 3 | 2), &mut out);
        varint(v.len() as u64, &mut out);
        out.extend_from_slice(v);
    }
    out
}

pub fn pb_get_uint(buf: &[u8], field: u32) -> Option<u64> {
    let mut pos = 0;
    while pos < buf.len() {
        let key = read_varint(buf, &mut pos)?;
        match key & 7 {
            0 => {
                let v = read_varint(buf, &mut pos)?;
                if key >> 3 == u64::from(field) {
                    return Some(v);
                }
            }
            2 => {
                let len = read_varint(buf, &mut pos)? as usize;
                pos += len;
            }
            _ => return None,
        }
    }
    None
}

fn read_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// echo (returns the request), flash_read (a synthetic image), data_write (counts bytes),
/// counter_stream (count items), counter_upload (counts items).
pub struct Demo;

impl Dispatch for Demo {
    fn kind(&self, name: &str) -> Option<CallKind> {
        match name {
            "echo" | "flash_read" | "data_write" | "slow" => Some(CallKind::Unary),
            "counter_stream" => Some(CallKind::ServerStream),
            "counter_upload" | "failing_upload" => Some(CallKind::ClientStream),
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
                "flash_read" => {
                    let addr = pb_get_uint(&request, 1).unwrap_or(0) as usize;
                    let len = pb_get_uint(&request, 2).unwrap_or(0) as usize;
                    if len > 8192 {
                        return Err(Status::handler_failed("read longer than 8192"));
                    }
                    let data: Vec<u8> = (addr..addr + len).map(|i| i as u8).collect();
                    let mut out = pb_uint(1, addr as u64);
                    out.extend(pb_bytes(2, &data));
                    Ok(out)
                }
                _ => Ok(pb_uint(1, request.len().saturating_sub(3) as u64)),
            }
        })
    }
    fn server_stream(&self, _: &str, request: Bytes) -> BoxStream<Result<Vec<u8>, Status>> {
        let count = pb_get_uint(&request, 1).unwrap_or(0);
        Box::pin(futures_util::stream::iter((0..count).map(|i| {
            let mut item = pb_uint(1, i);
            item.extend(pb_uint(2, i * 10));
            Ok(item)
        })))
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
            Ok(pb_uint(1, n as u64))
        })
    }
}

/// A demo server: with the test identity (encryption required) or in plaintext.
pub fn server(encrypted: bool) -> Server {
    let mut config = ServerConfig::default();
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

/// The client side of a WebSocket upgrade, by hand as `blerpc bench scale` does it: the TCP stream
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
    A: blerpc::server::Acceptor + Send + 'static,
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
