//! The device's side: dial a gateway and serve over that connection.
//!
//! A device behind NAT cannot be reached, so it connects out ([`Dialer::run`]: what
//! `blerpc serve --dial URL` runs), serves its service on that connection, and after a failure
//! or a close dials again with capped exponential backoff and jitter ([`Backoff`]).
//!
//! On that connection only, the device also answers the gateway's built-in command
//! [`RELAY_COMMAND`]: its request is a one-time `ws://` or `wss://` URL on the same host as
//! the gateway dialled; the device dials it and serves a fresh connection there (a backend's own
//! central then runs its own key exchange through the gateway), and answers once that connection
//! is up. A URL on another host, or any other scheme, is refused: the command cannot send the
//! device anywhere else. The device announces the command in CAPABILITIES
//! (`peripheral.relay`), on the gateway connection only.
//!
//! ```no_run
//! # async fn run() -> Result<(), blerpc::server::ServerError> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use blerpc::backoff::Backoff;
//! use blerpc::link::connect::ConnectOptions;
//! use blerpc::server::Dispatch;
//! use blerpc::ServerConfig;
//! use blerpc_gateway::dial::Dialer;
//!
//! let service: Arc<dyn Dispatch> =
//!     Arc::new(blerpc_demo::pb::BlerpcServer::new(blerpc_demo::DemoService::default()));
//! let config = ServerConfig { identity: Some([7; 32]), ..ServerConfig::default() };
//! let dialer = Dialer {
//!     url: "tcp://gateway.example:7000".parse().unwrap(),
//!     options: ConnectOptions::default(),
//!     backoff: Backoff::new(Duration::from_millis(100), Duration::from_secs(5)),
//! };
//! // Dials until the future passed as `shutdown` completes.
//! dialer.run(service, config, std::future::pending()).await
//! # }
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use blerpc::backoff::Backoff;
use blerpc::link::Link;
use blerpc::link::connect::{ConnectError, ConnectOptions, OnLink, open};
use blerpc::link::url::LinkUrl;
use blerpc::server::{BoxFuture, BoxStream, Bytes, CallKind, Dispatch, ServerError, Status};
use blerpc::{Server, ServerConfig};

use crate::relay::RELAY_COMMAND;

/// The longest a relayed connection is served.
pub const RELAYED_CONNECTION_MAX: Duration = Duration::from_secs(7 * 24 * 3600);

/// Where and how a device dials.
#[derive(Clone, Debug)]
pub struct Dialer {
    /// The gateway's device listener: `tcp://`, `tls://`, `ws://` or `wss://`.
    pub url: LinkUrl,
    /// Trust for `tls://` and `wss://` (the gateway's and the relay URLs alike).
    pub options: ConnectOptions,
    /// The waits between attempts.
    pub backoff: Backoff,
}

/// Why one connection to the gateway ended.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DialError {
    /// The gateway could not be reached, or setup with it failed.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The connection failed while it was served.
    #[error("the connection to {url} failed")]
    Serve {
        /// The gateway.
        url: LinkUrl,
        /// Why.
        #[source]
        source: ServerError,
    },
}

/// Serves one connection on a link until it closes.
struct ServeOn<'a>(&'a Server);

impl OnLink for ServeOn<'_> {
    type Output = Result<(), ServerError>;
    fn run<L: Link>(self, link: L) -> impl Future<Output = Self::Output> + Send {
        self.0.serve_link(link)
    }
}

/// Serves a relayed connection on a task of its own (for at most
/// [`RELAYED_CONNECTION_MAX`]), answering at once.
struct ServeRelayed(Server);

impl OnLink for ServeRelayed {
    type Output = ();
    fn run<L: Link>(self, link: L) -> impl Future<Output = ()> + Send {
        tracing::info!("relayed connection open");
        tokio::spawn(async move {
            match tokio::time::timeout(RELAYED_CONNECTION_MAX, self.0.serve_link(link)).await {
                Ok(Ok(())) | Err(_) => tracing::info!("relayed connection closed"),
                Ok(Err(e)) => tracing::info!("relayed connection ended: {e}"),
            }
        });
        std::future::ready(())
    }
}

impl Dialer {
    /// Keeps a connection to the gateway until `shutdown` completes: dial, serve `service`, and
    /// after a failure or a close wait per [`Dialer::backoff`] and dial again. Relayed
    /// connections are served with `config` as given; the gateway connection with
    /// `peripheral.relay` on and [`RELAY_COMMAND`] answered.
    ///
    /// # Errors
    /// [`ServerError`] when `config` is invalid; connection failures are logged and retried.
    pub async fn run(
        self,
        service: Arc<dyn Dispatch>,
        config: ServerConfig,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ServerError> {
        let plain = Server::new(service.clone(), config.clone())?;
        let mut backoff = self.backoff.clone();
        let dialer = Arc::new(self);
        let mut gateway_config = config;
        // The gateway learns from CAPABILITIES that this connection answers `blerpc.relay`.
        gateway_config.peripheral.relay = true;
        let server = Server::new(
            RelayDispatch {
                inner: service,
                dialer: dialer.clone(),
                plain,
            },
            gateway_config,
        )?;
        tokio::pin!(shutdown);
        loop {
            let started = Instant::now();
            tokio::select! {
                () = &mut shutdown => return Ok(()),
                r = dialer.serve_once(&server) => match r {
                    Ok(()) => tracing::info!(url = %dialer.url, "the gateway closed the connection"),
                    Err(e) => tracing::warn!("{}", error_chain(&e)),
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

    /// Connects to the gateway and serves one connection on it with `server` until it closes.
    async fn serve_once(&self, server: &Server) -> Result<(), DialError> {
        open(&self.url, &self.options, ServeOn(server))
            .await?
            .map_err(|source| DialError::Serve {
                url: self.url.clone(),
                source,
            })
    }

    fn host(&self) -> &str {
        self.url.host().unwrap_or_default()
    }
}

/// An error and its sources, `: `-separated.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The service, plus [`RELAY_COMMAND`] (see the [module docs](self)).
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
                        "cannot open a wss:// relay: the device has no TLS trust for the gateway \
                         (blerpc serve: --dial-tls-ca or --dial-tls-cert-pin)",
                    ),
                    e => Status::handler_failed(format!(
                        "cannot open the relayed connection: {}",
                        error_chain(&e)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn relaying(url: &str) -> RelayDispatch {
        let service: Arc<dyn Dispatch> = Arc::new(blerpc_demo::pb::BlerpcServer::new(
            blerpc_demo::DemoService::default(),
        ));
        RelayDispatch {
            plain: Server::new(
                service.clone(),
                ServerConfig {
                    identity: Some([7; 32]),
                    ..ServerConfig::default()
                },
            )
            .unwrap(),
            inner: service,
            dialer: Arc::new(Dialer {
                url: url.parse().unwrap(),
                options: ConnectOptions::default(),
                backoff: Backoff::new(Duration::from_millis(1), Duration::from_millis(2)),
            }),
        }
    }

    #[tokio::test]
    async fn relay_urls_go_to_the_host_dialled_only() {
        let d = relaying("tcp://127.0.0.1:7000");
        assert!(d.relay_url(b"ws://127.0.0.1:8080/v1/relay/abc").is_ok());
        let other = d.relay_url(b"ws://10.0.0.1:8080/x").unwrap_err();
        assert!(
            other.message.contains("refusing to relay to 10.0.0.1"),
            "{other:?}"
        );
        let scheme = d.relay_url(b"tcp://127.0.0.1:7001").unwrap_err();
        assert!(
            scheme.message.contains("must be ws:// or wss://"),
            "{scheme:?}"
        );
        let bytes = d.relay_url(&[0xff, 0xfe]).unwrap_err();
        assert!(bytes.message.contains("not UTF-8"), "{bytes:?}");
        assert_eq!(d.kind(RELAY_COMMAND), Some(CallKind::Unary));
        assert_eq!(d.kind("echo"), Some(CallKind::Unary));
    }
}
