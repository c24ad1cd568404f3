//! The hostile bench's servers: `blerpc serve` processes (this binary's `serve`), one per
//! link under attack, each with its metrics endpoint and its log in a file.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};

/// One `blerpc serve` process.
pub(crate) struct Server {
    child: Child,
    /// `tcp://…`, `ws://…/blerpc` or `tls://…`.
    pub(crate) url: String,
    /// Where the link listens.
    pub(crate) addr: SocketAddr,
    /// The identity key centrals pin.
    pub(crate) identity: [u8; 32],
    metrics: SocketAddr,
    log: PathBuf,
}

/// What the server is started with.
pub(crate) struct ServerOptions<'a> {
    pub(crate) listen: &'a str,
    pub(crate) key: &'a std::path::Path,
    pub(crate) tls: Option<&'a std::path::Path>,
    pub(crate) setup_timeout: Duration,
    pub(crate) container_timeout: Duration,
    pub(crate) dir: &'a std::path::Path,
    /// More `serve` options.
    pub(crate) extra: &'a [&'a str],
}

impl Server {
    pub(crate) fn start(o: &ServerOptions<'_>) -> anyhow::Result<Server> {
        let metrics = free_port()?;
        let name = o.listen.split(':').next().unwrap_or("server");
        let log = o.dir.join(format!("{name}.log"));
        let mut cmd = crate::process::serve_command()?;
        cmd.args(["--listen", o.listen])
            .arg("--identity")
            .arg(o.key)
            .args(["--flash-size", "4096"])
            .args([
                "--setup-timeout",
                &o.setup_timeout.as_secs_f64().to_string(),
            ])
            .args([
                "--container-timeout",
                &o.container_timeout.as_secs_f64().to_string(),
            ])
            .args(["--metrics", &metrics.to_string()])
            .args(o.extra)
            .env("RUST_LOG", "warn");
        if let Some(dir) = o.tls {
            cmd.arg("--tls-cert")
                .arg(dir.join("cert.pem"))
                .arg("--tls-key")
                .arg(dir.join("key.pem"));
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("cannot start blerpc serve")?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("stdout not piped"))?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let (Some(&"listening"), Some(url), Some(&"identity"), Some(key)) =
            (words.first(), words.get(1), words.get(2), words.get(3))
        else {
            let _ = child.kill();
            bail!(
                "blerpc serve {} did not start: {line:?}; its log: {}",
                o.listen,
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        };
        let identity = blerpc::known_keys::parse_key(key)
            .ok_or_else(|| anyhow!("bad identity in {line:?}"))?;
        let authority = url
            .split("://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .ok_or_else(|| anyhow!("bad URL {url}"))?;
        Ok(Server {
            addr: authority.parse()?,
            url: url.to_string(),
            identity,
            metrics,
            log,
            child,
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident memory now.
    pub(crate) fn rss(&self) -> u64 {
        crate::process::rss_bytes(self.pid()).unwrap_or(0)
    }

    /// CPU seconds so far.
    pub(crate) fn cpu(&self) -> f64 {
        crate::process::cpu_seconds(self.pid()).unwrap_or(0.0)
    }

    /// Bytes the server has logged so far.
    pub(crate) fn log_bytes(&self) -> u64 {
        std::fs::metadata(&self.log).map_or(0, |m| m.len())
    }

    /// The counters of `/metrics`: `blerpc_connections_closed_total{reason="x"} 3` as
    /// `("closed", "x") → 3` and so on.
    pub(crate) fn counters(&self) -> anyhow::Result<Counters> {
        let mut s = TcpStream::connect_timeout(&self.metrics, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        write!(
            s,
            "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.metrics
        )?;
        let mut text = String::new();
        s.read_to_string(&mut text)?;
        Ok(Counters::parse(&text))
    }

    /// Fails if the server process has exited.
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "blerpc serve {} exited ({status}); its log: {}",
                self.url,
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port free now on 127.0.0.1 (for the metrics endpoint).
fn free_port() -> anyhow::Result<SocketAddr> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?)
}

/// The server's counter of penalized addresses.
const PENALTIES: &str = "blerpc_address_penalties_total";

/// The counters a server reported, by `(kind, reason)` (`kind` is `refused` or `closed`) and
/// by gauge name.
#[derive(Clone, Debug, Default)]
pub(crate) struct Counters {
    by_reason: Vec<(String, String, f64)>,
    gauges: Vec<(String, f64)>,
}

impl Counters {
    fn parse(text: &str) -> Counters {
        let mut c = Counters::default();
        for line in text.lines().filter(|l| l.starts_with("blerpc_")) {
            let Some((name, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            if let Some((metric, labels)) = name.split_once('{') {
                let reason = labels
                    .trim_end_matches('}')
                    .strip_prefix("reason=\"")
                    .map(|r| r.trim_end_matches('"').to_string());
                let kind = metric
                    .strip_prefix("blerpc_connections_")
                    .and_then(|k| k.strip_suffix("_total"));
                if let (Some(kind), Some(reason)) = (kind, reason) {
                    c.by_reason.push((kind.to_string(), reason, value));
                }
            } else {
                c.gauges.push((name.to_string(), value));
            }
        }
        c
    }

    /// Refusals and closes for `reason`, together.
    pub(crate) fn count(&self, reason: &str) -> f64 {
        self.by_reason
            .iter()
            .filter(|(_, r, _)| r == reason)
            .map(|(_, _, v)| v)
            .sum()
    }

    /// Every reason with a count, `reason=count` in the difference `self - before`.
    pub(crate) fn delta(&self, before: &Counters) -> Vec<(String, u64)> {
        let mut reasons: Vec<String> = self.by_reason.iter().map(|(_, r, _)| r.clone()).collect();
        reasons.sort();
        reasons.dedup();
        let mut delta: Vec<(String, u64)> = reasons
            .into_iter()
            .filter_map(|r| {
                let d = self.count(&r) - before.count(&r);
                (d > 0.0).then_some((r, d as u64))
            })
            .collect();
        // Penalties imposed (an address ran its bucket dry), beside the refusals they caused.
        let penalties = self.gauge(PENALTIES) - before.gauge(PENALTIES);
        if penalties > 0.0 {
            delta.push(("penalties_imposed".to_string(), penalties as u64));
        }
        delta
    }

    /// A gauge's value.
    pub(crate) fn gauge(&self, name: &str) -> f64 {
        self.gauges
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0.0, |(_, v)| *v)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn counters_parse_the_metrics_text() {
        let text = "HTTP/1.1 200 OK\r\n\r\n# HELP x\n\
                    blerpc_connections_closed_total{reason=\"setup_timeout\"} 7\n\
                    blerpc_connections_refused_total{reason=\"setup_timeout\"} 1\n\
                    blerpc_connections_open 3\n# EOF\n";
        let c = Counters::parse(text);
        assert_eq!(c.count("setup_timeout"), 8.0);
        assert_eq!(c.gauge("blerpc_connections_open"), 3.0);
        let before =
            Counters::parse("blerpc_connections_closed_total{reason=\"setup_timeout\"} 2\n");
        assert_eq!(c.delta(&before), vec![("setup_timeout".to_string(), 6)]);
    }
}
