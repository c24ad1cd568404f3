//! One suite for every transport, the way rustls runs one suite per crypto provider: each test
//! below runs over the in-memory link, TCP, TLS (a CA the client verifies), WebSocket and serial
//! (a pseudo-terminal the client opens by path). What only one transport has (framing edge
//! cases, certificates, pings, line noise) stays in that transport's own file.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::time::Duration;

use blerpc::{Client, ClientConfig, Server};
use common::*;
use futures_util::StreamExt;
use tokio::time::timeout;

/// Every test finishes well within this, or fails.
const LIMIT: Duration = Duration::from_secs(30);

/// A transport the suite runs over: a server serving on it, and clients connecting to it.
trait Transport: Sized {
    /// Whether it takes more than one client (a serial line connects two ends).
    const MANY_CLIENTS: bool = true;
    /// What a client's link reports as its peer, for the given served endpoint.
    fn peer_id(&self) -> String;
    /// Serves `server` on a new endpoint.
    async fn serve(server: Server) -> Self;
    /// A client connected to the endpoint with `config`.
    async fn connect(&self, config: ClientConfig) -> Client;
    /// Stops serving and waits for the server to shut down.
    async fn stop(self);
}

async fn call_shapes<T: Transport>(encrypted: bool) {
    let server = server(encrypted);
    let config = client_config(&server);
    let t = T::serve(server).await;
    timeout(LIMIT, async {
        let client = t.connect(config).await;
        assert_eq!(client.info().encrypted, encrypted);
        assert_eq!(client.info().peer_id, t.peer_id());
        every_call_shape(&client).await;
        client.close().await;
    })
    .await
    .unwrap();
    t.stop().await;
}

/// A hundred clients connected at once, each answered, then each answered again. (From one
/// address: past the default burst of 50 new connections per address, so without that limit.)
async fn many_clients<T: Transport>() {
    let server = server_unlimited(true);
    let config = client_config(&server);
    let t = T::serve(server).await;
    timeout(LIMIT, async {
        let clients = futures_util::future::join_all((0..100u32).map(|i| {
            let config = config.clone();
            let t = &t;
            async move {
                let client = t.connect(config).await;
                let req = echo_req(&format!("client {i}"));
                assert_eq!(client.call("echo", req.clone()).await.unwrap(), req);
                client
            }
        }))
        .await;
        for (i, c) in clients.iter().enumerate() {
            let req = echo_req(&format!("again {i}"));
            assert_eq!(c.call("echo", req.clone()).await.unwrap(), req);
        }
    })
    .await
    .unwrap();
    t.stop().await;
}

/// Dropping a stream before its end cancels it; the connection carries on.
async fn a_dropped_stream_is_cancelled<T: Transport>() {
    let server = server(true);
    let config = client_config(&server);
    let t = T::serve(server).await;
    timeout(LIMIT, async {
        let client = t.connect(config).await;
        let mut stream = client
            .server_stream("counter_stream", counter_stream_req(5_000))
            .await
            .unwrap();
        assert!(stream.next().await.unwrap().is_ok());
        drop(stream);
        let req = echo_req("after");
        assert_eq!(client.call("echo", req.clone()).await.unwrap(), req);
    })
    .await
    .unwrap();
    t.stop().await;
}

/// A client that goes away in the middle of a call disturbs no other client.
async fn a_vanished_client_disturbs_no_other<T: Transport>() {
    let server = server(true);
    let config = client_config(&server);
    let t = T::serve(server).await;
    timeout(LIMIT, async {
        let gone = t.connect(config.clone()).await;
        let call = {
            let gone = gone.clone();
            tokio::spawn(async move { gone.call("echo", vec![0x0a; 40_000]).await })
        };
        tokio::task::yield_now().await;
        gone.close().await;
        let _ = call.await.unwrap();
        let other = t.connect(config).await;
        let req = echo_req("still here");
        assert_eq!(other.call("echo", req.clone()).await.unwrap(), req);
    })
    .await
    .unwrap();
    t.stop().await;
}

/// The suite's tests, instantiated for one transport.
macro_rules! suite {
    ($name:ident: $transport:ty) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_call_shape_encrypted() {
                call_shapes::<$transport>(true).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_call_shape_plaintext() {
                call_shapes::<$transport>(false).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_dropped_stream_is_cancelled_and_the_connection_goes_on() {
                a_dropped_stream_is_cancelled::<$transport>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_server_answers_100_concurrent_clients() {
                if <$transport as Transport>::MANY_CLIENTS {
                    many_clients::<$transport>().await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_client_that_vanishes_mid_call_disturbs_no_other() {
                if <$transport as Transport>::MANY_CLIENTS {
                    a_vanished_client_disturbs_no_other::<$transport>().await;
                }
            }
        }
    };
}

/// The in-memory link: a listener handing out one end of each new pair.
struct Mem {
    listener: tokio::sync::mpsc::Sender<blerpc::link::mem::MemLink>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Transport for Mem {
    fn peer_id(&self) -> String {
        "mem://a".into()
    }
    async fn serve(server: Server) -> Self {
        let (listener, acceptor) = MemAcceptor::new(128);
        let (stop, task) = serve_in_background(server, acceptor);
        Mem {
            listener,
            stop,
            task,
        }
    }
    async fn connect(&self, config: ClientConfig) -> Client {
        let (a, b) = blerpc::link::mem::pair(247);
        self.listener.send(b).await.unwrap();
        Client::connect(a, config).await.unwrap()
    }
    async fn stop(self) {
        drop(self.stop);
        self.task.await.unwrap();
    }
}

suite!(mem: Mem);

#[cfg(feature = "tcp")]
mod tcp_transport {
    use blerpc::link::tcp::{self, TcpAcceptor, TcpOptions};

    use super::*;

    pub(super) struct Tcp {
        addr: std::net::SocketAddr,
        stop: tokio::sync::oneshot::Sender<()>,
        task: tokio::task::JoinHandle<()>,
    }

    impl Transport for Tcp {
        fn peer_id(&self) -> String {
            format!("tcp://{}", self.addr)
        }
        async fn serve(server: Server) -> Self {
            let acceptor = TcpAcceptor::bind("127.0.0.1:0", TcpOptions::default())
                .await
                .unwrap();
            let addr = acceptor.local_addr().unwrap();
            let (stop, task) = serve_in_background(server, acceptor);
            Tcp { addr, stop, task }
        }
        async fn connect(&self, config: ClientConfig) -> Client {
            let link = tcp::connect(self.addr, &TcpOptions::default())
                .await
                .unwrap();
            Client::connect(link, config).await.unwrap()
        }
        async fn stop(self) {
            drop(self.stop);
            self.task.await.unwrap();
        }
    }
}

#[cfg(feature = "tcp")]
suite!(tcp: tcp_transport::Tcp);

#[cfg(feature = "tls")]
mod tls_transport {
    use blerpc::link::tcp::TcpOptions;
    use blerpc::link::tls::{self, TlsAcceptor, TlsClientConfig, TlsServerConfig};

    use super::*;

    pub(super) struct Tls {
        pki: Pki,
        port: u16,
        stop: tokio::sync::oneshot::Sender<()>,
        task: tokio::task::JoinHandle<()>,
    }

    impl Transport for Tls {
        fn peer_id(&self) -> String {
            format!("tls://127.0.0.1:{}", self.port)
        }
        async fn serve(server: Server) -> Self {
            let pki = Pki::new(&rcgen::PKCS_ECDSA_P256_SHA256);
            let tls = TlsServerConfig::from_pem_files(&pki.cert, &pki.key).unwrap();
            let acceptor = TlsAcceptor::bind("127.0.0.1:0", tls, TcpOptions::default())
                .await
                .unwrap();
            let port = acceptor.local_addr().unwrap().port();
            let (stop, task) = serve_in_background(server, acceptor);
            Tls {
                pki,
                port,
                stop,
                task,
            }
        }
        async fn connect(&self, config: ClientConfig) -> Client {
            let tls = TlsClientConfig::with_ca_file(&self.pki.ca).unwrap();
            let link = tls::connect("127.0.0.1", self.port, &tls, &TcpOptions::default())
                .await
                .unwrap();
            Client::connect(link, config).await.unwrap()
        }
        async fn stop(self) {
            drop(self.stop);
            self.task.await.unwrap();
        }
    }
}

#[cfg(feature = "tls")]
suite!(tls: tls_transport::Tls);

#[cfg(feature = "ws")]
mod ws_transport {
    use blerpc::link::ws::{self, WsAcceptor, WsOptions};

    use super::*;

    pub(super) struct Ws {
        url: String,
        stop: tokio::sync::oneshot::Sender<()>,
        task: tokio::task::JoinHandle<()>,
    }

    impl Transport for Ws {
        fn peer_id(&self) -> String {
            self.url.clone()
        }
        async fn serve(server: Server) -> Self {
            let acceptor = WsAcceptor::bind("127.0.0.1:0", WsOptions::default())
                .await
                .unwrap();
            let url = format!("ws://{}/blerpc", acceptor.local_addr().unwrap());
            let (stop, task) = serve_in_background(server, acceptor);
            Ws { url, stop, task }
        }
        async fn connect(&self, config: ClientConfig) -> Client {
            let link = ws::connect(&self.url, &WsOptions::default()).await.unwrap();
            Client::connect(link, config).await.unwrap()
        }
        async fn stop(self) {
            drop(self.stop);
            self.task.await.unwrap();
        }
    }
}

#[cfg(feature = "ws")]
suite!(ws: ws_transport::Ws);

#[cfg(all(unix, feature = "serial"))]
mod serial_transport {
    use blerpc::link::serial::{SerialLink, SerialOptions};

    use super::*;

    /// A pseudo-terminal: the server on the master side, the client opening the tty by path.
    pub(super) struct Serial {
        path: String,
        _slave: std::os::fd::OwnedFd,
        task: tokio::task::JoinHandle<()>,
    }

    impl Transport for Serial {
        const MANY_CLIENTS: bool = false;
        fn peer_id(&self) -> String {
            format!("serial://{}", self.path)
        }
        async fn serve(server: Server) -> Self {
            let pty = blerpc::link::pty::open().unwrap();
            let link = SerialLink::new(pty.master, SerialOptions::default());
            let task = tokio::spawn(async move {
                let _ = server.serve_link(link).await;
            });
            Serial {
                path: pty.path,
                _slave: pty.slave,
                task,
            }
        }
        async fn connect(&self, config: ClientConfig) -> Client {
            let options = SerialOptions {
                baud_rate: 921_600,
                ..Default::default()
            };
            let link = SerialLink::open(&self.path, options).unwrap();
            Client::connect(link, config).await.unwrap()
        }
        async fn stop(self) {
            self.task.abort();
            let _ = self.task.await;
        }
    }
}

#[cfg(all(unix, feature = "serial"))]
suite!(serial: serial_transport::Serial);
