//! Bodies as `data` frames with credit-based flow control, both directions (see
//! [`envelope`](super::envelope)).
//!
//! Each side of an exchange has an inbox on the gateway's one reply subscription
//! (`_INBOX.{nuid}.*`, one route per exchange), sorted by an [`Inbox`]: credits go to the sender's
//! [`Semaphore`], everything else into a channel bounded by the window (a peer that sends past
//! its credit fails the exchange instead of growing memory). [`send_body`] sends a body within
//! the credit it holds; [`Inflow`] checks the order of what arrives and says when to grant more.

use std::sync::Arc;
use std::time::Duration;

use async_nats::{Client, HeaderMap};
use axum::body::Body;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::{Semaphore, mpsc, watch};

use super::envelope::{EnvelopeError, Frame};

/// Why a body could not be carried.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum PipeError {
    /// A frame arrived out of order: NATS dropped one (a slow consumer, a reconnect).
    #[error(
        "frame {got} arrived where {expected} was due: the connection through NATS lost a frame"
    )]
    Gap {
        /// The number due.
        expected: u64,
        /// The number that came.
        got: u64,
    },
    /// The `end` frame counts other than what arrived.
    #[error("the body ended after {got} frames, but its end says {count}")]
    Count {
        /// Frames received.
        got: u64,
        /// Frames the end counts.
        count: u64,
    },
    /// The peer sent more than its credit.
    #[error("the other gateway sent more than its window of {0} frames")]
    Overrun(u32),
    /// Nothing arrived for this long.
    #[error("nothing arrived through NATS for {0:?}: the other side has gone or is cut off")]
    Stalled(Duration),
    /// The other side said the body failed.
    #[error("{0}")]
    Failed(String),
    /// A message that is not a frame.
    #[error("an unreadable frame: {0}")]
    Envelope(#[from] EnvelopeError),
    /// Publishing failed.
    #[error("cannot publish to NATS: {0}")]
    Publish(String),
    /// The other side cancelled.
    #[error("the caller went away")]
    Cancelled,
}

/// The receiving side's bookkeeping of one body: order, count, and credit to grant.
#[derive(Debug)]
pub struct Inflow {
    next: u64,
    window: u32,
    consumed: u32,
}

impl Inflow {
    /// A body whose sender was given `window` credits.
    pub fn new(window: u32) -> Inflow {
        Inflow {
            next: 0,
            window: window.max(1),
            consumed: 0,
        }
    }

    /// A `data` frame numbered `seq` arrived.
    pub fn data(&mut self, seq: u64) -> Result<(), PipeError> {
        if seq != self.next {
            return Err(PipeError::Gap {
                expected: self.next,
                got: seq,
            });
        }
        self.next += 1;
        Ok(())
    }

    /// The `end` frame counting `count` arrived.
    pub fn end(&self, count: u64) -> Result<(), PipeError> {
        if count == self.next {
            Ok(())
        } else {
            Err(PipeError::Count {
                got: self.next,
                count,
            })
        }
    }

    /// A frame that arrived mid-body: a chunk, the body's end (an `end` with an error fails
    /// it), or `idle`. Any other frame fails the body.
    pub fn take(&mut self, frame: Frame, payload: Bytes) -> Result<Taken, PipeError> {
        match frame {
            Frame::Data { seq } => self.data(seq).map(|()| Taken::Data(payload)),
            Frame::End { count, error } => {
                self.end(count)?;
                error.map_or(Ok(Taken::End), |e| Err(PipeError::Failed(e)))
            }
            Frame::Idle => Ok(Taken::Idle),
            other => Err(PipeError::Failed(format!(
                "an unexpected frame mid-body: {other:?}"
            ))),
        }
    }

    /// A frame was consumed: the credit to grant now, if any (half a window at a time).
    pub fn consumed(&mut self) -> Option<u32> {
        self.consumed += 1;
        if self.consumed >= self.window.div_ceil(2) {
            Some(std::mem::take(&mut self.consumed))
        } else {
            None
        }
    }
}

/// What a frame mid-body is to its receiver ([`Inflow::take`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Taken {
    /// The next chunk of the body.
    Data(Bytes),
    /// The body ended whole.
    End,
    /// Nothing yet, but the body is still open.
    Idle,
}

/// The most `data` frames a sender holds credit for at once, whatever its peer announces or
/// grants: a larger window, or credit beyond it, is cut to it.
pub const MAX_WINDOW: u32 = 1024;

/// Adds `n` credits to `credits`, never beyond [`MAX_WINDOW`] held at once (a peer's credit
/// frames cannot overflow the semaphore).
pub fn grant(credits: &Semaphore, n: u32) {
    let room = (MAX_WINDOW as usize).saturating_sub(credits.available_permits());
    credits.add_permits((n as usize).min(room));
}

/// What a side's inbox delivers, credits aside.
pub type Frames = mpsc::Receiver<Result<(Frame, Bytes), PipeError>>;

/// The messages of one side's inbox, sorted as they arrive: `credit` frames add to the
/// sender's credits (at most [`MAX_WINDOW`] held), `cancel` sets `cancelled`, every other
/// frame waits in a channel of at most `bound + 4` frames for the body's reader.
#[derive(Debug)]
pub struct Inbox {
    tx: mpsc::Sender<Result<(Frame, Bytes), PipeError>>,
    credits: Arc<Semaphore>,
    cancel: watch::Sender<bool>,
    bound: u32,
}

/// Why an [`Inbox`] takes no more messages.
#[derive(Debug, PartialEq, Eq)]
pub enum Closed {
    /// The exchange fails: the reader gets this error.
    Failed(PipeError),
    /// Nobody reads the frames any more.
    Gone,
}

impl Inbox {
    /// An inbox whose frames wait at most `bound` (+ 4) at once, the frames' receiver, the
    /// credits the peer grants, and the flag its `cancel` sets. A `bound` past [`MAX_WINDOW`]
    /// is cut to it: a sender never holds more credit than that.
    pub fn new(bound: u32) -> (Inbox, Frames, Arc<Semaphore>, watch::Receiver<bool>) {
        let bound = bound.min(MAX_WINDOW);
        // The last place is kept for the error that ends the exchange.
        let (tx, rx) = mpsc::channel(bound as usize + 5);
        let credits = Arc::new(Semaphore::new(0));
        let (cancel, cancelled) = watch::channel(false);
        let inbox = Inbox {
            tx,
            credits: credits.clone(),
            cancel,
            bound,
        };
        (inbox, rx, credits, cancelled)
    }

    /// Sorts one message (its headers and payload); after an error the exchange is over.
    pub fn take(&self, headers: Option<&HeaderMap>, payload: Bytes) -> Result<(), Closed> {
        match Frame::decode(headers) {
            Ok(Frame::Credit { n }) => grant(&self.credits, n),
            Ok(Frame::Cancel) => {
                let _ = self.cancel.send(true);
            }
            Ok(_) if self.tx.capacity() <= 1 && !self.tx.is_closed() => {
                return Err(Closed::Failed(PipeError::Overrun(self.bound)));
            }
            Ok(frame) => match self.tx.try_send(Ok((frame, payload))) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    return Err(Closed::Failed(PipeError::Overrun(self.bound)));
                }
                Err(mpsc::error::TrySendError::Closed(_)) => return Err(Closed::Gone),
            },
            Err(e) => return Err(Closed::Failed(e.into())),
        }
        Ok(())
    }

    /// Ends the exchange with `error`: its reader gets it after the frames before it, and a
    /// sender waiting for credit wakes.
    pub fn fail(&self, error: PipeError) {
        // `take` keeps a place for it.
        let _ = self.tx.try_send(Err(error));
        self.close();
    }

    /// Ends the exchange: a sender waiting for credit wakes.
    pub fn close(&self) {
        self.credits.close();
    }
}

/// One side's inbox, read: its frames, the peer's credits, and the flags set by a `cancel`
/// and by NATS's "no responders" (a route on the gateway's reply subscription).
/// Dropping it ends the exchange's route.
#[derive(Debug)]
pub struct Demuxed {
    /// Frames other than credits and cancels.
    pub frames: Frames,
    /// Credits the peer granted.
    pub credits: Arc<Semaphore>,
    /// Set when the peer cancels.
    pub cancelled: watch::Receiver<bool>,
    /// Set when NATS said nobody listens on the subject the request went to.
    pub no_responders: watch::Receiver<bool>,
    _route: super::replies::Registration,
}

impl Demuxed {
    pub(super) fn routed(
        frames: Frames,
        credits: Arc<Semaphore>,
        cancelled: watch::Receiver<bool>,
        no_responders: watch::Receiver<bool>,
        route: super::replies::Registration,
    ) -> Demuxed {
        Demuxed {
            frames,
            credits,
            cancelled,
            no_responders,
            _route: route,
        }
    }
}

/// Publishes `frame` with `payload` to `to`.
pub async fn publish(
    client: &Client,
    to: &str,
    frame: &Frame,
    payload: Bytes,
) -> Result<(), PipeError> {
    client
        .publish_with_headers(to.to_string(), frame.encode(), payload)
        .await
        .map_err(|e| PipeError::Publish(e.to_string()))
}

/// How a body is sent.
#[derive(Clone, Copy, Debug)]
pub struct SendLimits {
    /// The largest `data` frame payload.
    pub chunk: usize,
    /// Without data for this long, an `idle` frame is sent (holders only: `None` for none).
    pub keepalive: Option<Duration>,
    /// The longest wait for credit.
    pub stall: Duration,
}

/// The sending side of one body: numbered `data` frames within the credit the receiver
/// granted, then `end`.
#[derive(Debug)]
pub struct Outflow<'a> {
    client: &'a Client,
    to: &'a str,
    credits: &'a Semaphore,
    stall: Duration,
    seq: u64,
}

impl<'a> Outflow<'a> {
    /// Frames to `to`, within `credits`, waiting at most `stall` for credit.
    pub fn new(client: &'a Client, to: &'a str, credits: &'a Semaphore, stall: Duration) -> Self {
        Outflow {
            client,
            to,
            credits,
            stall,
            seq: 0,
        }
    }

    /// Sends `payload` as the next `data` frame once there is credit.
    pub async fn data(&mut self, payload: Bytes) -> Result<(), PipeError> {
        match tokio::time::timeout(self.stall, self.credits.acquire()).await {
            Ok(Ok(permit)) => permit.forget(),
            Ok(Err(_closed)) => return Err(PipeError::Cancelled),
            Err(_) => return Err(PipeError::Stalled(self.stall)),
        }
        publish(
            self.client,
            self.to,
            &Frame::Data { seq: self.seq },
            payload,
        )
        .await?;
        self.seq += 1;
        Ok(())
    }

    /// Sends `idle`.
    pub async fn idle(&self) -> Result<(), PipeError> {
        publish(self.client, self.to, &Frame::Idle, Bytes::new()).await
    }

    /// Sends `end` (with `error` if the body failed); returns the frames sent.
    pub async fn end(self, error: Option<String>) -> Result<u64, PipeError> {
        let end = Frame::End {
            count: self.seq,
            error,
        };
        publish(self.client, self.to, &end, Bytes::new()).await?;
        Ok(self.seq)
    }
}

/// Sends `body` to `to` as `data` frames within `credits`, then `end` (with the body's error,
/// if it failed); returns the frames sent.
pub async fn send_body(
    client: &Client,
    to: &str,
    body: Body,
    credits: &Semaphore,
    limits: SendLimits,
) -> Result<u64, PipeError> {
    let mut stream = body.into_data_stream();
    let mut out = Outflow::new(client, to, credits, limits.stall);
    let error = loop {
        let next = match limits.keepalive {
            Some(every) => match tokio::time::timeout(every, stream.next()).await {
                Ok(next) => next,
                Err(_) => {
                    out.idle().await?;
                    continue;
                }
            },
            None => stream.next().await,
        };
        let chunk = match next {
            None => break None,
            Some(Err(e)) => break Some(e.to_string()),
            Some(Ok(chunk)) => chunk,
        };
        for piece in chunk.chunks(limits.chunk.max(1)) {
            out.data(chunk.slice_ref(piece)).await?;
        }
    };
    out.end(error).await
}

/// A body received as frames from `frames`, granting credit to `peer` as it is read (each
/// `data` frame one chunk); fails if nothing (not even `idle`) arrives for `stall`. `keep` lives
/// as long as the body.
pub fn receive_body(
    client: Client,
    peer: String,
    frames: Frames,
    window: u32,
    stall: Duration,
    keep: impl Send + 'static,
) -> Body {
    struct State<K> {
        client: Client,
        peer: String,
        frames: Frames,
        flow: Inflow,
        stall: Duration,
        done: bool,
        _keep: K,
    }
    let state = State {
        client,
        peer,
        frames,
        flow: Inflow::new(window),
        stall,
        done: false,
        _keep: keep,
    };
    let stream = futures_util::stream::unfold(state, |mut s| async move {
        if s.done {
            return None;
        }
        loop {
            let next = match tokio::time::timeout(s.stall, s.frames.recv()).await {
                Err(_) => Err(PipeError::Stalled(s.stall)),
                Ok(None) => Err(PipeError::Failed(
                    "the connection through NATS closed mid-body".to_string(),
                )),
                Ok(Some(r)) => r,
            };
            let item = next.and_then(|(frame, payload)| s.flow.take(frame, payload));
            return match item {
                Ok(Taken::Idle) => continue,
                Ok(Taken::Data(payload)) => {
                    if let Some(n) = s.flow.consumed() {
                        let _ =
                            publish(&s.client, &s.peer, &Frame::Credit { n }, Bytes::new()).await;
                    }
                    Some((Ok::<Bytes, PipeError>(payload), s))
                }
                Ok(Taken::End) => None,
                Err(e) => {
                    s.done = true;
                    Some((Err(e), s))
                }
            };
        }
    });
    Body::from_stream(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_never_exceeds_a_window_however_much_is_granted() {
        let credits = Semaphore::new(0);
        grant(&credits, 16);
        assert_eq!(credits.available_permits(), 16);
        for _ in 0..1000 {
            grant(&credits, u32::MAX);
        }
        assert_eq!(credits.available_permits(), MAX_WINDOW as usize);
    }

    #[test]
    fn frames_are_taken_in_order_and_counted() {
        let mut f = Inflow::new(4);
        f.data(0).unwrap();
        f.data(1).unwrap();
        assert_eq!(
            f.data(3),
            Err(PipeError::Gap {
                expected: 2,
                got: 3
            })
        );
        assert_eq!(f.end(5), Err(PipeError::Count { got: 2, count: 5 }));
        assert_eq!(f.end(2), Ok(()));
    }

    #[test]
    fn credit_is_granted_half_a_window_at_a_time() {
        let mut f = Inflow::new(4);
        assert_eq!(f.consumed(), None);
        assert_eq!(f.consumed(), Some(2));
        assert_eq!(f.consumed(), None);
        assert_eq!(f.consumed(), Some(2));
        let mut one = Inflow::new(1);
        assert_eq!(one.consumed(), Some(1));
        let mut zero = Inflow::new(0);
        assert_eq!(zero.consumed(), Some(1));
    }

    fn frame(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.insert(*name, *value);
        }
        h
    }

    #[test]
    fn an_inbox_sorts_credits_cancels_and_frames_and_bounds_them() {
        let (inbox, mut frames, credits, cancelled) = Inbox::new(2);
        let credit = frame(&[("Blerpc-Frame", "credit"), ("Blerpc-Credit", "4294967295")]);
        inbox.take(Some(&credit), Bytes::new()).unwrap();
        inbox.take(Some(&credit), Bytes::new()).unwrap();
        assert_eq!(credits.available_permits(), MAX_WINDOW as usize);
        inbox
            .take(Some(&frame(&[("Blerpc-Frame", "cancel")])), Bytes::new())
            .unwrap();
        assert!(*cancelled.borrow());
        let data = frame(&[("Blerpc-Frame", "data"), ("Blerpc-Seq", "0")]);
        for _ in 0..6 {
            inbox.take(Some(&data), Bytes::from_static(b"ab")).unwrap();
        }
        assert_eq!(
            inbox.take(Some(&data), Bytes::new()),
            Err(Closed::Failed(PipeError::Overrun(2)))
        );
        assert_eq!(frames.len(), 6);
        assert!(matches!(
            inbox.take(Some(&frame(&[("Blerpc-Frame", "credit")])), Bytes::new()),
            Err(Closed::Failed(PipeError::Envelope(EnvelopeError::Missing(
                "Blerpc-Credit"
            ))))
        ));
        let (wide, _, _, _) = Inbox::new(u32::MAX);
        assert_eq!(wide.bound, MAX_WINDOW);
        frames.close();
        while frames.try_recv().is_ok() {}
        assert_eq!(inbox.take(Some(&data), Bytes::new()), Err(Closed::Gone));
    }

    #[test]
    fn a_body_takes_chunks_in_order_then_its_end() {
        let mut f = Inflow::new(2);
        let chunk = Bytes::from_static(b"\x01\x02");
        assert_eq!(
            f.take(Frame::Data { seq: 0 }, chunk.clone()),
            Ok(Taken::Data(chunk))
        );
        assert_eq!(f.take(Frame::Idle, Bytes::new()), Ok(Taken::Idle));
        assert_eq!(
            f.take(
                Frame::End {
                    count: 1,
                    error: Some("device disconnected".into())
                },
                Bytes::new()
            ),
            Err(PipeError::Failed("device disconnected".into()))
        );
        assert_eq!(
            f.take(
                Frame::End {
                    count: 1,
                    error: None
                },
                Bytes::new()
            ),
            Ok(Taken::End)
        );
        assert!(matches!(
            f.take(Frame::Cancel, Bytes::new()),
            Err(PipeError::Failed(_))
        ));
    }
}
