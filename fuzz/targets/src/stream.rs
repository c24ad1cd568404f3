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

/// Input: `[att_mtu byte][flags][max container byte][4 read steps]` then the stream. Flags bit
/// 0: long containers carried; bit 1: the receiver lowers its limit to `max container` (as a
/// server does for a stranger).
///
/// Invariants: the containers returned, in order, are exactly a prefix of the stream (nothing
/// lost, duplicated or reordered); each is at most the limit in force and parses as one whole
/// container where the core's parser accepts it; a clean end (`Ok(None)`) means the whole
/// stream was returned.
pub fn stream_framing(data: &[u8]) {
    let mut cur = Cursor::new(data);
    let att_mtu = 23 + usize::from(cur.u8()) * 2;
    let flags = cur.u8();
    let lowered = 4 + usize::from(cur.u8()) * 4;
    let steps = cur.bytes(4);
    let stream = cur.rest();
    let options = TcpOptions {
        att_mtu,
        long_containers: flags & 1 != 0,
        read_buffer_size: 64,
        max_read_buffer_size: 4096,
        ..TcpOptions::default()
    };
    let carried = options.max_container();
    let reader = Pieces {
        data: stream.to_vec(),
        pos: 0,
        steps: steps.to_vec(),
        n: 0,
    };
    let (_tx, mut rx) = halves(reader, tokio::io::sink(), &options);
    let max = if flags & 2 != 0 {
        rx.set_max_container(lowered);
        lowered.max(4).min(carried)
    } else {
        carried
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(async {
        let mut offset = 0;
        loop {
            match rx.recv().await {
                Ok(Some(pdu)) => {
                    assert!(pdu.len() <= max, "{} bytes over the {max} limit", pdu.len());
                    assert!(pdu.len() <= MAX_LONG_CONTAINER_LEN);
                    assert_eq!(
                        Some(pdu),
                        stream.get(offset..offset + pdu.len()),
                        "not the stream's next bytes"
                    );
                    if let Ok(c) = Container::parse(pdu) {
                        assert_eq!(
                            c.header_len() + c.payload.len(),
                            pdu.len(),
                            "the link cut a container the core reads differently"
                        );
                    }
                    offset += pdu.len();
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
