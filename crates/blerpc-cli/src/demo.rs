//! `blerpc demo`: a server and a client in one process over every link this build has
//! (in-memory, TCP, TLS with a locally generated CA the client verifies, WebSocket, serial over
//! a pseudo-terminal), the twelve reference functional tests on each, and a PASS/FAIL table.
//!
//! Every connection is encrypted and the client pins the server's identity
//! ([`PinPolicy::Trust`]), as a real deployment would.

use std::io::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow};
use blerpc::client::PinPolicy;
use blerpc::link::mem;
use blerpc::link::tls::{TlsClientConfig, TlsServerConfig};
use blerpc::{Client, ClientConfig, Server, ServerConfig};
use blerpc_demo::functional::{self, TESTS, TestResult};
use blerpc_demo::{DemoService, pb};
use clap::Args;

use crate::certs::LocalPki;
use crate::progress::Steps;
use blerpc::link::connect::{ConnectOptions, connect};
use blerpc::link::listen::{ListenOptions, Listener};
use blerpc::link::trace::Traced;
use blerpc::link::url::LinkUrl;

/// `blerpc demo` options.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Run only these links (comma-separated): mem, tcp, tls, ws, serial.
    #[arg(long, value_delimiter = ',', value_name = "LINKS")]
    pub links: Vec<String>,
    /// Seconds allowed for each link (connect plus all twelve tests).
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub timeout: u64,
}

/// The links `blerpc demo` runs, in order.
pub fn available_links() -> Vec<&'static str> {
    let mut links = vec!["mem", "tcp", "tls", "ws"];
    if cfg!(all(unix, feature = "serial")) {
        links.push("serial");
    }
    links
}

/// One link's run.
#[derive(Clone, Debug)]
pub struct LinkRun {
    /// The link's name.
    pub link: &'static str,
    /// Where the server listened (`tcp://127.0.0.1:40731`, `serial:///dev/pts/3`, ...).
    pub address: String,
    /// Connection setup time.
    pub connect: Duration,
    /// The test results; empty with `error` if the link never came up.
    pub results: Vec<TestResult>,
    /// Why the link could not run at all.
    pub error: Option<String>,
}

impl LinkRun {
    /// Tests passed.
    pub fn passed(&self) -> usize {
        self.results.iter().filter(|r| r.passed()).count()
    }
    /// `true` if the link ran and every test passed.
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.passed() == TESTS.len()
    }
}

/// The demo service with a fresh identity, and that identity's public key.
pub fn demo_server() -> anyhow::Result<(Server, [u8; 32])> {
    let server = Server::new(
        pb::BlerpcServer::new(DemoService::default()),
        ServerConfig {
            identity: Some(blerpc::identity::generate()),
            ..Default::default()
        },
    )?;
    let key = server
        .identity_public()
        .ok_or_else(|| anyhow!("the server has no identity"))?;
    Ok((server, key))
}

/// A client configuration that trusts exactly `key`.
pub fn client_config(key: [u8; 32]) -> ClientConfig {
    ClientConfig {
        pinning: PinPolicy::Trust(key),
        ..Default::default()
    }
}

/// Starts the demo server for `link` in this process and connects a client to it (encrypted,
/// the server's key pinned); returns the client and the server's address.
pub async fn start_link(link: &str, pki: &LocalPki) -> anyhow::Result<(Client, String)> {
    let (server, key) = demo_server()?;
    let loopback = |scheme: &str| -> anyhow::Result<LinkUrl> {
        let url = match scheme {
            "ws" => "ws://127.0.0.1:0/blerpc".to_string(),
            other => format!("{other}://127.0.0.1:0"),
        };
        Ok(url.parse()?)
    };
    match link {
        "mem" => {
            let (a, b) = mem::pair(blerpc::link::DEFAULT_STREAM_ATT_MTU);
            tokio::spawn(async move { server.serve_link(Traced::new(b)).await });
            let client = Client::connect(Traced::new(a), client_config(key)).await?;
            Ok((client, "in-memory".to_string()))
        }
        "tcp" | "tls" | "ws" => {
            let tls = TlsServerConfig::from_pem(pki.cert_pem.as_bytes(), pki.key_pem.as_bytes())?;
            let listener = Listener::bind(
                &loopback(link)?,
                &ListenOptions {
                    tls: Some(tls),
                    ..Default::default()
                },
            )
            .await?;
            let mut url = listener.url();
            if let LinkUrl::Tls { host, .. } = &mut url {
                // Verify the certificate against the name it was issued for.
                *host = "localhost".into();
            }
            tokio::spawn(async move { listener.serve(&server, std::future::pending()).await });
            let options = ConnectOptions {
                tls: Some(TlsClientConfig::with_ca_pem(pki.ca_pem.as_bytes())?),
                baud_rate: None,
                bearer: None,
            };
            let client = connect(&url, &options, client_config(key)).await?;
            Ok((client, url.to_string()))
        }
        "serial" => start_serial(server, key).await,
        other => Err(anyhow!(
            "unknown link `{other}`: this build has {}",
            available_links().join(", ")
        )),
    }
}

#[cfg(all(unix, feature = "serial"))]
async fn start_serial(server: Server, key: [u8; 32]) -> anyhow::Result<(Client, String)> {
    use blerpc::link::serial::{SerialLink, SerialOptions};
    let pty = blerpc::link::pty::open().context("cannot open a pseudo-terminal")?;
    let path = pty.path.clone();
    let slave = pty.slave;
    let server_link = SerialLink::new(
        pty.master,
        SerialOptions {
            peer_id: Some("serial://pty-master".into()),
            ..Default::default()
        },
    );
    tokio::spawn(async move {
        let _slave = slave;
        server.serve_link(Traced::new(server_link)).await
    });
    let address = LinkUrl::Serial { device: path };
    let client = connect(&address, &ConnectOptions::default(), client_config(key)).await?;
    Ok((client, address.to_string()))
}

#[cfg(not(all(unix, feature = "serial")))]
async fn start_serial(_: Server, _: [u8; 32]) -> anyhow::Result<(Client, String)> {
    Err(anyhow!(
        "this build has no serial link (feature `serial`, Unix)"
    ))
}

/// Runs the twelve tests over `link`, calling `progress` after each, then `then` on the same
/// connection (the benchmark crate runs the reference benchmarks there); returns the tests'
/// run and what `then` gave, if the link came up.
pub async fn run_link<T>(
    link: &'static str,
    pki: &LocalPki,
    mut progress: impl FnMut(&TestResult),
    then: impl AsyncFnOnce(&pb::BlerpcClient) -> T,
) -> (LinkRun, Option<T>) {
    let t0 = Instant::now();
    let mut run = LinkRun {
        link,
        address: String::new(),
        connect: Duration::ZERO,
        results: Vec::new(),
        error: None,
    };
    let (client, address) = match start_link(link, pki).await {
        Ok(c) => c,
        Err(e) => {
            run.error = Some(format!("{e:#}"));
            return (run, None);
        }
    };
    run.address = address;
    run.connect = t0.elapsed();
    let c = pb::BlerpcClient::new(client.clone());
    for name in TESTS {
        let r = functional::run_one(&c, name).await;
        progress(&r);
        run.results.push(r);
    }
    let extra = then(&c).await;
    client.close().await;
    (run, Some(extra))
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

/// The PASS/FAIL table: one row per test, one column per link, then totals and failures.
pub fn render(runs: &[LinkRun]) -> String {
    const W: usize = 16;
    let mut out = String::new();
    let mut line = format!("{:<22}", "test");
    for r in runs {
        line.push_str(&format!("{:<W$}", r.link));
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out.push_str(&"-".repeat(22 + W * runs.len()));
    out.push('\n');
    for (i, name) in TESTS.iter().enumerate() {
        let mut line = format!("{name:<22}");
        for r in runs {
            let cell = match r.results.get(i) {
                Some(t) if t.passed() => format!("PASS {}", ms(t.elapsed)),
                Some(t) => format!("FAIL {}", ms(t.elapsed)),
                None => "-".to_string(),
            };
            line.push_str(&format!("{cell:<W$}"));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push_str(&"-".repeat(22 + W * runs.len()));
    out.push('\n');
    let mut line = format!("{:<22}", "connect");
    for r in runs {
        let cell = if r.error.is_some() {
            "-".to_string()
        } else {
            ms(r.connect)
        };
        line.push_str(&format!("{cell:<W$}"));
    }
    out.push_str(line.trim_end());
    out.push('\n');
    let mut line = format!("{:<22}", "total");
    for r in runs {
        let cell = format!(
            "{} {}/{}",
            if r.ok() { "PASS" } else { "FAIL" },
            r.passed(),
            TESTS.len()
        );
        line.push_str(&format!("{cell:<W$}"));
    }
    out.push_str(line.trim_end());
    out.push('\n');
    for r in runs {
        if let Some(e) = &r.error {
            out.push_str(&format!("\n{}: could not run: {e}", r.link));
        }
        for t in r.results.iter().filter(|t| !t.passed()) {
            if let Err(e) = &t.outcome {
                out.push_str(&format!("\n{} {}: {e}", r.link, t.name));
            }
        }
    }
    if runs.iter().any(|r| !r.ok()) {
        out.push('\n');
    }
    out
}

/// The links named in `--links` (all of this build's when empty), or which name is unknown.
pub fn select_links(names: &[String]) -> anyhow::Result<Vec<&'static str>> {
    let available = available_links();
    if names.is_empty() {
        return Ok(available);
    }
    names
        .iter()
        .map(|l| {
            available.iter().copied().find(|a| a == l).ok_or_else(|| {
                anyhow!(
                    "unknown link `{l}` in --links: this build has {}",
                    available.join(", ")
                )
            })
        })
        .collect()
}

/// Runs [`run_link`] over each of `links` in turn, each within `limit`, with one progress line
/// per link on stderr (a bar while it runs where stderr is a terminal).
pub async fn run_links<T>(
    links: &[&'static str],
    limit: Duration,
    then: impl AsyncFn(&pb::BlerpcClient) -> T,
) -> anyhow::Result<Vec<(LinkRun, Option<T>)>> {
    let pki = LocalPki::generate().context("cannot generate the demo TLS certificates")?;
    let mut runs = Vec::new();
    for &link in links {
        let steps = Steps::new(format!("  {link:<7}"), TESTS.len() as u64);
        let t0 = Instant::now();
        let progress = |r: &TestResult| steps.step(r.passed());
        let (run, extra) =
            match tokio::time::timeout(limit, run_link(link, &pki, progress, &then)).await {
                Ok(done) => done,
                Err(_) => (
                    LinkRun {
                        link,
                        address: String::new(),
                        connect: Duration::ZERO,
                        results: Vec::new(),
                        error: Some(format!("timed out after {limit:?}")),
                    },
                    None,
                ),
            };
        steps.finish(&format!(
            "{}/{} in {}{}",
            run.passed(),
            TESTS.len(),
            ms(t0.elapsed()),
            if run.address.is_empty() {
                String::new()
            } else {
                format!("  ({})", run.address)
            }
        ));
        runs.push((run, extra));
    }
    Ok(runs)
}

/// The closing line of a run: every link passed, or where to look.
pub fn verdict(ok: bool) -> &'static str {
    if ok {
        "all links PASS"
    } else {
        "some tests FAILED (above); rerun with -v for the protocol trace"
    }
}

/// Runs `blerpc demo`; `Ok(false)` if any test failed.
pub async fn run(args: &DemoArgs) -> anyhow::Result<bool> {
    let links = select_links(&args.links)?;
    eprintln!(
        "blerpc demo: the 12 reference functional tests over {} (encrypted, identity pinned)",
        links.join(", ")
    );
    let limit = Duration::from_secs(args.timeout.max(1));
    let runs: Vec<LinkRun> = run_links(&links, limit, async |_| ())
        .await?
        .into_iter()
        .map(|(run, _)| run)
        .collect();
    let ok = runs.iter().all(LinkRun::ok);
    let mut out = std::io::stdout().lock();
    writeln!(out, "\n{}\n{}", render(&runs), verdict(ok)).context("cannot write to stdout")?;
    Ok(ok)
}
