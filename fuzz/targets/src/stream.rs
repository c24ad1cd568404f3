//! The stream links' receive side (`blerpc::link::tcp::StreamRx`, under TCP and TLS):
//! containers back to back on a byte stream, read in pieces of any size.

use std::pin::Pin;
use std::task::{Context, Poll};

use blerpc::link::LinkRx as _;
use blerpc::link::tcp::{TcpOptions, halves};
use blerpc_proto::wire::container::{Container, MAX_LONG_CONTAINER_LEN};
use tokio::io::{AsyncRead, ReadBuf};

use crate::input::Cursor;

/// A byte stream that hands out at most `step` bytes per read (`step` cycles through the input
/// so reads split containers everywhere).
struct Pieces {
    data: Vec<u8>,
    pos: usize,
    steps: Vec<u8>,
    n: usize,
}

impl AsyncRead for Pieces {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let step = match self.steps.as_slice() {
            [] => usize::MAX,
            s => usize::from(s[self.n % s.len()]).max(1),
        };
        self.n += 1;
        let (pos, len) = (self.pos, self.data.len());
        let take = step.min(buf.remaining()).min(len - pos);
        buf.put_slice(&self.data[pos..pos + take]);
        self.pos += take;
        Poll::Ready(Ok(()))
    }
}

/// The input both stream targets start with: `[att_mtu byte][flags][max container byte][4 read
/// steps]`, then the bytes the peer sends.
struct Input<'a> {
    options: TcpOptions,
    flags: u8,
    /// The limit flags bit 1 lowers the receiver to.
    lowered: usize,
    /// The peer's bytes, handed out in the input's read steps.
    reader: Pieces,
    stream: &'a [u8],
}

fn input(data: &[u8]) -> Input<'_> {
    let mut cur = Cursor::new(data);
    let att_mtu = 23 + usize::from(cur.u8()) * 2;
    let flags = cur.u8();
    let lowered = 4 + usize::from(cur.u8()) * 4;
    let steps = cur.bytes(4);
    let stream = cur.rest();
    Input {
        options: TcpOptions {
            att_mtu,
            long_containers: flags & 1 != 0,
            read_buffer_size: 64,
            max_read_buffer_size: 4096,
            ..TcpOptions::default()
        },
        flags,
        lowered,
        reader: Pieces {
            data: stream.to_vec(),
            pos: 0,
            steps: steps.to_vec(),
            n: 0,
        },
        stream,
    }
}

/// A PDU the link returned is within `max` and is one whole container as the core reads it.
fn check_pdu(pdu: &[u8], max: usize) {
    assert!(pdu.len() <= max, "{} bytes over the {max} limit", pdu.len());
    assert!(pdu.len() <= MAX_LONG_CONTAINER_LEN);
    if let Ok(c) = Container::parse(pdu) {
        assert_eq!(
            c.header_len() + c.payload.len(),
            pdu.len(),
            "the link cut a container the core reads differently"
        );
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime")
}

/// Input: `[att_mtu byte][flags][max container byte][4 read steps]` then the stream. Flags bit
/// 0: long containers carried; bit 1: the receiver lowers its limit to `max container` (as a
/// server does for a stranger); bit 2: the receiver releases its memory after every container
/// (as an idle connection does: the buffer is dropped and allocated again by the next bytes).
///
/// Invariants: the containers returned, in order, are exactly a prefix of the stream (nothing
/// lost, duplicated or reordered); each is at most the limit in force and parses as one whole
/// container where the core's parser accepts it; a clean end (`Ok(None)`) means the whole
/// stream was returned.
pub fn stream_framing(data: &[u8]) {
    let Input {
        options,
        flags,
        lowered,
        reader,
        stream,
    } = input(data);
    let carried = options.max_container();
    let (_tx, mut rx) = halves(reader, tokio::io::sink(), &options);
    let max = if flags & 2 != 0 {
        rx.set_max_container(lowered);
        lowered.max(4).min(carried)
    } else {
        carried
    };
    runtime().block_on(async {
        let mut offset = 0;
        loop {
            match rx.recv().await {
                Ok(Some(pdu)) => {
                    check_pdu(pdu, max);
                    assert_eq!(
                        Some(pdu),
                        stream.get(offset..offset + pdu.len()),
                        "not the stream's next bytes"
                    );
                    offset += pdu.len();
                    if flags & 4 != 0 {
                        rx.release_memory();
                    }
                }
                Ok(None) => {
                    assert_eq!(offset, stream.len(), "a clean end left bytes unread");
                    break;
                }
                Err(_) => break,
            }
        }
    });
}

/// The same pieces as a stream the WebSocket link can own: reads as [`Pieces`], writes (the
/// pongs and close replies tungstenite sends) discarded.
struct Duplex(Pieces);

impl AsyncRead for Duplex {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Duplex {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The WebSocket link's receive half on the server side (`blerpc::link::ws::server_halves`,
/// what `blerpc serve --listen ws://` reads after the upgrade): frames from a client, read in
/// pieces of any size.
///
/// Input: `[att_mtu byte][flags][max container byte][4 read steps]` then the client's bytes.
/// Flags bit 0: long containers carried; bit 1: the receiver lowers its limit to `max
/// container`.
///
/// Invariants: every PDU returned is one whole container (its header's length is its length)
/// within the limit in force; the receive ends (a clean end or an error) when the bytes do, and
/// after an end it stays ended.
pub fn ws_receive(data: &[u8]) {
    use blerpc::link::ws::{WsOptions, server_halves};

    let Input {
        options: tcp,
        flags,
        lowered,
        reader,
        stream,
    } = input(data);
    let options = WsOptions {
        tcp,
        path: None,
        // No pings: the reads never wait, and the target is the receive path.
        ping_interval: None,
        ..WsOptions::default()
    };
    let carried = options.tcp.max_container();
    runtime().block_on(async {
        let (_tx, mut rx) = server_halves(Duplex(reader), &options).await;
        let max = if flags & 2 != 0 {
            rx.set_max_container(lowered);
            lowered.min(carried)
        } else {
            carried
        };
        // Each returned PDU took at least its own bytes of input plus a frame header.
        let mut budget = stream.len() + 2;
        while let Ok(Some(pdu)) = rx.recv().await {
            check_pdu(pdu, max);
            assert!(
                !pdu.is_empty() && pdu.len() < budget,
                "more PDU bytes than input"
            );
            budget -= pdu.len();
        }
        // Ended: it stays ended.
        assert!(!matches!(rx.recv().await, Ok(Some(_))));
    });
}
