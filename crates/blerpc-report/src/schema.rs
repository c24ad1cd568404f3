//! The report as JSON: [`Report`], versioned by [`SCHEMA`] (`docs/field-reports.md` documents
//! every field; `docs/report.schema.json` is its JSON Schema, which CI checks the examples
//! against). A value the tool could not get is [`Known::Missing`] with the reason, never left
//! out.

use std::collections::BTreeMap;

use blerpc::diagnostics::DeviceDiagnostics;
use serde::{Deserialize, Serialize};

use crate::mix::Mix;

/// The schema this crate writes and reads.
pub const SCHEMA: &str = "blerpc-report/1";

/// A value, or why it is missing (`{"missing": "why"}` in JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Known<T> {
    /// The value.
    Value(T),
    /// Missing, with the reason.
    Missing {
        /// Why.
        missing: String,
    },
}

impl<T> Known<T> {
    /// Missing for `why`.
    pub fn missing(why: impl Into<String>) -> Self {
        Known::Missing {
            missing: why.into(),
        }
    }

    /// The value, if known.
    pub fn value(&self) -> Option<&T> {
        match self {
            Known::Value(v) => Some(v),
            Known::Missing { .. } => None,
        }
    }
}

impl<T: std::fmt::Display> std::fmt::Display for Known<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Known::Value(v) => v.fmt(f),
            Known::Missing { missing } => write!(f, "missing: {missing}"),
        }
    }
}

/// One field report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: String,
    /// The tool that wrote it: `blerpc-report <version>`.
    pub tool: String,
    /// When the run started, milliseconds since the Unix epoch (UTC).
    pub started_unix_ms: u64,
    /// Where it ran and what the tool was told.
    pub environment: Environment,
    /// The link to the device as the central sees it.
    pub link: LinkFacts,
    /// The device's diagnostics before the run and after it (the link as the peripheral sees
    /// it is there).
    pub device: DeviceBeforeAfter,
    /// What ran.
    pub run: RunFacts,
    /// Latency per call kind, and of every call together (`"all"`).
    pub latency: BTreeMap<String, Latency>,
    /// Payload throughput over the run.
    pub throughput: Throughput,
    /// Failed calls by class (`timeout`, `busy`, `link_lost`, `peer_error:<CODE>`, `decode`,
    /// `other`).
    pub failures: BTreeMap<String, u64>,
    /// Each loss of the connection, with its reason and how long reconnecting took.
    pub reconnects: Vec<Reconnect>,
    /// One row per second of the run.
    pub timeline: Vec<Second>,
}

/// The host and the tool's inputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// The operating system (`PRETTY_NAME` of `/etc/os-release`, or the target OS).
    pub os: Known<String>,
    /// The kernel release.
    pub kernel: Known<String>,
    /// The CPU model.
    pub cpu: Known<String>,
    /// Logical CPUs.
    pub cpus: Known<u32>,
    /// The BLE adapter and its stack's version.
    pub ble_adapter: Known<String>,
    /// What the tool cannot measure and was told: `--board`, `--access-point`, `--distance`,
    /// `--note`.
    pub board: Known<String>,
    /// The access point (Wi-Fi links).
    pub access_point: Known<String>,
    /// Distance to the device.
    pub distance: Known<String>,
    /// Anything else the person running it noted.
    pub note: Known<String>,
}

/// The link as the central sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkFacts {
    /// The URL connected to.
    pub url: String,
    /// `tcp`, `tls`, `ws`, `wss`, `serial`, `ble`, `sim` (the simulated BLE link), `mem`.
    pub kind: String,
    /// How TLS was verified (`none` where there is no TLS).
    pub tls: Known<String>,
    /// `true` when calls were end-to-end encrypted (bleRPC's session).
    pub encrypted: bool,
    /// The device's identity key (hex) when encrypted.
    pub peer_identity: Known<String>,
    /// The ATT MTU the central uses.
    pub att_mtu: u32,
    /// The connection interval as the central knows it (host BLE APIs hide it: the device's
    /// diagnostics have it).
    pub conn_interval_us: Known<u32>,
}

/// The device's diagnostics at both ends of the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceBeforeAfter {
    /// Before the first timed call.
    pub before: DeviceDiagnostics,
    /// After the last.
    pub after: DeviceDiagnostics,
}

/// What ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunFacts {
    /// The mix (`--mix`).
    pub mix: Mix,
    /// The duration asked for, seconds.
    pub duration_s: f64,
    /// The time the run took, seconds.
    pub elapsed_s: f64,
    /// Calls made.
    pub calls: u64,
    /// Calls that returned the right answer.
    pub ok: u64,
    /// Calls that failed (`failures` by class).
    pub failed: u64,
}

/// Latency of the calls that succeeded, milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Calls measured.
    pub count: u64,
    /// Median.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Slowest.
    pub max_ms: f64,
    /// Mean.
    pub mean_ms: f64,
}

/// Throughput over the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// Successful calls per second.
    pub calls_per_s: f64,
    /// Application payload central → device, bytes per second.
    pub up_bytes_per_s: f64,
    /// Application payload device → central, bytes per second.
    pub down_bytes_per_s: f64,
}

/// A loss of the connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reconnect {
    /// When the loss was seen, seconds into the run.
    pub at_s: f64,
    /// Why (the error the call or the link gave).
    pub reason: String,
    /// How long reconnecting took, ms; missing when the run ended first or gave up.
    pub reconnected_after_ms: Known<f64>,
}

/// One second of the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Second {
    /// Seconds into the run (this row covers `t_s .. t_s + 1`).
    pub t_s: u32,
    /// Calls that succeeded.
    pub ok: u32,
    /// Calls that failed.
    pub failed: u32,
    /// Median latency of the successful calls, ms; missing for a second without one.
    pub p50_ms: Known<f64>,
}
