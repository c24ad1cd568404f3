//! The results: rows with medians across repetitions, the published figures beside them,
//! ratios to the bare baseline, connection setup, the target checks, and the tables and JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::measure::{SetupTimes, Transport, Variant};
use super::summary::Summary;
use crate::stats::median;
use crate::table::{Align, Table, wrap, wrap_hanging};

/// One published row of benchmarks.md §2 (Windows 11, CPython 3.14.4, v0.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Published {
    /// Messages timed.
    pub messages: usize,
    /// ms.
    pub p50_ms: f64,
    /// ms.
    pub p95_ms: f64,
    /// ms.
    pub mean_ms: f64,
    /// msg/s.
    pub msg_per_s: f64,
}

const fn published(messages: usize, p50: f64, p95: f64, mean: f64, rate: f64) -> Published {
    Published {
        messages,
        p50_ms: p50,
        p95_ms: p95,
        mean_ms: mean,
        msg_per_s: rate,
    }
}

/// The published figure for a row: (transport, clients, payload bytes).
pub fn published_for(transport: Transport, clients: usize, payload: usize) -> Option<Published> {
    const KIB: usize = 1024;
    Some(match (transport, clients, payload) {
        (Transport::Tcp, 1, 0) => published(1000, 0.164, 0.279, 0.195, 5069.6),
        (Transport::Tcp, 1, 64) => published(1000, 0.156, 0.264, 0.178, 5566.1),
        (Transport::Tcp, 1, KIB) => published(1000, 0.159, 0.265, 0.186, 5346.0),
        (Transport::Tcp, 1, 65_536) => published(1000, 0.224, 0.329, 0.245, 4045.8),
        (Transport::Tls, 1, 0) => published(1000, 0.231, 0.351, 0.262, 3578.0),
        (Transport::Tls, 1, 64) => published(1000, 0.226, 0.340, 0.254, 3843.5),
        (Transport::Tls, 1, KIB) => published(1000, 0.236, 0.357, 0.265, 3712.9),
        (Transport::Tls, 1, 65_536) => published(1000, 0.361, 0.572, 0.434, 2270.7),
        (Transport::Tcp, 20, 64) => published(2000, 2.879, 5.296, 3.177, 5861.5),
        _ => return None,
    })
}

/// A row of the matrix: one transport, client count, payload and variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct RowKey {
    /// The transport.
    pub transport: Transport,
    /// Concurrent clients (1, or the load row's count).
    pub clients: usize,
    /// Calls in flight per client: 1 (one at a time, as published), or the pipelined rows'
    /// window.
    pub window: usize,
    /// Payload bytes.
    pub payload: usize,
    /// bleRPC with or without E2E encryption, or one of the bare baselines.
    pub variant: Variant,
}

/// One row: every repetition and their medians.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Which row.
    #[serde(flatten)]
    pub key: RowKey,
    /// Per repetition, in run order (`None`: the run failed or was not supported).
    pub reps: Vec<Option<Summary>>,
    /// Medians of the repetitions that ran.
    pub median: Option<Summary>,
    /// Failed runs (connections or calls).
    pub errors: usize,
    /// The first failure.
    pub first_error: Option<String>,
    /// Why the row cannot run (bleRPC cannot carry the payload).
    pub unsupported: Option<String>,
    /// The published figure for this transport, client count and payload.
    pub published: Option<Published>,
    /// Median over repetitions of p50 / bare p50 of the same repetition (every row but the
    /// bare ones).
    pub p50_vs_bare: Option<f64>,
    /// Median over repetitions of E2E p50 / plaintext p50 of the same repetition (E2E rows).
    pub p50_vs_plain: Option<f64>,
    /// Median over repetitions of E2E p50 / sealed bare p50 of the same repetition (E2E rows):
    /// what bleRPC costs beyond the cipher.
    pub p50_vs_bare_aead: Option<f64>,
    /// Median over repetitions of msg/s / bare msg/s (every row but the bare ones).
    pub rate_vs_bare: Option<f64>,
}

/// Connection setup medians for one transport and variant.
#[derive(Clone, Debug, Serialize)]
pub struct SetupRow {
    /// The transport.
    pub transport: Transport,
    /// The variant.
    pub variant: Variant,
    /// Connections measured.
    pub samples: usize,
    /// Median TCP connect, ms.
    pub tcp_connect_ms: f64,
    /// Median full TLS handshake (certificate signed and verified), ms (TLS only).
    pub tls_handshake_ms: Option<f64>,
    /// Median resumed TLS handshake (session ticket), ms: one connection per row (TLS only).
    pub tls_resumed_ms: Option<f64>,
    /// Median bleRPC setup (TIMEOUT, CAPABILITIES, key exchange with E2E), ms (bleRPC only).
    pub blerpc_setup_ms: Option<f64>,
    /// Median first call with the smallest payload, ms.
    pub first_call_ms: f64,
    /// The payload of those first calls.
    pub first_call_payload: usize,
}

/// A target and whether it was met.
#[derive(Clone, Debug, Serialize)]
pub struct TargetCheck {
    /// What is asked.
    pub target: String,
    /// `PASS`, `MISS`, or `N/A` (not in this run's matrix).
    pub verdict: &'static str,
    /// The figures behind the verdict.
    pub detail: String,
}

/// Everything a run produced.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// The command line, as run.
    pub command: String,
    /// Timed messages per single-client row.
    pub messages: usize,
    /// Messages of each load row, in total.
    pub load_messages: usize,
    /// Clients of the load rows.
    pub load_clients: usize,
    /// Repetitions.
    pub reps: usize,
    /// Whether the binary is a release build.
    pub release_build: bool,
    /// Every row.
    pub rows: Vec<Row>,
    /// Connection setup.
    pub setup: Vec<SetupRow>,
    /// The targets.
    pub targets: Vec<TargetCheck>,
    /// Failed runs in total.
    pub errors: usize,
}

/// Collects the raw results as they come in.
#[derive(Debug, Default)]
pub struct Collector {
    reps: usize,
    rows: BTreeMap<RowKey, Row>,
    setup: BTreeMap<(Transport, Variant), Vec<(usize, SetupTimes)>>,
}

impl Collector {
    /// A collector for `reps` repetitions.
    pub fn new(reps: usize) -> Self {
        Collector {
            reps,
            ..Default::default()
        }
    }

    /// Records repetition `rep` of `key`.
    pub fn add(&mut self, rep: usize, key: RowKey, result: super::measure::RunResult) {
        let reps = self.reps;
        let row = self.rows.entry(key).or_insert_with(|| Row {
            key,
            reps: vec![None; reps],
            median: None,
            errors: 0,
            first_error: None,
            unsupported: None,
            published: if key.window == 1 {
                published_for(key.transport, key.clients, key.payload)
            } else {
                None
            },
            p50_vs_bare: None,
            p50_vs_plain: None,
            p50_vs_bare_aead: None,
            rate_vs_bare: None,
        });
        row.errors += result.errors;
        if row.first_error.is_none() {
            row.first_error = result.first_error;
        }
        if let Some(u) = result.unsupported {
            row.unsupported = Some(u);
        } else if result.errors == 0
            && let Some(slot) = row.reps.get_mut(rep)
        {
            *slot = Some(Summary::from_nanos(&result.latencies_ns, result.wall_s));
        }
        if key.clients == 1 && key.window == 1 {
            let s = self.setup.entry((key.transport, key.variant)).or_default();
            s.extend(result.setup.into_iter().map(|t| (key.payload, t)));
        }
    }

    /// Computes medians, ratios, setup medians and the target checks.
    pub fn finish(self, mut report: Report, targets: &Targets) -> Report {
        let mut rows = self.rows;
        for row in rows.values_mut() {
            let ran: Vec<Summary> = row.reps.iter().flatten().copied().collect();
            row.median = (!ran.is_empty()).then(|| Summary::median_of(&ran));
        }
        let paired = |rows: &BTreeMap<RowKey, Row>,
                      key: RowKey,
                      other: Variant,
                      f: fn(&Summary, &Summary) -> f64| {
            let a = rows.get(&key)?;
            let b = rows.get(&RowKey {
                variant: other,
                ..key
            })?;
            let ratios: Vec<f64> = a
                .reps
                .iter()
                .zip(&b.reps)
                .filter_map(|(x, y)| Some(f(x.as_ref()?, y.as_ref()?)))
                .filter(|r| r.is_finite())
                .collect();
            (!ratios.is_empty()).then(|| median(&ratios))
        };
        let keys: Vec<RowKey> = rows.keys().copied().collect();
        for key in keys {
            if key.variant == Variant::Bare {
                continue;
            }
            let vs_bare = paired(&rows, key, Variant::Bare, |a, b| a.p50_ms / b.p50_ms);
            let rate = paired(&rows, key, Variant::Bare, |a, b| a.msg_per_s / b.msg_per_s);
            let e2e = |other| {
                (key.variant == Variant::BlerpcE2e)
                    .then(|| paired(&rows, key, other, |a, b| a.p50_ms / b.p50_ms))
                    .flatten()
            };
            let vs_plain = e2e(Variant::BlerpcPlain);
            let vs_bare_aead = e2e(Variant::BareAead);
            if let Some(row) = rows.get_mut(&key) {
                row.p50_vs_bare = vs_bare;
                row.rate_vs_bare = rate;
                row.p50_vs_plain = vs_plain;
                row.p50_vs_bare_aead = vs_bare_aead;
            }
        }
        report.setup = self
            .setup
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|((transport, variant), v)| {
                let smallest = v.iter().map(|(p, _)| *p).min().unwrap_or(0);
                let opt = |f: fn(&SetupTimes) -> Option<f64>| {
                    let xs: Vec<f64> = v.iter().filter_map(|(_, t)| f(t)).collect();
                    (!xs.is_empty()).then(|| median(&xs))
                };
                let first: Vec<f64> = v
                    .iter()
                    .filter(|(p, _)| *p == smallest)
                    .map(|(_, t)| t.first_call_ms)
                    .collect();
                SetupRow {
                    transport,
                    variant,
                    samples: v.len(),
                    tcp_connect_ms: opt(|t| Some(t.tcp_connect_ms)).unwrap_or(0.0),
                    tls_handshake_ms: opt(|t| {
                        t.tls_handshake_ms.filter(|_| t.tls_resumed == Some(false))
                    }),
                    tls_resumed_ms: opt(|t| {
                        t.tls_handshake_ms.filter(|_| t.tls_resumed == Some(true))
                    }),
                    blerpc_setup_ms: opt(|t| t.blerpc_setup_ms),
                    first_call_ms: median(&first),
                    first_call_payload: smallest,
                }
            })
            .collect();
        report.rows = rows.into_values().collect();
        report.errors = report.rows.iter().map(|r| r.errors).sum();
        report.targets = targets.check(&report.rows);
        report
    }
}

/// The targets shown (never asserted).
#[derive(Clone, Copy, Debug)]
pub struct Targets {
    /// bleRPC (E2E) p50 over bare TCP p50, at most.
    pub vs_bare_tcp: f64,
    /// bleRPC (E2E) p50 over bare rustls p50, at most.
    pub vs_bare_tls: f64,
    /// E2E p50 over plaintext p50, at most.
    pub e2e_cost: f64,
    /// 64 KiB over TLS (E2E), msg/s at least.
    pub tls_64k_rate: f64,
}

impl Default for Targets {
    fn default() -> Self {
        Targets {
            vs_bare_tcp: 1.15,
            vs_bare_tls: 1.10,
            e2e_cost: 1.10,
            tls_64k_rate: 5000.0,
        }
    }
}

impl Targets {
    /// Judges `ratio` of every selected row against `limit`. A row whose ratio is missing
    /// because its `baseline` row was not part of the run (`--variants`) is reported as such and
    /// does not count; one that failed is a MISS.
    fn ratio_check(
        rows: &[Row],
        target: String,
        limit: f64,
        select: impl Fn(&Row) -> bool,
        ratio: fn(&Row) -> Option<f64>,
        baseline: Variant,
    ) -> TargetCheck {
        let mut parts = Vec::new();
        let mut ok = true;
        let mut any = false;
        for row in rows.iter().filter(|r| select(r)) {
            let label = format!("{} {}", row.key.transport.label(), size(row.key.payload));
            let compared = RowKey {
                variant: baseline,
                ..row.key
            };
            match (&row.unsupported, ratio(row)) {
                (Some(_), _) => {
                    ok = false;
                    parts.push(format!("{label} not supported"));
                }
                (None, Some(r)) => {
                    any = true;
                    if r > limit {
                        ok = false;
                    }
                    parts.push(format!("{label} {r:.2}×"));
                }
                (None, None) if !rows.iter().any(|r| r.key == compared) => {
                    parts.push(format!("{label} no {} row to compare", baseline.label()));
                }
                (None, None) => {
                    ok = false;
                    parts.push(format!("{label} not measured (errors)"));
                }
            }
        }
        TargetCheck {
            target,
            verdict: match (any, ok) {
                (true, true) => "PASS",
                (false, true) => "N/A",
                (_, false) => "MISS",
            },
            detail: if parts.is_empty() {
                "no such rows in this run".into()
            } else {
                parts.join(", ")
            },
        }
    }

    /// The 64 KiB TLS rate: one call at a time, and with calls in flight when the run has a
    /// pipelined row (the verdict then follows the pipelined row; both figures are shown).
    fn rate_check(&self, rows: &[Row], target: String) -> TargetCheck {
        let tls_64k = |r: &&Row| {
            r.key.transport == Transport::Tls
                && r.key.clients == 1
                && r.key.payload == 65_536
                && r.key.variant == Variant::BlerpcE2e
        };
        let sequential = rows.iter().filter(tls_64k).find(|r| r.key.window == 1);
        let pipelined = rows.iter().filter(tls_64k).find(|r| r.key.window > 1);
        let figure = |r: &Row| match (&r.unsupported, &r.median) {
            (Some(why), _) => (None, format!("not supported: {why}")),
            (None, Some(m)) => (
                Some(m.msg_per_s),
                format!("{} msg/s", thousands(m.msg_per_s, 1)),
            ),
            (None, None) => (None, "not measured (errors)".into()),
        };
        let mut parts = Vec::new();
        let mut judged = None;
        for r in [sequential, pipelined].into_iter().flatten() {
            let (rate, text) = figure(r);
            let how = if r.key.window == 1 {
                "one call at a time".to_string()
            } else {
                format!("{} calls in flight", r.key.window)
            };
            parts.push(format!("{how} {text}"));
            judged = Some(rate);
        }
        let verdict = match judged {
            None => "N/A",
            Some(Some(rate)) if rate >= self.tls_64k_rate => "PASS",
            Some(_) => "MISS",
        };
        TargetCheck {
            target,
            verdict,
            detail: if parts.is_empty() {
                "no 64 KiB TLS row in this run".into()
            } else {
                parts.join("; ")
            },
        }
    }

    /// Checks every target against the rows.
    pub fn check(&self, rows: &[Row]) -> Vec<TargetCheck> {
        let single_e2e = |t: Transport| {
            move |r: &Row| {
                r.key.clients == 1
                    && r.key.window == 1
                    && r.key.variant == Variant::BlerpcE2e
                    && r.key.transport == t
            }
        };
        let mut out = vec![
            with_cipher_floor(
                Self::ratio_check(
                    rows,
                    format!(
                        "loopback unary p50 ≤ {:.2}× bare TCP echo (bleRPC E2E / bare, per payload)",
                        self.vs_bare_tcp
                    ),
                    self.vs_bare_tcp,
                    single_e2e(Transport::Tcp),
                    |r| r.p50_vs_bare,
                    Variant::Bare,
                ),
                rows,
                Transport::Tcp,
            ),
            with_cipher_floor(
                Self::ratio_check(
                    rows,
                    format!(
                        "loopback unary p50 ≤ {:.2}× bare rustls echo (bleRPC E2E over TLS / bare TLS)",
                        self.vs_bare_tls
                    ),
                    self.vs_bare_tls,
                    single_e2e(Transport::Tls),
                    |r| r.p50_vs_bare,
                    Variant::Bare,
                ),
                rows,
                Transport::Tls,
            ),
            Self::ratio_check(
                rows,
                format!(
                    "E2E encryption adds ≤ {:.2}× (p50 E2E / p50 plaintext, per row)",
                    self.e2e_cost
                ),
                self.e2e_cost,
                |r| r.key.clients == 1 && r.key.window == 1 && r.key.variant == Variant::BlerpcE2e,
                |r| r.p50_vs_plain,
                Variant::BlerpcPlain,
            ),
        ];
        let target = format!(
            "64 KiB over TLS ≥ {} msg/s (bleRPC E2E)",
            thousands(self.tls_64k_rate, 0)
        );
        out.push(self.rate_check(rows, target));
        out
    }
}

/// Adds to a "× bare" check what the cipher alone costs on the same rows: the sealed bare
/// baseline's p50 over the bare one (one call at a time), where the run has it. The verdict is
/// unchanged; the figures show how much of the ratio any E2E-encrypted exchange pays.
fn with_cipher_floor(mut check: TargetCheck, rows: &[Row], transport: Transport) -> TargetCheck {
    let floors: Vec<String> = rows
        .iter()
        .filter(|r| {
            r.key.variant == Variant::BareAead
                && r.key.transport == transport
                && r.key.clients == 1
                && r.key.window == 1
        })
        .filter_map(|r| Some(format!("{} {:.2}×", size(r.key.payload), r.p50_vs_bare?)))
        .collect();
    if !floors.is_empty() {
        check.detail = format!(
            "{} (the AES-GCM seal and open alone, bare + AES-GCM / bare: {})",
            check.detail,
            floors.join(", ")
        );
    }
    check
}

/// `0 B`, `64 B`, `1 KiB`, `64 KiB`, `1500 B`.
pub fn size(bytes: usize) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// `5,069.6` with `decimals` decimals.
pub fn thousands(x: f64, decimals: usize) -> String {
    let s = format!("{x:.decimals$}");
    let (int, frac) = s
        .split_once('.')
        .map_or((s.as_str(), None), |(a, b)| (a, Some(b)));
    let (sign, digits) = int.strip_prefix('-').map_or(("", int), |d| ("-", d));
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

/// A Markdown table of `rows` under `header`, numbers right-aligned.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut t = Table::new(header.iter().copied());
    for i in 2..header.len() {
        t = t.align(i, Align::Right);
    }
    for row in rows {
        t.row(row);
    }
    t.pipe()
}

/// A row's first cell: the transport, and the shape when it is not one call at a time.
fn row_label(k: &RowKey) -> String {
    if k.clients > 1 {
        format!("{}, {} clients", k.transport.label(), k.clients)
    } else if k.window > 1 {
        format!("{}, {} in flight", k.transport.label(), k.window)
    } else {
        k.transport.label().to_string()
    }
}

/// Milliseconds with the digits that matter (the unit is in the column's header).
fn ms_cell(x: f64) -> String {
    if x < 1.0 {
        format!("{x:.4}")
    } else {
        format!("{x:.3}")
    }
}

fn ratio_cell(r: Option<f64>) -> String {
    r.map_or_else(|| "—".into(), |r| format!("{r:.2}"))
}

impl Report {
    /// The tables, the setup table and the target lines, as printed on stdout.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let build = if self.release_build {
            "release build"
        } else {
            "DEBUG build: figures are not representative, use --release"
        };
        out.push_str(&wrap(&format!(
            "Loopback DATA→ACK matrix ({build}): medians of {} interleaved repetitions; {} timed \
             messages per one-client row and {} in total per load row, after one warm-up call per \
             client. Times in ms. vs bare, vs plain, vs GCM: this p50 ÷ that variant's p50 on \
             the same row (below 1 is faster); rate vs bare: this msg/s ÷ bare's (above 1 is \
             faster).",
            self.reps,
            thousands(self.messages as f64, 0),
            thousands(self.load_messages as f64, 0),
        )));
        // The published figures belong to a row shape, whatever the variant: once per shape.
        let mut seen = std::collections::BTreeSet::new();
        let published: Vec<Vec<String>> = self
            .rows
            .iter()
            .filter_map(|r| {
                let p = r.published?;
                seen.insert((r.key.transport, r.key.clients, r.key.window, r.key.payload))
                    .then(|| {
                        vec![
                            row_label(&r.key),
                            size(r.key.payload),
                            ms_cell(p.p50_ms),
                            ms_cell(p.p95_ms),
                            ms_cell(p.mean_ms),
                            thousands(p.msg_per_s, 0),
                        ]
                    })
            })
            .collect();
        if !published.is_empty() {
            let _ = writeln!(
                out,
                "\nPublished (benchmarks.md §2: the reference, Python on Windows 11), for scale\n"
            );
            out.push_str(&table(
                &["transport", "payload", "p50", "p95", "mean", "msg/s"],
                published,
            ));
        }
        for variant in Variant::ALL {
            if !self.rows.iter().any(|r| r.key.variant == variant) {
                continue;
            }
            let title = match variant {
                Variant::BlerpcE2e => "bleRPC, E2E encryption on (default)",
                Variant::BlerpcPlain => "bleRPC, E2E encryption off",
                Variant::Bare => {
                    "bare baseline (tokio TCP / tokio-rustls, length-prefixed DATA, 4-byte ACK)"
                }
                Variant::Grpc => {
                    "gRPC, tonic 0.14 at its defaults (HTTP/2: h2c on TCP, rustls and ring on TLS; \
                     what users pick instead)"
                }
                Variant::BareAead => {
                    "bare + AES-GCM baseline (the bare exchange with each DATA and ACK sealed as \
                     bleRPC seals a message: counter, AES-128-GCM, tag; the cipher's cost, no \
                     protocol)"
                }
            };
            out.push('\n');
            out.push_str(&wrap(title));
            out.push('\n');
            let mut header = vec!["transport", "payload", "p50", "p95", "p99", "mean", "msg/s"];
            if variant != Variant::Bare {
                header.extend(["vs bare", "rate vs bare"]);
            }
            if variant == Variant::BlerpcE2e {
                header.extend(["vs plain", "vs GCM"]);
            }
            let mut rows = Vec::new();
            for row in self.rows.iter().filter(|r| r.key.variant == variant) {
                let mut cells = vec![row_label(&row.key), size(row.key.payload)];
                match (&row.unsupported, &row.median) {
                    (Some(why), _) => {
                        cells.push(format!("not supported: {why}"));
                        cells.extend(std::iter::repeat_n(String::new(), 4));
                    }
                    (None, Some(m)) => cells.extend([
                        ms_cell(m.p50_ms),
                        ms_cell(m.p95_ms),
                        ms_cell(m.p99_ms),
                        ms_cell(m.mean_ms),
                        thousands(m.msg_per_s, 0),
                    ]),
                    (None, None) => {
                        cells.push(format!(
                            "FAILED: {}",
                            row.first_error.as_deref().unwrap_or("no run completed")
                        ));
                        cells.extend(std::iter::repeat_n(String::new(), 4));
                    }
                }
                if variant != Variant::Bare {
                    cells.push(ratio_cell(row.p50_vs_bare));
                    cells.push(ratio_cell(row.rate_vs_bare));
                }
                if variant == Variant::BlerpcE2e {
                    cells.push(ratio_cell(row.p50_vs_plain));
                    cells.push(ratio_cell(row.p50_vs_bare_aead));
                }
                rows.push(cells);
            }
            out.push_str(&table(&header, rows));
        }
        out.push('\n');
        out.push_str(&wrap(
            "Connection setup, ms (medians; each step timed on its own; TLS: the full handshake, \
             and one reconnection per row resuming the first client's session; bleRPC: TIMEOUT, \
             CAPABILITIES and the key exchange; the first call is the warm-up; total: with the \
             full handshake)",
        ));
        out.push('\n');
        let header = [
            "transport",
            "variant",
            "samples",
            "TCP",
            "TLS",
            "resumed",
            "bleRPC",
            "first call",
            "total",
        ];
        let rows: Vec<Vec<String>> = self
            .setup
            .iter()
            .map(|s| {
                let total = s.tcp_connect_ms
                    + s.tls_handshake_ms.unwrap_or(0.0)
                    + s.blerpc_setup_ms.unwrap_or(0.0)
                    + s.first_call_ms;
                vec![
                    s.transport.label().into(),
                    s.variant.label().into(),
                    s.samples.to_string(),
                    ms_cell(s.tcp_connect_ms),
                    s.tls_handshake_ms.map_or_else(|| "—".into(), ms_cell),
                    s.tls_resumed_ms.map_or_else(|| "—".into(), ms_cell),
                    s.blerpc_setup_ms.map_or_else(|| "—".into(), ms_cell),
                    format!(
                        "{} ({})",
                        ms_cell(s.first_call_ms),
                        size(s.first_call_payload)
                    ),
                    ms_cell(total),
                ]
            })
            .collect();
        out.push_str(&table(&header, rows));
        let _ = writeln!(out, "\nTargets (shown, not asserted)\n");
        for t in &self.targets {
            out.push_str(&wrap_hanging(
                &format!("{:<4}  {}: {}", t.verdict, t.target, t.detail),
                "      ",
            ));
        }
        let _ = writeln!(
            out,
            "\n{} error{}",
            self.errors,
            if self.errors == 1 { "" } else { "s" }
        );
        for row in self.rows.iter().filter(|r| r.errors > 0) {
            let _ = writeln!(
                out,
                "  {} {} {}: {}",
                row_label(&row.key),
                row.key.variant.label(),
                size(row.key.payload),
                row.first_error.as_deref().unwrap_or("?")
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(thousands(5069.56, 1), "5,069.6");
        assert_eq!(thousands(123.0, 0), "123");
        assert_eq!(thousands(1_234_567.0, 0), "1,234,567");
        assert_eq!(size(0), "0 B");
        assert_eq!(size(65_536), "64 KiB");
        assert_eq!(size(1500), "1500 B");
        assert!(published_for(Transport::Tls, 1, 65_536).is_some());
        assert!(published_for(Transport::Tls, 20, 64).is_none());
    }

    fn row(variant: Variant, p50_ms: Option<f64>, vs_plain: Option<f64>) -> Row {
        let summary = p50_ms.map(|p50_ms| Summary {
            messages: 10,
            p50_ms,
            ..Summary::default()
        });
        Row {
            key: RowKey {
                transport: Transport::Tcp,
                clients: 1,
                window: 1,
                payload: 64,
                variant,
            },
            reps: vec![summary],
            median: summary,
            errors: usize::from(summary.is_none()),
            first_error: summary.is_none().then(|| "refused".to_string()),
            unsupported: None,
            published: None,
            p50_vs_bare: None,
            p50_vs_plain: vs_plain,
            p50_vs_bare_aead: None,
            rate_vs_bare: None,
        }
    }

    fn e2e_cost(rows: &[Row]) -> TargetCheck {
        Targets::default()
            .check(rows)
            .into_iter()
            .find(|c| c.target.starts_with("E2E encryption adds"))
            .expect("the E2E target is always checked")
    }

    #[test]
    fn a_variant_left_out_of_the_run_is_not_an_error() {
        // E2E only: nothing to compare with, so neither PASS nor MISS.
        let check = e2e_cost(&[row(Variant::BlerpcE2e, Some(0.2), None)]);
        assert_eq!(check.verdict, "N/A");
        assert_eq!(check.detail, "TCP 64 B no bleRPC plain row to compare");
        // The plaintext row ran but failed: the ratio is missing because of errors.
        let check = e2e_cost(&[
            row(Variant::BlerpcE2e, Some(0.2), None),
            row(Variant::BlerpcPlain, None, None),
        ]);
        assert_eq!(check.verdict, "MISS");
        assert_eq!(check.detail, "TCP 64 B not measured (errors)");
        // Both ran.
        let check = e2e_cost(&[
            row(Variant::BlerpcE2e, Some(0.2), Some(1.05)),
            row(Variant::BlerpcPlain, Some(0.19), None),
        ]);
        assert_eq!(
            (check.verdict, check.detail.as_str()),
            ("PASS", "TCP 64 B 1.05×")
        );
        let check = e2e_cost(&[
            row(Variant::BlerpcE2e, Some(0.2), Some(1.2)),
            row(Variant::BlerpcPlain, Some(0.16), None),
        ]);
        assert_eq!(check.verdict, "MISS");
    }
}
