//! The two stream objects: [`ResponseStream`] (peripheral→central) and [`Upload`]
//! (central→peripheral), each the runtime's own behind a lock, since a foreign object is shared.
//!
//! Freeing either object, or `cancel()`, cancels its call in the core (the peripheral is told,
//! the stream slot is freed for the next stream). Cancelling a foreign task that awaits
//! `next()` or `send()` drops only that wait: the stream stays open.

use futures_util::StreamExt;
use tokio::sync::Mutex;

use crate::BlerpcError;

/// The responses of a peripheral→central stream, from
/// [`Connection::server_stream`](crate::Connection::server_stream).
#[derive(Debug, uniffi::Object)]
pub struct ResponseStream {
    inner: Mutex<Option<blerpc::ResponseStream>>,
}

impl ResponseStream {
    pub(crate) fn new(stream: blerpc::ResponseStream) -> Self {
        ResponseStream {
            inner: Mutex::new(Some(stream)),
        }
    }
}

#[uniffi::export(async_runtime = "tokio")]
impl ResponseStream {
    /// The next response's protobuf bytes, or none once the peripheral has ended the stream
    /// (and after [`ResponseStream::cancel`]). A failure ends the stream: `STREAM_OVERFLOW`
    /// if more items arrived than were read in time, `TIMEOUT` if the peripheral went
    /// quiet, `PEER_ERROR` if it refused.
    pub async fn next(&self) -> Result<Option<Vec<u8>>, BlerpcError> {
        let mut slot = self.inner.lock().await;
        let Some(stream) = slot.as_mut() else {
            return Ok(None);
        };
        match stream.next().await {
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

    /// Stops the stream: the call is cancelled in the core and the peripheral told. Waits for
    /// a `next()` in progress on another task to return first.
    pub async fn cancel(&self) {
        self.inner.lock().await.take();
    }
}

/// An open central→peripheral stream, from
/// [`Connection::client_stream`](crate::Connection::client_stream).
#[derive(Debug, uniffi::Object)]
pub struct Upload {
    inner: Mutex<Option<blerpc::Upload>>,
}

impl Upload {
    pub(crate) fn new(upload: blerpc::Upload) -> Self {
        Upload {
            inner: Mutex::new(Some(upload)),
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
    pub async fn send(&self, item: Vec<u8>) -> Result<(), BlerpcError> {
        let mut slot = self.inner.lock().await;
        let upload = slot.as_mut().ok_or_else(ended)?;
        if let Err(e) = upload.send(item).await {
            *slot = None;
            return Err(e.into());
        }
        Ok(())
    }

    /// Ends the stream and returns the peripheral's response (its protobuf bytes).
    pub async fn finish(&self) -> Result<Vec<u8>, BlerpcError> {
        let upload = self.inner.lock().await.take().ok_or_else(ended)?;
        Ok(upload.finish().await?)
    }

    /// Abandons the upload: the call is cancelled in the core and the peripheral told.
    pub async fn cancel(&self) {
        self.inner.lock().await.take();
    }
}
