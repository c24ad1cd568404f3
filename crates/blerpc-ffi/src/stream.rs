//! The stream objects: [`ResponseStream`] (peripheral→central), [`Upload`]
//! (central→peripheral) and [`BidiStream`] (both ways at once), each the runtime's own behind a
//! lock, since a foreign object is shared.
//!
//! Freeing any of them, `cancel()`, or cancelling the [`CancelToken`] it was opened with
//! cancels its call in the core (the peripheral is told, the stream slot is freed for the next
//! stream); an operation waiting on another task ends at once. Cancelling a foreign task that
//! awaits `next()` or `send()` drops only that wait: the stream stays open.

use std::sync::Arc;

use futures_util::StreamExt;
use tokio::sync::Mutex;

use crate::BlerpcError;
use crate::cancel::CancelToken;

/// The responses of a peripheral→central stream, from
/// [`Connection::server_stream`](crate::Connection::server_stream).
#[derive(Debug, uniffi::Object)]
pub struct ResponseStream {
    inner: Mutex<Option<blerpc::ResponseStream>>,
    /// Cancels the stream (the caller's token, or the stream's own).
    cancel: Arc<CancelToken>,
}

impl ResponseStream {
    pub(crate) fn new(stream: blerpc::ResponseStream, cancel: Arc<CancelToken>) -> Self {
        ResponseStream {
            inner: Mutex::new(Some(stream)),
            cancel,
        }
    }
}

#[uniffi::export(async_runtime = "tokio")]
impl ResponseStream {
    /// The next response's protobuf bytes, or none once the peripheral has ended the stream
    /// (and after [`ResponseStream::cancel`]). A failure ends the stream: `TIMEOUT` if the
    /// peripheral went quiet, `PEER_ERROR` if it refused, and from a peripheral without the
    /// streams extension `STREAM_OVERFLOW` if more items arrived than were read in time (one
    /// with it sends only what the reader has room for).
    pub async fn next(&self) -> Result<Option<Vec<u8>>, BlerpcError> {
        next_item(&self.inner, &self.cancel).await
    }

    /// Stops the stream: the call is cancelled in the core and the peripheral told. A `next()`
    /// in progress on another task returns the end.
    pub async fn cancel(&self) {
        self.cancel.cancel();
        self.inner.lock().await.take();
    }
}

/// The next item of the stream in `slot`, or none once it ended (or was cancelled, or is
/// gone). A failure or the end drops the stream (which, unended, cancels its call in the core).
async fn next_item<S>(
    slot: &Mutex<Option<S>>,
    cancel: &CancelToken,
) -> Result<Option<Vec<u8>>, BlerpcError>
where
    S: futures_util::Stream<Item = Result<Vec<u8>, blerpc::Error>> + Unpin,
{
    let mut slot = slot.lock().await;
    let Some(stream) = slot.as_mut() else {
        return Ok(None);
    };
    // Cancelled: the stream ends here.
    let item = cancel
        .guard(async { Ok(stream.next().await) })
        .await
        .unwrap_or_default();
    match item {
        Some(Ok(item)) => Ok(Some(item)),
        Some(Err(e)) => {
            *slot = None;
            Err(e.into())
        }
        None => {
            *slot = None;
            Ok(None)
        }
    }
}

/// An open central→peripheral stream, from
/// [`Connection::client_stream`](crate::Connection::client_stream).
#[derive(Debug, uniffi::Object)]
pub struct Upload {
    inner: Mutex<Option<blerpc::Upload>>,
    /// Cancels the upload (the caller's token, or the upload's own).
    cancel: Arc<CancelToken>,
}

impl Upload {
    pub(crate) fn new(upload: blerpc::Upload, cancel: Arc<CancelToken>) -> Self {
        Upload {
            inner: Mutex::new(Some(upload)),
            cancel,
        }
    }
}

/// The refusal of an operation on an upload that has ended.
fn ended() -> BlerpcError {
    BlerpcError::invalid("the upload has ended (finished, cancelled or failed)")
}

#[uniffi::export(async_runtime = "tokio")]
impl Upload {
    /// Sends one item (its protobuf bytes); waits while the link is congested. A failure
    /// (the peripheral refused the stream, the connection closed) ends the upload.
    /// A cancelled upload (by `cancel()` or its token) fails with `CANCELLED`.
    pub async fn send(&self, item: Vec<u8>) -> Result<(), BlerpcError> {
        let mut slot = self.inner.lock().await;
        let upload = slot.as_mut().ok_or_else(ended)?;
        let sent = self
            .cancel
            .guard(async { Ok(upload.send(item).await?) })
            .await;
        if sent.is_err() {
            *slot = None;
        }
        sent
    }

    /// Ends the stream and returns the peripheral's response (its protobuf bytes).
    pub async fn finish(&self) -> Result<Vec<u8>, BlerpcError> {
        let upload = self.inner.lock().await.take().ok_or_else(ended)?;
        self.cancel
            .guard(async { Ok(upload.finish().await?) })
            .await
    }

    /// Abandons the upload: the call is cancelled in the core and the peripheral told. A
    /// `send()` or `finish()` in progress on another task fails with `CANCELLED`.
    pub async fn cancel(&self) {
        self.cancel.cancel();
        self.inner.lock().await.take();
    }
}

/// An open bidirectional stream, from [`Connection::bidi_stream`](crate::Connection::bidi_stream)
/// (the streams extension): `send` items and `finish` this side's half while `next` reads the
/// peripheral's items, from two tasks at once. Items go both ways under the peripheral's and
/// this side's credits: a `send` waits while the peripheral has no room, and the peripheral
/// waits while this side has not read.
#[derive(Debug, uniffi::Object)]
pub struct BidiStream {
    /// The peripheral's items; dropping it cancels the call.
    items: Mutex<Option<blerpc::BidiStream>>,
    /// Sends on the call without the items' lock, so a send and a `next` run together.
    sender: blerpc::BidiSender,
    /// Cancels the stream (the caller's token, or the stream's own).
    cancel: Arc<CancelToken>,
}

impl BidiStream {
    pub(crate) fn new(stream: blerpc::BidiStream, cancel: Arc<CancelToken>) -> Self {
        BidiStream {
            sender: stream.sender(),
            items: Mutex::new(Some(stream)),
            cancel,
        }
    }
}

#[uniffi::export(async_runtime = "tokio")]
impl BidiStream {
    /// Sends one item (its protobuf bytes); waits while the link is congested or the
    /// peripheral has granted no room. Fails with `CANCELLED` once the stream is cancelled,
    /// and with the stream's failure once it has ended.
    pub async fn send(&self, item: Vec<u8>) -> Result<(), BlerpcError> {
        self.cancel
            .guard(async { Ok(self.sender.send(item).await?) })
            .await
    }

    /// Ends this side's half: no more items. The peripheral's keep coming until it ends the
    /// call (`next` returns none).
    pub async fn finish(&self) -> Result<(), BlerpcError> {
        self.cancel
            .guard(async { Ok(self.sender.finish().await?) })
            .await
    }

    /// The peripheral's next item, or none once it ended the call (and after `cancel`). A
    /// failure ends the stream.
    pub async fn next(&self) -> Result<Option<Vec<u8>>, BlerpcError> {
        next_item(&self.items, &self.cancel).await
    }

    /// Stops the stream both ways: the call is cancelled in the core and the peripheral told.
    /// A `next` in progress returns the end; a `send` in progress fails with `CANCELLED`.
    pub async fn cancel(&self) {
        self.cancel.cancel();
        self.items.lock().await.take();
    }
}
