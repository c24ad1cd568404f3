//! [`CompletionQueue`]: calls whose outcomes come back through a queue the foreign side drains,
//! instead of through UniFFI's future polling. The Python and Kotlin layers' `call` use it.
//!
//! An `await` on one of UniFFI's async methods costs the foreign side several crossings per
//! call: a poll, a waker called **from the runtime's thread** into the foreign language (for
//! Python, a ctypes callback that takes the GIL and schedules the loop; for Kotlin, a JNA
//! callback that attaches the thread), a second poll, the result, the free. A call started with
//! [`Connection::start_call`] crosses twice: once to start it (a plain synchronous call), once
//! to take its outcome with every other outcome that is waiting ([`CompletionQueue::take`], or
//! [`CompletionQueue::wait`] from a thread that may block). The runtime's thread never calls
//! into the foreign language: it queues the outcome and, if the queue was empty, writes one
//! byte to the queue's signal socket, which an event loop watches (Python's
//! `loop.add_reader`), or wakes a thread blocked in `wait` (Kotlin's).
//!
//! Measured side by side with UniFFI's awaits (`docs/benchmarks/bindings.txt`, `bash
//! tools/bindings/bench.sh`).
//!
//! The foreign side names each call by a ticket it chooses (unique among its calls not yet
//! completed): outcomes come back in the order the calls finish, each under its ticket.
//! [`CompletionQueue::cancel`] drops a call (the runtime's cancel-on-drop: its slot and any
//! late answer are released in the core, the connection stays usable), and no outcome comes
//! for it. The queue holds at most one outcome per call started and not yet taken, so its size
//! is bounded by the caller's own calls (each connection has at most four in flight; a fifth
//! fails at once with `TOO_MANY_CALLS`, as an outcome like any other).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::task::AbortHandle;

use crate::{BlerpcError, Connection};

/// How one call ended, under the ticket it was started with.
#[derive(Clone, Debug, PartialEq, Eq, uniffi::Enum)]
pub enum Completion {
    /// The call's response: the response message's protobuf bytes.
    Response {
        /// The ticket the call was started with.
        ticket: u64,
        /// The response's protobuf bytes.
        response: Vec<u8>,
    },
    /// The call failed (as [`Connection::call`] would have failed).
    Failed {
        /// The ticket the call was started with.
        ticket: u64,
        /// Why.
        error: BlerpcError,
    },
}

impl Completion {
    /// The ticket the call was started with.
    pub fn ticket(&self) -> u64 {
        match self {
            Completion::Response { ticket, .. } | Completion::Failed { ticket, .. } => *ticket,
        }
    }
}

/// Where the outcomes of calls started with [`Connection::start_call`] wait for the foreign
/// side: drain it with [`CompletionQueue::take`] when its [signal](CompletionQueue::signal_fd)
/// is readable, or block in [`CompletionQueue::wait`]. One queue serves any number of
/// connections (Python keeps one per event loop, Kotlin one per process).
#[derive(Debug, uniffi::Object)]
pub struct CompletionQueue {
    state: Mutex<State>,
    ready: Condvar,
    #[cfg(unix)]
    signal: Signal,
}

#[derive(Debug, Default)]
struct State {
    done: VecDeque<Completion>,
    running: HashMap<u64, AbortHandle>,
    shut_down: bool,
}

#[uniffi::export]
impl CompletionQueue {
    /// An empty queue with its signal socket (on Unix).
    ///
    /// Fails with `LINK_FAILED` if the socket cannot be made (no file descriptors left).
    #[uniffi::constructor]
    pub fn new() -> Result<Arc<Self>, BlerpcError> {
        Ok(Arc::new(CompletionQueue {
            state: Mutex::default(),
            ready: Condvar::new(),
            #[cfg(unix)]
            signal: Signal::new()?,
        }))
    }

    /// A file descriptor that is readable while outcomes may be waiting (Unix; `None`
    /// elsewhere): when it is, call [`take`](CompletionQueue::take), which reads it before
    /// taking the outcomes (an outcome queued in between makes it readable again). The queue
    /// owns it: do not read or close it.
    pub fn signal_fd(&self) -> Option<i32> {
        #[cfg(unix)]
        {
            Some(self.signal.fd())
        }
        #[cfg(not(unix))]
        {
            None
        }
    }

    /// Every outcome waiting, oldest first (empty if none); never blocks.
    pub fn take(&self) -> Vec<Completion> {
        #[cfg(unix)]
        self.signal.clear();
        self.lock().done.drain(..).collect()
    }

    /// Every outcome waiting, blocking until there is one, `timeout_ms` pass, or the queue is
    /// shut down (then empty). For a thread of the foreign side's own (Kotlin's).
    pub fn wait(&self, timeout_ms: u32) -> Vec<Completion> {
        let state = self.lock();
        let (mut state, _) = self
            .ready
            .wait_timeout_while(state, Duration::from_millis(u64::from(timeout_ms)), |s| {
                s.done.is_empty() && !s.shut_down
            })
            .unwrap_or_else(PoisonError::into_inner);
        state.done.drain(..).collect()
    }

    /// Cancels the call started under `ticket` if it is still running: no outcome comes for
    /// it. Does nothing for a ticket that has completed (its outcome may be waiting) or that
    /// was never used.
    pub fn cancel(&self, ticket: u64) {
        if let Some(task) = self.lock().running.remove(&ticket) {
            task.abort();
        }
    }

    /// Cancels every running call and wakes a thread blocked in
    /// [`wait`](CompletionQueue::wait) (which then returns what is waiting, or nothing); later
    /// calls started on it fail with `CLOSED` as their outcome.
    pub fn shutdown(&self) {
        let mut state = self.lock();
        state.shut_down = true;
        for (_, task) in state.running.drain() {
            task.abort();
        }
        drop(state);
        self.ready.notify_all();
    }
}

impl CompletionQueue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `call` on the crate's runtime and queues its outcome under `ticket`.
    fn start<F>(self: &Arc<Self>, ticket: u64, call: F) -> Result<(), BlerpcError>
    where
        F: Future<Output = Result<Vec<u8>, BlerpcError>> + Send + 'static,
    {
        let runtime = crate::runtime()?;
        let mut state = self.lock();
        if state.running.contains_key(&ticket) {
            return Err(BlerpcError::invalid(format!(
                "ticket {ticket} is already in use by a running call: give each call a ticket \
                 of its own"
            )));
        }
        if state.shut_down {
            drop(state);
            self.push(ticket, Err(closed()));
            return Ok(());
        }
        let queue = Arc::clone(self);
        // Spawned under the lock: the task removes its handle under it too, so the handle is
        // in the map before the task can take it out.
        let task = runtime.spawn(async move {
            let outcome = call.await;
            queue.lock().running.remove(&ticket);
            queue.push(ticket, outcome);
        });
        state.running.insert(ticket, task.abort_handle());
        Ok(())
    }

    fn push(&self, ticket: u64, outcome: Result<Vec<u8>, BlerpcError>) {
        let completion = match outcome {
            Ok(response) => Completion::Response { ticket, response },
            Err(error) => Completion::Failed { ticket, error },
        };
        let mut state = self.lock();
        let was_empty = state.done.is_empty();
        state.done.push_back(completion);
        drop(state);
        if was_empty {
            #[cfg(unix)]
            self.signal.raise();
            self.ready.notify_all();
        }
    }
}

fn closed() -> BlerpcError {
    BlerpcError::connection(
        crate::code::CLOSED,
        "the completion queue was shut down: make a new one",
    )
}

#[uniffi::export]
impl Connection {
    /// Starts [`Connection::call`] (no deadline: the protocol's 5 s call timeout) and returns
    /// at once; its outcome comes through `queue` under `ticket`. Fails only if `ticket` is in
    /// use by a running call of the queue, or the runtime cannot start (`LINK_FAILED`).
    pub fn start_call(
        self: Arc<Self>,
        queue: Arc<CompletionQueue>,
        ticket: u64,
        command: String,
        request: Vec<u8>,
    ) -> Result<(), BlerpcError> {
        queue.start(
            ticket,
            async move { self.unary(command, request, None).await },
        )
    }

    /// [`Connection::start_call`] with a deadline `deadline_ms` from now (`TIMEOUT` after it).
    pub fn start_call_until(
        self: Arc<Self>,
        queue: Arc<CompletionQueue>,
        ticket: u64,
        command: String,
        request: Vec<u8>,
        deadline_ms: u32,
    ) -> Result<(), BlerpcError> {
        queue.start(ticket, async move {
            self.unary(command, request, Some(deadline_ms)).await
        })
    }
}

/// The queue's signal: a connected pair of Unix sockets, the foreign side watching one end
/// for reads, the runtime writing a byte to the other when the queue stops being empty.
#[cfg(unix)]
#[derive(Debug)]
struct Signal {
    watched: std::os::unix::net::UnixStream,
    raised: std::os::unix::net::UnixStream,
}

#[cfg(unix)]
impl Signal {
    fn new() -> Result<Signal, BlerpcError> {
        let failed = |e: std::io::Error| {
            BlerpcError::connection(
                crate::code::LINK_FAILED,
                format!("cannot make the completion queue's signal socket: {e}"),
            )
        };
        let (watched, raised) = std::os::unix::net::UnixStream::pair().map_err(failed)?;
        watched.set_nonblocking(true).map_err(failed)?;
        raised.set_nonblocking(true).map_err(failed)?;
        Ok(Signal { watched, raised })
    }

    fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.watched.as_raw_fd()
    }

    /// One byte: a full socket buffer already means "readable", so a write that would block
    /// is as good as done.
    fn raise(&self) {
        use std::io::Write;
        let _ = (&self.raised).write(&[1]);
    }

    /// Reads every byte raised so far (nonblocking).
    fn clear(&self) {
        use std::io::Read;
        let mut sink = [0u8; 64];
        while matches!((&self.watched).read(&mut sink), Ok(n) if n > 0) {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the bytes the signal holds (the foreign side's part) and counts them.
    fn signal_bytes(queue: &CompletionQueue) -> usize {
        use std::io::Read;
        let mut bytes = [0u8; 64];
        (&queue.signal.watched).read(&mut bytes).unwrap_or(0)
    }

    #[test]
    fn an_outcome_raises_the_signal_once_and_take_clears_it() -> Result<(), BlerpcError> {
        let queue = CompletionQueue::new()?;
        assert!(queue.signal_fd().is_some_and(|fd| fd >= 0));
        assert_eq!(signal_bytes(&queue), 0);
        queue.push(1, Ok(vec![0x0a, 0x01, 0x41]));
        queue.push(2, Err(BlerpcError::invalid("bad")));
        // Raised when the queue stopped being empty, not again.
        assert_eq!(signal_bytes(&queue), 1);
        let done = queue.take();
        assert_eq!(
            done.iter().map(Completion::ticket).collect::<Vec<_>>(),
            [1, 2]
        );
        assert_eq!(
            done[0],
            Completion::Response {
                ticket: 1,
                response: vec![0x0a, 0x01, 0x41]
            }
        );
        assert!(queue.take().is_empty());
        // Take reads the signal itself: nothing is left to wake the loop for nothing.
        queue.push(3, Ok(Vec::new()));
        assert_eq!(queue.take().len(), 1);
        assert_eq!(signal_bytes(&queue), 0);
        Ok(())
    }

    #[test]
    fn wait_returns_on_an_outcome_from_another_thread_or_on_shutdown() -> Result<(), BlerpcError> {
        let queue = CompletionQueue::new()?;
        assert!(queue.wait(1).is_empty());
        let pusher = Arc::clone(&queue);
        let thread = std::thread::spawn(move || pusher.push(9, Ok(Vec::new())));
        let done = queue.wait(5_000);
        let _ = thread.join();
        assert_eq!(done.iter().map(Completion::ticket).collect::<Vec<_>>(), [9]);
        let stopper = Arc::clone(&queue);
        let thread = std::thread::spawn(move || stopper.shutdown());
        assert!(queue.wait(5_000).is_empty());
        let _ = thread.join();
        Ok(())
    }

    #[test]
    fn a_ticket_in_use_is_refused_and_a_cancelled_call_never_completes() -> Result<(), BlerpcError>
    {
        let queue = CompletionQueue::new()?;
        queue.start(7, std::future::pending())?;
        let e = queue
            .start(7, async { Ok(Vec::new()) })
            .err()
            .unwrap_or_else(|| panic!("accepted"));
        assert_eq!(e.code(), "INVALID_ARGUMENT");
        queue.cancel(7);
        queue.cancel(7);
        assert!(queue.wait(50).is_empty());
        // The ticket is free again.
        queue.start(7, async { Ok(vec![1]) })?;
        let done = queue.wait(5_000);
        assert_eq!(
            done,
            [Completion::Response {
                ticket: 7,
                response: vec![1]
            }]
        );
        Ok(())
    }

    #[test]
    fn a_queue_shut_down_answers_new_calls_closed() -> Result<(), BlerpcError> {
        let queue = CompletionQueue::new()?;
        queue.start(1, std::future::pending())?;
        queue.shutdown();
        queue.start(2, async { Ok(Vec::new()) })?;
        let done = queue.take();
        assert_eq!(done.len(), 1, "{done:?}");
        assert!(
            matches!(&done[0], Completion::Failed { ticket: 2, error } if error.code() == "CLOSED")
        );
        Ok(())
    }
}
