//! The server process of `blerpc-bench loopback` (`blerpc-bench loopback --server-process`,
//! hidden), and the parent's handle on it.
//!
//! Protocol between the two, one line each way:
//!
//! ```text
//! parent → child stdin:   {"cert_pem": "...", "key_pem": "..."}            (then stdin stays open)
//! child  → parent stdout: ready {"blerpc_tcp": 40731, ..., "identity": "3b6a…"}
//! ```
//!
//! The child binds every endpoint on 127.0.0.1 (bleRPC with and without E2E encryption over TCP
//! and TLS, bare TCP and bare TLS, each bare one also sealed), all served by one current-thread tokio runtime, and exits when
//! its stdin closes (the parent exited or dropped its [`ServerProcess`]) or after
//! [`MAX_LIFETIME`], whichever comes first.

use std::io::{BufRead as _, Write as _};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use blerpc::link::tcp::{TcpAcceptor, TcpOptions};
use blerpc::link::tls::{TlsAcceptor, TlsServerConfig};
use blerpc::{Server, ServerConfig};
use blerpc_demo::{DemoService, pb};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

use super::{bare, grpc};

/// The child exits after this long whatever happens.
pub const MAX_LIFETIME: Duration = Duration::from_secs(3 * 3600);

/// How long the parent waits for the ready line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// What the parent sends the child.
#[derive(Debug, Serialize, Deserialize)]
struct Setup {
    cert_pem: String,
    key_pem: String,
}

/// The ports the child listens on, and its bleRPC identity.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Endpoints {
    /// bleRPC over TCP, E2E encryption required.
    pub blerpc_tcp: u16,
    /// bleRPC over TCP, plaintext.
    pub blerpc_tcp_plain: u16,
    /// bleRPC over TLS, E2E encryption required.
    pub blerpc_tls: u16,
    /// bleRPC over TLS, plaintext inside TLS.
    pub blerpc_tls_plain: u16,
    /// Bare DATA→ACK over TCP.
    pub bare_tcp: u16,
    /// Bare DATA→ACK over TLS.
    pub bare_tls: u16,
    /// Sealed bare DATA→ACK (AES-128-GCM) over TCP.
    pub bare_aead_tcp: u16,
    /// Sealed bare DATA→ACK (AES-128-GCM) over TLS.
    pub bare_aead_tls: u16,
    /// gRPC (tonic) over TCP (h2c).
    pub grpc_tcp: u16,
    /// gRPC (tonic) over TLS.
    pub grpc_tls: u16,
    /// The bleRPC servers' Ed25519 public key, hex (clients pin it).
    pub identity: String,
}

const READY: &str = "ready ";

/// Runs the child: reads the setup line, serves until stdin closes. Never returns normally
/// while serving.
pub fn run_child() -> anyhow::Result<bool> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("cannot read the setup line")?;
    let setup: Setup = serde_json::from_str(&line).context("malformed setup line")?;
    // Exit with the parent: stdin reaches EOF when it exits or drops its handle.
    std::thread::spawn(|| {
        let mut sink = String::new();
        while std::io::stdin()
            .lock()
            .read_line(&mut sink)
            .is_ok_and(|n| n > 0)
        {
            sink.clear();
        }
        std::process::exit(0);
    });
    std::thread::spawn(|| {
        std::thread::sleep(MAX_LIFETIME);
        std::process::exit(3);
    });
    let tls = TlsServerConfig::from_pem(setup.cert_pem.as_bytes(), setup.key_pem.as_bytes())?;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(serve(tls, &setup))
}

fn blerpc_server(identity: Option<[u8; 32]>) -> anyhow::Result<Server> {
    let mut config = ServerConfig {
        identity,
        ..Default::default()
    };
    config.peripheral.require_encryption = identity.is_some();
    Ok(Server::new(
        pb::BlerpcServer::new(DemoService::default()),
        config,
    )?)
}

async fn serve(tls: TlsServerConfig, setup: &Setup) -> anyhow::Result<bool> {
    let seed = blerpc::identity::generate();
    let e2e = blerpc_server(Some(seed))?;
    let plain = blerpc_server(None)?;
    let identity = e2e
        .identity_public()
        .ok_or_else(|| anyhow!("the server has no identity"))?;
    let local = "127.0.0.1:0";
    let options = TcpOptions::default();
    let tcp_e2e = TcpAcceptor::bind(local, options.clone()).await?;
    let tcp_plain = TcpAcceptor::bind(local, options.clone()).await?;
    let tls_e2e = TlsAcceptor::bind(local, tls.clone(), options.clone()).await?;
    let tls_plain = TlsAcceptor::bind(local, tls.clone(), options).await?;
    let bare_tcp = TcpListener::bind(local).await?;
    let bare_tls = TcpListener::bind(local).await?;
    let bare_aead_tcp = TcpListener::bind(local).await?;
    let bare_aead_tls = TcpListener::bind(local).await?;
    let grpc_tcp = TcpListener::bind(local).await?;
    let grpc_tls = TcpListener::bind(local).await?;
    let endpoints = Endpoints {
        blerpc_tcp: tcp_e2e.local_addr()?.port(),
        blerpc_tcp_plain: tcp_plain.local_addr()?.port(),
        blerpc_tls: tls_e2e.local_addr()?.port(),
        blerpc_tls_plain: tls_plain.local_addr()?.port(),
        bare_tcp: bare_tcp.local_addr()?.port(),
        bare_tls: bare_tls.local_addr()?.port(),
        bare_aead_tcp: bare_aead_tcp.local_addr()?.port(),
        bare_aead_tls: bare_aead_tls.local_addr()?.port(),
        grpc_tcp: grpc_tcp.local_addr()?.port(),
        grpc_tls: grpc_tls.local_addr()?.port(),
        identity: blerpc::known_keys::to_hex(&identity),
    };
    let never = std::future::pending::<()>;
    let mut tasks = tokio::task::JoinSet::new();
    {
        let s = e2e.clone();
        tasks.spawn(async move { s.serve(tcp_e2e, never()).await.map_err(anyhow::Error::from) });
        let s = plain.clone();
        tasks.spawn(async move {
            s.serve(tcp_plain, never())
                .await
                .map_err(anyhow::Error::from)
        });
        tasks.spawn(async move {
            e2e.serve(tls_e2e, never())
                .await
                .map_err(anyhow::Error::from)
        });
        tasks.spawn(async move {
            plain
                .serve(tls_plain, never())
                .await
                .map_err(anyhow::Error::from)
        });
    }
    tasks.spawn(serve_bare(bare_tcp, None, false));
    tasks.spawn(serve_bare(bare_tls, Some(tls.clone()), false));
    tasks.spawn(serve_bare(bare_aead_tcp, None, true));
    tasks.spawn(serve_bare(bare_aead_tls, Some(tls), true));
    tasks.spawn(grpc::serve(grpc_tcp, None));
    let (cert, key) = (setup.cert_pem.clone(), setup.key_pem.clone());
    tasks.spawn(async move { grpc::serve(grpc_tls, Some((&cert, &key))).await });
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{READY}{}", serde_json::to_string(&endpoints)?)?;
        out.flush()?;
    }
    match tasks.join_next().await {
        Some(Ok(Err(e))) => Err(e.context("a benchmark listener stopped")),
        Some(Err(e)) => Err(anyhow!("a benchmark listener failed: {e}")),
        _ => bail!("a benchmark listener stopped"),
    }
}

async fn serve_bare(
    listener: TcpListener,
    tls: Option<TlsServerConfig>,
    sealed: bool,
) -> anyhow::Result<()> {
    let acceptor = tls.map(|t| tokio_rustls::TlsAcceptor::from(t.rustls().clone()));
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let r = match acceptor {
                None => bare::serve(stream, sealed).await,
                Some(a) => match a.accept(stream).await {
                    Ok(s) => bare::serve(s, sealed).await,
                    Err(e) => Err(e),
                },
            };
            if let Err(e) = r {
                tracing::debug!("bare connection ended: {e}");
            }
        });
    }
}

/// The parent's handle on the server process: killed and reaped when dropped.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Where it listens.
    pub endpoints: Endpoints,
}

impl ServerProcess {
    /// The server process's id.
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap_or(i32::MAX)
    }

    /// Spawns this executable as the server process with the TLS certificate and key, and waits
    /// (at most [`READY_TIMEOUT`]) for its ready line.
    pub fn spawn(cert_pem: &str, key_pem: &str) -> anyhow::Result<ServerProcess> {
        let mut child = crate::process::command(&["loopback-server"])?
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot spawn the benchmark server process")?;
        let stdout = child.stdout.take();
        let stdin = child.stdin.take();
        // From here on, `Drop` kills the child whatever fails.
        let mut process = ServerProcess {
            child,
            stdin,
            endpoints: Endpoints::default(),
        };
        let setup = serde_json::to_string(&Setup {
            cert_pem: cert_pem.to_string(),
            key_pem: key_pem.to_string(),
        })?;
        let stdin = process
            .stdin
            .as_mut()
            .ok_or_else(|| anyhow!("no stdin pipe"))?;
        writeln!(stdin, "{setup}").context("cannot send the setup to the server process")?;
        stdin.flush()?;
        let stdout = stdout.ok_or_else(|| anyhow!("no stdout pipe"))?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let r = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(r.map(|_| line));
        });
        let line = match rx.recv_timeout(READY_TIMEOUT) {
            Ok(Ok(line)) => line,
            Ok(Err(e)) => bail!("cannot read the server process's ready line: {e}"),
            Err(_) => bail!(
                "the server process did not report ready within {READY_TIMEOUT:?} (exit status: {:?})",
                process.child.try_wait().ok().flatten()
            ),
        };
        let json = line.trim().strip_prefix(READY).ok_or_else(|| {
            anyhow!(
                "the server process did not start (said {:?}; see its error above)",
                line.trim()
            )
        })?;
        process.endpoints = serde_json::from_str(json).context("malformed ready line")?;
        Ok(process)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Closing stdin asks it to exit; the kill makes sure.
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
