//! Listening by URL: [`Listener::bind`] binds what a [`LinkUrl`] names (`tcp://`, `tls://`,
//! `ws://`, `wss://`: a socket; `serial://`: a port, one central at a time; `ble://[NAME]`: a
//! BLE peripheral advertising the service) and [`Listener::serve`] serves a [`Server`] on it
//! until a shutdown future completes. Every accepted link is
//! [`Traced`](super::trace::Traced).
//!
//! Port 0 asks for any free port: [`Listener::url`] is the URL centrals use, with the address
//! and port bound. Each scheme needs its feature (`tcp`, `tls`, `ws`, `serial`,
//! `ble-peripheral` on Linux); a URL whose feature this build lacks fails with
//! [`ListenError::Unsupported`], naming it.
//!
//! ```
//! use blerpc::link::listen::{ListenOptions, Listener};
//! use blerpc::link::url::LinkUrl;
//!
//! # #[cfg(feature = "ws")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let asked: LinkUrl = "ws://127.0.0.1:0/blerpc".parse()?;
//! let listener = Listener::bind(&asked, &ListenOptions::default()).await?;
//! let url = listener.url(); // ws://127.0.0.1:40731/blerpc
//! assert_eq!((url.scheme(), url.host()), ("ws", Some("127.0.0.1")));
//! assert_ne!(url.port(), Some(0));
//! assert!(url.to_string().ends_with("/blerpc"));
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "ws"))]
//! # fn main() {}
//! ```
//!
//! A listener without a [`Server`] in front (a device gateway's, say) hands its acceptor to an
//! [`OnAcceptor`] instead: [`Listener::with_acceptor`].

use std::future::Future;

#[cfg(any(feature = "tcp", all(feature = "ble-peripheral", target_os = "linux")))]
use super::trace::TracedAcceptor;
use super::url::LinkUrl;
use super::{Acceptor, LinkError};
use crate::Server;
use crate::server::ServerError;

/// What [`Listener::bind`] needs beyond the URL.
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "ws"), derive(Default))]
pub struct ListenOptions {
    /// Certificate and key for `tls://` and `wss://`: needed for them, unused by the others.
    #[cfg(feature = "tls")]
    pub tls: Option<super::tls::TlsServerConfig>,
    /// Serial baud rate (default [`DEFAULT_BAUD_RATE`](super::serial::DEFAULT_BAUD_RATE) where
    /// the `serial` feature is on).
    pub baud_rate: Option<u32>,
    /// TCP options of `tcp://`, `tls://`, `ws://` and `wss://` listeners (`SO_REUSEPORT`,
    /// backlog, buffer sizes, limits).
    #[cfg(feature = "tcp")]
    pub tcp: super::tcp::TcpOptions,
    /// `ws://` and `wss://`: ping a peer quiet this long (`None`: never), and fail its link
    /// when nothing follows within `ws_pong_timeout` (see
    /// [`WsOptions`](super::ws::WsOptions)). Default 60 s and 30 s.
    #[cfg(feature = "ws")]
    pub ws_ping_interval: Option<std::time::Duration>,
    /// See `ws_ping_interval`.
    #[cfg(feature = "ws")]
    pub ws_pong_timeout: std::time::Duration,
}

#[cfg(feature = "ws")]
impl Default for ListenOptions {
    fn default() -> Self {
        let ws = super::ws::WsOptions::default();
        ListenOptions {
            #[cfg(feature = "tls")]
            tls: None,
            baud_rate: None,
            tcp: super::tcp::TcpOptions::default(),
            ws_ping_interval: ws.ping_interval,
            ws_pong_timeout: ws.pong_timeout,
        }
    }
}

/// Why [`Listener::bind`] or serving failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ListenError {
    /// This build of `blerpc` lacks the link's feature.
    #[error(
        "{url}: this build has no {scheme} listener: enable the `{feature}` feature of blerpc",
        scheme = url.scheme()
    )]
    Unsupported {
        /// The URL.
        url: LinkUrl,
        /// The cargo feature that adds the listener.
        feature: &'static str,
    },
    /// A `tls://` or `wss://` URL without [`ListenOptions::tls`].
    #[error("{url} needs a certificate and its private key (ListenOptions::tls)")]
    NoCertificate {
        /// The URL.
        url: LinkUrl,
    },
    /// The socket could not be bound (the address is in use, or not this host's).
    #[error("cannot listen on {url}")]
    Bind {
        /// The URL.
        url: LinkUrl,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The serial port could not be opened.
    #[error("cannot open serial port {device} (does it exist, and may you open it?)")]
    Serial {
        /// The device.
        device: String,
        /// Why.
        #[source]
        source: LinkError,
    },
    /// The BLE peripheral could not start.
    #[error(
        "cannot start the BLE peripheral {url} (is bluetoothd running and the adapter present?)"
    )]
    Ble {
        /// The URL.
        url: LinkUrl,
        /// Why.
        #[source]
        source: LinkError,
    },
    /// A serial listener serves one central at a time on its port: it has no acceptor to hand
    /// out ([`Listener::with_acceptor`]); serve it with [`Listener::serve`].
    #[error("{url} has no acceptor: a serial port serves one central at a time")]
    NoAcceptor {
        /// The URL.
        url: LinkUrl,
    },
    /// Serving stopped with an error (accepting failed).
    #[error("serving {url} failed")]
    Serve {
        /// The URL.
        url: LinkUrl,
        /// Why.
        #[source]
        source: ServerError,
    },
}

/// What to do with a listener's acceptor: a generic step, since each scheme's acceptor is a
/// type of its own.
pub trait OnAcceptor {
    /// What running on the acceptor gives.
    type Output;
    /// Runs on the acceptor (its links are traced).
    fn run<A: Acceptor>(self, acceptor: A) -> impl Future<Output = Self::Output> + Send;
}

/// A bound listener, ready to serve.
#[derive(Debug)]
pub struct Listener {
    bound: Bound,
    url: LinkUrl,
}

/// What a listener holds (one per listener: the variants' sizes do not matter).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum Bound {
    #[cfg(feature = "tcp")]
    Tcp(super::tcp::TcpAcceptor),
    #[cfg(feature = "tls")]
    Tls(super::tls::TlsAcceptor),
    #[cfg(feature = "ws")]
    Ws(super::ws::WsAcceptor),
    #[cfg(feature = "serial")]
    Serial(SerialListener),
    #[cfg(all(feature = "ble-peripheral", target_os = "linux"))]
    Ble(super::ble::peripheral::BluerPeripheral),
}

impl Listener {
    /// Binds `url` (port 0 picks a free port; [`Listener::url`] tells which). A serial port is
    /// opened here, so a missing one fails before anything is announced.
    #[cfg_attr(
        not(any(
            feature = "tcp",
            feature = "serial",
            all(feature = "ble-peripheral", target_os = "linux")
        )),
        allow(unreachable_code) // no link: every URL is unsupported
    )]
    pub async fn bind(url: &LinkUrl, options: &ListenOptions) -> Result<Listener, ListenError> {
        #[cfg(feature = "tcp")]
        let bind_error = |source| ListenError::Bind {
            url: url.clone(),
            source,
        };
        let _ = options;
        let (bound, url) = match url {
            #[cfg(feature = "tcp")]
            LinkUrl::Tcp { .. } => {
                let a = super::tcp::TcpAcceptor::bind(authority(url), options.tcp.clone())
                    .await
                    .map_err(bind_error)?;
                let at = bound_url(url, a.local_addr().map_err(bind_error)?);
                (Bound::Tcp(a), at)
            }
            #[cfg(feature = "tls")]
            LinkUrl::Tls { .. } => {
                let tls = certificate(url, options)?;
                let a = super::tls::TlsAcceptor::bind(authority(url), tls, options.tcp.clone())
                    .await
                    .map_err(bind_error)?;
                let at = bound_url(url, a.local_addr().map_err(bind_error)?);
                (Bound::Tls(a), at)
            }
            #[cfg(feature = "ws")]
            LinkUrl::Ws { secure: false, .. } => {
                let a = super::ws::WsAcceptor::bind(authority(url), ws_options(url, options))
                    .await
                    .map_err(bind_error)?;
                let at = bound_url(url, a.local_addr().map_err(bind_error)?);
                (Bound::Ws(a), at)
            }
            #[cfg(all(feature = "ws", feature = "tls"))]
            LinkUrl::Ws { secure: true, .. } => {
                let tls = certificate(url, options)?;
                let ws = ws_options(url, options);
                let a = super::ws::WsAcceptor::bind_tls(authority(url), tls, ws)
                    .await
                    .map_err(bind_error)?;
                let at = bound_url(url, a.local_addr().map_err(bind_error)?);
                (Bound::Ws(a), at)
            }
            #[cfg(feature = "serial")]
            LinkUrl::Serial { device } => (
                Bound::Serial(SerialListener::open(device.clone(), options.baud_rate)?),
                url.clone(),
            ),
            #[cfg(all(feature = "ble-peripheral", target_os = "linux"))]
            LinkUrl::Ble { peripheral } => {
                use super::ble::peripheral::{BluerPeripheral, BluerPeripheralOptions};
                let mut ble = BluerPeripheralOptions::default();
                if let Some(name) = peripheral {
                    ble.name = name.clone();
                }
                let at = LinkUrl::Ble {
                    peripheral: Some(ble.name.clone()),
                };
                let p = BluerPeripheral::start(ble)
                    .await
                    .map_err(|source| ListenError::Ble {
                        url: at.clone(),
                        source,
                    })?;
                (Bound::Ble(p), at)
            }
            #[allow(unreachable_patterns)] // with every link feature on
            other => {
                return Err(ListenError::Unsupported {
                    url: other.clone(),
                    feature: super::url::feature_of(other, true),
                });
            }
        };
        Ok(Listener { bound, url })
    }

    /// The URL centrals use: the address and port bound (`tcp://127.0.0.1:40731`), the serial
    /// device, or `ble://NAME` with the advertised name.
    pub fn url(&self) -> LinkUrl {
        self.url.clone()
    }

    /// Serves `server` until `shutdown` completes (a serial port: one central after another).
    pub async fn serve(
        self,
        server: &Server,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ListenError> {
        struct Serve<'a, S> {
            server: &'a Server,
            shutdown: S,
        }
        impl<S: Future<Output = ()> + Send> OnAcceptor for Serve<'_, S> {
            type Output = Result<(), ServerError>;
            fn run<A: Acceptor>(self, acceptor: A) -> impl Future<Output = Self::Output> + Send {
                self.server.serve(acceptor, self.shutdown)
            }
        }
        let url = self.url.clone();
        let served = match self.bound {
            #[cfg(feature = "serial")]
            Bound::Serial(s) => return s.serve(server, shutdown).await,
            #[allow(unreachable_patterns)] // with no acceptor feature on
            _ => self.with_acceptor(Serve { server, shutdown }).await?,
        };
        served.map_err(|source| ListenError::Serve { url, source })
    }

    /// Runs `then` with this listener's acceptor (its links [`Traced`](super::trace::Traced)).
    /// A serial listener has none ([`ListenError::NoAcceptor`]).
    pub async fn with_acceptor<F: OnAcceptor>(self, then: F) -> Result<F::Output, ListenError> {
        let _ = &then;
        match self.bound {
            #[cfg(feature = "tcp")]
            Bound::Tcp(a) => Ok(then.run(TracedAcceptor(a)).await),
            #[cfg(feature = "tls")]
            Bound::Tls(a) => Ok(then.run(TracedAcceptor(a)).await),
            #[cfg(feature = "ws")]
            Bound::Ws(a) => Ok(then.run(TracedAcceptor(a)).await),
            #[cfg(all(feature = "ble-peripheral", target_os = "linux"))]
            Bound::Ble(a) => Ok(then.run(TracedAcceptor(a)).await),
            #[cfg(feature = "serial")]
            Bound::Serial(_) => Err(ListenError::NoAcceptor { url: self.url }),
        }
    }
}

/// `HOST:PORT` of an IP URL (empty for others, which never get here).
#[cfg(feature = "tcp")]
fn authority(url: &LinkUrl) -> String {
    url.authority().unwrap_or_default()
}

/// The WebSocket options of a listener on `url`: its path, the TCP options and the keepalive.
#[cfg(feature = "ws")]
fn ws_options(url: &LinkUrl, options: &ListenOptions) -> super::ws::WsOptions {
    let path = match url {
        LinkUrl::Ws { path, .. } if path != "/" => Some(path.clone()),
        _ => None,
    };
    super::ws::WsOptions {
        path,
        tcp: options.tcp.clone(),
        ping_interval: options.ws_ping_interval,
        pong_timeout: options.ws_pong_timeout,
        headers: Vec::new(),
    }
}

/// `url` at the address a socket bound: the IP and port the kernel gave, the WebSocket path
/// kept.
#[cfg(feature = "tcp")]
fn bound_url(url: &LinkUrl, addr: std::net::SocketAddr) -> LinkUrl {
    let (host, port) = (addr.ip().to_string(), addr.port());
    match url {
        LinkUrl::Ws { path, secure, .. } => LinkUrl::Ws {
            host,
            port,
            path: path.clone(),
            secure: *secure,
        },
        LinkUrl::Tls { .. } => LinkUrl::Tls { host, port },
        _ => LinkUrl::Tcp { host, port },
    }
}

/// The certificate [`ListenOptions::tls`] gives a `tls://` or `wss://` URL.
#[cfg(feature = "tls")]
fn certificate(
    url: &LinkUrl,
    options: &ListenOptions,
) -> Result<super::tls::TlsServerConfig, ListenError> {
    options
        .tls
        .clone()
        .ok_or_else(|| ListenError::NoCertificate { url: url.clone() })
}

/// A serial port to serve one central at a time on.
#[cfg(feature = "serial")]
#[derive(Debug)]
struct SerialListener {
    device: String,
    baud: Option<u32>,
    first: Option<super::serial::SerialPortLink>,
}

#[cfg(feature = "serial")]
impl SerialListener {
    /// Opens the port (kept for the first session).
    fn open(device: String, baud: Option<u32>) -> Result<Self, ListenError> {
        let first = Some(Self::open_port(&device, baud)?);
        Ok(SerialListener {
            device,
            baud,
            first,
        })
    }

    fn open_port(
        device: &str,
        baud: Option<u32>,
    ) -> Result<super::serial::SerialPortLink, ListenError> {
        let mut options = super::serial::SerialOptions::default();
        if let Some(b) = baud {
            options.baud_rate = b;
        }
        super::serial::SerialLink::open(device, options).map_err(|source| ListenError::Serial {
            device: device.to_string(),
            source,
        })
    }

    /// Serves one session after another on the port until `shutdown`.
    async fn serve(
        mut self,
        server: &Server,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ListenError> {
        tokio::pin!(shutdown);
        loop {
            let link = match self.first.take() {
                Some(link) => link,
                None => Self::open_port(&self.device, self.baud)?,
            };
            tokio::select! {
                () = &mut shutdown => return Ok(()),
                r = server.serve_link(super::trace::Traced::new(link)) => {
                    if let Err(e) = r {
                        tracing::debug!(device = %self.device, "serial session ended: {e}");
                    }
                }
            }
            // The port stays; the next central starts a new session on it.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> LinkUrl {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[tokio::test]
    async fn a_missing_feature_or_certificate_is_named() {
        let options = ListenOptions::default();
        #[cfg(not(all(feature = "ble-peripheral", target_os = "linux")))]
        {
            let e = Listener::bind(&url("ble://x"), &options).await.err();
            assert_eq!(
                e.map(|e| e.to_string()).unwrap_or_default(),
                "ble://x: this build has no ble listener: enable the `ble-peripheral` feature of blerpc"
            );
        }
        #[cfg(all(feature = "tls", feature = "ws"))]
        for u in ["tls://127.0.0.1:0", "wss://127.0.0.1:0/"] {
            let e = Listener::bind(&url(u), &options).await.err();
            assert!(
                matches!(&e, Some(ListenError::NoCertificate { url: got }) if got.to_string().starts_with(u)),
                "{u}: {e:?}"
            );
        }
        #[cfg(feature = "serial")]
        {
            let e = Listener::bind(&url("serial:///dev/blerpc-none"), &options).await;
            let e = e.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                e.starts_with("cannot open serial port /dev/blerpc-none"),
                "{e}"
            );
        }
    }

    #[cfg(all(feature = "tcp", feature = "ws"))]
    #[tokio::test]
    async fn the_url_has_the_address_and_port_bound() {
        let options = ListenOptions::default();
        for (asked, scheme, path) in [
            ("tcp://127.0.0.1:0", "tcp", ""),
            ("ws://127.0.0.1:0/blerpc", "ws", "/blerpc"),
            ("ws://[::1]:0", "ws", "/"),
        ] {
            let listener = match Listener::bind(&url(asked), &options).await {
                Ok(l) => l,
                // A host without IPv6 loopback.
                Err(ListenError::Bind { .. }) if asked.contains("::1") => continue,
                Err(e) => panic!("{asked}: {e}"),
            };
            let got = listener.url();
            assert_eq!(got.scheme(), scheme);
            assert_ne!(got.port(), Some(0), "{got}");
            assert!(got.to_string().ends_with(path), "{got}");
        }
        // A port in use is refused with the URL and the cause.
        let held = Listener::bind(&url("tcp://127.0.0.1:0"), &options).await;
        let held = held.unwrap_or_else(|e| panic!("{e}"));
        let taken = held.url();
        let e = Listener::bind(&taken, &options).await.err();
        assert!(
            matches!(&e, Some(ListenError::Bind { url, .. }) if *url == taken),
            "{e:?}"
        );
    }
}
