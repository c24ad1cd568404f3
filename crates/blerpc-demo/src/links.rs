//! The demo over every link (feature `links`): a server and a client in one process over each
//! link this build has (in-memory, TCP, TLS with a locally generated CA the client verifies,
//! WebSocket, serial over a pseudo-terminal), the twelve reference functional tests on each,
//! and a PASS/FAIL table. `blerpc demo` runs it; the benchmarks run the reference benchmarks on
//! the same connections.
//!
//! Every connection is encrypted and the client pins the server's identity
//! ([`PinPolicy::Trust`](blerpc::client::PinPolicy::Trust)), as a real deployment would.
//!
//! ```
//! use std::time::Duration;
//! use blerpc_demo::links::{LinkRun, render, run_links, select_links};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), blerpc_demo::links::LinkRunError> {
//! let links = select_links(&["mem".to_string(), "tcp".to_string()])?;
//! let runs = run_links(&links, Duration::from_secs(60), async |_client| ()).await?;
//! let runs: Vec<LinkRun> = runs.into_iter().map(|(run, _)| run).collect();
//! assert!(runs.iter().all(LinkRun::ok), "{}", render(&runs));
//! # Ok(())
//! # }
//! ```

use std::time::{Duration, Instant};

use blerpc::Client;
use blerpc::link::connect::{ConnectError, ConnectOptions, connect};
use blerpc::link::listen::{ListenError, ListenOptions, Listener};
use blerpc::link::local_ca::{LocalCaError, LocalPki};
use blerpc::link::mem;
use blerpc::link::tls::{TlsClientConfig, TlsError, TlsServerConfig};
use blerpc::link::trace::Traced;
use blerpc::link::url::LinkUrl;
use blerpc::server::ServerError;

use crate::functional::{self, TESTS, TestResult};
use crate::pb;
use crate::progress::Steps;
use crate::server::{client_config, demo_server};

/// Why a link of the demo could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkRunError {
    /// A link name this build does not have.
    #[error("unknown link `{name}`: this build has {}", available.join(", "))]
    UnknownLink {
        /// The name asked for.
        name: String,
        /// The links this build has.
        available: Vec<&'static str>,
    },
    /// The demo server could not be built.
    #[error("the demo server")]
    Server(#[source] ServerError),
    /// The local CA could not be made.
    #[error("cannot generate the demo TLS certificates")]
    LocalCa(#[source] LocalCaError),
    /// The local CA's certificates did not load.
    #[error("the demo TLS certificates")]
    Tls(#[source] TlsError),
    /// The server's listener could not be bound.
    #[error("the demo server's listener")]
    Listen(#[source] ListenError),
    /// The client could not connect.
    #[error("the demo client")]
    Connect(#[source] ConnectError),
    /// The in-memory link's client setup failed.
    #[error("the demo client's setup")]
    Setup(#[source] blerpc::Error),
    /// No pseudo-terminal for the serial link.
    #[error("cannot open a pseudo-terminal")]
    Pty(#[source] std::io::Error),
}

/// The links this build runs, in order: mem, tcp, tls, ws, and serial (a pseudo-terminal) on
/// Unix with the `serial` feature.
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

/// Starts the demo server for `link` in this process and connects a client to it (encrypted,
/// the server's key pinned); returns the client and the server's address.
pub async fn start_link(link: &str, pki: &LocalPki) -> Result<(Client, String), LinkRunError> {
    let (server, key) = demo_server().map_err(LinkRunError::Server)?;
    match link {
        "mem" => {
            let (a, b) = mem::pair(blerpc::link::DEFAULT_STREAM_ATT_MTU);
            tokio::spawn(async move { server.serve_link(Traced::new(b)).await });
            let client = Client::connect(Traced::new(a), client_config(key))
                .await
                .map_err(LinkRunError::Setup)?;
            Ok((client, "in-memory".to_string()))
        }
        "tcp" | "tls" | "ws" => {
            let tls = TlsServerConfig::from_pem(pki.cert_pem.as_bytes(), pki.key_pem.as_bytes())
                .map_err(LinkRunError::Tls)?;
            let host = "127.0.0.1".to_string();
            let url = match link {
                "tcp" => LinkUrl::Tcp { host, port: 0 },
                "tls" => LinkUrl::Tls { host, port: 0 },
                _ => LinkUrl::Ws {
                    host,
                    port: 0,
                    path: "/blerpc".into(),
                    secure: false,
                },
            };
            let options = ListenOptions {
                tls: Some(tls),
                ..Default::default()
            };
            let listener = Listener::bind(&url, &options)
                .await
                .map_err(LinkRunError::Listen)?;
            let mut url = listener.url();
            if let LinkUrl::Tls { host, .. } = &mut url {
                // Verify the certificate against the name it was issued for.
                *host = "localhost".into();
            }
            tokio::spawn(async move { listener.serve(&server, std::future::pending()).await });
            let options = ConnectOptions {
                tls: Some(
                    TlsClientConfig::with_ca_pem(pki.ca_pem.as_bytes())
                        .map_err(LinkRunError::Tls)?,
                ),
                ..ConnectOptions::default()
            };
            let client = connect(&url, &options, client_config(key))
                .await
                .map_err(LinkRunError::Connect)?;
            Ok((client, url.to_string()))
        }
        "serial" => start_serial(server, key).await,
        other => Err(LinkRunError::UnknownLink {
            name: other.to_string(),
            available: available_links(),
        }),
    }
}

#[cfg(all(unix, feature = "serial"))]
async fn start_serial(
    server: blerpc::Server,
    key: [u8; 32],
) -> Result<(Client, String), LinkRunError> {
    use blerpc::link::serial::{SerialLink, SerialOptions};
    let pty = blerpc::link::pty::open().map_err(LinkRunError::Pty)?;
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
    let address = LinkUrl::Serial { device: pty.path };
    let client = connect(&address, &ConnectOptions::default(), client_config(key))
        .await
        .map_err(LinkRunError::Connect)?;
    Ok((client, address.to_string()))
}

#[cfg(not(all(unix, feature = "serial")))]
async fn start_serial(_: blerpc::Server, _: [u8; 32]) -> Result<(Client, String), LinkRunError> {
    Err(LinkRunError::UnknownLink {
        name: "serial".into(),
        available: available_links(),
    })
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
            run.error = Some(blerpc::error_chain(&e));
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

/// The links named (all of this build's when none), or which name is unknown.
pub fn select_links(names: &[String]) -> Result<Vec<&'static str>, LinkRunError> {
    let available = available_links();
    if names.is_empty() {
        return Ok(available);
    }
    names
        .iter()
        .map(|l| {
            available
                .iter()
                .copied()
                .find(|a| a == l)
                .ok_or_else(|| LinkRunError::UnknownLink {
                    name: l.clone(),
                    available: available.clone(),
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
) -> Result<Vec<(LinkRun, Option<T>)>, LinkRunError> {
    let pki = LocalPki::generate().map_err(LinkRunError::LocalCa)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn passed(name: &'static str, ms: u64) -> TestResult {
        TestResult {
            name,
            outcome: Ok(()),
            elapsed: Duration::from_millis(ms),
        }
    }

    #[test]
    fn links_are_selected_by_name() {
        assert_eq!(select_links(&[]).ok(), Some(available_links()));
        let tcp = select_links(&["tcp".into(), "mem".into()]).ok();
        assert_eq!(tcp, Some(vec!["tcp", "mem"]));
        let e = select_links(&["carrier-pigeon".into()]).err();
        let e = e.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            e.starts_with("unknown link `carrier-pigeon`: this build has mem, tcp, tls, ws"),
            "{e}"
        );
    }

    #[test]
    fn the_table_has_a_row_per_test_and_says_what_failed() {
        let ok = LinkRun {
            link: "mem",
            address: "in-memory".into(),
            connect: Duration::from_micros(1500),
            results: TESTS.iter().map(|t| passed(t, 12)).collect(),
            error: None,
        };
        let mut bad = ok.clone();
        bad.link = "tcp";
        if let Some(first) = bad.results.first_mut() {
            first.outcome = Err("echoed 3 bytes, sent 4".into());
        }
        let down = LinkRun {
            link: "ws",
            address: String::new(),
            connect: Duration::ZERO,
            results: Vec::new(),
            error: Some("the demo client: cannot connect".into()),
        };
        let table = render(&[ok.clone(), bad, down]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines.first().copied(),
            Some(format!("{:<22}{:<16}{:<16}ws", "test", "mem", "tcp").as_str())
        );
        assert_eq!(
            lines.get(2).copied(),
            Some(
                format!(
                    "{:<22}{:<16}{:<16}-",
                    TESTS[0], "PASS 12.0 ms", "FAIL 12.0 ms"
                )
                .as_str()
            )
        );
        assert!(
            table.contains(&format!("{:<22}{:<16}", "connect", "1.50 ms")),
            "{table}"
        );
        assert!(
            table.contains(&format!(
                "{:<22}{:<16}{:<16}FAIL 0/12",
                "total", "PASS 12/12", "FAIL 11/12"
            )),
            "{table}"
        );
        assert!(
            table.contains(&format!("\ntcp {}: echoed 3 bytes, sent 4", TESTS[0])),
            "{table}"
        );
        assert!(
            table.contains("\nws: could not run: the demo client: cannot connect"),
            "{table}"
        );
        assert!(ok.ok() && verdict(true) == "all links PASS");
        assert!(!render(&[ok]).contains("could not run"));
    }
}
