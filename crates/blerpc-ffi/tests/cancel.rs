//! A [`CancelToken`] cancels each kind of operation against a real server over TCP, the
//! operation ends at once with `CANCELLED` (a stream with its end), and the connection stays
//! usable: the call slots and the stream slot are free again.
//!
//! The server's commands wait for the test's release before they answer (`hang`, the upload
//! `sink`) or after their first item (`one_then_wait`), so the calls are still in flight when
//! they are cancelled; once released, their late answers must be dropped by the client.

use std::sync::Arc;
use std::time::Duration;

use blerpc::known_keys::to_hex;
use blerpc::link::listen::{ListenOptions, Listener};
use blerpc::server::{BoxFuture, BoxStream, Bytes, CallKind, Dispatch, Status};
use blerpc::{Server, ServerConfig};
use blerpc_ffi::{
    BlerpcError, CancelToken, ConnectOptions, Connection, connect, connect_cancellable,
};
use futures_util::StreamExt;
use tokio::sync::watch;

/// Nothing here takes this long unless a cancel failed to end a wait.
const BOUND: Duration = Duration::from_secs(5);

/// `echo` answers its request; `hang` answers once released; `one_then_wait` sends `[1]`,
/// then ends once released; the upload `sink` reads every item, then answers once released;
/// `talk`, both ways, echoes each item and ends once released after the central's half.
struct Stalling {
    release: watch::Receiver<bool>,
}

impl Stalling {
    /// Completes once the test released the server.
    fn released(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut release = self.release.clone();
        async move {
            // An error means the test is over: nothing waits for the answer any more.
            let _ = release.wait_for(|r| *r).await;
        }
    }
}

impl Dispatch for Stalling {
    fn kind(&self, name: &str) -> Option<CallKind> {
        match name {
            "echo" | "hang" => Some(CallKind::Unary),
            "one_then_wait" => Some(CallKind::ServerStream),
            "sink" => Some(CallKind::ClientStream),
            "talk" => Some(CallKind::BidiStream),
            _ => None,
        }
    }
    fn unary(&self, name: &str, request: Bytes) -> BoxFuture<Result<Vec<u8>, Status>> {
        let released = (name != "echo").then(|| self.released());
        Box::pin(async move {
            if let Some(released) = released {
                released.await;
            }
            Ok(request.to_vec())
        })
    }
    fn server_stream(&self, _: &str, _: Bytes) -> BoxStream<Result<Vec<u8>, Status>> {
        let end = futures_util::stream::once(self.released()).filter_map(|()| async { None });
        Box::pin(futures_util::stream::iter([Ok(vec![1])]).chain(end))
    }
    /// `talk` echoes each item; once the central ends its half, it ends once released.
    fn bidi_stream(&self, _: &str, items: BoxStream<Bytes>) -> BoxStream<Result<Vec<u8>, Status>> {
        let end = futures_util::stream::once(self.released()).filter_map(|()| async { None });
        Box::pin(items.map(|item| Ok(item.to_vec())).chain(end))
    }
    fn client_stream(
        &self,
        _: &str,
        items: BoxStream<Bytes>,
    ) -> BoxFuture<Result<Vec<u8>, Status>> {
        let released = self.released();
        Box::pin(async move {
            let n = items.count().await;
            released.await;
            Ok(vec![u8::try_from(n).unwrap_or(u8::MAX)])
        })
    }
}

/// A connection to a fresh [`Stalling`] server on a TCP listener, its key pinned, and the
/// server's release.
async fn connected() -> (Arc<Connection>, watch::Sender<bool>) {
    let (release, held) = watch::channel(false);
    let server = Server::new(
        Stalling { release: held },
        ServerConfig {
            identity: Some(blerpc::identity::generate()),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let key = server.identity_public().unwrap_or_else(|| panic!("no key"));
    let url = "tcp://127.0.0.1:0"
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    let listener = Listener::bind(&url, &ListenOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let url = listener.url().to_string();
    tokio::spawn(async move { listener.serve(&server, std::future::pending()).await });
    let options = ConnectOptions {
        trust_key: Some(to_hex(&key)),
        ..Default::default()
    };
    let conn = connect(url, options)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (conn, release)
}

/// Lets the server's stalled handlers answer, and gives their late answers time to arrive
/// (the client drops them: their calls were cancelled).
async fn release(release: &watch::Sender<bool>) {
    release.send_replace(true);
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// `fut`'s outcome, failing the test if it takes longer than [`BOUND`].
async fn bounded<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(BOUND, fut)
        .await
        .unwrap_or_else(|_| panic!("still waiting after {BOUND:?}"))
}

/// Four echo calls at once (every call slot) answer.
async fn four_calls_answer(conn: &Connection) {
    let calls = (0..4u8).map(|i| conn.call("echo".into(), vec![i], Some(2_000)));
    for (i, reply) in bounded(futures_util::future::join_all(calls))
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(reply, Ok(vec![u8::try_from(i).unwrap_or(0)]));
    }
}

fn assert_cancelled<T: std::fmt::Debug>(outcome: Result<T, BlerpcError>) {
    match outcome {
        Err(e) => assert_eq!(e.code(), "CANCELLED", "{e:?}"),
        Ok(v) => panic!("not cancelled: {v:?}"),
    }
}

#[tokio::test]
async fn cancelled_calls_end_and_free_their_slots() {
    let (conn, server) = connected().await;
    let tokens: Vec<_> = (0..4).map(|_| CancelToken::new()).collect();
    let calls: Vec<_> = tokens
        .iter()
        .map(|t| {
            let (conn, t) = (conn.clone(), t.clone());
            tokio::spawn(async move { conn.call_cancellable("hang".into(), vec![], None, t).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The server runs the four handlers, each holding a receiver of the release.
    assert_eq!(server.receiver_count(), 1 + 4);
    // Every slot is taken by a call that will never be answered.
    let e = conn.call("echo".into(), vec![], None).await;
    assert_eq!(
        e.map_err(|e| e.code().to_string()),
        Err("TOO_MANY_CALLS".into())
    );
    for t in &tokens {
        t.cancel();
    }
    for call in calls {
        assert_cancelled(bounded(call).await.unwrap_or_else(|e| panic!("{e}")));
    }
    // The client's slots are free at once, and so are the server's: the cancel extension told
    // it, and it dropped the four handlers. A call is answered at once.
    let e = bounded(conn.call("echo".into(), vec![], None)).await;
    assert_eq!(e.map_err(|e| e.code().to_string()), Ok(vec![]));
    assert_eq!(
        server.receiver_count(),
        1,
        "the cancelled handlers were dropped"
    );
    release(&server).await;
    four_calls_answer(&conn).await;
}

#[tokio::test]
async fn a_cancelled_token_refuses_the_call_and_the_connect() {
    let (conn, _server) = connected().await;
    let token = CancelToken::new();
    token.cancel();
    assert_cancelled(
        conn.call_cancellable("echo".into(), vec![1], None, token.clone())
            .await,
    );
    assert_cancelled(
        conn.server_stream_cancellable("one_then_wait".into(), vec![], token.clone())
            .await,
    );
    assert_cancelled(
        conn.client_stream_cancellable("sink".into(), token.clone())
            .await,
    );
    four_calls_answer(&conn).await;
    let options = ConnectOptions {
        allow_any_key: true,
        ..Default::default()
    };
    assert_cancelled(connect_cancellable(conn.info().peer_id, options, token).await);
}

#[tokio::test]
async fn a_connect_that_gets_no_answer_is_cancelled() {
    // Accepts the TCP connection and never answers setup.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let url = format!(
        "tcp://{}",
        silent.local_addr().unwrap_or_else(|e| panic!("{e}"))
    );
    let hold = tokio::spawn(async move {
        let accepted = silent.accept().await;
        std::future::pending::<()>().await;
        drop(accepted);
    });
    let token = CancelToken::new();
    let canceller = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        canceller.cancel();
    });
    let options = ConnectOptions {
        allow_any_key: true,
        ..Default::default()
    };
    assert_cancelled(bounded(connect_cancellable(url, options, token)).await);
    hold.abort();
}

#[tokio::test]
async fn a_cancelled_stream_ends_its_pending_next_and_frees_the_stream() {
    let (conn, server) = connected().await;
    let token = CancelToken::new();
    let stream = conn
        .server_stream_cancellable("one_then_wait".into(), vec![], token.clone())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bounded(stream.next()).await, Ok(Some(vec![1])));
    let pending = tokio::spawn({
        let stream = stream.clone();
        async move { stream.next().await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!pending.is_finished());
    token.cancel();
    let end = bounded(pending).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(end, Ok(None));
    assert_eq!(stream.next().await, Ok(None));
    // The stream slot is free: a new stream starts (no STREAM_ACTIVE), and calls answer.
    release(&server).await;
    server.send_replace(false);
    let again = conn
        .server_stream("one_then_wait".into(), vec![])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bounded(again.next()).await, Ok(Some(vec![1])));
    // `cancel()` ends a `next()` pending on another task too, without waiting for an item.
    let pending = tokio::spawn({
        let again = again.clone();
        async move { again.next().await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    bounded(again.cancel()).await;
    assert_eq!(bounded(pending).await.ok(), Some(Ok(None)));
    release(&server).await;
    four_calls_answer(&conn).await;
}

#[tokio::test]
async fn a_cancelled_upload_fails_its_pending_finish() {
    let (conn, server) = connected().await;
    let token = CancelToken::new();
    let upload = conn
        .client_stream_cancellable("sink".into(), token.clone())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    bounded(upload.send(vec![1, 2, 3]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let finish = tokio::spawn({
        let upload = upload.clone();
        async move { upload.finish().await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!finish.is_finished());
    token.cancel();
    assert_cancelled(bounded(finish).await.unwrap_or_else(|e| panic!("{e}")));
    // Ended: more is refused, and the stream slot is free for the next stream.
    let e = upload.send(vec![4]).await.err();
    assert_eq!(
        e.map(|e| e.code().to_string()),
        Some("INVALID_ARGUMENT".into())
    );
    let stream = conn
        .server_stream("one_then_wait".into(), vec![])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bounded(stream.next()).await, Ok(Some(vec![1])));
    bounded(stream.cancel()).await;
    release(&server).await;
    four_calls_answer(&conn).await;
}

#[tokio::test]
async fn a_cancelled_stream_both_ways_ends_its_next_and_refuses_sends() {
    let (conn, server) = connected().await;
    let token = CancelToken::new();
    let talk = conn
        .bidi_stream_cancellable("talk".into(), token.clone())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Both ways at once: an item out, its echo back, the stream still open.
    for i in 0..3u8 {
        bounded(talk.send(vec![i]))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(bounded(talk.next()).await, Ok(Some(vec![i])));
    }
    let pending = tokio::spawn({
        let talk = talk.clone();
        async move { talk.next().await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!pending.is_finished());
    token.cancel();
    assert_eq!(bounded(pending).await.ok(), Some(Ok(None)));
    assert_cancelled(talk.send(vec![9]).await);
    // The stream slot is free: a new stream both ways runs to its end.
    let again = conn
        .bidi_stream("talk".into())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    bounded(again.send(vec![7]))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    bounded(again.finish())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bounded(again.next()).await, Ok(Some(vec![7])));
    release(&server).await;
    assert_eq!(bounded(again.next()).await, Ok(None));
    four_calls_answer(&conn).await;
}
