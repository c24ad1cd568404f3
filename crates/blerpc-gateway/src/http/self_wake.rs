//! A task that wakes itself while it runs is polled again at once, on the thread it runs on.
//!
//! hyper's HTTP/1 connection wakes its own task while the task runs, twice a call: its request
//! body is a channel from the connection's reader to the handler, and both ends live in the
//! connection's task (the reader sends a chunk the handler waits for; the handler takes it and
//! unparks the reader). tokio's multi-thread scheduler treats a task woken while it runs as a
//! yield: it goes to the back of the worker's queue and a parked worker is woken to steal it,
//! so every call crossed between threads (a futex wake-up, and the call's data in another
//! core's cache). [`SelfWoken`] polls such a future again before returning, so what
//! it woke itself for runs at once; a wake from anywhere else (the socket, a device's answer, a
//! timer) reaches the task as before.
//!
//! Fairness is kept: the future is polled again at most [`MAX_REPOLLS`] times in one poll of
//! its task, and never once tokio's cooperative budget is spent; past either, it yields as
//! it did without this.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// How many times one poll of the task polls its future again after the future woke itself.
pub(crate) const MAX_REPOLLS: usize = 8;

pin_project_lite::pin_project! {
    /// `F`, polled again at once when it wakes itself during a poll.
    pub(crate) struct SelfWoken<F> {
        #[pin]
        inner: F,
        state: Arc<State>,
        waker: Waker,
    }
}

/// What the waker given to the inner future shares with [`SelfWoken::poll`].
#[derive(Default)]
struct State {
    /// The inner future is being polled.
    polling: AtomicBool,
    /// It was woken while being polled.
    again: AtomicBool,
    /// The task's own waker, for wakes from outside a poll.
    task: AtomicWaker,
}

impl Wake for State {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.polling.load(Ordering::SeqCst) {
            self.again.store(true, Ordering::SeqCst);
            // The poll may have ended between the two loads, without seeing `again`: then
            // the task is woken as usual.
            if self.polling.load(Ordering::SeqCst) {
                return;
            }
        }
        self.task.wake();
    }
}

impl<F: Future> SelfWoken<F> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: F) -> Self {
        let state = Arc::new(State::default());
        SelfWoken {
            inner,
            waker: Waker::from(state.clone()),
            state,
        }
    }
}

impl<F: Future> Future for SelfWoken<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let mut this = self.project();
        this.state.task.register(cx.waker());
        // A wake that raced the end of the last poll woke the task too: this poll is its own.
        this.state.again.store(false, Ordering::SeqCst);
        let mut inner_cx = Context::from_waker(this.waker);
        for _ in 0..=MAX_REPOLLS {
            this.state.polling.store(true, Ordering::SeqCst);
            let poll = this.inner.as_mut().poll(&mut inner_cx);
            this.state.polling.store(false, Ordering::SeqCst);
            if poll.is_ready() {
                return poll;
            }
            if !this.state.again.swap(false, Ordering::SeqCst) {
                return Poll::Pending;
            }
            if !tokio::task::coop::has_budget_remaining() {
                break;
            }
        }
        // Woken during its last poll: yield, as tokio would have done.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts its polls; wakes itself during the first `self_wakes` of them.
    struct WakesItself {
        polls: Arc<AtomicUsize>,
        self_wakes: usize,
        ready_after: usize,
    }

    impl Future for WakesItself {
        type Output = usize;
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            let n = self.polls.fetch_add(1, Ordering::SeqCst) + 1;
            if n >= self.ready_after {
                return Poll::Ready(n);
            }
            if n <= self.self_wakes {
                cx.waker().wake_by_ref();
            }
            Poll::Pending
        }
    }

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Counter(AtomicUsize);
    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A [`WakesItself`] wrapped, polled by a task whose wakes are counted.
    struct Fixture {
        f: SelfWoken<WakesItself>,
        polls: Arc<AtomicUsize>,
        task_wakes: Arc<Counter>,
        waker: Waker,
    }

    impl Fixture {
        fn new(self_wakes: usize, ready_after: usize) -> Fixture {
            let polls = Arc::new(AtomicUsize::new(0));
            let task_wakes = Arc::new(Counter::default());
            Fixture {
                f: SelfWoken::new(WakesItself {
                    polls: polls.clone(),
                    self_wakes,
                    ready_after,
                }),
                polls,
                waker: Waker::from(task_wakes.clone()),
                task_wakes,
            }
        }

        fn poll(&mut self) -> Poll<usize> {
            Pin::new(&mut self.f).poll(&mut Context::from_waker(&self.waker))
        }

        fn polls(&self) -> usize {
            self.polls.load(Ordering::SeqCst)
        }

        fn task_wakes(&self) -> usize {
            self.task_wakes.0.load(Ordering::SeqCst)
        }
    }

    #[test]
    fn a_future_that_wakes_itself_is_polled_again_without_waking_its_task() {
        let mut f = Fixture::new(2, 3);
        assert_eq!(f.poll(), Poll::Ready(3));
        assert_eq!(f.task_wakes(), 0);
    }

    #[test]
    fn a_future_that_keeps_waking_itself_yields_after_the_bound() {
        let mut f = Fixture::new(usize::MAX, usize::MAX);
        assert!(f.poll().is_pending());
        assert_eq!(f.polls(), MAX_REPOLLS + 1);
        assert_eq!(f.task_wakes(), 1, "it yields: its task is woken");
    }

    #[test]
    fn a_wake_after_the_poll_reaches_the_task() {
        let mut f = Fixture::new(0, 2);
        assert!(f.poll().is_pending());
        assert_eq!(f.task_wakes(), 0);
        // The socket, a device's answer or a timer wakes the inner future's waker later.
        f.f.waker.wake_by_ref();
        assert_eq!(f.task_wakes(), 1);
        assert_eq!(f.poll(), Poll::Ready(2));
    }

    #[test]
    fn a_wake_that_raced_the_end_of_a_poll_costs_no_extra_poll() {
        let mut f = Fixture::new(0, usize::MAX);
        assert!(f.poll().is_pending());
        // What a wake from another thread leaves when it sees the poll end after setting
        // `again`: the flag, and the task woken.
        f.f.state.again.store(true, Ordering::SeqCst);
        assert!(f.poll().is_pending());
        assert_eq!(f.polls(), 2, "one poll for the one wake");
    }
}
