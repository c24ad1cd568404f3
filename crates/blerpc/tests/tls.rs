//! The TLS link: every call shape through Client/Server with a CA and with a pinned certificate,
//! refused certificates with clear errors, framing across TLS records, handshakes that do not
//! hold up the acceptor, many clients at once. Certificates are generated per test (rcgen).
#![cfg(feature = "tls")]
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::sync::Arc;
use std::time::Duration;

use blerpc::link::Acceptor;
use blerpc::link::tcp::TcpOptions;
use blerpc::link::tls::{self, TlsAcceptor, TlsClientConfig, TlsError, TlsServerConfig};
use blerpc::link::{Link, LinkError, LinkRx};
use blerpc::{Client, Server};
use common::*;
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(20);

fn pki() -> Pki {
    Pki::new(&rcgen::PKCS_ECDSA_P256_SHA256)
}

/// [`pki`] with the server's key (and the CA's) of algorithm `alg`.
fn pki_with(alg: &'static rcgen::SignatureAlgorithm) -> Pki {
    Pki::new(alg)
}

async fn serve(
    server: Server,
    pki: &Pki,
    options: TcpOptions,
) -> (
    u16,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let tls = TlsServerConfig::from_pem_files(&pki.cert, &pki.key).unwrap();
    let acceptor = TlsAcceptor::bind("127.0.0.1:0", tls, options)
        .await
        .unwrap();
    let port = acceptor.local_addr().unwrap().port();
    let (stop_tx, task) = common::serve_in_background(server, acceptor);
    (port, stop_tx, task)
}

/// The link's provider (*ring*) serves and verifies the key types the docs list (RSA is covered
/// by `blerpc-bench loopback`'s RSA-2048 certificate, which *ring* cannot generate here).
#[tokio::test]
async fn ecdsa_p256_p384_and_ed25519_certificates_work() {
    for alg in [
        &rcgen::PKCS_ECDSA_P256_SHA256,
        &rcgen::PKCS_ECDSA_P384_SHA384,
        &rcgen::PKCS_ED25519,
    ] {
        let pki = pki_with(alg);
        let server = server(true);
        let config = client_config(&server);
        let (port, stop, task) = serve(server, &pki, TcpOptions::default()).await;
        let trust = TlsClientConfig::with_ca_file(&pki.ca).unwrap();
        timeout(LIMIT, async {
            let link = tls::connect("127.0.0.1", port, &trust, &TcpOptions::default())
                .await
                .unwrap();
            let client = Client::connect(link, config).await.unwrap();
            let req = echo_req("key types");
            assert_eq!(client.call("echo", req.clone()).await.unwrap(), req);
            client.close().await;
        })
        .await
        .unwrap_or_else(|_| panic!("{alg:?}: timed out"));
        let _ = stop.send(());
        let _ = task.await;
    }
}

/// Every call shape with the server's certificate pinned instead of a CA (the CA case is in the
/// link suite, `tests/links.rs`).
async fn call_shapes_pinned(encrypted: bool) {
    let pki = pki();
    let server = server(encrypted);
    let config = client_config(&server);
    let (port, stop, task) = serve(server, &pki, TcpOptions::default()).await;
    let trust = TlsClientConfig::with_pinned_cert_file(&pki.cert).unwrap();
    timeout(LIMIT, async {
        let link = tls::connect("127.0.0.1", port, &trust, &TcpOptions::default())
            .await
            .unwrap();
        assert_eq!(link.peer_id(), format!("tls://127.0.0.1:{port}"));
        let client = Client::connect(link, config).await.unwrap();
        assert_eq!(client.info().encrypted, encrypted);
        every_call_shape(&client).await;
    })
    .await
    .unwrap();
    drop(stop);
    task.await.unwrap();
}

#[tokio::test]
async fn every_call_shape_encrypted_with_a_pinned_certificate() {
    call_shapes_pinned(true).await;
}

#[tokio::test]
async fn every_call_shape_plaintext_with_a_pinned_certificate() {
    call_shapes_pinned(false).await;
}

#[tokio::test]
async fn a_pinned_der_certificate_and_a_server_name_work() {
    let pki = pki();
    let (port, stop, task) = serve(server(true), &pki, TcpOptions::default()).await;
    let der = pki.ca.with_file_name("leaf.der");
    std::fs::write(&der, pki.leaf.as_ref()).unwrap();
    let trust = TlsClientConfig::with_pinned_cert_file(&der)
        .unwrap()
        .server_name("anything.invalid");
    let link = tls::connect("127.0.0.1", port, &trust, &TcpOptions::default())
        .await
        .unwrap();
    drop(link);
    // With a CA the name is checked: `localhost` is in the certificate.
    let trust = TlsClientConfig::with_ca_file(&pki.ca)
        .unwrap()
        .server_name("localhost");
    tls::connect("127.0.0.1", port, &trust, &TcpOptions::default())
        .await
        .unwrap();
    drop(stop);
    task.await.unwrap();
}

async fn refused(pki: &Pki, trust: TlsClientConfig) -> String {
    let (port, stop, task) = serve(server(true), pki, TcpOptions::default()).await;
    let err = timeout(
        LIMIT,
        tls::connect("127.0.0.1", port, &trust, &TcpOptions::default()),
    )
    .await
    .unwrap()
    .unwrap_err();
    drop(stop);
    task.await.unwrap();
    assert!(matches!(err, LinkError::Transport(_)), "{err:?}");
    err.to_string()
}

#[tokio::test]
async fn a_wrong_ca_fails_the_handshake_with_a_clear_error() {
    let (pki, other) = (pki(), pki());
    let msg = refused(&pki, TlsClientConfig::with_ca_file(&other.ca).unwrap()).await;
    assert!(msg.contains("TLS handshake with 127.0.0.1 failed"), "{msg}");
    assert!(msg.contains("UnknownIssuer"), "{msg}");
}

#[tokio::test]
async fn a_name_the_certificate_does_not_cover_is_refused() {
    let pki = pki();
    let trust = TlsClientConfig::with_ca_file(&pki.ca)
        .unwrap()
        .server_name("device.example");
    let msg = refused(&pki, trust).await;
    assert!(
        msg.contains("not valid for name \"device.example\""),
        "{msg}"
    );
}

#[tokio::test]
async fn a_pinned_certificate_that_does_not_match_is_refused() {
    let (pki, other) = (pki(), pki());
    let msg = refused(
        &pki,
        TlsClientConfig::with_pinned_cert_file(&other.cert).unwrap(),
    )
    .await;
    assert!(msg.contains("not the pinned certificate"), "{msg}");
}

/// A peer that replays the pinned certificate without its key cannot finish the handshake: the
/// signature is still checked against the pinned certificate's public key.
#[tokio::test]
async fn a_pinned_certificate_without_its_key_is_refused() {
    let (pki, other) = (pki(), pki());
    // The server presents `pki`'s certificate but signs with another key (rustls's own builder
    // refuses that pairing, so a resolver hands it over directly).
    let certs = vec![pki.leaf.clone()];
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(&other.key).unwrap();
    let provider = tls::provider();
    let signer = provider.key_provider.load_private_key(key).unwrap();
    let certified = Arc::new(rustls::sign::CertifiedKey::new(certs, signer));
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Fixed(certified)));
    let acceptor = TlsAcceptor::bind(
        "127.0.0.1:0",
        TlsServerConfig::from_rustls(Arc::new(config)),
        TcpOptions::default(),
    )
    .await
    .unwrap();
    let port = acceptor.local_addr().unwrap().port();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        server(true)
            .serve(acceptor, async {
                let _ = stop_rx.await;
            })
            .await
    });
    let trust = TlsClientConfig::with_pinned_cert_file(&pki.cert).unwrap();
    let err = timeout(
        LIMIT,
        tls::connect("127.0.0.1", port, &trust, &TcpOptions::default()),
    )
    .await
    .unwrap()
    .unwrap_err();
    assert!(err.to_string().contains("TLS handshake"), "{err}");
    drop(stop_tx);
    task.await.unwrap().unwrap();
}

#[derive(Debug)]
struct Fixed(Arc<rustls::sign::CertifiedKey>);

impl rustls::server::ResolvesServerCert for Fixed {
    fn resolve(
        &self,
        _: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }
}

#[test]
fn configuration_errors_name_the_file_and_the_problem() {
    let pki = pki();
    let missing = pki.ca.with_file_name("missing.pem");
    let err = TlsServerConfig::from_pem_files(&missing, &pki.key).unwrap_err();
    assert!(matches!(err, TlsError::Read { .. }), "{err}");
    assert!(err.to_string().contains("missing.pem"), "{err}");
    let err = TlsServerConfig::from_pem_files(&pki.cert, &pki.cert).unwrap_err();
    assert!(matches!(err, TlsError::NoPrivateKey(_)), "{err}");
    let err = TlsServerConfig::from_pem_files(&pki.key, &pki.key).unwrap_err();
    assert!(matches!(err, TlsError::NoCertificate(_)), "{err}");
    let other = self::pki();
    let err = TlsServerConfig::from_pem_files(&pki.cert, &other.key).unwrap_err();
    assert!(matches!(err, TlsError::Rustls(_)), "{err}");
    let err = TlsClientConfig::with_ca_file(&pki.key).unwrap_err();
    assert!(matches!(err, TlsError::NoCertificate(_)), "{err}");
}

#[tokio::test]
async fn containers_split_across_tls_records_and_oversize_ones() {
    let pki = pki();
    let tls_config = TlsServerConfig::from_pem_files(&pki.cert, &pki.key).unwrap();
    // Classic containers only: 244 bytes at most (with long containers, 16 KiB).
    let classic = TcpOptions {
        long_containers: false,
        ..TcpOptions::default()
    };
    let mut acceptor = TlsAcceptor::bind("127.0.0.1:0", tls_config, classic)
        .await
        .unwrap();
    let addr = acceptor.local_addr().unwrap();
    let client = tokio::spawn({
        let trust = TlsClientConfig::with_ca_file(&pki.ca).unwrap();
        async move {
            let tcp = TcpStream::connect(addr).await.unwrap();
            let connector = tokio_rustls::TlsConnector::from(trust.rustls().clone());
            let name = ServerName::try_from("localhost").unwrap();
            let mut s = connector.connect(name, tcp).await.unwrap();
            // One TLS record per byte, then two containers in one record, then an oversize one.
            for b in [3u8, 0, 0xC4, 2, 0x64, 0x00] {
                s.write_all(&[b]).await.unwrap();
                s.flush().await.unwrap();
            }
            s.write_all(&[4, 0, 0x40, 1, 7, 5, 0, 0xC8, 0])
                .await
                .unwrap();
            s.write_all(&[6, 0, 0x40, 250]).await.unwrap();
            s.flush().await.unwrap();
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest).await;
        }
    });
    let link = timeout(LIMIT, acceptor.accept()).await.unwrap().unwrap();
    assert!(link.peer_id().starts_with("tls://127.0.0.1:"));
    let (_tx, mut rx) = link.split();
    assert_eq!(rx.recv().await.unwrap().unwrap(), &[3, 0, 0xC4, 2, 0x64, 0]);
    assert_eq!(rx.recv().await.unwrap().unwrap(), &[4, 0, 0x40, 1, 7]);
    assert_eq!(rx.recv().await.unwrap().unwrap(), &[5, 0, 0xC8, 0]);
    assert!(matches!(
        timeout(LIMIT, rx.recv()).await.unwrap(),
        Err(LinkError::Framing(_))
    ));
    drop(rx);
    drop(_tx);
    client.await.unwrap();
}

#[tokio::test]
async fn a_silent_connection_neither_blocks_others_nor_stays_forever() {
    let pki = pki();
    let options = TcpOptions {
        handshake_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let server = server(true);
    let config = client_config(&server);
    let (port, stop, task) = serve(server, &pki, options).await;
    timeout(LIMIT, async {
        // Connects and never says a word.
        let mut silent = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let trust = TlsClientConfig::with_ca_file(&pki.ca).unwrap();
        let link = tls::connect("127.0.0.1", port, &trust, &TcpOptions::default())
            .await
            .unwrap();
        let client = Client::connect(link, config).await.unwrap();
        assert_eq!(client.call("echo", vec![1]).await.unwrap(), vec![1]);
        // After the handshake timeout the server drops it.
        let mut buf = [0; 16];
        let n = silent.read(&mut buf).await.unwrap_or(0);
        assert_eq!(n, 0);
    })
    .await
    .unwrap();
    drop(stop);
    task.await.unwrap();
}

/// A client that connects again with the same configuration resumes its TLS 1.3 session (no
/// certificate signature and verification), once it has read the server's session tickets.
#[tokio::test]
async fn a_reconnecting_client_resumes_its_tls_session() {
    let pki = pki();
    let server = server(true);
    let config = client_config(&server);
    let (port, stop, task) = serve(server, &pki, TcpOptions::default()).await;
    let trust = TlsClientConfig::with_ca_file(&pki.ca).unwrap();
    timeout(LIMIT, async {
        let mut kinds = Vec::new();
        for _ in 0..3 {
            let link = tls::connect("127.0.0.1", port, &trust, &TcpOptions::default())
                .await
                .unwrap();
            kinds.push(link.get_ref().get_ref().1.handshake_kind());
            // A call reads the tickets the server sent after its handshake.
            let client = Client::connect(link, config.clone()).await.unwrap();
            let req = echo_req("resume");
            assert_eq!(client.call("echo", req.clone()).await.unwrap(), req);
            client.close().await;
        }
        println!("{kinds:?}");
        assert_eq!(kinds[0], Some(rustls::HandshakeKind::Full));
        assert_eq!(kinds[1], Some(rustls::HandshakeKind::Resumed));
        assert_eq!(kinds[2], Some(rustls::HandshakeKind::Resumed));
    })
    .await
    .unwrap();
    let _ = stop.send(());
    let _ = task.await;
}

/// Sessions resume with stateless tickets: a client whose session is older than 300 others (more
/// than rustls's default 256-session server cache holds) still resumes.
#[tokio::test]
async fn sessions_resume_after_hundreds_of_others() {
    use std::sync::Arc;
    let pki = pki();
    // 302 handshakes from one address in a second or two: past the default connection rate.
    let server = server_unlimited(true);
    let (port, stop, task) = serve(server, &pki, TcpOptions::default()).await;
    let trust = TlsClientConfig::with_ca_file(&pki.ca).unwrap();
    // A client configuration with its own session store.
    let own_store = || {
        let mut config = (**trust.rustls()).clone();
        config.resumption = rustls::client::Resumption::in_memory_sessions(4);
        TlsClientConfig::from_rustls(Arc::new(config))
    };
    // Connects, reads for `wait` (taking in the tickets that follow the handshake; no container
    // comes, as the server waits for the client's first bytes), returns the handshake kind.
    async fn handshake(
        port: u16,
        trust: &TlsClientConfig,
        wait: Duration,
    ) -> Option<rustls::HandshakeKind> {
        let link = tls::connect("127.0.0.1", port, trust, &TcpOptions::default())
            .await
            .unwrap();
        let kind = link.get_ref().get_ref().1.handshake_kind();
        let (_tx, mut rx) = link.split();
        let _ = timeout(wait, rx.recv()).await;
        kind
    }
    let (long, short) = (Duration::from_millis(200), Duration::from_millis(1));
    timeout(LIMIT, async {
        let first = own_store();
        assert_eq!(
            handshake(port, &first, long).await,
            Some(rustls::HandshakeKind::Full)
        );
        for _ in 0..300 {
            let other = own_store();
            assert_eq!(
                handshake(port, &other, short).await,
                Some(rustls::HandshakeKind::Full)
            );
        }
        assert_eq!(
            handshake(port, &first, short).await,
            Some(rustls::HandshakeKind::Resumed)
        );
    })
    .await
    .unwrap();
    let _ = stop.send(());
    let _ = task.await;
}
