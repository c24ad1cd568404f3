//! The hostile bench's servers: `blerpc serve` processes (this binary's `serve`), one per
//! link under attack, each with its metrics endpoint and its log in a file; for `--link http`
//! a `blerpc gateway` (this binary's `serve-gateway`, started as the gateway bench starts it)
//! with one device (`blerpc serve --dial`) dialled in, its `/metrics` on its HTTP port.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};

/// What runs: a `blerpc serve`, or a gateway and its device.
enum Process {
    Serve(Child),
    Gateway {
        gateway: crate::gateway::procs::GatewayProc,
        device: crate::gateway::procs::Proc,
    },
}

/// One `blerpc serve` process, or one `blerpc gateway` with its device.
pub(crate) struct Server {
    process: Process,
    /// `tcp://…`, `ws://…/blerpc` or `tls://…`.
    pub(crate) url: String,
    /// Where the link listens.
    pub(crate) addr: SocketAddr,
    /// The identity key centrals pin (the gateway's device's).
    pub(crate) identity: [u8; 32],
    metrics: SocketAddr,
    /// The bearer token `/metrics` needs (the gateway's).
    token: Option<&'static str>,
    /// Where the server logs (the gateway logs to this process's stderr).
    log: Option<PathBuf>,
}

/// What the gateway is started with (`blerpc gateway` options).
pub(crate) struct GatewayOptions<'a> {
    pub(crate) dir: &'a std::path::Path,
    /// `--http-header-timeout` and `--http-body-timeout`.
    pub(crate) header_timeout: Duration,
    /// `--http-max-per-address`.
    pub(crate) max_per_address: usize,
    /// `--max-event-streams`.
    pub(crate) max_event_streams: usize,
    /// `--http-max-connection-rate`, `--http-connection-burst`, `--http-offence-cost` and
    /// `--http-penalty`.
    pub(crate) guard: [f64; 4],
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
            token: None,
            log: Some(log),
            process: Process::Serve(child),
        })
    }

    /// Starts a gateway (its HTTP port on 127.0.0.1) and one device dialled in, and waits
    /// until the device answers through it.
    pub(crate) async fn gateway(o: &GatewayOptions<'_>) -> anyhow::Result<Server> {
        use crate::gateway::{TOKEN, procs};
        let tokens = o.dir.join("tokens");
        std::fs::write(&tokens, format!("{TOKEN}\n"))?;
        let timeout = o.header_timeout.as_secs_f64().to_string();
        let (per_address, streams) = (
            o.max_per_address.to_string(),
            o.max_event_streams.to_string(),
        );
        let [rate, burst, cost, penalty] = o.guard.map(|v| v.to_string());
        let gateway = procs::gateway(
            o.dir,
            None,
            &[
                "--tokens",
                tokens.to_str().context("temp path")?,
                "--http-header-timeout",
                &timeout,
                "--http-body-timeout",
                &timeout,
                "--http-max-per-address",
                &per_address,
                "--max-event-streams",
                &streams,
                "--http-max-connection-rate",
                &rate,
                "--http-connection-burst",
                &burst,
                "--http-offence-cost",
                &cost,
                "--http-penalty",
                &penalty,
            ],
        )?;
        let key_file = o.dir.join("device.key");
        blerpc::identity::store(&key_file, &blerpc::identity::generate(), true)?;
        let (device, _, identity) = procs::device(o.dir, &gateway.devices, &key_file)?;
        crate::gateway::wait_online(gateway.http, &hex::encode(identity)).await?;
        Ok(Server {
            url: format!("http://{}", gateway.http),
            addr: gateway.http,
            identity,
            metrics: gateway.http,
            token: Some(TOKEN),
            log: None,
            process: Process::Gateway { gateway, device },
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        match &self.process {
            Process::Serve(child) => child.id(),
            Process::Gateway { gateway, .. } => gateway.proc.pid(),
        }
    }

    /// Resident memory now.
    pub(crate) fn rss(&self) -> u64 {
        crate::process::rss_bytes(self.pid()).unwrap_or(0)
    }

    /// CPU seconds so far.
    pub(crate) fn cpu(&self) -> f64 {
        crate::process::cpu_seconds(self.pid()).unwrap_or(0.0)
    }

    /// Bytes the server has logged so far (0 for the gateway, which logs to this process's
    /// stderr).
    pub(crate) fn log_bytes(&self) -> u64 {
        self.log
            .as_ref()
            .and_then(|log| std::fs::metadata(log).ok())
            .map_or(0, |m| m.len())
    }

    /// The counters of `/metrics`: `blerpc_connections_closed_total{reason="x"} 3` as
    /// `("closed", "x") → 3` and so on.
    pub(crate) fn counters(&self) -> anyhow::Result<Counters> {
        let mut s = TcpStream::connect_timeout(&self.metrics, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        let auth = self
            .token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        write!(
            s,
            "GET /metrics HTTP/1.1\r\nHost: {}\r\n{auth}Connection: close\r\n\r\n",
            self.metrics
        )?;
        let mut text = String::new();
        s.read_to_string(&mut text)?;
        Ok(Counters::parse(&text))
    }

    /// Fails if the server process has exited.
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        match &mut self.process {
            Process::Serve(child) => {
                if let Some(status) = child.try_wait()? {
                    let log = self.log.as_ref().map(std::fs::read_to_string);
                    bail!(
                        "blerpc serve {} exited ({status}); its log: {}",
                        self.url,
                        log.and_then(Result::ok).unwrap_or_default()
                    );
                }
            }
            Process::Gateway { gateway, device } => {
                if let Some(status) = gateway.proc.child.try_wait()? {
                    bail!("blerpc gateway {} exited ({status})", self.url);
                }
                if let Some(status) = device.child.try_wait()? {
                    bail!("the gateway's device exited ({status})");
                }
            }
        }
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // The gateway's processes end with their `Proc`s.
        if let Process::Serve(child) = &mut self.process {
            let _ = child.kill();
            let _ = child.wait();
        }
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
                let serve = metric
                    .strip_prefix("blerpc_connections_")
                    .and_then(|k| k.strip_suffix("_total"));
                // The gateway's HTTP face: `refused:per_address`, `timeouts:head`, …
                let http = metric
                    .strip_prefix("blerpc_gateway_http_")
                    .and_then(|k| k.strip_suffix("_total"));
                match (serve, http, reason) {
                    (Some(kind), _, Some(reason)) => {
                        c.by_reason.push((kind.to_string(), reason, value));
                    }
                    (_, Some(kind), Some(reason)) => {
                        c.by_reason
                            .push((kind.to_string(), format!("{kind}:{reason}"), value));
                    }
                    _ => {}
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

    #[test]
    fn counters_parse_the_gateways_http_series() {
        let text = "blerpc_gateway_http_refused_total{reason=\"per_address\"} 12\n\
                    blerpc_gateway_http_refused_total{reason=\"rate\"} 3\n\
                    blerpc_gateway_http_penalties_total{reason=\"offences\"} 2\n\
                    blerpc_gateway_http_timeouts_total{reason=\"head\"} 2000\n\
                    blerpc_gateway_calls_total{status=\"ok\"} 5\n\
                    blerpc_gateway_http_connections 4\n";
        let c = Counters::parse(text);
        assert_eq!(c.count("refused:per_address"), 12.0);
        assert_eq!(c.count("refused:rate"), 3.0);
        assert_eq!(c.count("penalties:offences"), 2.0);
        assert_eq!(c.count("timeouts:head"), 2000.0);
        assert_eq!(c.gauge("blerpc_gateway_http_connections"), 4.0);
        assert_eq!(
            c.delta(&Counters::default()),
            vec![
                ("penalties:offences".to_string(), 2),
                ("refused:per_address".to_string(), 12),
                ("refused:rate".to_string(), 3),
                ("timeouts:head".to_string(), 2000)
            ]
        );
    }
}
