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

use anyhow::{Context as _, anyhow, bail};
use blerpc::Server;
use blerpc::backoff::Backoff;
use blerpc::link::tcp::{self, TcpOptions};
use blerpc::link::tls::{self, TlsClientConfig};
use blerpc::link::url::LinkUrl;
use blerpc::link::ws::{self, WsOptions};
use blerpc::server::{BoxFuture, BoxStream, Bytes, CallKind, Dispatch, Status};
use blerpc_gateway::relay::RELAY_COMMAND;

use crate::link::Traced;

/// Where and how a device dials.
#[derive(Clone, Debug)]
pub struct Dialer {
    /// The gateway's device listener.
    pub url: LinkUrl,
    /// Trust for `tls://` and `wss://` (gateway and relay URLs alike).
    pub tls: Option<TlsClientConfig>,
}

impl Dialer {
    /// Connects to `url` and serves one connection on it with `server` until it closes.
    async fn serve_once(&self, url: &LinkUrl, server: &Server) -> anyhow::Result<()> {
        let what = || format!("cannot connect to {url}");
        let need_tls = || {
            self.tls.as_ref().ok_or_else(|| {
                anyhow!(
                    "{url} needs TLS trust: pass --dial-tls-ca FILE or --dial-tls-cert-pin FILE"
                )
            })
        };
        let served = match url {
            LinkUrl::Tcp { .. } => {
                let link = tcp::connect(url.authority(), &TcpOptions::default())
                    .await
                    .with_context(what)?;
                server.serve_link(Traced::new(link)).await
            }
            LinkUrl::Tls { host, port } => {
                let link = tls::connect(host, *port, need_tls()?, &TcpOptions::default())
                    .await
                    .with_context(what)?;
                server.serve_link(Traced::new(link)).await
            }
            LinkUrl::Ws { secure, .. } => {
                let link = if *secure {
                    ws::connect_tls(&url.to_string(), need_tls()?, &WsOptions::default()).await
                } else {
                    ws::connect(&url.to_string(), &WsOptions::default()).await
                }
                .with_context(what)?;
                server.serve_link(Traced::new(link)).await
            }
            other => bail!("cannot dial {other}: use tcp://, tls://, ws:// or wss://"),
        };
        served.with_context(|| format!("the connection to {url} failed"))
    }

    fn host(&self) -> &str {
        match &self.url {
            LinkUrl::Tcp { host, .. } | LinkUrl::Tls { host, .. } | LinkUrl::Ws { host, .. } => {
                host
            }
            _ => "",
        }
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
            r = dialer.serve_once(&dialer.url, &server) => match r {
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
            let url = url?;
            let link = match &url {
                LinkUrl::Ws { secure: true, .. } => match &dialer.tls {
                    Some(tls) => {
                        ws::connect_tls(&url.to_string(), tls, &WsOptions::default()).await
                    }
                    None => {
                        return Err(Status::handler_failed(
                            "cannot open a wss:// relay without --dial-tls-ca or --dial-tls-cert-pin",
                        ));
                    }
                },
                _ => ws::connect(&url.to_string(), &WsOptions::default()).await,
            }
            .map_err(|e| Status::handler_failed(format!("cannot open the relayed connection: {e}")))?;
            tracing::info!("relayed connection open");
            tokio::spawn(async move {
                match tokio::time::timeout(
                    Duration::from_secs(7 * 24 * 3600),
                    plain.serve_link(Traced::new(link)),
                )
                .await
                {
                    Ok(Ok(())) | Err(_) => tracing::info!("relayed connection closed"),
                    Ok(Err(e)) => tracing::info!("relayed connection ended: {e}"),
                }
            });
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
