//! Heap per idle client connection over WebSocket, by allocation size, the server's share left
//! out: a measurement, run alone with
//! `cargo test -p blerpc --features ws --release --test client_memory -- --ignored --nocapture`;
//! and a bound on the same figure that fails on regressions.
//!
//! The clients connect the way `blerpc-bench scale` does: the upgrade done by hand on a raw TCP
//! stream, then `ws::client_from_upgraded` with a 1 KiB read buffer, encryption on. Client and
//! server run in separate runtimes; every allocation carries a tag naming the side whose thread
//! made it, so the server's connections (and whatever the test thread does) are not counted.
#![cfg(feature = "ws")]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::time::Duration;

use blerpc::Client;
use blerpc::link::ws::{self, WsAcceptor, WsOptions};

/// Live client-side allocations by size (sizes above the table share its last slot).
struct BySide;

const SLOTS: usize = 70_000;
static LIVE: [AtomicIsize; SLOTS] = [const { AtomicIsize::new(0) }; SLOTS];

const OTHER: u8 = 0;
const CLIENT: u8 = 1;

thread_local! {
    /// The side this thread allocates for.
    static SIDE: Cell<u8> = const { Cell::new(OTHER) };
}

/// Every allocation starts with a header holding its side, so a free on any thread undoes the
/// count of the side that allocated.
fn header(layout: Layout) -> (Layout, usize) {
    let pad = layout.align().max(16);
    let outer = Layout::from_size_align(layout.size() + pad, pad).unwrap();
    (outer, pad)
}

fn count(size: usize, delta: isize) {
    LIVE[size.min(SLOTS - 1)].fetch_add(delta, Relaxed);
}

unsafe impl GlobalAlloc for BySide {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (outer, pad) = header(layout);
        let p = unsafe { System.alloc(outer) };
        if p.is_null() {
            return p;
        }
        let side = SIDE.try_with(Cell::get).unwrap_or(OTHER);
        unsafe { p.write(side) };
        if side == CLIENT {
            count(layout.size(), 1);
        }
        unsafe { p.add(pad) }
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        let (outer, pad) = header(layout);
        let base = unsafe { p.sub(pad) };
        if unsafe { base.read() } == CLIENT {
            count(layout.size(), -1);
        }
        unsafe { System.dealloc(base, outer) };
    }
}

#[global_allocator]
static ALLOC: BySide = BySide;

fn snapshot() -> Vec<isize> {
    LIVE.iter().map(|a| a.load(Relaxed)).collect()
}

/// One measurement at a time: both tests count into the same table.
static SERIAL: Mutex<()> = Mutex::new(());

/// The bench's read buffer (`blerpc-bench scale`, `--read-buffer` default).
const READ_BUFFER: usize = 1024;

/// Client heap per idle connection: the total and the rows by allocation size (size, count per
/// connection), largest share first.
fn measure(n: usize) -> (f64, Vec<(usize, f64)>) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .on_thread_start(|| SIDE.set(CLIENT))
        .on_thread_stop(|| SIDE.set(OTHER))
        .enable_all()
        .build()
        .unwrap();
    let server = common::server(true);
    let config = common::client_config(&server);
    // The server lives until `_stop` is dropped at the end of the test.
    let (addr, _stop) = server_rt.block_on(async {
        let acceptor = WsAcceptor::bind("127.0.0.1:0", WsOptions::default())
            .await
            .unwrap();
        let addr = acceptor.local_addr().unwrap();
        (addr, common::serve_in_background(server, acceptor))
    });
    let open = move |count: usize| {
        let config = config.clone();
        async move {
            let mut held = Vec::with_capacity(count);
            for _ in 0..count {
                let stream = common::ws_upgraded(addr).await;
                let mut options = WsOptions::default();
                options.tcp.read_buffer_size = READ_BUFFER;
                let link =
                    ws::client_from_upgraded(stream, format!("ws://{addr}/"), &options).await;
                held.push(Client::connect(link, config.clone()).await.unwrap());
            }
            held
        }
    };
    // Warm up (runtime, timer wheel, first allocations), then settle.
    let mut held = client_rt.block_on(client_rt.spawn(open(20))).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    held.reserve(n);
    let before = snapshot();
    held.extend(client_rt.block_on(client_rt.spawn(open(n))).unwrap());
    // Past the client's (and the server's) idle_release of 1 s.
    std::thread::sleep(Duration::from_millis(2500));
    let after = snapshot();
    let (total, rows) = common::heap_per_connection(&before, &after, n);
    client_rt.block_on(async move {
        for c in &held {
            c.close().await;
        }
    });
    client_rt.shutdown_timeout(Duration::from_secs(1));
    server_rt.shutdown_timeout(Duration::from_secs(1));
    (total, rows)
}

#[test]
#[ignore = "measurement; run alone with --ignored --nocapture"]
fn heap_per_idle_client_connection_by_size() {
    let (total, rows) = measure(200);
    println!("heap per idle client connection (ws, {READ_BUFFER} B read buffer): {total:.0} B");
    for (size, per) in rows.iter().take(30) {
        println!("{size:>7} B × {per:.2}");
    }
}

/// A bound with room to spare: about 8.1 KB measured (release and debug alike), 15.1 KB before
/// the task future held its state once and the command channel's slots shrank.
#[test]
fn idle_client_heap_is_bounded() {
    let (total, rows) = measure(50);
    assert!(
        total < 10_240.0,
        "{total:.0} B of heap per idle client connection: {rows:?}"
    );
}
