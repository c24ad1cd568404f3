//! The WebSocket link: every call shape through Client/Server over `ws://` and `wss://`,
//! messages that are not one container, text frames, pings without traffic, close frames, a
//! required path, a client that vanishes mid-frame, many clients at once, and the memory an idle
//! connection costs (an ignored measurement).
#![cfg(feature = "ws")]
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::time::Duration;

use blerpc::link::Acceptor;
use blerpc::link::tcp::TcpOptions;
use blerpc::link::ws::{self, WsAcceptor, WsLink, WsOptions};
use blerpc::link::{Link, LinkError, LinkRx, LinkTx};
use blerpc::{Client, Server};
use common::*;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::{Bytes, Message};

const LIMIT: Duration = Duration::from_secs(20);

/// Counts live heap bytes, for the memory measurement.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size() as isize, Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, layout, new_size) };
        if !q.is_null() {
            LIVE.fetch_add(new_size as isize - layout.size() as isize, Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

async fn serve_on(
    server: Server,
    acceptor: WsAcceptor,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let addr = acceptor.local_addr().unwrap();
    let (stop_tx, task) = common::serve_in_background(server, acceptor);
    (addr, stop_tx, task)
}

async fn serve(
    server: Server,
    options: WsOptions,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    serve_on(
        server,
        WsAcceptor::bind("127.0.0.1:0", options).await.unwrap(),
    )
    .await
}

#[cfg(feature = "tls")]
mod wss {
    use super::*;
    use blerpc::link::tls::{TlsClientConfig, TlsServerConfig};

    fn certificate() -> (TlsServerConfig, TlsClientConfig) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let server =
            TlsServerConfig::from_pem(cert.pem().as_bytes(), key.serialize_pem().as_bytes())
                .unwrap();
        let client = TlsClientConfig::with_pinned_cert(cert.der().clone()).unwrap();
        (server, client)
    }

    async fn call_shapes_wss(encrypted: bool) {
        let (tls_server, tls_client) = certificate();
        let server = server(encrypted);
        let config = client_config(&server);
        let acceptor = WsAcceptor::bind_tls("127.0.0.1:0", tls_server, WsOptions::default())
            .await
            .unwrap();
        let (addr, stop, task) = serve_on(server, acceptor).await;
        timeout(LIMIT, async {
            let url = format!("wss://{addr}/");
            let link = ws::connect_tls(&url, &tls_client, &WsOptions::default())
                .await
                .unwrap();
            assert_eq!(link.peer_id(), url);
            let client = Client::connect(link, config).await.unwrap();
            assert_eq!(client.info().encrypted, encrypted);
            every_call_shape(&client).await;
            // ws::connect refuses wss:// with a pointer to connect_tls.
            let err = ws::connect(&url, &WsOptions::default()).await.unwrap_err();
            assert!(err.to_string().contains("connect_tls"), "{err}");
        })
        .await
        .unwrap();
        drop(stop);
        task.await.unwrap();
    }

    #[tokio::test]
    async fn every_call_shape_encrypted_over_wss() {
        call_shapes_wss(true).await;
    }

    #[tokio::test]
    async fn every_call_shape_plaintext_over_wss() {
        call_shapes_wss(false).await;
    }
}

/// A server link accepted from a raw tokio-tungstenite client.
async fn raw_pair(
    options: WsOptions,
    path: &str,
) -> (WsLink, tokio_tungstenite::WebSocketStream<TcpStream>) {
    let mut acceptor = WsAcceptor::bind("127.0.0.1:0", options).await.unwrap();
    let url = format!("ws://{}{path}", acceptor.local_addr().unwrap());
    let stream = TcpStream::connect(acceptor.local_addr().unwrap())
        .await
        .unwrap();
    let local = stream.local_addr().unwrap();
    let (client, link) = tokio::join!(
        tokio_tungstenite::client_async(url.as_str(), stream),
        acceptor.accept()
    );
    let link = link.unwrap();
    assert_eq!(link.peer_id(), format!("ws://{local}{path}"));
    (link, client.unwrap().0)
}

#[tokio::test]
async fn one_binary_message_is_one_container() {
    let (link, mut client) = raw_pair(WsOptions::default(), "/x?y=1").await;
    let (mut tx, mut rx) = link.split();
    for c in [
        vec![1, 0, 0xC4, 0],
        vec![2, 0, 0x00, 3, 0, 3, 7, 8, 9],
        [vec![3, 1, 0x40, 240], vec![5; 240]].concat(),
    ] {
        client.send(Message::binary(c.clone())).await.unwrap();
        assert_eq!(rx.recv().await.unwrap().unwrap(), &c[..]);
    }
    tx.queue(&[9, 0, 0xD4, 1, 2]).unwrap();
    tx.queue(&[9, 0, 0xC4, 0]).unwrap();
    tx.flush().await.unwrap();
    assert_eq!(
        client.next().await.unwrap().unwrap(),
        Message::Binary(Bytes::from_static(&[9, 0, 0xD4, 1, 2]))
    );
    assert_eq!(
        client.next().await.unwrap().unwrap(),
        Message::Binary(Bytes::from_static(&[9, 0, 0xC4, 0]))
    );
    // Over the link's largest container (16 KiB with long containers, the default).
    assert!(matches!(
        tx.queue(&[0; 16_385]),
        Err(LinkError::TooLarge { .. })
    ));
    assert!(matches!(
        tx.queue(&[1, 0, 0x40, 3]),
        Err(LinkError::Framing(_))
    ));
}

#[tokio::test]
async fn a_text_message_is_a_framing_error() {
    let (link, mut client) = raw_pair(WsOptions::default(), "/").await;
    let (_tx, mut rx) = link.split();
    client.send(Message::text("hello")).await.unwrap();
    let err = rx.recv().await.unwrap_err();
    assert!(matches!(err, LinkError::Framing(_)), "{err}");
    assert!(err.to_string().contains("text"), "{err}");
}

#[tokio::test]
async fn a_message_that_is_not_exactly_one_container_is_a_framing_error() {
    for bad in [
        vec![1, 0, 0x40, 5, 1],          // truncated
        vec![1, 0, 0x40, 0, 1, 0, 0xC4], // two containers, or trailing bytes
        vec![1, 0],                      // shorter than a header
    ] {
        let (link, mut client) = raw_pair(WsOptions::default(), "/").await;
        let (_tx, mut rx) = link.split();
        client.send(Message::binary(bad)).await.unwrap();
        assert!(matches!(rx.recv().await, Err(LinkError::Framing(_))));
    }
}

#[tokio::test]
async fn an_oversize_message_is_refused_before_it_is_buffered() {
    let (link, mut client) = raw_pair(WsOptions::default(), "/").await;
    let (_tx, mut rx) = link.split();
    // Far beyond one container (16 KiB with long containers): refused from the frame header.
    let _ = client.send(Message::binary(vec![0x40; 100_000])).await;
    let err = rx.recv().await.unwrap_err();
    assert!(matches!(err, LinkError::Framing(_)), "{err}");
    assert!(err.to_string().contains("too large"), "{err}");
}

#[tokio::test]
async fn pings_are_answered_while_nothing_is_sent() {
    let (link, mut client) = raw_pair(WsOptions::default(), "/").await;
    let (_tx, mut rx) = link.split();
    // The server side only waits in recv, as an idle connection does; its tx is never flushed.
    let reader = tokio::spawn(async move {
        let r = rx.recv().await.map(|p| p.map(<[u8]>::to_vec));
        (rx, r)
    });
    for i in 0..3u8 {
        client
            .send(Message::Ping(Bytes::from(vec![i; 3])))
            .await
            .unwrap();
        let pong = timeout(LIMIT, client.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(pong, Message::Pong(Bytes::from(vec![i; 3])));
    }
    // A close frame ends the link cleanly.
    client.close(None).await.unwrap();
    let (mut rx, r) = timeout(LIMIT, reader).await.unwrap().unwrap();
    assert_eq!(r.unwrap(), None);
    assert_eq!(rx.recv().await.unwrap(), None);
}

#[tokio::test]
async fn closing_our_side_sends_a_close_frame() {
    let (link, mut client) = raw_pair(WsOptions::default(), "/").await;
    let (mut tx, _rx) = link.split();
    tx.queue(&[1, 0, 0xC4, 0]).unwrap();
    tx.close().await.unwrap();
    assert!(matches!(
        client.next().await.unwrap().unwrap(),
        Message::Binary(_)
    ));
    assert!(matches!(
        client.next().await.unwrap().unwrap(),
        Message::Close(_)
    ));
    assert!(matches!(tx.queue(&[1, 0, 0xC4, 0]), Err(LinkError::Closed)));
}

#[tokio::test]
async fn a_required_path_refuses_others() {
    let options = WsOptions {
        path: Some("/blerpc".into()),
        ..Default::default()
    };
    let server = server(true);
    let config = client_config(&server);
    let (addr, stop, task) = serve(server, options).await;
    timeout(LIMIT, async {
        let err = ws::connect(&format!("ws://{addr}/other"), &WsOptions::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("404"), "{err}");
        let link = ws::connect(&format!("ws://{addr}/blerpc"), &WsOptions::default())
            .await
            .unwrap();
        let client = Client::connect(link, config).await.unwrap();
        assert_eq!(client.call("echo", vec![1]).await.unwrap(), vec![1]);
    })
    .await
    .unwrap();
    drop(stop);
    task.await.unwrap();
}

/// Pings every 200 ms, a peer gone after 300 ms without a frame.
fn pinging() -> WsOptions {
    WsOptions {
        ping_interval: Some(Duration::from_millis(200)),
        pong_timeout: Duration::from_millis(300),
        ..Default::default()
    }
}

/// Through a server's connection task, whose one timer serves the link's keepalive.
#[tokio::test]
async fn a_quiet_peer_is_pinged_and_one_that_never_answers_is_closed() {
    let (addr, _stop, _task) = serve(server(true), pinging()).await;
    // A client that completes the upgrade and then never sends: it cannot pong.
    let mut raw = raw_upgraded(addr).await;
    let started = std::time::Instant::now();
    let mut head = [0u8; 2];
    timeout(LIMIT, raw.read_exact(&mut head))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(head, [0x89, 0x00], "an empty ping frame");
    let pinged = started.elapsed();
    // Nothing came back: the server closes the connection a pong timeout later, long before
    // its setup deadline (10 s).
    let mut rest = Vec::new();
    let end = timeout(LIMIT, raw.read_to_end(&mut rest)).await.unwrap();
    let closed = started.elapsed();
    assert!(
        matches!(end, Ok(0)) || end.is_err(),
        "expected the end of the connection, got {end:?} and {rest:?}"
    );
    assert!(
        pinged >= Duration::from_millis(150) && pinged < Duration::from_secs(2),
        "pinged after {pinged:?} (one to two 200 ms intervals of silence)"
    );
    assert!(
        closed >= pinged + Duration::from_millis(250) && closed < Duration::from_secs(5),
        "closed after {closed:?}, pinged after {pinged:?} (deadline 300 ms after the ping)"
    );
}

#[tokio::test]
async fn a_peer_that_answers_pings_stays_connected_while_idle() {
    let server = server(true);
    let config = client_config(&server);
    let (addr, stop, task) = serve(server, pinging()).await;
    timeout(LIMIT, async {
        // Both ends ping and fail a peer silent for 300 ms after a ping.
        let link = ws::connect(&format!("ws://{addr}/"), &pinging())
            .await
            .unwrap();
        let client = Client::connect(link, config).await.unwrap();
        // Ten ping intervals without a call: the pongs keep both ends connected.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(client.call("echo", vec![1]).await.unwrap(), vec![1]);
    })
    .await
    .unwrap();
    drop(stop);
    task.await.unwrap();
}

/// Silent sockets opened together are dropped over the spread of the handshake deadline
/// (between half the timeout and all of it here), not in one instant.
#[tokio::test]
async fn silent_handshakes_opened_together_are_dropped_over_the_spread() {
    let options = WsOptions {
        tcp: TcpOptions {
            handshake_timeout: Duration::from_millis(1000),
            handshake_timeout_spread: 0.5,
            ..Default::default()
        },
        ..Default::default()
    };
    let (addr, stop, task) = serve(server(true), options).await;
    let started = std::time::Instant::now();
    let mut sockets = Vec::new();
    for _ in 0..20 {
        sockets.push(TcpStream::connect(addr).await.unwrap());
    }
    let closed = futures_util::future::join_all(sockets.into_iter().map(|mut s| async move {
        let mut byte = [0u8; 1];
        let read = timeout(LIMIT, s.read(&mut byte)).await.unwrap();
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        started.elapsed()
    }))
    .await;
    let (first, last) = (closed.iter().min().unwrap(), closed.iter().max().unwrap());
    assert!(
        *first >= Duration::from_millis(450),
        "one dropped after {first:?}"
    );
    assert!(
        *last < Duration::from_millis(1800),
        "one dropped after {last:?}"
    );
    // Twenty draws from half a second: all within 100 ms has a chance of about 1e-12.
    assert!(
        *last - *first >= Duration::from_millis(100),
        "all dropped between {first:?} and {last:?}"
    );
    drop(stop);
    task.await.unwrap();
}

async fn connect_from(src: &str, to: std::net::SocketAddr) -> TcpStream {
    let s = tokio::net::TcpSocket::new_v4().unwrap();
    s.bind(format!("{src}:0").parse().unwrap()).unwrap();
    s.connect(to).await.unwrap()
}

/// With every handshake slot taken, a newcomer drops the oldest handshake of the address that
/// holds the most, not a lone client's older one.
#[tokio::test]
async fn a_flood_from_one_address_does_not_push_out_a_lone_clients_handshake() {
    let options = WsOptions {
        tcp: TcpOptions {
            max_handshakes: 4,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut acceptor = WsAcceptor::bind("127.0.0.1:0", options).await.unwrap();
    let addr = acceptor.local_addr().unwrap();
    let (links_tx, mut links) = tokio::sync::mpsc::unbounded_channel();
    let accepting = tokio::spawn(async move {
        loop {
            let link = acceptor.accept().await.unwrap();
            if links_tx.send(link).is_err() {
                return;
            }
        }
    });
    let settle = || tokio::time::sleep(Duration::from_millis(100));
    // The lone client starts first, so its handshake is the oldest: half its request.
    let request = upgrade_request("/");
    let mut lone = connect_from("127.0.0.3", addr).await;
    lone.write_all(&request[..20]).await.unwrap();
    settle().await;
    // Three silent sockets from one address fill the other slots, then a fourth arrives.
    let mut flood = Vec::new();
    for _ in 0..3 {
        flood.push(connect_from("127.0.0.2", addr).await);
    }
    settle().await;
    flood.push(connect_from("127.0.0.2", addr).await);
    settle().await;
    // The flood's oldest went, not the lone client's handshake.
    let mut byte = [0u8; 1];
    let first = timeout(Duration::from_secs(2), flood[0].read(&mut byte)).await;
    assert!(
        matches!(first, Ok(Ok(0)) | Ok(Err(_))),
        "the flood's oldest socket is still held: {first:?}"
    );
    lone.write_all(&request[20..]).await.unwrap();
    let link = timeout(LIMIT, links.recv()).await.unwrap().unwrap();
    assert!(link.peer_id().contains("127.0.0.3"), "{}", link.peer_id());
    accepting.abort();
}

/// The HTTP upgrade request a raw client sends (fixed key from RFC 6455).
fn upgrade_request(path: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .into_bytes()
}

/// Connects a raw socket and completes the WebSocket upgrade by hand.
async fn raw_upgraded(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&upgrade_request("/")).await.unwrap();
    let mut response = Vec::new();
    while !response.ends_with(b"\r\n\r\n") {
        let mut b = [0];
        s.read_exact(&mut b).await.unwrap();
        response.push(b[0]);
    }
    assert!(response.starts_with(b"HTTP/1.1 101"));
    s
}

/// A masked (mask key 0) binary frame.
fn masked_binary(payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 126);
    [&[0x82, 0x80 | payload.len() as u8, 0, 0, 0, 0][..], payload].concat()
}

#[tokio::test]
async fn a_client_that_vanishes_mid_frame_does_not_disturb_the_server() {
    let server = server(true);
    let config = client_config(&server);
    let (addr, stop, task) = serve(server, WsOptions::default()).await;
    timeout(LIMIT, async {
        for cut in [1, 3, 8] {
            let mut raw = raw_upgraded(addr).await;
            let frame = masked_binary(&[1, 0, 0x00, 20, 0, 20, 1, 2, 3]);
            raw.write_all(&frame[..cut]).await.unwrap();
            drop(raw);
        }
        let link = ws::connect(&format!("ws://{addr}/"), &WsOptions::default())
            .await
            .unwrap();
        let client = Client::connect(link, config).await.unwrap();
        assert_eq!(client.call("echo", vec![3]).await.unwrap(), vec![3]);
    })
    .await
    .unwrap();
    drop(stop);
    task.await.unwrap();
}

#[tokio::test]
async fn a_vanished_peer_ends_the_link_without_an_error() {
    let mut acceptor = WsAcceptor::bind("127.0.0.1:0", WsOptions::default())
        .await
        .unwrap();
    let addr = acceptor.local_addr().unwrap();
    let (raw, link) = tokio::join!(raw_upgraded(addr), acceptor.accept());
    let (_tx, mut rx) = link.unwrap().split();
    let mut raw = raw;
    raw.write_all(&masked_binary(&[1, 0, 0xC4, 0])[..5])
        .await
        .unwrap();
    drop(raw);
    assert_eq!(timeout(LIMIT, rx.recv()).await.unwrap().unwrap(), None);
}

fn resident_bytes() -> i64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: i64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

const N: usize = 1000;

/// Heap and RSS per connection while `N` connections are held, from `open` (which opens them
/// and returns what keeps them alive).
async fn per_connection<T, F: std::future::Future<Output = T>>(open: F) -> (T, i64, i64) {
    let (heap0, rss0) = (LIVE.load(Relaxed) as i64, resident_bytes());
    let held = open.await;
    let (heap1, rss1) = (LIVE.load(Relaxed) as i64, resident_bytes());
    (held, (heap1 - heap0) / N as i64, (rss1 - rss0) / N as i64)
}

/// Opens `N` server-side WebSocket links from raw clients (upgrade by hand, one container
/// each), splits them as the server does, receives the container, and holds them.
async fn open_ws(
    read_buffer_size: usize,
) -> Vec<(TcpStream, blerpc::link::ws::WsTx, blerpc::link::ws::WsRx)> {
    let options = WsOptions {
        tcp: TcpOptions {
            read_buffer_size,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut acceptor = WsAcceptor::bind("127.0.0.1:0", options).await.unwrap();
    let addr = acceptor.local_addr().unwrap();
    let mut held = Vec::with_capacity(N);
    for _ in 0..N {
        let (raw, link) = tokio::join!(raw_upgraded(addr), acceptor.accept());
        let mut raw = raw;
        let (tx, mut rx) = link.unwrap().split();
        raw.write_all(&masked_binary(&[1, 0, 0xC4, 0]))
            .await
            .unwrap();
        assert_eq!(rx.recv().await.unwrap().unwrap(), &[1, 0, 0xC4, 0]);
        held.push((raw, tx, rx));
    }
    held
}

/// Memory per idle server-side connection (run with `--ignored --nocapture`, alone). Prints
/// heap (counting allocator) and RSS (`/proc/self/statm`) deltas per connection for: raw TCP
/// pairs (the baseline: both sockets), WebSocket links with this link's 4 KiB buffer, and with
/// tungstenite's default 128 KiB buffer.
#[test]
#[ignore = "measurement; run alone with --ignored --nocapture"]
fn idle_connection_memory() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // Warm up (runtime, listener, first allocations).
        drop(open_ws_few().await);
        let (held, heap, rss) = per_connection(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let mut held = Vec::with_capacity(N);
            for _ in 0..N {
                let (c, s) = tokio::join!(TcpStream::connect(addr), listener.accept());
                held.push((c.unwrap(), s.unwrap().0));
            }
            held
        })
        .await;
        println!("raw TCP pair (baseline)        heap {heap:>7} B/conn  RSS {rss:>7} B/conn");
        drop(held);
        for (label, size) in [("ws link, 4 KiB buffer", 4096), ("ws link, 128 KiB buffer", 128 * 1024)] {
            let (held, heap, rss) = per_connection(open_ws(size)).await;
            println!("{label:30} heap {heap:>7} B/conn  RSS {rss:>7} B/conn  (incl. one raw client socket)");
            if size == 4096 {
                assert!(heap < 16 * 1024, "{heap} B of heap per idle WebSocket connection");
            }
            drop(held);
        }
    });
}

async fn open_ws_few() -> Vec<(TcpStream, blerpc::link::ws::WsTx, blerpc::link::ws::WsRx)> {
    let mut acceptor = WsAcceptor::bind("127.0.0.1:0", WsOptions::default())
        .await
        .unwrap();
    let addr = acceptor.local_addr().unwrap();
    let mut held = Vec::new();
    for _ in 0..10 {
        let (raw, link) = tokio::join!(raw_upgraded(addr), acceptor.accept());
        let (tx, rx) = link.unwrap().split();
        held.push((raw, tx, rx));
    }
    held
}
