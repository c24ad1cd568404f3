//! Bearer tokens: `Authorization: Bearer <token>` checked in front of every authenticated
//! route, in constant time.
//!
//! A [`RequireToken`] layer answers a request without an accepted token with 401 itself, and
//! passes the rest to its route without boxing or cloning anything: it runs on every call.

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::future::{Either, Ready, ready};
use subtle::ConstantTimeEq;

use super::Problem;

/// `true` if `presented` is one of `tokens`. Every token is compared, each in constant time,
/// so neither the match nor which token matched shows in the time taken.
pub fn token_matches(tokens: &[String], presented: &[u8]) -> bool {
    let mut any = subtle::Choice::from(0);
    for t in tokens {
        any |= t.as_bytes().ct_eq(presented);
    }
    any.into()
}

/// Why a request with `headers` is refused by `tokens` (none: every request passes).
pub(super) fn refusal(tokens: &[String], headers: &HeaderMap) -> Option<Problem> {
    if tokens.is_empty() {
        return None;
    }
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    let detail = match presented {
        Some(p) if token_matches(tokens, p) => return None,
        Some(_) => "the bearer token is not one this gateway accepts",
        None => "this gateway needs `Authorization: Bearer <token>`",
    };
    Some(Problem::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "Unauthorized",
        detail.to_string(),
    ))
}

/// The layer that lets through only requests presenting one of its tokens.
#[derive(Clone, Debug)]
pub(crate) struct RequireToken {
    tokens: Arc<[String]>,
}

impl RequireToken {
    /// Requires one of `tokens` (none: lets every request through).
    pub(crate) fn new(tokens: Arc<[String]>) -> RequireToken {
        RequireToken { tokens }
    }
}

impl<S> tower::Layer<S> for RequireToken {
    type Service = TokenChecked<S>;

    fn layer(&self, inner: S) -> TokenChecked<S> {
        TokenChecked {
            tokens: self.tokens.clone(),
            inner,
        }
    }
}

/// A route behind [`RequireToken`].
#[derive(Clone, Debug)]
pub(crate) struct TokenChecked<S> {
    tokens: Arc<[String]>,
    inner: S,
}

impl<S> tower::Service<Request> for TokenChecked<S>
where
    S: tower::Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Either<S::Future, Ready<Result<Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        match refusal(&self.tokens, request.headers()) {
            None => Either::Left(self.inner.call(request)),
            Some(problem) => Either::Right(ready(Ok(problem.into_response()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(authorization: Option<&'static str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = authorization {
            h.insert(header::AUTHORIZATION, a.parse().unwrap());
        }
        h
    }

    #[test]
    fn tokens_match_exactly() {
        let tokens = vec!["alpha".to_string(), "beta-2".to_string()];
        assert!(token_matches(&tokens, b"alpha"));
        assert!(token_matches(&tokens, b"beta-2"));
        assert!(!token_matches(&tokens, b"alph"));
        assert!(!token_matches(&tokens, b"alphaa"));
        assert!(!token_matches(&tokens, b""));
        assert!(!token_matches(&[], b"alpha"));
    }

    #[test]
    fn only_a_listed_bearer_token_passes() {
        let tokens = ["alpha".to_string(), "beta".to_string()];
        assert!(refusal(&tokens, &headers(Some("Bearer beta"))).is_none());
        let wrong = refusal(&tokens, &headers(Some("Bearer gamma"))).unwrap();
        assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
        assert!(wrong.detail.contains("not one this gateway accepts"));
        let missing = refusal(&tokens, &headers(None)).unwrap();
        assert!(missing.detail.contains("needs `Authorization: Bearer"));
        // Another scheme is no token.
        assert!(refusal(&tokens, &headers(Some("Basic YWxwaGE="))).is_some());
        assert!(refusal(&tokens, &headers(Some("Bearer alphabeta"))).is_some());
    }

    #[test]
    fn without_tokens_every_request_passes() {
        assert!(refusal(&[], &headers(None)).is_none());
        assert!(refusal(&[], &headers(Some("Bearer anything"))).is_none());
    }
}
