//! Heap per server connection, by allocation size: an idle WebSocket one, and a silent TCP one
//! (accepted, never established: what a hostile socket costs until the setup deadline). A
//! measurement, run alone with
//! `cargo test -p blerpc --features ws --release --test server_memory -- --ignored --nocapture --test-threads 1`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::time::Duration;

use blerpc::link::tcp::{TcpAcceptor, TcpOptions};
use blerpc::link::ws::{WsAcceptor, WsOptions};

/// Live allocations by size (sizes above the table share its last slot).
struct BySize;

const SLOTS: usize = 70_000;
static LIVE: [AtomicIsize; SLOTS] = [const { AtomicIsize::new(0) }; SLOTS];

fn slot(size: usize) -> &'static AtomicIsize {
    &LIVE[size.min(SLOTS - 1)]
}

unsafe impl GlobalAlloc for BySize {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            slot(layout.size()).fetch_add(1, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        slot(layout.size()).fetch_sub(1, Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, layout, new_size) };
        if !q.is_null() {
            slot(layout.size()).fetch_sub(1, Relaxed);
            slot(new_size).fetch_add(1, Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOC: BySize = BySize;

fn snapshot() -> Vec<isize> {
    LIVE.iter().map(|a| a.load(Relaxed)).collect()
}

/// Connections measured (with the 20 warm-up ones, under the server's default 1,024 cap).
const N: usize = 1000;

/// Binds with `bind`, serves, opens 20 connections with `open` to warm up, then `N` more, and
/// prints the heap they added per connection, by allocation size, after `settle`.
fn measure<A, B, BFut, F, Fut>(what: &str, bind: B, open: F, settle: Duration)
where
    A: blerpc::link::Acceptor,
    B: FnOnce() -> BFut,
    BFut: std::future::Future<Output = (A, std::net::SocketAddr)>,
    F: Fn(std::net::SocketAddr) -> Fut,
    Fut: std::future::Future<Output = tokio::net::TcpStream>,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (acceptor, addr) = bind().await;
        let server = common::server_unlimited(true);
        let _server = common::serve_in_background(server, acceptor);
        let mut held = Vec::new();
        for _ in 0..20 {
            held.push(open(addr).await);
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let before = snapshot();
        for _ in 0..N {
            held.push(open(addr).await);
        }
        tokio::time::sleep(settle).await;
        let after = snapshot();
        let (total, rows) = common::heap_per_connection(&before, &after, N);
        println!("heap per {what}: {total:.0} B");
        for (size, per) in rows.iter().take(30) {
            println!("{size:>7} B × {per:.2}");
        }
        drop(held);
    });
}

#[test]
#[ignore = "measurement; run alone with --ignored --nocapture"]
fn heap_per_idle_server_connection_by_size() {
    let bind = || async {
        let a = WsAcceptor::bind("127.0.0.1:0", WsOptions::default())
            .await
            .unwrap();
        let addr = a.local_addr().unwrap();
        (a, addr)
    };
    measure(
        "idle server connection",
        bind,
        common::ws_upgraded,
        Duration::from_millis(2500),
    );
}

#[test]
#[ignore = "measurement; run alone with --ignored --nocapture"]
fn heap_per_silent_tcp_connection_by_size() {
    let bind = || async {
        let a = TcpAcceptor::bind("127.0.0.1:0", TcpOptions::default())
            .await
            .unwrap();
        let addr = a.local_addr().unwrap();
        (a, addr)
    };
    // Well within the 10 s setup deadline: every one is still held, unproven.
    measure(
        "silent TCP connection (accepted, not established)",
        bind,
        |a| async move { tokio::net::TcpStream::connect(a).await.unwrap() },
        Duration::from_millis(1500),
    );
}
