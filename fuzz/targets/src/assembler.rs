//! Target 6: the assembler against a reference model of its rules, and split → assemble.

use std::collections::BTreeMap;

use blerpc_proto::assemble::{AssembleError, Assembler, AssemblerConfig, Completed};
use blerpc_proto::wire::container::{
    Container, ContainerKind, LONG_FLAG, MAX_CHUNK_LEN, MAX_LONG_CONTAINER_LEN,
};

use crate::input::Cursor;

#[derive(Clone, Debug)]
struct ModelTx {
    /// Containers taken (the next seq is this mod 256).
    received: u32,
    large: bool,
    total: usize,
    buf: Vec<u8>,
}

/// Feeds length-prefixed containers to an `Assembler<Vec<u8>, 4>` with small limits and checks
/// every outcome against a reference model of the documented rules; then splits a message at a
/// fuzz-chosen MTU and reassembles it.
pub fn assembler(data: &[u8]) {
    const SLOTS: usize = 4;
    let mut cur = Cursor::new(data);
    let max_message_len = usize::from(cur.u16() % 1024);
    let in_flight_byte = cur.u8();
    // Bit 7: the large-message extension is in force (LARGE FIRST accepted, seq wraps).
    let large = in_flight_byte & 0x80 != 0;
    // Bit 6: the long-container extension is in force (LONG containers up to 16 KiB).
    let long = in_flight_byte & 0x40 != 0;
    let max_in_flight = usize::from((in_flight_byte & 0x3F) % 5);
    let mtu = 10 + usize::from(cur.u8());
    let split_part = cur.chunk();
    let config = AssemblerConfig {
        max_message_len,
        max_in_flight,
        large_messages: large,
        long_containers: long,
    };
    let mut asm: Assembler<Vec<u8>, SLOTS> = Assembler::new(config);
    let max_in_flight = max_in_flight.min(SLOTS);
    assert_eq!(asm.config().max_in_flight, max_in_flight);

    // The model: transactions in progress, and completed messages not yet released.
    let mut receiving: BTreeMap<u8, ModelTx> = BTreeMap::new();
    let mut held: Vec<(Completed, Vec<u8>)> = Vec::new();

    while !cur.is_empty() {
        let release_bits = cur.u8();
        let pdu = cur.chunk();
        // Release some held messages first, as a connection would after handing them out.
        if release_bits & 0x80 != 0 && !held.is_empty() {
            let (done, bytes) = held.remove(usize::from(release_bits) % held.len());
            assert_eq!(asm.message(done), bytes.as_slice());
            asm.release(done);
            assert!(
                asm.message(done).is_empty(),
                "released message still readable"
            );
            asm.release(done); // idempotent
        }
        let Ok(c) = Container::parse(pdu) else {
            continue;
        };
        let result = asm.feed(&c);
        let in_flight = receiving.len() + held.len();
        let long_max = if long {
            MAX_LONG_CONTAINER_LEN - c.header_len()
        } else {
            MAX_CHUNK_LEN
        };
        let expected: Result<Option<Vec<u8>>, AssembleError> = match c.kind {
            _ if c.is_long() && c.payload.len() > long_max => {
                receiving.remove(&c.tid);
                Err(AssembleError::ContainerTooLong {
                    tid: c.tid,
                    payload_len: c.payload.len(),
                    max: long_max,
                })
            }
            ContainerKind::Control(_) | ContainerKind::Unknown => Ok(None),
            ContainerKind::LargeFirst { total_length } if !large => {
                receiving.remove(&c.tid);
                Err(AssembleError::LargeNotNegotiated {
                    tid: c.tid,
                    total_length: total_length as usize,
                })
            }
            ContainerKind::First { .. } | ContainerKind::LargeFirst { .. } => {
                let (total, is_large) = match c.kind {
                    ContainerKind::LargeFirst { total_length } => (total_length as usize, true),
                    ContainerKind::First { total_length } => (usize::from(total_length), false),
                    _ => unreachable!(),
                };
                receiving.remove(&c.tid);
                let in_flight = receiving.len() + held.len();
                if in_flight >= SLOTS || in_flight >= max_in_flight {
                    Err(AssembleError::NoFreeSlot { tid: c.tid })
                } else if total > max_message_len {
                    Err(AssembleError::TooLarge {
                        tid: c.tid,
                        total_length: total,
                        limit: max_message_len,
                    })
                } else {
                    let take = c.payload.len().min(total);
                    let buf = c.payload[..take].to_vec();
                    if buf.len() >= total {
                        Ok(Some(buf))
                    } else {
                        receiving.insert(
                            c.tid,
                            ModelTx {
                                received: 1,
                                large: is_large,
                                total,
                                buf,
                            },
                        );
                        Ok(None)
                    }
                }
            }
            ContainerKind::Subsequent => match receiving.get_mut(&c.tid) {
                None => Err(AssembleError::UnknownTransaction {
                    tid: c.tid,
                    seq: c.seq,
                }),
                Some(tx)
                    if c.seq != (tx.received % 256) as u8 || (!tx.large && tx.received >= 256) =>
                {
                    let expected = (tx.received % 256) as u8;
                    receiving.remove(&c.tid);
                    Err(AssembleError::SequenceGap {
                        tid: c.tid,
                        expected,
                        got: c.seq,
                    })
                }
                Some(tx) => {
                    tx.received += 1;
                    let need = tx.total - tx.buf.len();
                    tx.buf
                        .extend_from_slice(&c.payload[..c.payload.len().min(need)]);
                    if tx.buf.len() >= tx.total {
                        let tx = receiving.remove(&c.tid).expect("present");
                        Ok(Some(tx.buf))
                    } else {
                        Ok(None)
                    }
                }
            },
        };
        match (result, expected) {
            (Ok(None), Ok(None)) => {}
            (Ok(Some(done)), Ok(Some(bytes))) => {
                assert_eq!(done.tid, c.tid);
                assert_eq!(
                    asm.message(done),
                    bytes.as_slice(),
                    "completed message differs"
                );
                assert!(asm.message(done).len() <= max_message_len);
                held.push((done, bytes));
            }
            (Err(got), Err(want)) => assert_eq!(got, want),
            (got, want) => {
                panic!("feed({c:?}) = {got:?}, model expects {want:?} (in flight {in_flight})")
            }
        }
        assert_eq!(asm.in_flight(), receiving.len() + held.len());
        assert!(asm.in_flight() <= max_in_flight.max(held.len()));
        for tid in receiving.keys() {
            assert!(asm.is_receiving(*tid));
        }
        // Handles stay valid until released.
        for (done, bytes) in &held {
            assert_eq!(asm.message(*done), bytes.as_slice());
        }
        // Occasionally drop everything.
        if release_bits == 0x7F {
            asm.reset();
            receiving.clear();
            held.clear();
            assert_eq!(asm.in_flight(), 0);
        }
    }

    split_roundtrip(split_part, mtu, release_tid(data));
    split_roundtrip_large(split_part, mtu, release_tid(data));
    split_roundtrip_long(split_part, release_tid(data), large);
}

fn release_tid(data: &[u8]) -> u8 {
    data.iter().fold(0u8, |a, b| a.wrapping_add(*b))
}

/// Split `message` at `mtu`, check every container, reassemble it and compare.
fn split_roundtrip(message: &[u8], mtu: usize, tid: u8) {
    use blerpc_proto::split::{Splitter, container_count, max_message_len, split_to_vec};
    // Stretch short inputs so that multi-container splits are common.
    let message: Vec<u8> = match message.split_first() {
        Some((&rep, rest)) if rep > 0xF0 => rest
            .iter()
            .cycle()
            .take(usize::from(rep) * 40)
            .copied()
            .collect(),
        _ => message.to_vec(),
    };
    let containers = match split_to_vec(tid, &message, mtu) {
        Ok(c) => c,
        Err(_) => {
            assert!(
                mtu < blerpc_proto::split::SplitCursor::MIN_ATT_MTU
                    || message.len() > max_message_len(mtu)
            );
            return;
        }
    };
    assert_eq!(Ok(containers.len()), container_count(message.len(), mtu));
    let mut asm: Assembler<Vec<u8>, 1> = Assembler::new(AssemblerConfig::default());
    let mut completed = None;
    for (i, pdu) in containers.iter().enumerate() {
        assert!(
            pdu.len() <= mtu - 3,
            "container of {} bytes at MTU {mtu}",
            pdu.len()
        );
        let c = Container::parse(pdu).expect("split output parses");
        assert_eq!((c.tid, usize::from(c.seq)), (tid, i));
        assert!(completed.is_none(), "completed before the last container");
        completed = asm.feed(&c).expect("split output assembles");
    }
    let done = completed.expect("last container completes the message");
    assert_eq!(asm.message(done), message.as_slice());
    // The borrowing splitter with an exact-size buffer gives the same containers.
    let mut s = Splitter::new(tid, &message, mtu).expect("same plan");
    let mut buf = vec![0u8; mtu - 3];
    for pdu in &containers {
        let n = s.next_into(&mut buf).expect("another container");
        assert_eq!(&buf[..n], pdu.as_slice());
    }
    assert_eq!(s.next_into(&mut buf), None);
}

/// The large-message split ([`blerpc_proto::split::SplitCursor::new_large`]) of the same (stretched)
/// message: classic when it fits, otherwise a LARGE FIRST and wrapping seqs; reassembles with
/// the extension in force, and is refused without it.
fn split_roundtrip_large(message: &[u8], mtu: usize, tid: u8) {
    use blerpc_proto::split::{SplitCursor, max_message_len};
    let message: Vec<u8> = match message.split_first() {
        // Long enough to need a LARGE FIRST at small MTUs (and to wrap seq).
        Some((&rep, rest)) if rep > 0xE0 && !rest.is_empty() => rest
            .iter()
            .cycle()
            .take(usize::from(rep) * 64)
            .copied()
            .collect(),
        _ => message.to_vec(),
    };
    let Ok(mut cursor) = SplitCursor::new_large(tid, message.len(), mtu) else {
        assert!(mtu < SplitCursor::MIN_LARGE_ATT_MTU);
        return;
    };
    assert_eq!(cursor.is_large(), message.len() > max_message_len(mtu));
    let config = |large_messages| AssemblerConfig {
        max_message_len: message.len(),
        max_in_flight: 1,
        large_messages,
        long_containers: false,
    };
    let mut asm: Assembler<Vec<u8>, 1> = Assembler::new(config(true));
    let mut classic: Assembler<Vec<u8>, 1> = Assembler::new(config(false));
    let mut buf = vec![0u8; mtu - 3];
    let mut completed = None;
    let mut i = 0usize;
    while let Some(n) = cursor.emit_next(&message, &mut buf).expect("planned split") {
        let c = Container::parse(&buf[..n]).expect("split output parses");
        assert!(n <= mtu - 3 && c.payload.len() <= 255);
        assert_eq!((c.tid, c.seq), (tid, (i % 256) as u8));
        match (i, c.kind) {
            (0, ContainerKind::LargeFirst { total_length }) => {
                assert!(cursor.is_large());
                assert_eq!(total_length as usize, message.len());
                assert!(matches!(
                    classic.feed(&c),
                    Err(AssembleError::LargeNotNegotiated { .. })
                ));
            }
            (0, ContainerKind::First { .. }) => assert!(!cursor.is_large()),
            (0, k) => panic!("first container is {k:?}"),
            (_, k) => assert_eq!(k, ContainerKind::Subsequent),
        }
        assert!(completed.is_none(), "completed before the last container");
        completed = asm.feed(&c).expect("large split output assembles");
        i += 1;
    }
    let done = completed.expect("last container completes the message");
    assert_eq!(asm.message(done), message.as_slice());
}

/// The long-container split ([`blerpc_proto::split::SplitCursor::new_long`]) of the same (stretched)
/// message, with and without the large-message extension: every container at most 16 KiB, LONG
/// exactly when its payload is above 255 bytes; reassembles with the extension in force, and a
/// LONG container is refused without it.
fn split_roundtrip_long(message: &[u8], tid: u8, large: bool) {
    use blerpc_proto::split::SplitCursor;
    let message: Vec<u8> = match message.split_first() {
        // Stretched so that some splits need several LONG containers or a LARGE FIRST.
        Some((&rep, rest)) if rep > 0x80 && !rest.is_empty() => rest
            .iter()
            .cycle()
            .take(usize::from(rep) * 600)
            .copied()
            .collect(),
        _ => message.to_vec(),
    };
    let Ok(mut cursor) = SplitCursor::new_long(tid, message.len(), large) else {
        assert!(!large && message.len() > 65_535);
        return;
    };
    assert_eq!(cursor.is_large(), message.len() > 65_535);
    let config = |long_containers| AssemblerConfig {
        max_message_len: message.len(),
        max_in_flight: 1,
        large_messages: large,
        long_containers,
    };
    let mut asm: Assembler<Vec<u8>, 1> = Assembler::new(config(true));
    let mut classic: Assembler<Vec<u8>, 1> = Assembler::new(config(false));
    let mut buf = vec![0u8; MAX_LONG_CONTAINER_LEN];
    let mut completed = None;
    let mut i = 0usize;
    while let Some(n) = cursor.emit_next(&message, &mut buf).expect("planned split") {
        let c = Container::parse(&buf[..n]).expect("split output parses");
        assert_eq!(c.emitted_len(), n);
        assert!(n <= MAX_LONG_CONTAINER_LEN);
        assert_eq!(c.is_long(), c.payload.len() > MAX_CHUNK_LEN);
        assert_eq!(buf[2] & LONG_FLAG != 0, c.is_long());
        assert_eq!((c.tid, c.seq), (tid, (i % 256) as u8));
        if c.is_long() {
            assert!(matches!(
                classic.feed(&c),
                Err(AssembleError::ContainerTooLong { max: 255, .. })
            ));
        }
        assert!(completed.is_none(), "completed before the last container");
        completed = asm.feed(&c).expect("long split output assembles");
        i += 1;
    }
    let done = completed.expect("last container completes the message");
    assert_eq!(asm.message(done), message.as_slice());
}
