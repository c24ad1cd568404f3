//! Addresses and links for the CLI: parses `tcp://`, `tls://`, `ws://`, `wss://`, `serial://`
//! and `ble://` addresses, connects a [`Client`] to one ([`connect`]) and listens on one
//! ([`Listener`]). Every link can be wrapped in [`Traced`], which logs each PDU at `trace` level
//! (target `blerpc::pdu`) for `--verbose`.

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::str::FromStr;

use anyhow::{Context as _, anyhow, bail};
use blerpc::blerpc_proto::connection::CloseReason;
use blerpc::client::{CentralError, IdentityError};
use blerpc::link::Acceptor;
use blerpc::link::tcp::{self, TcpAcceptor, TcpOptions};
use blerpc::link::tls::{self, TlsAcceptor, TlsClientConfig, TlsServerConfig};
use blerpc::link::url::LinkUrl;
use blerpc::link::ws::{self, WsAcceptor, WsOptions};
use blerpc::link::{Link, LinkError, LinkRx, LinkTx};
use blerpc::{Client, ClientConfig, Server};

/// Where to connect or listen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    /// `tcp://`, `tls://`, `ws://`, `wss://`.
    Net(LinkUrl),
    /// `serial:///dev/ttyUSB0` (the path after `serial://`).
    Serial(String),
    /// `ble://` (any bleRPC peripheral) or `ble://NAME-OR-ADDRESS`.
    Ble(Option<String>),
}

impl FromStr for Address {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Address> {
        if let Some(path) = s.strip_prefix("serial://") {
            if path.is_empty() {
                bail!("`{s}` has no device: use serial:///dev/ttyUSB0 (or serial://COM3)");
            }
            return Ok(Address::Serial(path.to_string()));
        }
        if let Some(rest) = s.strip_prefix("ble://") {
            let rest = rest.trim_end_matches('/');
            return Ok(Address::Ble((!rest.is_empty()).then(|| rest.to_string())));
        }
        if s == "ble" {
            return Ok(Address::Ble(None));
        }
        match s.parse::<LinkUrl>() {
            Ok(url) => Ok(Address::Net(url)),
            Err(e) => Err(anyhow!("{e} (or serial:///dev/ttyX, ble://)")),
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Net(u) => write!(f, "{u}"),
            Address::Serial(p) => write!(f, "serial://{p}"),
            Address::Ble(None) => f.write_str("ble://"),
            Address::Ble(Some(n)) => write!(f, "ble://{n}"),
        }
    }
}

/// How the client reaches the server, beyond the address.
#[derive(Clone, Debug, Default)]
pub struct ConnectOptions {
    /// Trust for `tls://` and `wss://`.
    pub tls: Option<TlsClientConfig>,
    /// Serial baud rate (default 115,200).
    pub baud_rate: Option<u32>,
    /// `ws://` and `wss://`: a bearer token sent as `Authorization: Bearer …` with the upgrade
    /// (a device gateway's relayed link needs it).
    pub bearer: Option<String>,
}

/// Builds the client's TLS trust from `--tls-ca` / `--tls-cert-pin`.
pub fn tls_client_config(
    ca: Option<&PathBuf>,
    pin: Option<&PathBuf>,
    server_name: Option<&str>,
) -> anyhow::Result<Option<TlsClientConfig>> {
    let config = match (ca, pin) {
        (Some(_), Some(_)) => bail!("--tls-ca and --tls-cert-pin exclude each other"),
        (Some(ca), None) => TlsClientConfig::with_ca_file(ca)?,
        (None, Some(pin)) => TlsClientConfig::with_pinned_cert_file(pin)?,
        (None, None) => return Ok(None),
    };
    Ok(Some(match server_name {
        Some(n) => config.server_name(n),
        None => config,
    }))
}

fn need_tls<'a>(
    tls: &'a Option<TlsClientConfig>,
    url: &LinkUrl,
) -> anyhow::Result<&'a TlsClientConfig> {
    tls.as_ref().ok_or_else(|| {
        anyhow!(
            "{url} needs TLS trust: pass --tls-ca FILE (the CA that signed the server's certificate) or --tls-cert-pin FILE (the server's certificate)"
        )
    })
}

/// Connects a client to `address` and runs setup (TIMEOUT, CAPABILITIES, key exchange).
pub async fn connect(
    address: &Address,
    options: &ConnectOptions,
    config: ClientConfig,
) -> anyhow::Result<Client> {
    let what = || format!("cannot connect to {address}");
    match address {
        Address::Net(url @ LinkUrl::Tcp { .. }) => {
            let link = tcp::connect(url.authority(), &TcpOptions::default())
                .await
                .with_context(what)?;
            setup(Traced::new(link), config, address).await
        }
        Address::Net(url @ LinkUrl::Tls { host, port }) => {
            let trust = need_tls(&options.tls, url)?;
            let link = tls::connect(host, *port, trust, &TcpOptions::default())
                .await
                .with_context(what)?;
            setup(Traced::new(link), config, address).await
        }
        Address::Net(url @ LinkUrl::Ws { secure, .. }) => {
            let ws_options = WsOptions {
                headers: options
                    .bearer
                    .iter()
                    .map(|t| ("Authorization".to_string(), format!("Bearer {t}")))
                    .collect(),
                ..WsOptions::default()
            };
            let link = if *secure {
                ws::connect_tls(&url.to_string(), need_tls(&options.tls, url)?, &ws_options).await
            } else {
                ws::connect(&url.to_string(), &ws_options).await
            }
            .with_context(what)?;
            setup(Traced::new(link), config, address).await
        }
        Address::Net(other) => bail!("unsupported link {other}"),
        Address::Serial(path) => connect_serial(path, options, config, address).await,
        Address::Ble(filter) => connect_ble(filter.as_deref(), config, address).await,
    }
}

async fn setup<L: Link>(
    link: L,
    config: ClientConfig,
    address: &Address,
) -> anyhow::Result<Client> {
    Client::connect(link, config).await.map_err(|e| match e {
        blerpc::Error::Central(CentralError::Identity(why @ IdentityError::Changed { .. })) => {
            anyhow!(
                "{address}: {why}; if the server's key changed on purpose, remove its entry from that file or pass --trust-key HEX"
            )
        }
        blerpc::Error::Central(CentralError::Identity(why)) => anyhow!("{address}: {why}"),
        other @ blerpc::Error::Central(CentralError::Setup(CloseReason::IdentityRejected)) => {
            anyhow!(
                "connection setup with {address} failed: {other}; check --trust-key against the `identity` that `blerpc serve` printed"
            )
        }
        other => anyhow!("connection setup with {address} failed: {other}"),
    })
}

#[cfg(feature = "serial")]
async fn connect_serial(
    path: &str,
    options: &ConnectOptions,
    config: ClientConfig,
    address: &Address,
) -> anyhow::Result<Client> {
    let link = SerialListener::open_port(path, options.baud_rate)?;
    setup(Traced::new(link), config, address).await
}

#[cfg(not(feature = "serial"))]
async fn connect_serial(
    _: &str,
    _: &ConnectOptions,
    _: ClientConfig,
    address: &Address,
) -> anyhow::Result<Client> {
    bail!(
        "{address}: this blerpc was built without the `serial` feature; rebuild with --features serial"
    )
}

#[cfg(feature = "ble-central")]
async fn connect_ble(
    filter: Option<&str>,
    config: ClientConfig,
    address: &Address,
) -> anyhow::Result<Client> {
    use blerpc::link::ble::central::{BleCentralLink, BleCentralOptions};
    let mut options = BleCentralOptions::default();
    match filter {
        // AA:BB:CC:DD:EE:FF, or a CoreBluetooth UUID.
        Some(f) if f.len() == 17 && f.matches(':').count() == 5 || f.len() == 36 => {
            options.address = Some(f.to_string());
        }
        Some(name) => options.name = Some(name.to_string()),
        None => {}
    }
    let link = BleCentralLink::connect(options).await.with_context(|| {
        format!("cannot connect to {address} (is Bluetooth on, and is the peripheral advertising? try `blerpc scan`)")
    })?;
    setup(Traced::new(link), config, address).await
}

#[cfg(not(feature = "ble-central"))]
async fn connect_ble(
    _: Option<&str>,
    _: ClientConfig,
    address: &Address,
) -> anyhow::Result<Client> {
    bail!(
        "{address}: this blerpc was built without ble-central; rebuild with `cargo build -p blerpc-cli --features ble-central`"
    )
}

/// What `serve` needs beyond the address.
#[derive(Clone, Debug)]
pub struct ListenOptions {
    /// Certificate and key for `tls://` and `wss://`.
    pub tls: Option<TlsServerConfig>,
    /// Serial baud rate (default 115,200).
    pub baud_rate: Option<u32>,
    /// TCP options of `tcp://`, `tls://`, `ws://` and `wss://` listeners (`SO_REUSEPORT`,
    /// backlog, buffer sizes).
    pub tcp: TcpOptions,
    /// `ws://` and `wss://`: ping a peer quiet this long (`None`: never), and fail its link when
    /// nothing follows within `ws_pong_timeout` (see [`WsOptions`]). Default 60 s and 30 s.
    pub ws_ping_interval: Option<std::time::Duration>,
    /// See `ws_ping_interval`.
    pub ws_pong_timeout: std::time::Duration,
}

impl Default for ListenOptions {
    fn default() -> Self {
        let ws = WsOptions::default();
        ListenOptions {
            tls: None,
            baud_rate: None,
            tcp: TcpOptions::default(),
            ws_ping_interval: ws.ping_interval,
            ws_pong_timeout: ws.pong_timeout,
        }
    }
}

/// A bound listener, ready to serve.
#[derive(Debug)]
pub enum Listener {
    /// `tcp://`.
    Tcp(TcpAcceptor, String),
    /// `tls://`.
    Tls(TlsAcceptor, String),
    /// `ws://` or `wss://`.
    Ws(WsAcceptor, String),
    /// `serial://`: one peer on a port, opened when bound (so a missing port fails before
    /// `listening` is printed) and reopened for each later session.
    #[cfg(feature = "serial")]
    Serial(SerialListener),
    /// `ble://[NAME]`: a BLE peripheral advertising the service.
    #[cfg(all(feature = "ble-peripheral", target_os = "linux"))]
    Ble(blerpc::link::ble::peripheral::BluerPeripheral, String),
}

impl Listener {
    /// Binds `address` (port 0 picks a free port; [`Listener::url`] tells which).
    pub async fn bind(address: &Address, options: &ListenOptions) -> anyhow::Result<Listener> {
        let what = || format!("cannot listen on {address}");
        let need_tls = |url: &LinkUrl| {
            options.tls.clone().ok_or_else(|| {
                anyhow!("{url} needs a certificate: pass --tls-cert FILE and --tls-key FILE (PEM)")
            })
        };
        let bound = |url: &LinkUrl, addr: std::net::SocketAddr| -> String {
            match url {
                LinkUrl::Ws { path, secure, .. } => {
                    let scheme = if *secure { "wss" } else { "ws" };
                    format!("{scheme}://{addr}{path}")
                }
                other => format!("{}://{addr}", other.scheme()),
            }
        };
        match address {
            Address::Net(url @ LinkUrl::Tcp { .. }) => {
                let a = TcpAcceptor::bind(url.authority(), options.tcp.clone())
                    .await
                    .with_context(what)?;
                let u = bound(url, a.local_addr()?);
                Ok(Listener::Tcp(a, u))
            }
            Address::Net(url @ LinkUrl::Tls { .. }) => {
                let a = TlsAcceptor::bind(url.authority(), need_tls(url)?, options.tcp.clone())
                    .await
                    .with_context(what)?;
                let u = bound(url, a.local_addr()?);
                Ok(Listener::Tls(a, u))
            }
            Address::Net(url @ LinkUrl::Ws { path, secure, .. }) => {
                let ws_options = WsOptions {
                    path: (path != "/").then(|| path.clone()),
                    tcp: options.tcp.clone(),
                    ping_interval: options.ws_ping_interval,
                    pong_timeout: options.ws_pong_timeout,
                    headers: Vec::new(),
                };
                let a = if *secure {
                    WsAcceptor::bind_tls(url.authority(), need_tls(url)?, ws_options).await
                } else {
                    WsAcceptor::bind(url.authority(), ws_options).await
                }
                .with_context(what)?;
                let u = bound(url, a.local_addr()?);
                Ok(Listener::Ws(a, u))
            }
            Address::Net(other) => bail!("unsupported link {other}"),
            #[cfg(feature = "serial")]
            Address::Serial(path) => Ok(Listener::Serial(SerialListener::open(
                path.clone(),
                options.baud_rate,
            )?)),
            #[cfg(not(feature = "serial"))]
            Address::Serial(_) => bail!(
                "{address}: this blerpc was built without the `serial` feature; rebuild with --features serial"
            ),
            #[cfg(all(feature = "ble-peripheral", target_os = "linux"))]
            Address::Ble(name) => {
                use blerpc::link::ble::peripheral::{BluerPeripheral, BluerPeripheralOptions};
                let mut options = BluerPeripheralOptions::default();
                if let Some(n) = name {
                    options.name = n.clone();
                }
                let url = format!("ble://{}", options.name);
                let p = BluerPeripheral::start(options).await.with_context(|| {
                    format!("cannot start the BLE peripheral {url} (is bluetoothd running and the adapter present?)")
                })?;
                Ok(Listener::Ble(p, url))
            }
            #[cfg(not(all(feature = "ble-peripheral", target_os = "linux")))]
            Address::Ble(_) => bail!(
                "{address}: this blerpc was built without ble-peripheral; rebuild with `cargo build -p blerpc-cli --features ble-peripheral` (Linux, BlueZ)"
            ),
        }
    }

    /// The address centrals use, with the bound port.
    pub fn url(&self) -> String {
        match self {
            Listener::Tcp(_, u) | Listener::Tls(_, u) | Listener::Ws(_, u) => u.clone(),
            #[cfg(feature = "serial")]
            Listener::Serial(s) => format!("serial://{}", s.path),
            #[cfg(all(feature = "ble-peripheral", target_os = "linux"))]
            Listener::Ble(_, u) => u.clone(),
        }
    }

    /// Serves `server` until `shutdown` completes.
    pub async fn serve(
        self,
        server: &Server,
        shutdown: impl Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        let url = self.url();
        let result = match self {
            Listener::Tcp(a, _) => server.serve(TracedAcceptor(a), shutdown).await,
            Listener::Tls(a, _) => server.serve(TracedAcceptor(a), shutdown).await,
            Listener::Ws(a, _) => server.serve(TracedAcceptor(a), shutdown).await,
            #[cfg(all(feature = "ble-peripheral", target_os = "linux"))]
            Listener::Ble(a, _) => server.serve(TracedAcceptor(a), shutdown).await,
            #[cfg(feature = "serial")]
            Listener::Serial(s) => return s.serve(server, shutdown).await,
        };
        result.with_context(|| format!("serving {url} failed"))
    }
}

/// A serial port to serve one central at a time on.
#[cfg(feature = "serial")]
#[derive(Debug)]
pub struct SerialListener {
    path: String,
    baud: Option<u32>,
    first: Option<blerpc::link::serial::SerialPortLink>,
}

#[cfg(feature = "serial")]
impl SerialListener {
    fn open(path: String, baud: Option<u32>) -> anyhow::Result<Self> {
        let first = Some(Self::open_port(&path, baud)?);
        Ok(SerialListener { path, baud, first })
    }

    fn open_port(
        path: &str,
        baud: Option<u32>,
    ) -> anyhow::Result<blerpc::link::serial::SerialPortLink> {
        let mut options = blerpc::link::serial::SerialOptions::default();
        if let Some(b) = baud {
            options.baud_rate = b;
        }
        blerpc::link::serial::SerialLink::open(path, options).with_context(|| {
            format!("cannot open serial port {path} (does it exist, and may you open it?)")
        })
    }

    async fn serve(
        mut self,
        server: &Server,
        shutdown: impl Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        tokio::pin!(shutdown);
        loop {
            let link = match self.first.take() {
                Some(link) => link,
                None => Self::open_port(&self.path, self.baud)?,
            };
            tokio::select! {
                () = &mut shutdown => return Ok(()),
                r = server.serve_link(Traced::new(link)) => {
                    if let Err(e) = r {
                        tracing::debug!(path = %self.path, "serial session ended: {e}");
                    }
                }
            }
            // The port stays; the next central starts a new session on it.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

/// A link that logs every PDU (direction, length, hex) at `trace` level, target `blerpc::pdu`.
#[derive(Debug)]
pub struct Traced<L> {
    inner: L,
}

impl<L: Link> Traced<L> {
    /// Wraps `inner`.
    pub fn new(inner: L) -> Self {
        Traced { inner }
    }
}

impl<L: Link> Link for Traced<L> {
    type Tx = TracedTx<L::Tx>;
    type Rx = TracedRx<L::Rx>;
    fn att_mtu(&self) -> usize {
        self.inner.att_mtu()
    }
    fn long_containers(&self) -> bool {
        self.inner.long_containers()
    }
    fn peer_id(&self) -> String {
        self.inner.peer_id()
    }
    fn peer_ip(&self) -> Option<std::net::IpAddr> {
        self.inner.peer_ip()
    }
    fn setup_pipelining(&self) -> blerpc_proto::connection::SetupPipelining {
        self.inner.setup_pipelining()
    }
    fn split(self) -> (Self::Tx, Self::Rx) {
        let peer = self.inner.peer_id();
        let (tx, rx) = self.inner.split();
        (
            TracedTx {
                inner: tx,
                peer: peer.clone(),
            },
            TracedRx { inner: rx, peer },
        )
    }
}

/// The transmit half of a [`Traced`] link.
#[derive(Debug)]
pub struct TracedTx<T> {
    inner: T,
    peer: String,
}

/// The receive half of a [`Traced`] link.
#[derive(Debug)]
pub struct TracedRx<R> {
    inner: R,
    peer: String,
}

fn hex_prefix(pdu: &[u8]) -> String {
    const SHOWN: usize = 48;
    let head = blerpc::known_keys::to_hex(pdu.get(..SHOWN).unwrap_or(pdu));
    if pdu.len() > SHOWN {
        format!("{head}…")
    } else {
        head
    }
}

impl<T: LinkTx> LinkTx for TracedTx<T> {
    fn queue(&mut self, pdu: &[u8]) -> Result<(), LinkError> {
        tracing::trace!(target: "blerpc::pdu", peer = %self.peer, "→ {:3} B {}", pdu.len(), hex_prefix(pdu));
        self.inner.queue(pdu)
    }
    fn is_full(&self) -> bool {
        self.inner.is_full()
    }
    fn has_pending(&self) -> bool {
        self.inner.has_pending()
    }
    fn flush(&mut self) -> impl Future<Output = Result<(), LinkError>> + Send {
        self.inner.flush()
    }
    fn close(&mut self) -> impl Future<Output = Result<(), LinkError>> + Send {
        self.inner.close()
    }
    fn release_memory(&mut self) {
        self.inner.release_memory();
    }
}

impl<R: LinkRx> LinkRx for TracedRx<R> {
    async fn recv(&mut self) -> Result<Option<&[u8]>, LinkError> {
        let r = self.inner.recv().await;
        if let Ok(Some(pdu)) = &r {
            tracing::trace!(target: "blerpc::pdu", peer = %self.peer, "← {:3} B {}", pdu.len(), hex_prefix(pdu));
        }
        r
    }
    fn set_max_container(&mut self, len: usize) {
        self.inner.set_max_container(len);
    }
    fn release_memory(&mut self) {
        self.inner.release_memory();
    }
    fn poll_timeout(&self) -> Option<tokio::time::Instant> {
        self.inner.poll_timeout()
    }
    fn handle_timeout(&mut self, now: tokio::time::Instant) -> Result<(), LinkError> {
        self.inner.handle_timeout(now)
    }
}

/// An acceptor whose links are [`Traced`].
#[derive(Debug)]
pub struct TracedAcceptor<A>(pub A);

impl<A: Acceptor> Acceptor for TracedAcceptor<A> {
    type Link = Traced<A::Link>;
    async fn accept(&mut self) -> std::io::Result<Traced<A::Link>> {
        self.0.accept().await.map(Traced::new)
    }
    fn set_guard(&mut self, guard: std::sync::Arc<blerpc::link::guard::AddressGuard>) -> bool {
        self.0.set_guard(guard)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn addresses_parse_and_print() {
        for s in [
            "tcp://127.0.0.1:9000",
            "tls://localhost:9001",
            "ws://[::1]:9002/blerpc",
            "serial:///dev/ttyUSB0",
            "ble://",
            "ble://AA:BB:CC:DD:EE:FF",
        ] {
            assert_eq!(s.parse::<Address>().unwrap().to_string(), s);
        }
        assert_eq!("ble".parse::<Address>().unwrap(), Address::Ble(None));
        let e = "http://x".parse::<Address>().unwrap_err().to_string();
        assert!(e.contains("unknown link scheme `http`"), "{e}");
        assert!("serial://".parse::<Address>().is_err());
        for s in ["tcp://127.0.0.1:0", "ws://[::1]:0/x", "tls://localhost:0"] {
            assert_eq!(s.parse::<Address>().unwrap().to_string(), s);
        }
    }
}
