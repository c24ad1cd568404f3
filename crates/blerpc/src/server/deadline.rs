//! A request's deadline, as its handler sees it: [`deadline`].
//!
//! With the deadline extension in force (`docs/protocol.md`, "Deadline"), a request carries the
//! milliseconds its central still waits (a unary call always, a server stream when its caller
//! gave a deadline). The server runs the unary handler, or polls the stream's producer, inside
//! a scope where [`deadline`] returns that instant (on the runtime's clock, counted from the
//! request's arrival), and stops it when it passes: the central gets ERROR `DEADLINE_EXCEEDED`
//! (by then it has failed the call with `TIMEOUT`; the error frees the request on both sides
//! and ends a stream's drain). A handler that has long work to do can check [`deadline`] and
//! give up, or size its work, before it is stopped.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use blerpc_proto::wire::error_code::ErrorCode;
use futures_core::Stream;
use tokio::time::{Instant, Sleep};

use super::{BoxStream, Status};

tokio::task_local! {
    static DEADLINE: Instant;
}

/// The deadline of the request the calling unary handler is answering: `None` when its
/// central sent none (a reference central, or no deadline extension), or when called outside
/// a handler (or from a task the handler spawned: the scope is the handler's own future).
///
/// ```
/// use blerpc::server::{Status, deadline};
///
/// async fn survey() -> Result<Vec<u8>, Status> {
///     let mut found = Vec::new();
///     for channel in 0u8..40 {
///         // Stop early, with what there is, if the central would not wait for more.
///         if deadline().is_some_and(|d| d <= tokio::time::Instant::now()) {
///             break;
///         }
///         found.push(channel);
///     }
///     Ok(found)
/// }
/// # tokio_test_run(survey());
/// # fn tokio_test_run<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(f)
/// # }
/// ```
pub fn deadline() -> Option<Instant> {
    DEADLINE.try_with(|d| *d).ok()
}

/// Polls `handler` once where [`deadline`] is `at`: its result if it is ready (even past
/// `at`), without a timer or an allocation.
pub(super) fn first_poll<F>(at: Instant, handler: &mut F) -> Option<F::Output>
where
    F: Future + Unpin,
{
    use futures_util::FutureExt;
    DEADLINE.sync_scope(at, || handler.now_or_never())
}

/// Runs `handler` where [`deadline`] is `at`, stopping it there with `DEADLINE_EXCEEDED`. A
/// handler ready at its first poll answers even past `at`.
pub(super) async fn bounded<F>(at: Instant, handler: F) -> Result<Vec<u8>, Status>
where
    F: Future<Output = Result<Vec<u8>, Status>>,
{
    match tokio::time::timeout_at(at, DEADLINE.scope(at, handler)).await {
        Ok(result) => result,
        Err(_) => Err(exceeded()),
    }
}

fn exceeded() -> Status {
    Status::new(
        ErrorCode::DeadlineExceeded,
        "stopped at the request's deadline",
    )
}

/// A server stream's producer, polled where [`deadline`] is `at`, which ends with
/// `DEADLINE_EXCEEDED` there (items ready at the same poll still go first).
pub(super) struct BoundedStream {
    at: Instant,
    items: Option<BoxStream<Result<Vec<u8>, Status>>>,
    timer: Pin<Box<Sleep>>,
}

impl BoundedStream {
    pub(super) fn new(at: Instant, items: BoxStream<Result<Vec<u8>, Status>>) -> Self {
        BoundedStream {
            at,
            items: Some(items),
            timer: Box::pin(tokio::time::sleep_until(at)),
        }
    }
}

impl Stream for BoundedStream {
    type Item = Result<Vec<u8>, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let at = self.at;
        let Some(items) = self.items.as_mut() else {
            return Poll::Ready(None);
        };
        if let Poll::Ready(item) = DEADLINE.sync_scope(at, || items.as_mut().poll_next(cx)) {
            if item.is_none() {
                self.items = None;
            }
            return Poll::Ready(item);
        }
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.items = None;
                Poll::Ready(Some(Err(exceeded())))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_handler_sees_its_deadline_and_is_stopped_there() {
        let at = Instant::now() + Duration::from_millis(300);
        assert_eq!(deadline(), None);
        let quick = bounded(at, async {
            Ok(deadline()
                .map(|d| d == at)
                .into_iter()
                .map(u8::from)
                .collect())
        });
        assert_eq!(quick.await, Ok(vec![1]));
        let slow = bounded(at, async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(Vec::new())
        });
        let started = Instant::now();
        let e = slow.await.err().unwrap_or_else(|| panic!("not stopped"));
        assert_eq!(e.code, ErrorCode::DeadlineExceeded);
        assert_eq!(started.elapsed(), Duration::from_millis(300));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_sees_its_deadline_and_ends_there_with_an_error() {
        use futures_util::StreamExt;
        let at = Instant::now() + Duration::from_millis(100);
        // An item every 30 ms, each the milliseconds left as its producer sees them.
        let ticks = futures_util::stream::unfold((), |()| async {
            tokio::time::sleep(Duration::from_millis(30)).await;
            let left = deadline().map(|d| d.saturating_duration_since(Instant::now()));
            Some((Ok(vec![left.map_or(255, |l| l.as_millis() as u8)]), ()))
        });
        let got: Vec<_> = BoundedStream::new(at, Box::pin(ticks)).collect().await;
        let items: Vec<u8> = got
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .map(|v| v[0])
            .collect();
        assert_eq!(items, [70, 40, 10]);
        let last = got.last().and_then(|r| r.as_ref().err()).map(|s| s.code);
        assert_eq!(last, Some(ErrorCode::DeadlineExceeded));
        assert_eq!(got.len(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn a_handler_ready_at_once_answers_even_past_its_deadline() {
        let past = Instant::now();
        tokio::time::advance(Duration::from_millis(10)).await;
        assert_eq!(bounded(past, async { Ok(vec![7]) }).await, Ok(vec![7]));
        // The first poll without the timer sees the deadline too.
        let mut seen = Box::pin(async { Ok::<_, Status>(deadline()) });
        assert_eq!(first_poll(past, &mut seen), Some(Ok(Some(past))));
        let mut waiting = Box::pin(std::future::pending::<()>());
        assert_eq!(first_poll(past, &mut waiting), None);
    }
}
