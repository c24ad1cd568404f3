//! Connecting by URL: [`connect`] opens the link a [`LinkUrl`] names (`tcp://`, `tls://`,
//! `ws://`, `wss://`, `serial://`, `ble://`) and runs a [`Client`]'s setup on it; [`open`] opens
//! the link and hands it to any [`OnLink`] (a server that dials out serves on it). Every link is
//! [`Traced`].
//!
//! Each scheme needs its feature (`tcp`, `tls`, `ws`, `serial`, `ble-central`); a URL whose
//! feature this build lacks fails with [`ConnectError::Unsupported`], naming it.
//!
//! ```
//! use blerpc::client::PinPolicy;
//! use blerpc::link::connect::{ConnectOptions, connect};
//! use blerpc::link::listen::{ListenOptions, Listener};
//! use blerpc::{ClientConfig, Server, ServerConfig};
//! use blerpc_example::SimThermostat;
//! use blerpc_example::thermostat::{SetTargetRequest, ThermostatClient, ThermostatServer};
//!
//! # #[cfg(feature = "tcp")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = Server::new(
//!     ThermostatServer::new(SimThermostat::default()),
//!     ServerConfig { identity: Some([7; 32]), ..Default::default() },
//! )?;
//! let key = server.identity_public().ok_or("no identity")?;
//! // Port 0: any free port; the listener's URL has the one it bound.
//! let listener = Listener::bind(&"tcp://127.0.0.1:0".parse()?, &ListenOptions::default()).await?;
//! let url = listener.url();
//! tokio::spawn(async move { listener.serve(&server, std::future::pending()).await });
//!
//! let config = ClientConfig { pinning: PinPolicy::Trust(key), ..Default::default() };
//! let client = connect(&url, &ConnectOptions::default(), config).await?;
//! let reply = ThermostatClient::new(client)
//!     .set_target(SetTargetRequest { centi_celsius: 1950 })
//!     .await?;
//! assert_eq!(reply.centi_celsius, 1950);
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "tcp"))]
//! # fn main() {}
//! ```

use std::future::Future;

#[cfg(any(feature = "tcp", feature = "serial", feature = "ble-central"))]
use super::trace::Traced;
use super::url::LinkUrl;
use super::{Link, LinkError};
use crate::{Client, ClientConfig};

/// How to reach a server, beyond its URL.
#[derive(Clone, Debug, Default)]
pub struct ConnectOptions {
    /// Trust for `tls://` and `wss://` (a CA, or the server's pinned certificate): needed for
    /// them, unused by the others.
    #[cfg(feature = "tls")]
    pub tls: Option<super::tls::TlsClientConfig>,
    /// Serial baud rate (default [`DEFAULT_BAUD_RATE`](super::serial::DEFAULT_BAUD_RATE) where
    /// the `serial` feature is on).
    pub baud_rate: Option<u32>,
    /// `ws://` and `wss://`: a bearer token sent as `Authorization: Bearer …` with the upgrade
    /// (a device gateway's relayed link needs one).
    pub bearer: Option<String>,
    /// `tcp://` and `tls://`: TCP keepalive after this long idle (see
    /// [`TcpOptions::keepalive`](super::tcp::TcpOptions::keepalive)); `None`: the runtime's
    /// default (60 s). A device dialling a gateway sets it short to notice a gateway cut off.
    pub tcp_keepalive: Option<std::time::Duration>,
}

/// Why [`connect`] or [`open`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// This build of `blerpc` lacks the link's feature.
    #[error(
        "{url}: this build has no {scheme} link: enable the `{feature}` feature of blerpc",
        scheme = url.scheme()
    )]
    Unsupported {
        /// The URL.
        url: LinkUrl,
        /// The cargo feature that adds the link.
        feature: &'static str,
    },
    /// A `tls://` or `wss://` URL without [`ConnectOptions::tls`].
    #[error(
        "{url} needs TLS trust: give the CA that signed the server's certificate, or the \
         server's certificate to pin (ConnectOptions::tls)"
    )]
    NoTlsTrust {
        /// The URL.
        url: LinkUrl,
    },
    /// The link could not be opened (refused, unreachable, a failed TLS or WebSocket
    /// handshake).
    #[error("cannot connect to {url}")]
    Link {
        /// The URL.
        url: LinkUrl,
        /// Why.
        #[source]
        source: LinkError,
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
    /// No BLE connection: nothing matching advertised, or the adapter failed.
    #[error(
        "cannot connect to {url} (is Bluetooth on, and is the peripheral advertising the \
         bleRPC service?)"
    )]
    Ble {
        /// The URL.
        url: LinkUrl,
        /// Why.
        #[source]
        source: LinkError,
    },
    /// The link opened, and the connection's setup (TIMEOUT, CAPABILITIES, the key exchange
    /// and the server's identity check) failed on it.
    #[error("connection setup with {url} failed")]
    Setup {
        /// The URL.
        url: LinkUrl,
        /// Why (boxed: the client's error is large, and this one is returned everywhere).
        #[source]
        source: Box<crate::Error>,
    },
}

/// What to do with a link once [`open`] has it: a generic step, since each scheme's link is a
/// type of its own.
pub trait OnLink {
    /// What running on the link gives.
    type Output;
    /// Runs on the (traced) link.
    fn run<L: Link>(self, link: L) -> impl Future<Output = Self::Output> + Send;
}

/// Connects a [`Client`] to `url` and runs its setup (TIMEOUT, CAPABILITIES, the key
/// exchange): [`open`] with [`Client::connect`].
pub async fn connect(
    url: &LinkUrl,
    options: &ConnectOptions,
    config: ClientConfig,
) -> Result<Client, ConnectError> {
    struct Setup(ClientConfig);
    impl OnLink for Setup {
        type Output = Result<Client, crate::Error>;
        fn run<L: Link>(self, link: L) -> impl Future<Output = Self::Output> + Send {
            Client::connect(link, self.0)
        }
    }
    open(url, options, Setup(config))
        .await?
        .map_err(|source| ConnectError::Setup {
            url: url.clone(),
            source: Box::new(source),
        })
}

/// Opens the link `url` names, wraps it in [`Traced`] and runs `then` on it.
pub async fn open<F: OnLink>(
    url: &LinkUrl,
    options: &ConnectOptions,
    then: F,
) -> Result<F::Output, ConnectError> {
    // Without the features that read them.
    let _ = (options, &then);
    #[cfg(feature = "tcp")]
    let failed = |source| ConnectError::Link {
        url: url.clone(),
        source,
    };
    match url {
        #[cfg(feature = "tcp")]
        LinkUrl::Tcp { host, port } => {
            let authority = super::url::authority(host, *port);
            let link = super::tcp::connect(authority, &tcp_options(options))
                .await
                .map_err(failed)?;
            Ok(then.run(Traced::new(link)).await)
        }
        #[cfg(feature = "tls")]
        LinkUrl::Tls { host, port } => {
            let trust = tls_trust(url, options)?;
            let link = super::tls::connect(host, *port, trust, &tcp_options(options))
                .await
                .map_err(failed)?;
            Ok(then.run(Traced::new(link)).await)
        }
        #[cfg(feature = "ws")]
        LinkUrl::Ws { secure: false, .. } => {
            let link = super::ws::connect(&url.to_string(), &ws_options(options))
                .await
                .map_err(failed)?;
            Ok(then.run(Traced::new(link)).await)
        }
        #[cfg(all(feature = "ws", feature = "tls"))]
        LinkUrl::Ws { secure: true, .. } => {
            let trust = tls_trust(url, options)?;
            let link = super::ws::connect_tls(&url.to_string(), trust, &ws_options(options))
                .await
                .map_err(failed)?;
            Ok(then.run(Traced::new(link)).await)
        }
        #[cfg(feature = "serial")]
        LinkUrl::Serial { device } => {
            let mut serial = super::serial::SerialOptions::default();
            if let Some(baud) = options.baud_rate {
                serial.baud_rate = baud;
            }
            let link = super::serial::SerialLink::open(device, serial).map_err(|source| {
                ConnectError::Serial {
                    device: device.clone(),
                    source,
                }
            })?;
            Ok(then.run(Traced::new(link)).await)
        }
        #[cfg(feature = "ble-central")]
        LinkUrl::Ble { peripheral } => {
            use super::ble::btleplug::BleCentralOptions;
            use super::ble::central::BleCentralLink;
            let ble = BleCentralOptions::for_peripheral(peripheral.as_deref());
            let link = BleCentralLink::connect(ble)
                .await
                .map_err(|source| ConnectError::Ble {
                    url: url.clone(),
                    source,
                })?;
            Ok(then.run(Traced::new(link)).await)
        }
        #[allow(unreachable_patterns)] // with every link feature on
        other => Err(ConnectError::Unsupported {
            url: other.clone(),
            feature: super::url::feature_of(other, false),
        }),
    }
}

/// The TCP options of a client: the runtime's, with [`ConnectOptions::tcp_keepalive`].
#[cfg(feature = "tcp")]
fn tcp_options(options: &ConnectOptions) -> super::tcp::TcpOptions {
    let default = super::tcp::TcpOptions::default();
    super::tcp::TcpOptions {
        keepalive: options.tcp_keepalive.or(default.keepalive),
        ..default
    }
}

/// The WebSocket options of a client: the bearer token as a header.
#[cfg(feature = "ws")]
fn ws_options(options: &ConnectOptions) -> super::ws::WsOptions {
    super::ws::WsOptions {
        headers: options
            .bearer
            .iter()
            .map(|t| ("Authorization".to_string(), format!("Bearer {t}")))
            .collect(),
        ..super::ws::WsOptions::default()
    }
}

/// The trust [`ConnectOptions::tls`] gives a `tls://` or `wss://` URL.
#[cfg(feature = "tls")]
fn tls_trust<'a>(
    url: &LinkUrl,
    options: &'a ConnectOptions,
) -> Result<&'a super::tls::TlsClientConfig, ConnectError> {
    options
        .tls
        .as_ref()
        .ok_or_else(|| ConnectError::NoTlsTrust { url: url.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> LinkUrl {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[tokio::test]
    async fn a_missing_feature_or_trust_is_named() {
        let options = ConnectOptions::default();
        let config = ClientConfig::default;
        assert_eq!(
            crate::link::url::feature_of(&url("wss://h/"), false),
            if cfg!(feature = "ws") { "tls" } else { "ws" }
        );
        #[cfg(not(feature = "ble-central"))]
        {
            let e = connect(&url("ble://x"), &options, config()).await;
            let e = e.err().map(|e| e.to_string()).unwrap_or_default();
            assert_eq!(
                e,
                "ble://x: this build has no ble link: enable the `ble-central` feature of blerpc"
            );
        }
        #[cfg(feature = "tls")]
        for u in ["tls://localhost:1", "wss://localhost:1/"] {
            let e = connect(&url(u), &options, config()).await;
            assert!(
                matches!(&e, Err(ConnectError::NoTlsTrust { url: got }) if got.to_string().starts_with(u)),
                "{u}: {:?}",
                e.err()
            );
        }
        #[cfg(feature = "serial")]
        {
            let e = connect(&url("serial:///dev/blerpc-none"), &options, config()).await;
            let e = e.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                e.starts_with("cannot open serial port /dev/blerpc-none"),
                "{e}"
            );
        }
        let _ = (options, config);
    }

    #[cfg(feature = "tcp")]
    #[tokio::test]
    async fn a_refused_connection_names_the_url_and_the_cause() {
        // A port just freed: nothing listens on it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(9);
        let u = url(&format!("tcp://127.0.0.1:{port}"));
        let e = connect(&u, &ConnectOptions::default(), ClientConfig::default()).await;
        match e {
            Err(e @ ConnectError::Link { .. }) => {
                assert_eq!(e.to_string(), format!("cannot connect to {u}"));
                let cause = std::error::Error::source(&e).map(ToString::to_string);
                assert!(cause.is_some_and(|c| c.contains("refused")), "{e:?}");
            }
            other => panic!("{:?}", other.err()),
        }
    }
}
