//! `blerpc serve --dial URL`: the peripheral connects out (to a device gateway, through NAT)
//! and serves over that connection, reconnecting with capped exponential backoff and jitter.
//!
//! On that connection only, the server also answers the gateway's built-in command
//! `blerpc.relay` ([`blerpc_gateway::relay::RELAY_COMMAND`]): its request is a one-time
//! `ws://` or `wss://` URL on the same host as `--dial`; the device dials it and serves a fresh
//! connection there (a backend's own central then runs its own key exchange through the
//! gateway), and answers once that connection is up. A URL on another host, or any other
//! scheme, is refused: the command cannot send the device anywhere else.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use blerpc::Server;
use blerpc::backoff::Backoff;
use blerpc::link::Link;
use blerpc::link::connect::{ConnectError, ConnectOptions, OnLink, open};
use blerpc::link::url::LinkUrl;
use blerpc::server::{BoxFuture, BoxStream, Bytes, CallKind, Dispatch, ServerError, Status};
use blerpc_gateway::relay::RELAY_COMMAND;

use crate::links::{TrustFlags, connect_error};

/// `--dial`'s trust flags.
const DIAL_TRUST: TrustFlags = TrustFlags {
    ca: "--dial-tls-ca",
    pin: "--dial-tls-cert-pin",
};

/// Where and how a device dials.
#[derive(Clone, Debug)]
pub struct Dialer {
    /// The gateway's device listener.
    pub url: LinkUrl,
    /// Trust for `tls://` and `wss://` (gateway and relay URLs alike).
    pub options: ConnectOptions,
}

/// Serves one connection on a link until it closes.
struct ServeOn<'a>(&'a Server);

impl OnLink for ServeOn<'_> {
    type Output = Result<(), ServerError>;
    fn run<L: Link>(self, link: L) -> impl Future<Output = Self::Output> + Send {
        self.0.serve_link(link)
    }
}

/// Serves a relayed connection on a task of its own (for at most a week), answering at once.
struct ServeRelayed(Server);

impl OnLink for ServeRelayed {
    type Output = ();
    fn run<L: Link>(self, link: L) -> impl Future<Output = ()> + Send {
        tracing::info!("relayed connection open");
        tokio::spawn(async move {
            match tokio::time::timeout(Duration::from_secs(7 * 24 * 3600), self.0.serve_link(link))
                .await
            {
                Ok(Ok(())) | Err(_) => tracing::info!("relayed connection closed"),
                Ok(Err(e)) => tracing::info!("relayed connection ended: {e}"),
            }
        });
        std::future::ready(())
    }
}

impl Dialer {
    /// Connects to the gateway and serves one connection on it with `server` until it closes.
    async fn serve_once(&self, server: &Server) -> anyhow::Result<()> {
        let url = &self.url;
        open(url, &self.options, ServeOn(server))
            .await
            .map_err(|e| connect_error(e, &DIAL_TRUST))?
            .with_context(|| format!("the connection to {url} failed"))
    }

    fn host(&self) -> &str {
        self.url.host().unwrap_or_default()
    }
}

/// Keeps a connection to the gateway until `shutdown`: dial, serve, and after a failure or a
/// close wait per `backoff` and dial again. `on_gateway` serves the gateway connection (it
/// answers `blerpc.relay`); `plain` serves relayed connections.
pub async fn run(
    dialer: Dialer,
    plain: Server,
    on_gateway: impl FnOnce(Arc<dyn Dispatch>) -> anyhow::Result<Server>,
    inner: Arc<dyn Dispatch>,
    mut backoff: Backoff,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let dialer = Arc::new(dialer);
    let relaying = RelayDispatch {
        inner,
        dialer: dialer.clone(),
        plain,
    };
    let server = on_gateway(Arc::new(relaying))?;
    tokio::pin!(shutdown);
    loop {
        let started = Instant::now();
        tokio::select! {
            () = &mut shutdown => return Ok(()),
            r = dialer.serve_once(&server) => match r {
                Ok(()) => tracing::info!(url = %dialer.url, "the gateway closed the connection"),
                Err(e) => tracing::warn!("{e:#}"),
            },
        }
        backoff.connection_ended(started.elapsed());
        let wait = backoff.next_wait();
        tracing::info!(url = %dialer.url, "dialling again in {wait:?}");
        tokio::select! {
            () = &mut shutdown => return Ok(()),
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// The service, plus `blerpc.relay` (see the [module docs](self)).
struct RelayDispatch {
    inner: Arc<dyn Dispatch>,
    dialer: Arc<Dialer>,
    plain: Server,
}

impl RelayDispatch {
    fn relay_url(&self, request: &[u8]) -> Result<LinkUrl, Status> {
        let text = std::str::from_utf8(request)
            .map_err(|_| Status::decode("the relay URL is not UTF-8"))?;
        let url: LinkUrl = text
            .parse()
            .map_err(|e| Status::decode(format!("the relay URL {text:?}: {e}")))?;
        match &url {
            LinkUrl::Ws { host, .. } if host == self.dialer.host() => Ok(url),
            LinkUrl::Ws { host, .. } => Err(Status::handler_failed(format!(
                "refusing to relay to {host}: relayed connections go to the host dialled ({})",
                self.dialer.host()
            ))),
            _ => Err(Status::handler_failed(
                "refusing to relay: the relay URL must be ws:// or wss://",
            )),
        }
    }
}

impl Dispatch for RelayDispatch {
    fn kind(&self, name: &str) -> Option<CallKind> {
        if name == RELAY_COMMAND {
            Some(CallKind::Unary)
        } else {
            self.inner.kind(name)
        }
    }

    fn unary(&self, name: &str, request: Bytes) -> BoxFuture<Result<Vec<u8>, Status>> {
        if name != RELAY_COMMAND {
            return self.inner.unary(name, request);
        }
        let url = self.relay_url(&request);
        let dialer = self.dialer.clone();
        let plain = self.plain.clone();
        Box::pin(async move {
            open(&url?, &dialer.options, ServeRelayed(plain))
                .await
                .map_err(|e| match e {
                    ConnectError::NoTlsTrust { .. } => Status::handler_failed(
                        "cannot open a wss:// relay without --dial-tls-ca or --dial-tls-cert-pin",
                    ),
                    e => Status::handler_failed(format!(
                        "cannot open the relayed connection: {:#}",
                        anyhow::Error::new(e)
                    )),
                })?;
            Ok(Vec::new())
        })
    }

    fn server_stream(&self, name: &str, request: Bytes) -> BoxStream<Result<Vec<u8>, Status>> {
        self.inner.server_stream(name, request)
    }

    fn client_stream(
        &self,
        name: &str,
        items: BoxStream<Bytes>,
    ) -> BoxFuture<Result<Vec<u8>, Status>> {
        self.inner.client_stream(name, items)
    }

    fn sole_upload(&self) -> Option<&'static str> {
        self.inner.sole_upload()
    }
}
