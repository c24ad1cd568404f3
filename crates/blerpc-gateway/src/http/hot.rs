//! The API's hot path: a call to a device (`POST /v1/devices/{id}/calls/{command}`) is taken in
//! front of the router, by the same steps its route takes (the token, a durable call's
//! submission, the routing to the device's holder), without the router's per-request work
//! (its path parameters, extensions, extractors and boxed handler futures). Everything else,
//! and a call whose path needs percent-decoding, goes through the router.

use std::convert::Infallible;
use std::task::{Context, Poll};

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use futures_util::future::{BoxFuture, Either};

use super::{Api, api, auth};

/// The API: its routes, with the hot path in front (what [`api_router`](super::api_router)
/// and [`router`](super::router) give, and the listener serves). A tower service of requests
/// with any body, as an axum [`Router`] is: the HTTP listener gives it hyper's bodies as they
/// come, and a test may call it with [`Body`]s.
#[derive(Clone, Debug)]
pub struct HotPath {
    api: Api,
    router: Router,
}

impl HotPath {
    /// `router` (the API's) with the hot path of `api` in front.
    pub(crate) fn new(api: Api, router: Router) -> HotPath {
        HotPath { api, router }
    }
}

impl<B> tower::Service<Request<B>> for HotPath
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<
        BoxFuture<'static, Result<Response, Infallible>>,
        <Router as tower::Service<Request<B>>>::Future,
    >;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let id = (request.method() == axum::http::Method::POST)
            .then(|| api::call_path(request.uri().path()))
            .flatten()
            .map(|(id, _)| id.to_string());
        let Some(id) = id else {
            return Either::Right(self.router.call(request));
        };
        let api = self.api.clone();
        let request = request.map(Body::new);
        Either::Left(Box::pin(async move { Ok(call(&api, &id, request).await) }))
    }
}

/// The answer to a call to device `id` (`request`'s path is that call's: [`api::call_path`]),
/// as its route gives it: `/v1/devices/{id}/{*rest}` behind the token.
async fn call(api: &Api, id: &str, request: Request) -> Response {
    if let Some(problem) = auth::refusal(&api.state.tokens, request.headers()) {
        return problem.into_response();
    }
    super::for_device(api, id, request).await
}
