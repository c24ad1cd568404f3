//! The rounds of the **ping** and **tcp** variants on one epoll loop (mio), without a future,
//! a waker or a timer per exchange.
//!
//! A round writes one message on every connection of the process, then reads until every reply
//! is complete (or the step bound passes), the way the published tool's event loop does it. Each
//! exchange is timed from building its message to the last byte of its reply.
//!
//! Why not futures: with 10,000 connections a round is 10,000 futures in a `FuturesUnordered`.
//! Each lives in its own ~1 KB heap task, every readiness event wakes one through its own cache
//! lines, and tokio's cooperative budget makes the set yield every ~128 operations: profiled,
//! the load generator spent more CPU per message than the server, mostly in
//! `FuturesUnordered`'s wake-ups, so the generator, not the server, set the round time. Here a
//! connection is a slot in one array; a message costs a `write`, a `read` and its share of an
//! `epoll_wait`.

use std::io::{self, Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use mio::net::TcpStream as MioStream;
use mio::{Events, Interest, Poll, Token};

/// Builds the next message and the exact reply it must get.
pub trait Exchange: Send {
    /// Writes the message to send into `message` and the expected reply into `reply` (both
    /// cleared first).
    fn next(&mut self, message: &mut Vec<u8>, reply: &mut Vec<u8>);
}

/// What happened to one connection in the current round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Its reply is complete (or no round has started).
    Idle,
    /// Its message is (being) written and its reply not complete.
    Waiting,
    /// It failed or timed out: left out of every later round.
    Broken,
}

struct Slot {
    stream: MioStream,
    state: State,
    message: Vec<u8>,
    written: usize,
    reply: Vec<u8>,
    got: usize,
    start: Instant,
}

/// The result of [`run`].
pub struct Outcome {
    /// The streams, back as they came in (nonblocking).
    pub streams: Vec<TcpStream>,
    /// Wall time of each round, ns.
    pub round_ns: Vec<u64>,
    /// Connections in the rounds (at the start).
    pub connections: usize,
    /// Per-exchange latency, ns.
    pub histogram: Histogram<u64>,
    /// Failed exchanges.
    pub errors: usize,
    /// The first failure, if any.
    pub first_error: Option<String>,
}

/// Limits of [`run`].
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The phase ends after this long (a round in progress completes).
    pub duration: Duration,
    /// Most rounds.
    pub max_rounds: u64,
    /// Bound on one round: replies still missing then are errors.
    pub step: Duration,
}

/// Runs rounds over `streams` (nonblocking sockets) until `limits` say stop; `progress` is
/// called after each round.
pub fn run(
    streams: Vec<TcpStream>,
    exchange: &mut dyn Exchange,
    limits: Limits,
    histogram: Histogram<u64>,
    progress: &mut dyn FnMut(),
) -> io::Result<Outcome> {
    let poll = Poll::new()?;
    let connections = streams.len();
    let mut slots = Vec::with_capacity(connections);
    for (i, stream) in streams.into_iter().enumerate() {
        stream.set_nonblocking(true)?;
        let mut stream = MioStream::from_std(stream);
        poll.registry().register(
            &mut stream,
            Token(i),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        slots.push(Slot {
            stream,
            state: State::Idle,
            message: Vec::new(),
            written: 0,
            reply: Vec::new(),
            got: 0,
            start: Instant::now(),
        });
    }
    let mut out = Outcome {
        streams: Vec::new(),
        round_ns: Vec::new(),
        connections,
        histogram,
        errors: 0,
        first_error: None,
    };
    let mut rounds = Rounds {
        poll,
        events: Events::with_capacity(1024),
        slots,
        buffer: vec![0u8; 64 * 1024],
    };
    let end = Instant::now() + limits.duration;
    while (out.round_ns.len() as u64) < limits.max_rounds && Instant::now() < end {
        let start = Instant::now();
        if rounds.round(exchange, limits.step, &mut out)? == 0 {
            // Every connection failed: nothing left to measure.
            break;
        }
        out.round_ns.push(super::client::nanos(start.elapsed()));
        progress();
    }
    for mut slot in rounds.slots {
        rounds.poll.registry().deregister(&mut slot.stream)?;
        out.streams.push(slot.stream.into());
    }
    Ok(out)
}

struct Rounds {
    poll: Poll,
    events: Events,
    slots: Vec<Slot>,
    buffer: Vec<u8>,
}

fn fail(out: &mut Outcome, slot: &mut Slot, why: String) {
    slot.state = State::Broken;
    out.errors += 1;
    out.first_error.get_or_insert(why);
}

impl Rounds {
    /// One round; returns the connections that took part.
    fn round(
        &mut self,
        exchange: &mut dyn Exchange,
        step: Duration,
        out: &mut Outcome,
    ) -> io::Result<usize> {
        let mut waiting = 0usize;
        let mut active = 0usize;
        for slot in &mut self.slots {
            if slot.state == State::Broken {
                continue;
            }
            exchange.next(&mut slot.message, &mut slot.reply);
            slot.written = 0;
            slot.got = 0;
            slot.state = State::Waiting;
            slot.start = Instant::now();
            waiting += 1;
            active += 1;
            if let Err(e) = flush(slot) {
                fail(out, slot, format!("write: {e}"));
                waiting -= 1;
            }
        }
        let deadline = Instant::now() + step;
        while waiting > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                for slot in &mut self.slots {
                    if slot.state == State::Waiting {
                        fail(out, slot, format!("no reply within {step:?}"));
                    }
                }
                return Ok(active);
            }
            match self.poll.poll(&mut self.events, Some(left)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for event in &self.events {
                let Some(slot) = self.slots.get_mut(event.token().0) else {
                    continue;
                };
                if slot.state == State::Broken {
                    continue;
                }
                if event.is_writable()
                    && slot.state == State::Waiting
                    && let Err(e) = flush(slot)
                {
                    fail(out, slot, format!("write: {e}"));
                    waiting -= 1;
                    continue;
                }
                if event.is_readable() || event.is_read_closed() || event.is_error() {
                    let was_waiting = slot.state == State::Waiting;
                    match receive(slot, &mut self.buffer) {
                        Ok(true) => {
                            let _ = out
                                .histogram
                                .record(super::client::nanos(slot.start.elapsed()).max(1));
                            slot.state = State::Idle;
                            waiting -= 1;
                        }
                        Ok(false) => {}
                        Err(why) => {
                            fail(out, slot, why);
                            if was_waiting {
                                waiting -= 1;
                            }
                        }
                    }
                }
            }
        }
        Ok(active)
    }
}

/// Writes what is left of the slot's message; `WouldBlock` leaves the rest for the next
/// writable event.
fn flush(slot: &mut Slot) -> io::Result<()> {
    while let Some(rest) = slot.message.get(slot.written..).filter(|r| !r.is_empty()) {
        match slot.stream.write(rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => slot.written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads the rest of the awaited reply; `Ok(true)` when it just became complete. Bytes that are
/// not the expected reply, or bytes while no reply is awaited, are errors.
///
/// The registration is edge-triggered, and a reply that is complete is not drained further
/// (no `read` that would only return `WouldBlock`): nothing more is due until the next message,
/// and any byte that does arrive raises a new edge, read then as a stray or a wrong reply.
fn receive(slot: &mut Slot, buffer: &mut [u8]) -> Result<bool, String> {
    loop {
        let limit = if slot.state == State::Waiting {
            slot.reply
                .len()
                .saturating_sub(slot.got)
                .clamp(1, buffer.len())
        } else {
            buffer.len()
        };
        let Some(into) = buffer.get_mut(..limit) else {
            return Err("empty read buffer".into());
        };
        let n = match slot.stream.read(into) {
            Ok(0) => return Err("the server closed the connection".into()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("read: {e}")),
        };
        if slot.state != State::Waiting {
            return Err(format!("{n} bytes while no reply was awaited"));
        }
        let got = into.get(..n).unwrap_or(&[]);
        if slot.reply.get(slot.got..slot.got + n) != Some(got) {
            return Err("the reply is not the one to this message".into());
        }
        slot.got += n;
        if slot.got == slot.reply.len() {
            slot.state = State::Idle;
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::net::TcpListener;

    /// Messages "m<seq>", replies the same bytes (an echo).
    struct Echo(u32);

    impl Exchange for Echo {
        fn next(&mut self, message: &mut Vec<u8>, reply: &mut Vec<u8>) {
            self.0 += 1;
            message.clear();
            message.extend_from_slice(format!("m{:08}", self.0).as_bytes());
            reply.clone_from(message);
        }
    }

    /// How the test server answers on one connection.
    #[derive(Clone, Copy, PartialEq)]
    enum Answer {
        Echo,
        /// The first byte of every reply flipped.
        Flipped,
        /// Every reply followed by one byte more.
        Longer,
    }

    /// A blocking echo server thread per accepted connection, answering as `answer` says for
    /// the connection at `odd` and with a plain echo on the others.
    fn server(
        conns: usize,
        odd: Option<(usize, Answer)>,
    ) -> (Vec<TcpStream>, Vec<std::thread::JoinHandle<()>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut clients = Vec::new();
        let mut threads = Vec::new();
        for i in 0..conns {
            clients.push(TcpStream::connect(addr).unwrap());
            let (mut s, _) = listener.accept().unwrap();
            let answer = odd
                .filter(|(at, _)| *at == i)
                .map_or(Answer::Echo, |(_, a)| a);
            threads.push(std::thread::spawn(move || {
                let mut b = [0u8; 256];
                while let Ok(n) = s.read(&mut b) {
                    if n == 0 {
                        return;
                    }
                    let mut reply = b[..n].to_vec();
                    match answer {
                        Answer::Echo => {}
                        Answer::Flipped => reply[0] ^= 0xff,
                        Answer::Longer => reply.push(b'!'),
                    }
                    if s.write_all(&reply).is_err() {
                        return;
                    }
                }
            }));
        }
        (clients, threads)
    }

    fn limits(rounds: u64) -> Limits {
        Limits {
            duration: Duration::from_secs(30),
            max_rounds: rounds,
            step: Duration::from_secs(5),
        }
    }

    /// `rounds` rounds against the test server with `conns` connections (see [`server`]);
    /// returns the outcome (streams closed, server threads joined) and the progress calls.
    fn run_against(conns: usize, odd: Option<(usize, Answer)>, rounds: u64) -> (Outcome, usize) {
        let (clients, threads) = server(conns, odd);
        let mut progress = 0;
        let mut out = run(
            clients,
            &mut Echo(0),
            limits(rounds),
            super::super::client::new_histogram(),
            &mut || progress += 1,
        )
        .unwrap();
        assert_eq!(out.streams.len(), conns, "every stream comes back");
        // Closing the streams ends the server threads.
        out.streams.clear();
        for t in threads {
            t.join().unwrap();
        }
        (out, progress)
    }

    #[test]
    fn every_connection_answers_in_every_round() {
        let (out, progress) = run_against(8, None, 5);
        assert_eq!((out.errors, out.round_ns.len(), progress), (0, 5, 5));
        assert_eq!(out.histogram.len(), 40);
    }

    #[test]
    fn a_wrong_reply_breaks_only_its_connection() {
        let (out, _) = run_against(4, Some((2, Answer::Flipped)), 3);
        // One error in the first round; the broken connection sits out the next two.
        assert_eq!(out.errors, 1, "{:?}", out.first_error);
        assert_eq!(out.histogram.len(), 3 * 3);
        assert!(out.first_error.unwrap().contains("not the one"));
    }

    #[test]
    fn a_reply_with_a_byte_too_many_is_an_error() {
        let (out, _) = run_against(2, Some((1, Answer::Longer)), 3);
        // The extra byte is read at the start of the next reply, which then does not match.
        assert_eq!(out.errors, 1, "{:?}", out.first_error);
        assert!(out.first_error.unwrap().contains("not the one"));
    }

    #[test]
    fn a_silent_server_is_an_error_after_the_step_bound() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_held, _) = listener.accept().unwrap();
        let started = Instant::now();
        let out = run(
            vec![client],
            &mut Echo(0),
            Limits {
                duration: Duration::from_secs(10),
                max_rounds: 2,
                step: Duration::from_millis(100),
            },
            super::super::client::new_histogram(),
            &mut || {},
        )
        .unwrap();
        assert_eq!(out.errors, 1);
        assert!(out.first_error.unwrap().contains("no reply"));
        // The second round has nothing left to do.
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
