//! What a NATS peer can send a gateway of a fleet: the envelope's requests and frames (message
//! headers), the frames of a body as its inbox sorts them and its reader takes them (credit
//! flow control), and the records other gateways write to the fleet's KV buckets.
//!
//! Header blocks are text, one header a line: `Name:value`, or a line whose first byte is below
//! `0x20` for the name of index `byte % 14` in [`NAMES`] (the format's headers) followed by the
//! value. Lines whose name or value a NATS header cannot hold are skipped.

use async_nats::{HeaderMap, HeaderName, HeaderValue};
use blerpc_gateway::nats::durable::{CallRecord, CallState, MAX_ATTEMPTS};
use blerpc_gateway::nats::envelope::{
    BodyMode, DEFAULT_WINDOW, EnvelopeError, Frame, RequestHead, VERSION, header,
};
use blerpc_gateway::nats::pipe::{Closed, Inbox, Inflow, MAX_WINDOW, PipeError, Taken};
use blerpc_gateway::nats::{GatewayRecord, PresenceRecord, RecordError};
use bytes::Bytes;

use crate::input::{Cursor, encode_chunk};

/// The headers of the format, by index.
pub const NAMES: [&str; 14] = [
    header::VERSION,
    header::METHOD,
    header::PATH,
    header::BODY,
    header::FRAME,
    header::STATUS,
    header::PEER,
    header::WINDOW,
    header::SEQ,
    header::ERROR,
    header::CREDIT,
    header::CARRIED[0],
    header::CARRIED[1],
    header::CARRIED[2],
];

/// The headers of a block (see the [module docs](self)); a name given twice has both values.
pub fn headers_from(block: &[u8]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for line in block.split(|&b| b == b'\n') {
        let (name, value) = match line.split_first() {
            Some((&b, value)) if b < 0x20 => (NAMES[usize::from(b) % NAMES.len()], value),
            _ => match line.iter().position(|&b| b == b':') {
                Some(at) => match std::str::from_utf8(&line[..at]) {
                    Ok(name) => (name, &line[at + 1..]),
                    Err(_) => continue,
                },
                None => continue,
            },
        };
        let (Ok(name), Ok(value)) = (
            name.parse::<HeaderName>(),
            String::from_utf8_lossy(value).parse::<HeaderValue>(),
        ) else {
            continue;
        };
        h.append(name, value);
    }
    h
}

/// A block of `headers` as [`headers_from`] reads it (the seeds).
pub fn block_of(headers: &HeaderMap) -> Vec<u8> {
    let mut lines: Vec<String> = headers
        .iter()
        .flat_map(|(name, values)| values.iter().map(move |v| format!("{name}:{v}\n")))
        .collect();
    lines.sort();
    lines.concat().into_bytes()
}

fn value<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).map(HeaderValue::as_str)
}

/// An error names what the headers have: a missing header is absent, a bad value is the one
/// sent, another version is not this one.
fn check_error(h: Option<&HeaderMap>, e: &EnvelopeError) {
    match (h, e) {
        (None, EnvelopeError::NoHeaders) => {}
        (None, other) => panic!("no headers, but {other:?}"),
        (Some(_), EnvelopeError::NoHeaders) => panic!("headers, but NoHeaders"),
        (Some(h), EnvelopeError::Missing(name)) => {
            // A streamed head without a peer is `Missing(PEER)` too.
            if *name != header::PEER {
                assert_eq!(value(h, name), None, "{name} is there");
            } else {
                assert_eq!(value(h, header::BODY), Some("stream"));
            }
        }
        (Some(h), EnvelopeError::Bad { header, value: v }) => {
            assert_eq!(value(h, header), Some(v.as_str()), "{header}");
        }
        (Some(h), EnvelopeError::Version(v)) => {
            assert_ne!(v, VERSION);
            assert_eq!(value(h, header::VERSION), Some(v.as_str()));
        }
        (Some(_), other) => panic!("an error the target does not know: {other:?}"),
    }
}

/// `[mode]` then a header block (`mode % 8 == 7`: a message without headers), decoded as a
/// request and as a frame.
///
/// Invariants: a decoded request has its path starting with `/`, the method sent, the default
/// window without `Blerpc-Window`, and encodes to headers that decode to itself; a decoded `head`
/// has a status in 100..=599 and a peer when its body streams; every decoded frame encodes to
/// headers that decode to itself; each error names what the headers have (a missing header is
/// absent, a bad value is the value sent, another version is not `1`).
pub fn nats_envelope(data: &[u8]) {
    let [mode, block @ ..] = data else {
        return;
    };
    let h = headers_from(block);
    let h = (mode % 8 != 7).then_some(&h);
    match RequestHead::decode(h) {
        Ok(head) => {
            let h = h.expect("decoded from headers");
            assert!(head.path.starts_with('/'));
            assert_eq!(Some(head.method.as_str()), value(h, header::METHOD));
            if value(h, header::WINDOW).is_none() {
                assert_eq!(head.window, DEFAULT_WINDOW);
            }
            assert_eq!(RequestHead::decode(Some(&head.encode())), Ok(head));
        }
        Err(e) => check_error(h, &e),
    }
    match Frame::decode(h) {
        Ok(frame) => {
            if let Frame::Head {
                status, body, peer, ..
            } = &frame
            {
                assert!((100..=599).contains(status), "status {status}");
                assert!(*body == BodyMode::Whole || peer.is_some());
            }
            assert_eq!(Frame::decode(Some(&frame.encode())), Ok(frame));
        }
        Err(e) => check_error(h, &e),
    }
}

/// A frame from the input: `[kind]` then its fields.
fn frame(c: &mut Cursor<'_>) -> Frame {
    match c.u8() % 8 {
        0 | 1 => Frame::Data {
            seq: u64::from(c.u8()),
        },
        2 => Frame::End {
            count: u64::from(c.u8()),
            error: (c.u8() & 1 == 1).then(|| "device disconnected".to_string()),
        },
        3 => Frame::Credit { n: c.u32() },
        4 => Frame::Idle,
        5 => Frame::Cancel,
        6 => Frame::Accepted {
            peer: Some("_INBOX.peer".to_string()),
            window: c.u32(),
        },
        _ => Frame::Head {
            status: 200,
            carried: Vec::new(),
            body: BodyMode::Stream,
            peer: Some("_INBOX.peer".to_string()),
        },
    }
}

/// `[bound u16][window u8]` then ops, each `[op]` and its fields: 0 a frame arrives
/// (`[kind]…` then a chunk of payload), 1 a raw header block arrives (a chunk), 2 a message
/// without headers arrives, 3 the body's reader takes one frame, 4 the sender spends one credit,
/// 5 the reader takes every frame waiting.
///
/// An [`Inbox`] sorts what arrives, an [`Inflow`] takes the body, as the reply subscription
/// and `receive_body` do, against a reference model of both. Invariants: the credits held equal the model's (each
/// grant cut at [`MAX_WINDOW`]), never more than it, whatever credit frames say; at most
/// `min(bound, MAX_WINDOW) + 4` frames wait, and one more fails the exchange with `Overrun`; an
/// unreadable message fails it with the decoder's error; `cancel` sets the flag; the reader
/// takes `data` only in order (`Gap` otherwise), ends only at the right count (`Count`),
/// fails on an `end` with an error or any other frame, and grants exactly one credit per chunk
/// taken, half a window at a time.
pub fn nats_pipe(data: &[u8]) {
    let mut c = Cursor::new(data);
    let bound = u32::from(c.u16());
    let window = u32::from(c.u8());
    let (inbox, mut frames, credits, cancelled) = Inbox::new(bound);
    let capacity = bound.min(MAX_WINDOW) as usize + 4;
    let mut flow = Inflow::new(window);
    let half = window.max(1).div_ceil(2);
    // The model.
    let (mut held, mut queued, mut cancel) = (0usize, 0usize, false);
    let (mut open, mut reading) = (true, true);
    let (mut next, mut taken, mut granted, mut pending) = (0u64, 0u64, 0u64, 0u32);
    let mut steps = 0;
    while !c.is_empty() && steps < 4096 {
        steps += 1;
        let op = c.u8() % 6;
        let arrived = match op {
            0 => {
                let f = frame(&mut c);
                Some((Some(f.encode()), Bytes::copy_from_slice(c.chunk())))
            }
            1 => Some((Some(headers_from(c.chunk())), Bytes::new())),
            2 => Some((None, Bytes::new())),
            _ => None,
        };
        if let Some((headers, payload)) = arrived {
            if !open {
                continue; // the route is gone.
            }
            let outcome = inbox.take(headers.as_ref(), payload);
            match Frame::decode(headers.as_ref()) {
                Err(e) => {
                    assert_eq!(outcome, Err(Closed::Failed(PipeError::Envelope(e))));
                    open = false;
                }
                Ok(Frame::Credit { n }) => {
                    assert_eq!(outcome, Ok(()));
                    held += (n as usize).min(MAX_WINDOW as usize - held);
                }
                Ok(Frame::Cancel) => {
                    assert_eq!(outcome, Ok(()));
                    cancel = true;
                }
                Ok(_) if queued == capacity => {
                    assert_eq!(
                        outcome,
                        Err(Closed::Failed(PipeError::Overrun(bound.min(MAX_WINDOW))))
                    );
                    open = false;
                }
                Ok(_) => {
                    assert_eq!(outcome, Ok(()));
                    queued += 1;
                }
            }
        }
        let reads = match op {
            3 => queued.min(1),
            5 => queued,
            _ => 0,
        };
        for _ in 0..reads {
            let Ok(Ok((f, payload))) = frames.try_recv() else {
                panic!("{queued} frames waiting, none to read");
            };
            queued -= 1;
            if !reading {
                continue; // the body has ended: what follows is dropped with the receiver.
            }
            let got = flow.take(f.clone(), payload.clone());
            let expected = match f {
                Frame::Data { seq } if seq == next => Ok(Taken::Data(payload)),
                Frame::Data { seq } => Err(PipeError::Gap {
                    expected: next,
                    got: seq,
                }),
                Frame::End { count, .. } if count != next => {
                    Err(PipeError::Count { got: next, count })
                }
                Frame::End { error: Some(e), .. } => Err(PipeError::Failed(e)),
                Frame::End { error: None, .. } => Ok(Taken::End),
                Frame::Idle => Ok(Taken::Idle),
                _ => Err(PipeError::Failed(String::new())),
            };
            match (&got, &expected) {
                (Err(PipeError::Failed(_)), Err(PipeError::Failed(e))) if e.is_empty() => {}
                _ => assert_eq!(got, expected),
            }
            match got {
                Ok(Taken::Data(_)) => {
                    next += 1;
                    taken += 1;
                    pending += 1;
                    let grant = flow.consumed();
                    if pending >= half {
                        assert_eq!(grant, Some(pending));
                        granted += u64::from(pending);
                        pending = 0;
                    } else {
                        assert_eq!(grant, None);
                    }
                }
                Ok(Taken::Idle) => {}
                Ok(Taken::End) | Err(_) => reading = false,
            }
        }
        if op == 4 && held > 0 {
            credits.try_acquire().expect("credit held").forget();
            held -= 1;
        }
        assert_eq!(credits.available_permits(), held);
        assert!(held <= MAX_WINDOW as usize);
        assert_eq!(frames.len(), queued);
        assert!(queued <= capacity);
        assert_eq!(*cancelled.borrow(), cancel);
        assert_eq!(granted + u64::from(pending), taken);
        assert!(pending < half);
    }
}

/// `[kind]` then a record's bytes: 0 a presence record, 1 a gateway record, 2 a call record
/// (`key`, a newline, then the value).
///
/// Invariants: a decoded record has this version and a gateway name (one subject token); a
/// call record names its own key and has sends left if queued (so `run_one`'s `attempts + 1`
/// stays within [`MAX_ATTEMPTS`]); every decoded record encodes to JSON that decodes to itself.
pub fn nats_records(data: &[u8]) {
    let [kind, rest @ ..] = data else {
        return;
    };
    let token = |t: &str| {
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'='))
    };
    match kind % 3 {
        0 => {
            if let Ok(r) = PresenceRecord::decode(rest) {
                assert_eq!(r.v, blerpc_gateway::nats::RECORD_VERSION);
                assert!(token(r.node.as_str()));
                let again = serde_json::to_vec(&r).unwrap();
                assert_eq!(PresenceRecord::decode(&again), Ok(r));
            }
        }
        1 => {
            if let Ok(r) = GatewayRecord::decode(rest) {
                assert_eq!(r.v, blerpc_gateway::nats::RECORD_VERSION);
                assert!(token(r.node.as_str()));
                let again = serde_json::to_vec(&r).unwrap();
                assert_eq!(GatewayRecord::decode(&again), Ok(r));
            }
        }
        _ => {
            let (key, value) = match rest.iter().position(|&b| b == b'\n') {
                Some(at) => (&rest[..at], &rest[at + 1..]),
                None => (rest, &[][..]),
            };
            let key = String::from_utf8_lossy(key);
            match CallRecord::decode(&key, value) {
                Ok(r) => {
                    assert_eq!(r.key(), key);
                    assert!(token(&r.device) && token(&r.id));
                    assert!(r.attempts <= MAX_ATTEMPTS);
                    if r.state == CallState::Queued {
                        assert!(r.attempts < MAX_ATTEMPTS, "a queued call has a send left");
                    }
                    let again = serde_json::to_vec(&r).unwrap();
                    assert_eq!(CallRecord::decode(&key, &again).unwrap(), r);
                }
                Err(RecordError::Json(_) | RecordError::Version(_) | RecordError::Bad { .. }) => {}
                Err(e) => panic!("an error the target does not know: {e:?}"),
            }
        }
    }
}

/// Seeds for the three targets: every frame and a request as header blocks, a body with
/// credits and a gap, and the records gateways write.
pub fn seed_inputs() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let mut seeds = Vec::new();
    let request = RequestHead {
        method: "POST".into(),
        path: "/v1/devices/ab/calls/echo".into(),
        body: BodyMode::Stream,
        carried: vec![("Content-Type", "application/json".into())],
        window: 16,
    };
    let mut with = |target, name, bytes: Vec<u8>| seeds.push((target, name, bytes));
    let mut block = vec![0];
    block.extend(block_of(&request.encode()));
    with("nats_envelope", "request", block);
    let frames = [
        (
            "accepted",
            Frame::Accepted {
                peer: Some("_INBOX.a".into()),
                window: 16,
            },
        ),
        (
            "head",
            Frame::Head {
                status: 200,
                carried: vec![("Content-Type", "application/x-ndjson".into())],
                body: BodyMode::Stream,
                peer: Some("_INBOX.b".into()),
            },
        ),
        ("data", Frame::Data { seq: 3 }),
        (
            "end",
            Frame::End {
                count: 3,
                error: Some("device disconnected".into()),
            },
        ),
        ("credit", Frame::Credit { n: 8 }),
        ("idle", Frame::Idle),
        ("cancel", Frame::Cancel),
    ];
    for (name, f) in &frames {
        let mut block = vec![0];
        block.extend(block_of(&f.encode()));
        with("nats_envelope", name, block);
    }
    // A body: window 4, bound 4; credit past the window, data 0 and 1 read, idle, a gap, end.
    let mut body = vec![4, 0, 4];
    body.extend([0, 3, 0xff, 0xff, 0xff, 0xff]); // credit u32::MAX
    body.extend([4, 4]); // two credits spent
    for seq in 0..2 {
        body.extend([0, 0, seq]);
        encode_chunk(b"{\"n\":1}\n", &mut body);
        body.push(3);
    }
    body.extend([0, 4, 0, 3]); // idle, read
    body.extend([0, 2, 2, 0, 0, 3]); // end after 2, read
    body.extend([0, 0, 7, 0, 5]); // data 7 (a gap, after the end)
    let mut raw = block_of(&Frame::Credit { n: 1 }.encode());
    raw.extend(b"\x0a5\n"); // Blerpc-Credit: 5 (the second value)
    body.push(1);
    encode_chunk(&raw, &mut body);
    body.push(2);
    with("nats_pipe", "body", body);
    let mut overrun = vec![0, 0, 2];
    for _ in 0..6 {
        overrun.extend([0, 0, 0, 0]);
    }
    with("nats_pipe", "overrun", overrun);
    with(
        "nats_records",
        "presence",
        [
            &[0][..],
            br#"{"v":1,"node":"gw-b","epoch":1733470000000000,"online":true,"since_ms":1733470000000,"seen_ms":1733470001000}"#,
        ]
        .concat(),
    );
    let mut gw = vec![1];
    gw.extend(
        br#"{"v":1,"node":"gw-a","online":2,"joined_ms":1733470000000,"at_ms":1733470005000}"#,
    );
    with("nats_records", "gateway", gw);
    let mut call = vec![2];
    call.extend(b"ab.c1\n");
    call.extend(br#"{"v":1,"id":"c1","device":"ab","command":"echo","request":{"message":"hi"},"idempotent":true,"created_ms":1,"expires_ms":60001,"state":"sent","history":[{"state":"queued","at_ms":1,"by":"gw-a"},{"state":"sent","at_ms":2,"by":"gw-a"}],"attempts":1,"sent_by":["gw-a",1]}"#);
    with("nats_records", "call", call);
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seeds reach what they are for: decoded frames, a body taken, records decoded.
    #[test]
    fn the_seeds_decode() {
        for (target, name, data) in seed_inputs() {
            match target {
                "nats_envelope" => {
                    let h = headers_from(&data[1..]);
                    let decoded = if name == "request" {
                        RequestHead::decode(Some(&h)).map(drop)
                    } else {
                        Frame::decode(Some(&h)).map(drop)
                    };
                    assert_eq!(decoded, Ok(()), "{name}");
                    nats_envelope(&data);
                }
                "nats_pipe" => nats_pipe(&data),
                _ => {
                    let rest = &data[1..];
                    let ok = match data[0] {
                        0 => PresenceRecord::decode(rest).is_ok(),
                        1 => GatewayRecord::decode(rest).is_ok(),
                        _ => CallRecord::decode("ab.c1", &rest[6..]).is_ok(),
                    };
                    assert!(ok, "{name}");
                    nats_records(&data);
                }
            }
        }
    }
}
