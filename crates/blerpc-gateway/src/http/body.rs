//! Request bodies read whole (a call's JSON, a durable call's), within a size and a time: a
//! body whose `Content-Length` is over the size is refused before a byte of it is read, one
//! that grows past it is refused when it does, and one that does not arrive in full within
//! [`GatewayConfig::http_body_timeout`](crate::GatewayConfig::http_body_timeout) (a client that
//! trickles it, or stops) is given up. The answers to both carry `Connection: close`
//! ([`super::Problem`]), so the rest of such a body is never read.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};

/// Why a body was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// The body is (or announced itself as) over the limit.
    #[error("the request body is larger than {limit} bytes")]
    TooLarge {
        /// The limit, bytes.
        limit: usize,
    },
    /// The body did not arrive in full within the timeout.
    #[error("the request body did not arrive in full within {0:?}")]
    Timeout(Duration),
    /// The connection failed while the body was read.
    #[error("the request body failed: {0}")]
    Failed(String),
}

/// The `Content-Length` `headers` announce, if any (an unparsable one is left to the body's
/// own framing, which hyper has already checked).
fn announced(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Reads `body` (whose request had `headers`) whole: at most `limit` bytes, within `timeout`.
pub async fn read(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, BodyError> {
    if announced(headers).is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge { limit });
    }
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Err(_) => Err(BodyError::Timeout(timeout)),
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => {
            let inner = e.into_inner();
            if inner.is::<http_body_util::LengthLimitError>() {
                Err(BodyError::TooLarge { limit })
            } else {
                Err(BodyError::Failed(inner.to_string()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use futures_util::StreamExt as _;

    fn length(n: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_LENGTH, n.parse().unwrap());
        h
    }

    #[tokio::test]
    async fn a_body_within_the_limits_is_read() {
        let got = read(&length("5"), Body::from("hello"), 5, Duration::from_secs(1)).await;
        assert_eq!(got.unwrap(), Bytes::from_static(b"hello"));
    }

    #[tokio::test]
    async fn an_announced_length_over_the_limit_is_refused_unread() {
        // The body would never end: only the header can have refused it.
        let never = Body::from_stream(futures_util::stream::pending::<Result<Bytes, BodyError>>());
        let got = read(&length("1073741824"), never, 1024, Duration::from_secs(60)).await;
        assert_eq!(got, Err(BodyError::TooLarge { limit: 1024 }));
    }

    #[tokio::test]
    async fn a_body_growing_past_the_limit_is_refused() {
        let got = read(
            &HeaderMap::new(),
            Body::from(vec![b'a'; 2048]),
            1024,
            Duration::from_secs(1),
        )
        .await;
        assert_eq!(got, Err(BodyError::TooLarge { limit: 1024 }));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_is_given_up_at_the_timeout() {
        let first = futures_util::stream::iter([Ok::<_, BodyError>(Bytes::from_static(b"{\"me"))]);
        let stalled = first.chain(futures_util::stream::pending());
        let got = read(
            &length("20"),
            Body::from_stream(stalled),
            1024,
            Duration::from_secs(10),
        )
        .await;
        assert_eq!(got, Err(BodyError::Timeout(Duration::from_secs(10))));
    }
}
