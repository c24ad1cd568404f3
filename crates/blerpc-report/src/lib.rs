//! # blerpc-report: field reports
//!
//! Loopback and simulated figures are a software baseline; a field report records a real link:
//! a payload mix run against a device for a duration over any link (BLE, TCP, TLS, WebSocket,
//! serial), with the host, the device's diagnostics before and after (the link as the
//! peripheral sees it: interval, PHY, data length, RSSI), latency p50/p95/p99/max per call
//! kind, throughput, failures by class, every reconnect with its reason, and a timeline; what
//! the tool cannot measure (the board, the access point, the distance) it is told, and a value
//! it does not have is written as missing with the reason, never left out.
//!
//! | module | holds |
//! |---|---|
//! | [`mix`] | the calls and their weights (`--mix`; the published benchmark's by default) |
//! | [`run`](mod@run) | the run: calls, timing, reconnects, the [`Report`] |
//! | [`schema`] | the versioned JSON ([`schema::SCHEMA`], `docs/field-reports.md`) |
//! | [`markdown`], [`plot`] | the summary and the SVG plots |
//! | [`compare`] | two reports side by side, environment differences first |
//! | [`host`] | the host's OS, kernel and CPU |
//!
//! `blerpc report --connect URL` is the command (`blerpc-cli`); this crate is the work.
//!
//! ```
//! use std::time::Duration;
//! use blerpc_report::{Options, host, run, schema::{Environment, Known}};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let (server, key) = blerpc_demo::server::demo_server().unwrap();
//! let server = std::sync::Arc::new(server);
//! let connect = || {
//!     let server = server.clone();
//!     async move {
//!         let (a, b) = blerpc::link::mem::pair(247);
//!         tokio::spawn(async move { server.serve_link(b).await });
//!         let config = blerpc_demo::server::client_config(key);
//!         blerpc::Client::connect(a, config).await.map_err(|e| e.to_string())
//!     }
//! };
//! let environment = Environment::for_host(Known::missing("not a BLE link"), None, None, None, None);
//! let options = Options::new("mem://demo", "mem", Duration::from_millis(300), environment);
//! let report = run(connect, &options, |_| {}).await.unwrap();
//! assert!(report.run.ok > 0 && report.run.failed == 0);
//! assert!(blerpc_report::markdown::summary(&report).contains("| echo |"));
//! # }
//! ```

pub mod compare;
pub mod host;
pub mod markdown;
pub mod mix;
pub mod plot;
pub mod run;
pub mod schema;

pub use mix::{CallType, Mix};
pub use run::{Options, Progress, RunError, run};
pub use schema::Report;

use schema::{Environment, Known};

impl Environment {
    /// The host as [`host`] reads it, the BLE adapter as given, and what the person running
    /// the report said (each `None` is written as missing, naming the flag that gives it).
    pub fn for_host(
        ble_adapter: Known<String>,
        board: Option<String>,
        access_point: Option<String>,
        distance: Option<String>,
        note: Option<String>,
    ) -> Self {
        let told = |v: Option<String>, flag: &str| match v {
            Some(v) => Known::Value(v),
            None => Known::missing(format!("not given ({flag})")),
        };
        Environment {
            os: host::os(),
            kernel: host::kernel(),
            cpu: host::cpu(),
            cpus: host::cpus(),
            ble_adapter,
            board: told(board, "--board"),
            access_point: told(access_point, "--access-point"),
            distance: told(distance, "--distance"),
            note: told(note, "--note"),
        }
    }
}

/// The files a report is written as: `report.json`, `report.md`,
/// `latency-over-time.svg`, `latency-distribution.svg`, in `dir` (created if missing).
pub fn write(
    report: &Report,
    dir: &std::path::Path,
) -> Result<Vec<std::path::PathBuf>, WriteError> {
    std::fs::create_dir_all(dir).map_err(|e| WriteError::Io(dir.to_owned(), e))?;
    let json = serde_json::to_string_pretty(report).map_err(WriteError::Json)?;
    let files = [
        ("report.json", json),
        ("report.md", markdown::summary(report)),
        ("latency-over-time.svg", plot::latency_over_time(report)?),
        (
            "latency-distribution.svg",
            plot::latency_distribution(report)?,
        ),
    ];
    let mut written = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| WriteError::Io(path.clone(), e))?;
        written.push(path);
    }
    Ok(written)
}

/// Reads a report written by [`write()`] (for `compare`): a file of another schema is refused.
pub fn read(path: &std::path::Path) -> Result<Report, WriteError> {
    let text = std::fs::read_to_string(path).map_err(|e| WriteError::Io(path.to_owned(), e))?;
    let report: Report = serde_json::from_str(&text).map_err(WriteError::Json)?;
    if report.schema != schema::SCHEMA {
        return Err(WriteError::Schema(path.to_owned(), report.schema));
    }
    Ok(report)
}

/// A report that could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// A file could not be written or read.
    #[error("{0}: {1}")]
    Io(std::path::PathBuf, std::io::Error),
    /// The JSON does not encode or decode as a report.
    #[error("the report's JSON: {0}")]
    Json(serde_json::Error),
    /// A report of another schema.
    #[error("{0}: schema {1:?}, this tool reads {s:?}", s = schema::SCHEMA)]
    Schema(std::path::PathBuf, String),
    /// A plot could not be drawn.
    #[error(transparent)]
    Plot(#[from] plot::PlotError),
}
