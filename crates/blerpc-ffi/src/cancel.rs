//! [`CancelToken`] and the `*_cancellable` variants of [`connect`](crate::connect) and of
//! [`Connection`]'s operations: an explicit cancel, for foreign async code that does not drop
//! the Rust future when its task is cancelled.
//!
//! Python and Kotlin need none: cancelling the task or coroutine makes UniFFI drop the call's
//! future, and dropping it cancels the call in the core. Swift's generated code does not (its
//! `withUnsafeContinuation` has no cancellation handler: a cancelled `Task` keeps waiting until
//! the Rust future finishes), so the Swift layer makes a token per operation, passes it to a
//! variant here and calls [`CancelToken::cancel`] from `withTaskCancellationHandler`'s
//! `onCancel` (a synchronous closure, hence a synchronous method). The operation then ends at
//! once and its future is dropped, which is the same cancel-on-drop path: the call's slot and
//! any late answer are released in the core, a stream's peripheral is told, and the
//! connection stays usable.
//!
//! The variants are separate methods, not an optional argument of the others: every argument
//! costs the foreign side work on each call (an optional one is a buffer allocated through
//! the FFI, about 4 µs a call in Python), which Python and Kotlin would pay for nothing.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use blerpc::client::CentralError;
use tokio::sync::Notify;

use crate::connection::{Connection, open_url};
use crate::{BlerpcError, ConnectOptions};

/// Cancels the operations it was given: a connect, a call, a server stream (a pending `next()`
/// returns the end) or an upload (a pending `send()` or `finish()` fails with `CANCELLED`).
/// Once cancelled it stays cancelled: an operation started with it fails at once. Any thread
/// may cancel it, any number of times.
#[derive(Debug, Default, uniffi::Object)]
pub struct CancelToken {
    cancelled: AtomicBool,
    notify: Notify,
}

#[uniffi::export]
impl CancelToken {
    /// A token not yet cancelled.
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::new(CancelToken::default())
    }

    /// Cancels every operation given this token, now and later. Never blocks.
    pub fn cancel(&self) {
        if !self.cancelled.swap(true, Ordering::SeqCst) {
            self.notify.notify_waiters();
        }
    }

    /// `true` once [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
}

impl CancelToken {
    /// Completes once the token is cancelled (at once if it already is).
    pub(crate) async fn cancelled(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the flag is read: a cancel in between still wakes this.
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }

    /// Runs `op` until it completes or the token is cancelled; then `op` is dropped (the
    /// runtime's cancel-on-drop) and the result is `CANCELLED`. An outcome ready at the same
    /// poll as the cancel wins.
    pub(crate) async fn guard<T>(
        &self,
        op: impl Future<Output = Result<T, BlerpcError>>,
    ) -> Result<T, BlerpcError> {
        if self.is_cancelled() {
            return Err(cancelled());
        }
        tokio::select! {
            biased;
            outcome = op => outcome,
            () = self.cancelled() => Err(cancelled()),
        }
    }
}

/// [`connect`](crate::connect), which cancelling `cancel` stops (`CANCELLED`).
#[uniffi::export(async_runtime = "tokio")]
pub async fn connect_cancellable(
    url: String,
    options: ConnectOptions,
    cancel: Arc<CancelToken>,
) -> Result<Arc<Connection>, BlerpcError> {
    cancel.guard(open_url(url, options)).await
}

#[uniffi::export(async_runtime = "tokio")]
impl Connection {
    /// [`Connection::call`], which cancelling `cancel` cancels (`CANCELLED`).
    pub async fn call_cancellable(
        &self,
        command: String,
        request: Vec<u8>,
        deadline_ms: Option<u32>,
        cancel: Arc<CancelToken>,
    ) -> Result<Vec<u8>, BlerpcError> {
        cancel
            .guard(self.unary(command, request, deadline_ms))
            .await
    }

    /// [`Connection::server_stream`]; the stream keeps `cancel`: cancelling it, now or later,
    /// cancels the stream (a pending `next()` returns its end).
    pub async fn server_stream_cancellable(
        &self,
        command: String,
        request: Vec<u8>,
        cancel: Arc<CancelToken>,
    ) -> Result<Arc<crate::ResponseStream>, BlerpcError> {
        self.open_stream(command, request, cancel).await
    }

    /// [`Connection::client_stream`]; the upload keeps `cancel`: cancelling it, now or later,
    /// cancels the upload (a pending `send()` or `finish()` fails with `CANCELLED`).
    pub async fn client_stream_cancellable(
        &self,
        command: String,
        cancel: Arc<CancelToken>,
    ) -> Result<Arc<crate::Upload>, BlerpcError> {
        self.open_upload(command, cancel).await
    }

    /// [`Connection::bidi_stream`]; the stream keeps `cancel`: cancelling it, now or later,
    /// cancels the stream both ways (a pending `next()` returns its end, a `send()` fails with
    /// `CANCELLED`).
    pub async fn bidi_stream_cancellable(
        &self,
        command: String,
        cancel: Arc<CancelToken>,
    ) -> Result<Arc<crate::BidiStream>, BlerpcError> {
        self.open_bidi(command, cancel).await
    }
}

/// The error of an operation its token cancelled: the core's `CANCELLED`.
pub(crate) fn cancelled() -> BlerpcError {
    BlerpcError::from(blerpc::Error::Central(CentralError::Cancelled))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_cancel_ends_the_wait_and_drops_the_operation() {
        struct Dropped(Arc<AtomicBool>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let token = CancelToken::new();
        let dropped = Arc::new(AtomicBool::new(false));
        let witness = Dropped(dropped.clone());
        let op = async move {
            let _witness = witness;
            std::future::pending::<Result<(), BlerpcError>>().await
        };
        let canceller = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            canceller.cancel();
        });
        let e = tokio::time::timeout(Duration::from_secs(5), token.guard(op))
            .await
            .unwrap_or_else(|_| panic!("the cancel did not end the wait"))
            .err()
            .unwrap_or_else(|| panic!("completed"));
        assert_eq!(e.code(), "CANCELLED");
        assert!(
            matches!(
                e,
                BlerpcError::Call {
                    peer_code: None,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(dropped.load(Ordering::SeqCst));
        assert!(token.is_cancelled());
    }

    #[tokio::test]
    async fn a_cancelled_token_refuses_before_the_operation_starts() {
        let token = CancelToken::new();
        token.cancel();
        token.cancel();
        let started = AtomicBool::new(false);
        let e = token
            .guard(async {
                started.store(true, Ordering::SeqCst);
                Ok(())
            })
            .await
            .err()
            .unwrap_or_else(|| panic!("ran"));
        assert_eq!(e.code(), "CANCELLED");
        assert!(!started.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn an_uncancelled_token_passes_the_outcome_through() {
        let token = CancelToken::new();
        assert_eq!(token.guard(async { Ok(7) }).await, Ok(7));
        let e = BlerpcError::invalid("bad");
        assert_eq!(token.guard(async { Err::<(), _>(e.clone()) }).await, Err(e));
        assert!(!token.is_cancelled());
    }
}
