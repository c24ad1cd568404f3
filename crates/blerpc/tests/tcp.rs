//! The TCP link: every call shape through Client/Server, framing edge cases against a raw
//! socket peer (containers split byte by byte, many in one read, oversize, truncated),
//! cancel-safety of `recv` and `flush`, many clients at once.
#![cfg(feature = "tcp")]
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::time::Duration;

use blerpc::link::Acceptor;
use blerpc::link::tcp::{self, TcpAcceptor, TcpOptions};
use blerpc::link::{Link, LinkError, LinkRx, LinkTx};
use blerpc::{Client, Server};
use blerpc_proto::wire::error_code::ErrorCode;
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(20);

/// Serves `server` on 127.0.0.1 (OS-assigned port); dropping the returned sender stops it.
async fn serve(
    server: Server,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let acceptor = TcpAcceptor::bind("127.0.0.1:0", TcpOptions::default())
        .await
        .unwrap();
    let addr = acceptor.local_addr().unwrap();
    let (stop_tx, task) = common::serve_in_background(server, acceptor);
    (addr, stop_tx, task)
}

#[tokio::test]
async fn ipv6_loopback_works_when_available() {
    let Ok(acceptor) = TcpAcceptor::bind("[::1]:0", TcpOptions::default()).await else {
        return; // no IPv6 on this machine
    };
    let addr = acceptor.local_addr().unwrap();
    let server = server(true);
    let config = client_config(&server);
    let (stop_tx, task) = common::serve_in_background(server, acceptor);
    let link = tcp::connect(addr, &TcpOptions::default()).await.unwrap();
    assert!(
        link.peer_id().starts_with("tcp://[::1]:"),
        "{}",
        link.peer_id()
    );
    let client = Client::connect(link, config).await.unwrap();
    assert_eq!(client.call("echo", vec![1]).await.unwrap(), vec![1]);
    drop(stop_tx);
    task.await.unwrap();
}

/// A link-level pair: an accepted server link and a raw client socket.
async fn raw_pair(options: TcpOptions) -> (tcp::TcpLink, TcpStream) {
    let mut acceptor = TcpAcceptor::bind("127.0.0.1:0", options).await.unwrap();
    let raw = TcpStream::connect(acceptor.local_addr().unwrap())
        .await
        .unwrap();
    raw.set_nodelay(true).unwrap();
    let link = acceptor.accept().await.unwrap();
    assert_eq!(
        link.peer_id(),
        format!("tcp://{}", raw.local_addr().unwrap())
    );
    (link, raw)
}

/// Containers of every type and length 4..=244 bytes.
fn sample_containers() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (i, len) in [0usize, 1, 2, 17, 100, 238].into_iter().enumerate() {
        let mut c = vec![i as u8, 0, 0x00, len as u8, 0, len as u8];
        c.extend((0..len).map(|b| b as u8));
        out.push(c);
    }
    for (i, flags) in [0x40u8, 0xC4, 0xD8, 0x80, 0x41, 0xC6]
        .into_iter()
        .enumerate()
    {
        for len in [0usize, 1, 129, 240] {
            let mut c = vec![i as u8, 1, flags, len as u8];
            c.extend((0..len).map(|b| (b * 7) as u8));
            out.push(c);
        }
    }
    // LONG containers (long-container extension): FIRST, LARGE FIRST, SUBSEQUENT.
    for (i, len) in [256usize, 1000, 16_377].into_iter().enumerate() {
        let [l0, l1] = (len as u16).to_le_bytes();
        let mut c = vec![i as u8, 0, 0x02, l0, l1, l0, l1];
        c.extend((0..len).map(|b| (b * 3) as u8));
        out.push(c);
    }
    let mut c = vec![9u8, 0, 0x03, 0, 0, 2, 0, 0x2c, 0x01];
    c.extend((0..300).map(|b| b as u8));
    out.push(c);
    let mut c = vec![9u8, 1, 0x42, 0xfb, 0x3f];
    c.extend((0..16_379).map(|b| (b * 5) as u8));
    out.push(c);
    out
}

#[tokio::test]
async fn containers_split_byte_by_byte_are_reassembled() {
    let (link, mut raw) = raw_pair(TcpOptions::default()).await;
    let (_tx, mut rx) = link.split();
    let containers = sample_containers();
    let bytes: Vec<u8> = containers.concat();
    let writer = tokio::spawn(async move {
        for b in bytes {
            raw.write_all(&[b]).await.unwrap();
            raw.flush().await.unwrap();
            // Let most bytes arrive in their own segment and read.
            tokio::task::yield_now().await;
        }
        raw
    });
    for c in &containers {
        let got = timeout(LIMIT, rx.recv()).await.unwrap().unwrap().unwrap();
        assert_eq!(got, &c[..]);
    }
    drop(writer.await.unwrap());
    assert_eq!(rx.recv().await.unwrap(), None);
}

#[tokio::test]
async fn many_containers_in_one_read_come_out_one_at_a_time() {
    let (link, mut raw) = raw_pair(TcpOptions::default()).await;
    let (_tx, mut rx) = link.split();
    let containers: Vec<Vec<u8>> = (0..20).flat_map(|_| sample_containers()).collect();
    raw.write_all(&containers.concat()).await.unwrap();
    raw.shutdown().await.unwrap();
    for c in &containers {
        let got = timeout(LIMIT, rx.recv()).await.unwrap().unwrap().unwrap();
        assert_eq!(got, &c[..]);
    }
    assert_eq!(rx.recv().await.unwrap(), None);
    // Closed stays closed.
    assert_eq!(rx.recv().await.unwrap(), None);
}

#[tokio::test]
async fn the_read_buffer_grows_under_bulk_and_shrinks_when_released() {
    let options = TcpOptions {
        read_buffer_size: 4096,
        max_read_buffer_size: 32 * 1024,
        ..TcpOptions::default()
    };
    let (link, mut raw) = raw_pair(options).await;
    let (_tx, mut rx) = link.split();
    assert_eq!(rx.buffer_size(), 0, "no buffer before the first bytes");
    let containers: Vec<Vec<u8>> = (0..40).flat_map(|_| sample_containers()).collect();
    let writer = {
        let bytes = containers.concat();
        tokio::spawn(async move {
            raw.write_all(&bytes).await.unwrap();
            raw
        })
    };
    let (first, rest) = containers.split_at(containers.len() / 2);
    for c in first {
        let got = timeout(LIMIT, rx.recv()).await.unwrap().unwrap().unwrap();
        assert_eq!(got, &c[..]);
    }
    assert!(rx.buffer_size() > 4096, "still {} bytes", rx.buffer_size());
    assert!(rx.buffer_size() <= 32 * 1024);
    // Releasing with bytes still buffered loses none of them.
    rx.release_memory();
    for c in rest {
        let got = timeout(LIMIT, rx.recv()).await.unwrap().unwrap().unwrap();
        assert_eq!(got, &c[..]);
    }
    rx.release_memory();
    assert_eq!(rx.buffer_size(), 0, "idle with nothing buffered: no buffer");
    let mut raw = writer.await.unwrap();
    // The small buffer still carries whole containers.
    let c = sample_containers();
    raw.write_all(&c.concat()).await.unwrap();
    raw.shutdown().await.unwrap();
    for c in &c {
        let got = timeout(LIMIT, rx.recv()).await.unwrap().unwrap().unwrap();
        assert_eq!(got, &c[..]);
    }
    assert_eq!(rx.recv().await.unwrap(), None);
}

#[tokio::test]
async fn random_chunks_with_growth_and_releases_lose_no_container() {
    // A fixed xorshift sequence: reproducible, no RNG dependency.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let options = TcpOptions {
        read_buffer_size: 4096,
        max_read_buffer_size: 64 * 1024,
        ..TcpOptions::default()
    };
    let (link, mut raw) = raw_pair(options).await;
    let (_tx, mut rx) = link.split();
    let containers: Vec<Vec<u8>> = (0..60).flat_map(|_| sample_containers()).collect();
    let bytes = containers.concat();
    let chunks: Vec<usize> = (0..bytes.len()).map(|_| 1 + next(20_000)).collect();
    let writer = tokio::spawn(async move {
        let mut rest = &bytes[..];
        for len in chunks {
            if rest.is_empty() {
                break;
            }
            let (chunk, tail) = rest.split_at(len.min(rest.len()));
            raw.write_all(chunk).await.unwrap();
            rest = tail;
            tokio::task::yield_now().await;
        }
        raw.shutdown().await.unwrap();
    });
    let mut max_seen = 0;
    for (i, c) in containers.iter().enumerate() {
        let got = timeout(LIMIT, rx.recv()).await.unwrap().unwrap().unwrap();
        assert_eq!(got, &c[..], "container {i}");
        max_seen = max_seen.max(rx.buffer_size());
        assert!((4096..=64 * 1024).contains(&rx.buffer_size()));
        if next(7) == 0 {
            rx.release_memory();
        }
    }
    assert_eq!(rx.recv().await.unwrap(), None);
    writer.await.unwrap();
    assert!(max_seen > 4096, "the buffer never grew");
}

#[tokio::test]
async fn recv_is_cancel_safe() {
    let (link, mut raw) = raw_pair(TcpOptions::default()).await;
    let (_tx, mut rx) = link.split();
    let containers: Vec<Vec<u8>> = (0..3).flat_map(|_| sample_containers()).collect();
    let bytes = containers.concat();
    let writer = tokio::spawn(async move {
        for chunk in bytes.chunks(37) {
            raw.write_all(chunk).await.unwrap();
            tokio::time::sleep(Duration::from_micros(300)).await;
        }
        raw
    });
    let mut got = Vec::new();
    let mut cancelled = 0;
    while got.len() < containers.len() {
        // Most of these time out mid-container and drop the future.
        match timeout(Duration::from_micros(200), rx.recv()).await {
            Ok(r) => got.push(r.unwrap().unwrap().to_vec()),
            Err(_) => cancelled += 1,
        }
    }
    assert_eq!(got, containers);
    assert!(cancelled > 0);
    drop(writer.await.unwrap());
}

#[tokio::test]
async fn an_oversize_container_is_a_framing_error() {
    // Without long containers, at MTU 247 a container is at most 244 bytes; this FIRST
    // declares 6 + 250.
    let classic = TcpOptions {
        long_containers: false,
        ..TcpOptions::default()
    };
    let (link, mut raw) = raw_pair(classic.clone()).await;
    let (_tx, mut rx) = link.split();
    raw.write_all(&[1, 0, 0x00, 250, 0, 250]).await.unwrap();
    let err = timeout(LIMIT, rx.recv()).await.unwrap().unwrap_err();
    assert!(matches!(err, LinkError::Framing(_)), "{err}");
    assert!(err.to_string().contains("at most 244"), "{err}");

    // With them (the default), 16 KiB: a LONG SUBSEQUENT declaring 5 + 16,380 is refused at its
    // header.
    let (link, mut raw) = raw_pair(TcpOptions::default()).await;
    let (_tx, mut rx) = link.split();
    raw.write_all(&[1, 0, 0x42, 0xfc, 0x3f]).await.unwrap();
    let err = timeout(LIMIT, rx.recv()).await.unwrap().unwrap_err();
    assert!(err.to_string().contains("at most 16384"), "{err}");

    // A smaller configured MTU lowers the classic limit: 23 → 20 bytes.
    let options = TcpOptions {
        att_mtu: 23,
        ..classic
    };
    let (link, mut raw) = raw_pair(options).await;
    let (_tx, mut rx) = link.split();
    raw.write_all(&[1, 0, 0x40, 16]).await.unwrap();
    raw.write_all(&[0; 16]).await.unwrap();
    raw.write_all(&[2, 0, 0x40, 17]).await.unwrap();
    assert_eq!(rx.recv().await.unwrap().unwrap().len(), 20);
    assert!(matches!(rx.recv().await, Err(LinkError::Framing(_))));
}

#[tokio::test]
async fn a_peer_that_disconnects_mid_container_is_a_framing_error() {
    let (link, mut raw) = raw_pair(TcpOptions::default()).await;
    let (_tx, mut rx) = link.split();
    raw.write_all(&[1, 0, 0xC4, 0, 2, 0, 0x40, 100, 1, 2, 3])
        .await
        .unwrap();
    drop(raw);
    assert_eq!(rx.recv().await.unwrap().unwrap(), &[1, 0, 0xC4, 0]);
    let err = rx.recv().await.unwrap_err();
    assert!(err.to_string().contains("inside a container"), "{err}");
}

#[tokio::test]
async fn queue_refuses_what_is_not_one_container() {
    let classic = TcpOptions {
        long_containers: false,
        ..TcpOptions::default()
    };
    let (link, _raw) = raw_pair(classic).await;
    let (mut tx, _rx) = link.split();
    assert!(matches!(
        tx.queue(&[0; 245]),
        Err(LinkError::TooLarge { len: 245, max: 244 })
    ));
    assert!(matches!(
        tx.queue(&[1, 0, 0x40]),
        Err(LinkError::Framing(_))
    ));
    assert!(matches!(
        tx.queue(&[1, 0, 0x40, 1, 9, 9]),
        Err(LinkError::Framing(_))
    ));
    assert!(!tx.has_pending());
    tx.queue(&[1, 0, 0x40, 1, 9]).unwrap();
    assert!(tx.has_pending());
}

#[tokio::test]
async fn a_stalled_peer_fills_the_queue_and_flush_is_cancel_safe() {
    let options = TcpOptions {
        send_queue_limit: 1000,
        ..Default::default()
    };
    let (link, mut raw) = raw_pair(options).await;
    let (mut tx, _rx) = link.split();
    let c = |i: u32| {
        let mut c = vec![i as u8, (i >> 8) as u8, 0x40, 240];
        c.extend(std::iter::repeat_n((i >> 16) as u8, 240));
        c
    };
    let mut expected = Vec::new();
    let mut queued = 0u32;
    // Far more than the socket buffers hold: the peer reads nothing yet, so flushes stall and are
    // cancelled over and over.
    let mut stalls = 0;
    while queued < 40_000 {
        while !tx.is_full() {
            tx.queue(&c(queued)).unwrap();
            expected.extend(c(queued));
            queued += 1;
        }
        if timeout(Duration::from_millis(2), tx.flush()).await.is_err() {
            stalls += 1;
            if stalls > 3 {
                break;
            }
        }
    }
    assert!(stalls > 0, "the peer never pushed back");
    assert!(tx.is_full() || tx.has_pending());
    let reader = tokio::spawn(async move {
        let mut got = vec![0; expected.len()];
        raw.read_exact(&mut got).await.unwrap();
        assert!(
            got == expected,
            "bytes lost or reordered across cancelled flushes"
        );
    });
    timeout(LIMIT, tx.flush()).await.unwrap().unwrap();
    assert!(!tx.has_pending() && !tx.is_full());
    reader.await.unwrap();
}

#[tokio::test]
async fn close_is_seen_by_the_peer_and_queue_after_close_fails() {
    let (link, mut raw) = raw_pair(TcpOptions::default()).await;
    let (mut tx, _rx) = link.split();
    tx.queue(&[5, 0, 0xC4, 0]).unwrap();
    tx.close().await.unwrap();
    let mut got = Vec::new();
    raw.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, vec![5, 0, 0xC4, 0]);
    assert!(matches!(tx.queue(&[5, 0, 0xC4, 0]), Err(LinkError::Closed)));
}

#[tokio::test]
async fn the_server_answers_a_raw_peer_writing_byte_by_byte_and_in_bulk() {
    let (addr, stop, task) = serve(server(true)).await;
    // A plaintext REQUEST "echo" to an encryption-requiring server gets an ERROR reply naming the
    // tid (wire.md 6.2): a deterministic exchange through the whole server.
    let request = |tid: u8| {
        vec![
            tid, 0, 0, 15, 0, 15, 0, 4, b'e', b'c', b'h', b'o', 7, 0, 0x0a, 5, b'h', b'e', b'l',
            b'l', b'o',
        ]
    };
    let reply = |tid: u8| vec![tid, 0, 0xd4, 1, ErrorCode::EncryptionRequired.to_byte()];
    timeout(LIMIT, async {
        let mut raw = TcpStream::connect(addr).await.unwrap();
        raw.set_nodelay(true).unwrap();
        for b in request(9) {
            raw.write_all(&[b]).await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let mut got = [0; 5];
        raw.read_exact(&mut got).await.unwrap();
        assert_eq!(got.to_vec(), reply(9));
        let bulk: Vec<u8> = (1..=3).flat_map(request).collect();
        raw.write_all(&bulk).await.unwrap();
        let mut got = [0; 15];
        raw.read_exact(&mut got).await.unwrap();
        assert_eq!(got.to_vec(), [reply(1), reply(2), reply(3)].concat());
    })
    .await
    .unwrap();
    drop(stop);
    task.await.unwrap();
}

#[tokio::test]
async fn a_client_that_disconnects_mid_message_does_not_disturb_the_server() {
    let server = server(true);
    let config = client_config(&server);
    let (addr, stop, task) = serve(server).await;
    timeout(LIMIT, async {
        for cut in [1, 5, 30] {
            let mut raw = TcpStream::connect(addr).await.unwrap();
            // The first container of a multi-container message, cut short.
            let mut first = vec![1, 0, 0x00, 0x00, 0x02, 238];
            first.extend([0xAA; 238]);
            raw.write_all(&first[..cut]).await.unwrap();
            drop(raw);
        }
        let client = Client::connect(
            tcp::connect(addr, &TcpOptions::default()).await.unwrap(),
            config,
        )
        .await
        .unwrap();
        assert_eq!(client.call("echo", vec![3]).await.unwrap(), vec![3]);
    })
    .await
    .unwrap();
    drop(stop);
    task.await.unwrap();
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn reuse_port_lets_two_acceptors_share_a_port() {
    let options = TcpOptions {
        reuse_port: true,
        ..Default::default()
    };
    let a = TcpAcceptor::bind("127.0.0.1:0", options.clone())
        .await
        .unwrap();
    let addr = a.local_addr().unwrap();
    let b = TcpAcceptor::bind(addr, options).await.unwrap();
    assert_eq!(b.local_addr().unwrap(), addr);
    // Without the option the port is taken.
    assert!(
        TcpAcceptor::bind(addr, TcpOptions::default())
            .await
            .is_err()
    );
}

/// Measures unary echo latency and 8 KB flash_read time with TCP_NODELAY on and off (run with
/// `--ignored --nocapture`).
#[tokio::test]
#[ignore = "measurement; prints a table"]
async fn measure_nodelay() {
    for nodelay in [true, false] {
        let options = TcpOptions {
            nodelay,
            ..Default::default()
        };
        let server = server(true);
        let config = client_config(&server);
        let acceptor = TcpAcceptor::bind("127.0.0.1:0", options.clone())
            .await
            .unwrap();
        let addr = acceptor.local_addr().unwrap();
        let (stop_tx, task) = common::serve_in_background(server, acceptor);
        let client = Client::connect(tcp::connect(addr, &options).await.unwrap(), config)
            .await
            .unwrap();
        let read = flash_read_req(0, 8192);
        for (name, req, n) in [
            ("echo 5 B", echo_req("hello"), 200),
            ("flash_read 8 KB", read, 50),
        ] {
            let mut times = Vec::new();
            for _ in 0..n {
                let t = std::time::Instant::now();
                client
                    .call(name.split(' ').next().unwrap(), req.clone())
                    .await
                    .unwrap();
                times.push(t.elapsed());
            }
            times.sort();
            println!(
                "nodelay={nodelay:5} {name:16} median {:>9.1?} p90 {:>9.1?}",
                times[n / 2],
                times[n * 9 / 10]
            );
        }
        let mut times = Vec::new();
        for _ in 0..20 {
            let t = std::time::Instant::now();
            let mut up = client.client_stream("counter_upload").await.unwrap();
            for i in 0..20u32 {
                up.send(counter_item(i, 0)).await.unwrap();
            }
            up.finish().await.unwrap();
            times.push(t.elapsed());
        }
        times.sort();
        println!(
            "nodelay={nodelay:5} {:16} median {:>9.1?} p90 {:>9.1?}",
            "upload 20 items", times[10], times[18]
        );
        drop(client);
        drop(stop_tx);
        task.await.unwrap();
    }
}
