//! The device's side: dial a gateway and serve over that connection.
//!
//! A device behind NAT cannot be reached, so it connects out ([`Dialer::run`]: what
//! `blerpc serve --dial URL` runs), serves its service on that connection, and after a failure
//! or a close dials again with capped exponential backoff and jitter ([`Backoff`]).
//!
//! **Failover.** A dialer may have several gateways ([`Dialer::urls`], the gateways of a fleet):
//! it keeps to the one that answers, and after a failure or a close tries the next one in
//! turn, waiting per the backoff only once it has tried them all. A URL whose host name
//! resolves to several addresses is tried at each of them in turn by the connect itself.
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
//! # async fn run() -> Result<(), blerpc_gateway::dial::DialError> {
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
//!     urls: vec!["tcp://gateway-a.example:7000".parse().unwrap()],
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
    /// The gateways' device listeners, tried in turn: `tcp://`, `tls://`, `ws://` or `wss://`
    /// (at least one).
    pub urls: Vec<LinkUrl>,
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
    /// The server configuration is invalid.
    #[error("the device's server configuration: {0}")]
    Config(#[source] ServerError),
    /// The dialer has no gateway URL.
    #[error("no gateway to dial: give at least one URL")]
    NoGateway,
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

/// A dialer at work: which of its URLs is next.
#[derive(Debug)]
struct Dialling {
    dialer: Dialer,
    current: std::sync::atomic::AtomicUsize,
}

impl Dialer {
    /// Keeps a connection to the gateway until `shutdown` completes: dial, serve `service`, and
    /// after a failure or a close wait per [`Dialer::backoff`] and dial again. Relayed
    /// connections are served with `config` as given; the gateway connection with
    /// `peripheral.relay` on and [`RELAY_COMMAND`] answered.
    ///
    /// # Errors
    /// [`DialError::Config`] when `config` is invalid, [`DialError::NoGateway`] without URLs;
    /// connection failures are logged and retried.
    pub async fn run(
        self,
        service: Arc<dyn Dispatch>,
        config: ServerConfig,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), DialError> {
        let count = self.urls.len();
        if count == 0 {
            return Err(DialError::NoGateway);
        }
        let plain = Server::new(service.clone(), config.clone()).map_err(DialError::Config)?;
        let mut backoff = self.backoff.clone();
        let dialer = Arc::new(Dialling {
            dialer: self,
            current: std::sync::atomic::AtomicUsize::new(0),
        });
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
        )
        .map_err(DialError::Config)?;
        tokio::pin!(shutdown);
        // Failed attempts in a row: after one round of every URL, wait per the backoff.
        let mut failed_in_row = 0usize;
        loop {
            let started = Instant::now();
            let url = dialer.url();
            tokio::select! {
                () = &mut shutdown => return Ok(()),
                r = dialer.serve_once(&server, &url) => match r {
                    Ok(()) => tracing::info!(%url, "the gateway closed the connection"),
                    Err(e) => tracing::warn!("{}", blerpc::error_chain(&e)),
                },
            }
            let lasted = started.elapsed();
            backoff.connection_ended(lasted);
            if lasted >= backoff.reset_after {
                failed_in_row = 0;
            }
            failed_in_row += 1;
            dialer.next_url();
            if count > 1 && !failed_in_row.is_multiple_of(count) {
                tracing::info!(url = %dialer.url(), "trying the next gateway");
                continue;
            }
            let wait = backoff.next_wait();
            tracing::info!(url = %dialer.url(), "dialling again in {wait:?}");
            tokio::select! {
                () = &mut shutdown => return Ok(()),
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

impl Dialling {
    /// Connects to the gateway at `url` and serves one connection on it with `server` until it
    /// closes.
    async fn serve_once(&self, server: &Server, url: &LinkUrl) -> Result<(), DialError> {
        open(url, &self.dialer.options, ServeOn(server))
            .await?
            .map_err(|source| DialError::Serve {
                url: url.clone(),
                source,
            })
    }

    /// The gateway dialled now.
    fn url(&self) -> LinkUrl {
        let k = self.current.load(std::sync::atomic::Ordering::Relaxed);
        let urls = &self.dialer.urls;
        urls[k % urls.len()].clone()
    }

    fn next_url(&self) {
        self.current
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The host of the gateway dialled now: relay URLs must name it.
    fn host(&self) -> String {
        self.url().host().unwrap_or_default().to_string()
    }
}

/// The service, plus [`RELAY_COMMAND`] (see the [module docs](self)).
struct RelayDispatch {
    inner: Arc<dyn Dispatch>,
    dialer: Arc<Dialling>,
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
            LinkUrl::Ws { host, .. } if *host == self.dialer.host() => Ok(url),
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
            open(&url?, &dialer.dialer.options, ServeRelayed(plain))
                .await
                .map_err(|e| match e {
                    ConnectError::NoTlsTrust { .. } => Status::handler_failed(
                        "cannot open a wss:// relay: the device has no TLS trust for the gateway \
                         (blerpc serve: --dial-tls-ca or --dial-tls-cert-pin)",
                    ),
                    e => Status::handler_failed(format!(
                        "cannot open the relayed connection: {}",
                        blerpc::error_chain(&e)
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
            dialer: Arc::new(Dialling {
                dialer: Dialer {
                    urls: vec![url.parse().unwrap()],
                    options: ConnectOptions::default(),
                    backoff: Backoff::new(Duration::from_millis(1), Duration::from_millis(2)),
                },
                current: std::sync::atomic::AtomicUsize::new(0),
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
