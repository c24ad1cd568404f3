//! The TLS link: the TCP link's framing (containers back to back, see [`super::tcp`]) inside a
//! TLS 1.3 session ([rustls] with the *ring* crypto provider, chosen explicitly; sessions resume
//! with stateless tickets, see [`TlsServerConfig::from_der`]).
//!
//! **Server:** a certificate chain and its private key ([`TlsServerConfig::from_pem_files`]).
//! **Client:** trusts either a CA ([`TlsClientConfig::with_ca_file`]: standard WebPKI
//! validation of the chain, the validity period and the server name) or one pinned certificate
//! ([`TlsClientConfig::with_pinned_cert_file`]).
//!
//! **Security model of a pinned certificate.** The server's end-entity certificate must be
//! byte-for-byte the pinned one (compared in constant time); the chain, the issuer, the validity
//! period and the name are *not* checked: the pin itself is the trust anchor, as an SSH host key
//! is. The handshake signature is still verified with the provider's algorithms against the
//! pinned certificate's public key, so only the holder of its private key can complete the
//! handshake: a man in the middle that replays the certificate fails. Rotating the server's key
//! or certificate means distributing a new pin. Use a CA when certificates rotate on their own.
//!
//! TLS protects the link hop; bleRPC's own end-to-end encryption (on by default) still runs inside
//! it and still pins the peripheral's Ed25519 identity.
//!
//! Only TLS 1.3 is offered. No ALPN is negotiated, so the same certificates work behind a
//! TLS-terminating proxy. **Peer ids:** `tls://HOST:PORT` on the client (the host as given, which
//! is also the default server name), `tls://IP:PORT` of the remote socket on the server.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use subtle::ConstantTimeEq;
use tokio::io::{ReadHalf, WriteHalf};
use tokio::net::{TcpStream, ToSocketAddrs};
pub use tokio_rustls::TlsStream;

use super::tcp::{self, StreamRx, StreamTx, TcpOptions};
use super::url::authority;
use super::{Link, LinkError};

/// Errors loading TLS certificates and keys.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The PEM text is malformed.
    #[error("{what}: malformed PEM: {detail}")]
    Pem {
        /// What was being read (a path or a description).
        what: String,
        /// The parser's message.
        detail: String,
    },
    /// No certificate in the input.
    #[error("{0}: no certificate found")]
    NoCertificate(String),
    /// No private key in the input.
    #[error("{0}: no private key found (PKCS#8, PKCS#1 or SEC1 PEM)")]
    NoPrivateKey(String),
    /// rustls refused the configuration (a key that does not match the certificate, an
    /// unparsable CA certificate).
    #[error("TLS configuration: {0}")]
    Rustls(rustls::Error),
}

/// rustls' message is part of [`TlsError::Rustls`]'s, so it is not also the `source`.
impl From<rustls::Error> for TlsError {
    fn from(e: rustls::Error) -> Self {
        TlsError::Rustls(e)
    }
}

/// The crypto provider both sides use: *ring*, explicitly (never a process-wide default).
///
/// *ring* rather than aws-lc-rs, measured side by side on the loopback matrix
/// (`docs/benchmarks/loopback.md`): its AES-128-GCM sealed and opened the 64 KiB rows' records
/// faster, and aws-lc's random generator gathers CPU-jitter entropy the first time a process
/// uses it, which made the first TLS handshake of every process tens of milliseconds slower. Server keys: RSA, ECDSA
/// P-256 and P-384, Ed25519 (as rustls reads them from PEM); not ECDSA P-521.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_file(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn pem_error(what: &str, e: impl std::fmt::Display) -> TlsError {
    TlsError::Pem {
        what: what.into(),
        detail: e.to_string(),
    }
}

/// Every certificate in a PEM text.
fn certs_from_pem(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(what, e))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(what.into()));
    }
    Ok(certs)
}

/// One certificate from PEM or DER (DER when the input does not look like PEM).
fn one_cert(bytes: &[u8], what: &str) -> Result<CertificateDer<'static>, TlsError> {
    if bytes.trim_ascii_start().starts_with(b"-----BEGIN") {
        certs_from_pem(bytes, what)?
            .into_iter()
            .next()
            .ok_or_else(|| TlsError::NoCertificate(what.into()))
    } else if bytes.is_empty() {
        Err(TlsError::NoCertificate(what.into()))
    } else {
        Ok(CertificateDer::from(bytes.to_vec()))
    }
}

static TLS13_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

/// The server side's TLS configuration.
#[derive(Clone, Debug)]
pub struct TlsServerConfig {
    config: Arc<rustls::ServerConfig>,
}

impl TlsServerConfig {
    /// Loads the certificate chain (leaf first) and its private key from PEM files.
    pub fn from_pem_files(
        cert_chain: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<TlsServerConfig, TlsError> {
        let (cert_path, key_path) = (cert_chain.as_ref(), key.as_ref());
        let chain = certs_from_pem(&read_file(cert_path)?, &cert_path.display().to_string())?;
        let key_what = key_path.display().to_string();
        let key = private_key(&read_file(key_path)?, &key_what)?;
        Self::from_der(chain, key)
    }

    /// Parses the certificate chain (leaf first) and the private key from PEM text.
    pub fn from_pem(cert_chain_pem: &[u8], key_pem: &[u8]) -> Result<TlsServerConfig, TlsError> {
        let chain = certs_from_pem(cert_chain_pem, "certificate chain")?;
        Self::from_der(chain, private_key(key_pem, "private key")?)
    }

    /// A configuration from a DER certificate chain (leaf first) and private key.
    ///
    /// Sessions resume with stateless TLS 1.3 tickets (rustls's *ring* `Ticketer`: keys
    /// rotated every 6 hours, resumption still with an ephemeral key exchange): a reconnecting
    /// client skips the certificate signature and verification (a full handshake takes
    /// ~1.2 ms here with RSA-2048, a resumed one ~0.4 ms), and the server keeps nothing per
    /// session, so every one of a gateway's clients can resume (rustls's default is a
    /// 256-session cache).
    pub fn from_der(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<TlsServerConfig, TlsError> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(TLS13_ONLY)?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.ticketer = rustls::crypto::ring::Ticketer::new()?;
        Ok(TlsServerConfig {
            config: Arc::new(config),
        })
    }

    /// Uses a rustls configuration as it is (client authentication, other providers, ...).
    pub fn from_rustls(config: Arc<rustls::ServerConfig>) -> TlsServerConfig {
        TlsServerConfig { config }
    }

    /// The rustls configuration.
    pub fn rustls(&self) -> &Arc<rustls::ServerConfig> {
        &self.config
    }

    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.clone())
    }
}

fn private_key(pem: &[u8], what: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    match PrivateKeyDer::from_pem_slice(pem) {
        Ok(key) => Ok(key),
        Err(rustls::pki_types::pem::Error::NoItemsFound) => {
            Err(TlsError::NoPrivateKey(what.into()))
        }
        Err(e) => Err(pem_error(what, e)),
    }
}

/// The client side's TLS configuration: whom to trust, and the server name to ask for.
#[derive(Clone, Debug)]
pub struct TlsClientConfig {
    config: Arc<rustls::ClientConfig>,
    server_name: Option<String>,
}

impl TlsClientConfig {
    /// Trusts servers whose chain leads to a CA certificate in this PEM file (one or more).
    pub fn with_ca_file(path: impl AsRef<Path>) -> Result<TlsClientConfig, TlsError> {
        let path = path.as_ref();
        Self::with_ca_der(certs_from_pem(
            &read_file(path)?,
            &path.display().to_string(),
        )?)
    }

    /// Trusts servers whose chain leads to a CA certificate in this PEM text.
    pub fn with_ca_pem(pem: &[u8]) -> Result<TlsClientConfig, TlsError> {
        Self::with_ca_der(certs_from_pem(pem, "CA certificates")?)
    }

    /// Trusts servers whose chain leads to one of these DER CA certificates.
    pub fn with_ca_der(cas: Vec<CertificateDer<'static>>) -> Result<TlsClientConfig, TlsError> {
        let mut roots = RootCertStore::empty();
        for ca in cas {
            roots.add(ca)?;
        }
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(TLS13_ONLY)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(TlsClientConfig {
            config: Arc::new(config),
            server_name: None,
        })
    }

    /// Trusts exactly one server certificate, read from a PEM or DER file (see the module docs
    /// for what a pin does and does not check).
    pub fn with_pinned_cert_file(path: impl AsRef<Path>) -> Result<TlsClientConfig, TlsError> {
        let path = path.as_ref();
        Self::with_pinned_cert(one_cert(&read_file(path)?, &path.display().to_string())?)
    }

    /// Trusts exactly this server certificate (DER).
    pub fn with_pinned_cert(cert: CertificateDer<'static>) -> Result<TlsClientConfig, TlsError> {
        let provider = provider();
        let verifier = PinnedCert {
            cert,
            algorithms: provider.signature_verification_algorithms,
        };
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(TLS13_ONLY)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(TlsClientConfig {
            config: Arc::new(config),
            server_name: None,
        })
    }

    /// Uses a rustls configuration as it is (client certificates, other providers, ...).
    pub fn from_rustls(config: Arc<rustls::ClientConfig>) -> TlsClientConfig {
        TlsClientConfig {
            config,
            server_name: None,
        }
    }

    /// The name sent as SNI and checked against the certificate (CA mode). Default: the host
    /// being connected to.
    pub fn server_name(mut self, name: impl Into<String>) -> TlsClientConfig {
        self.server_name = Some(name.into());
        self
    }

    /// The rustls configuration.
    pub fn rustls(&self) -> &Arc<rustls::ClientConfig> {
        &self.config
    }

    /// Runs the client handshake on a connected stream.
    pub(crate) async fn handshake(
        &self,
        host: &str,
        stream: TcpStream,
    ) -> Result<tokio_rustls::client::TlsStream<TcpStream>, LinkError> {
        let name = self.server_name.as_deref().unwrap_or(host);
        let name = ServerName::try_from(name.trim_start_matches('[').trim_end_matches(']'))
            .map_err(|e| LinkError::Transport(format!("invalid TLS server name `{name}`: {e}")))?
            .to_owned();
        tokio_rustls::TlsConnector::from(self.config.clone())
            .connect(name, stream)
            .await
            .map_err(|e| handshake_error(host, e))
    }
}

pub(crate) fn handshake_error(peer: &str, e: io::Error) -> LinkError {
    // rustls prints a custom certificate error with `Debug`; show its message instead.
    let detail = match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        Some(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other))) => {
            format!("invalid peer certificate: {}", other.0)
        }
        _ => e.to_string(),
    };
    LinkError::Transport(format!("TLS handshake with {peer} failed: {detail}"))
}

/// Trusts exactly one end-entity certificate; see the module docs.
#[derive(Debug)]
struct PinnedCert {
    cert: CertificateDer<'static>,
    algorithms: WebPkiSupportedAlgorithms,
}

#[derive(Debug, thiserror::Error)]
#[error("the server certificate is not the pinned certificate")]
struct PinMismatch;

impl ServerCertVerifier for PinnedCert {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The lengths are public; the contents are compared in constant time.
        if bool::from(end_entity.as_ref().ct_eq(self.cert.as_ref())) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::Other(rustls::OtherError(Arc::new(PinMismatch))),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Connects to a bleRPC server over TLS at `host:port`. `host` is also the server name unless
/// [`TlsClientConfig::server_name`] sets one. Bounded by [`TcpOptions::handshake_timeout`].
pub async fn connect(
    host: &str,
    port: u16,
    tls: &TlsClientConfig,
    options: &TcpOptions,
) -> Result<TlsLink, LinkError> {
    let peer = authority(host, port);
    tcp::timed(options.handshake_timeout, "TLS connect", async {
        let stream = TcpStream::connect(&peer).await?;
        handshake_stream(host, stream, tls, options).await
    })
    .await
}

/// Runs the client's TLS handshake on an already connected TCP stream (setting `TCP_NODELAY`
/// as configured): [`connect`] without the TCP connect, for callers that connect themselves or
/// time the two steps apart. `host` is the server name unless [`TlsClientConfig::server_name`]
/// sets one; the peer id is `tls://HOST:PORT` with the stream's remote port. Bounded by
/// [`TcpOptions::handshake_timeout`].
pub async fn handshake_stream(
    host: &str,
    stream: TcpStream,
    tls: &TlsClientConfig,
    options: &TcpOptions,
) -> Result<TlsLink, LinkError> {
    let peer = authority(host, stream.peer_addr()?.port());
    tcp::timed(options.handshake_timeout, "TLS handshake", async {
        stream.set_nodelay(options.nodelay)?;
        let stream = tls.handshake(host, stream).await?;
        Ok(TlsLink {
            stream: TlsStream::Client(stream),
            peer: format!("tls://{peer}"),
            options: options.clone(),
        })
    })
    .await
}

/// A TLS connection carrying bleRPC containers.
#[derive(Debug)]
pub struct TlsLink {
    stream: TlsStream<TcpStream>,
    peer: String,
    options: TcpOptions,
}

impl TlsLink {
    /// The TLS stream (negotiated parameters, peer certificates).
    pub fn get_ref(&self) -> &TlsStream<TcpStream> {
        &self.stream
    }
}

impl Link for TlsLink {
    type Tx = StreamTx<WriteHalf<TlsStream<TcpStream>>>;
    type Rx = StreamRx<ReadHalf<TlsStream<TcpStream>>>;
    fn att_mtu(&self) -> usize {
        self.options.att_mtu
    }
    fn long_containers(&self) -> bool {
        self.options.long_containers
    }
    fn peer_id(&self) -> String {
        self.peer.clone()
    }
    fn peer_ip(&self) -> Option<std::net::IpAddr> {
        self.stream.get_ref().0.peer_addr().ok().map(|a| a.ip())
    }
    fn split(self) -> (Self::Tx, Self::Rx) {
        let (r, w) = tokio::io::split(self.stream);
        tcp::halves(r, w, &self.options)
    }
}

/// Accepts bleRPC connections over TLS. Handshakes run concurrently (at most
/// [`TcpOptions::max_handshakes`], each within [`TcpOptions::handshake_timeout`]); a failed one is
/// logged at debug level and skipped.
#[derive(Debug)]
pub struct TlsAcceptor {
    listener: super::listener::GuardedListener,
    tls: TlsServerConfig,
    options: TcpOptions,
    pending: super::handshakes::Handshakes<TlsLink>,
}

impl TlsAcceptor {
    /// Binds `addr` (port 0 picks a free port; see [`TlsAcceptor::local_addr`]).
    pub async fn bind(
        addr: impl ToSocketAddrs,
        tls: TlsServerConfig,
        options: TcpOptions,
    ) -> io::Result<TlsAcceptor> {
        Ok(TlsAcceptor {
            listener: super::listener::bind(addr, &options).await?,
            tls,
            options,
            pending: super::handshakes::Handshakes::new(),
        })
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

impl crate::link::Acceptor for TlsAcceptor {
    type Link = TlsLink;
    fn set_guard(&mut self, guard: std::sync::Arc<crate::link::guard::AddressGuard>) -> bool {
        self.listener.set_guard(guard);
        true
    }
    async fn accept(&mut self) -> io::Result<TlsLink> {
        let tls = self.tls.acceptor();
        let options = &self.options;
        Ok(self
            .pending
            .next(&mut self.listener, options, |stream, addr| {
                let tls = tls.clone();
                let options = options.clone();
                async move {
                    let stream = tls
                        .accept(stream)
                        .await
                        .map_err(|e| handshake_error(&addr.to_string(), e))?;
                    Ok(TlsLink {
                        stream: TlsStream::Server(stream),
                        peer: format!("tls://{addr}"),
                        options,
                    })
                }
            })
            .await)
    }
}
