//! Two reports side by side: each figure with the ratio B / A, and the environment's
//! differences flagged first (a different MTU or connection interval explains most
//! differences in the figures).

use std::fmt::Write as _;

use crate::schema::Report;

/// A difference in what two runs ran on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// What differs.
    pub what: &'static str,
    /// A's value.
    pub a: String,
    /// B's value.
    pub b: String,
}

/// What differs between the two runs' environments and links.
pub fn differences(a: &Report, b: &Report) -> Vec<Difference> {
    let facts = |r: &Report| -> Vec<(&'static str, String)> {
        let d = &r.device.before;
        vec![
            ("schema", r.schema.clone()),
            ("link kind", r.link.kind.clone()),
            ("TLS", r.link.tls.to_string()),
            ("encryption", r.link.encrypted.to_string()),
            ("ATT MTU (central)", r.link.att_mtu.to_string()),
            ("ATT MTU (device)", d.att_mtu.to_string()),
            ("connection interval µs", d.conn_interval_us.to_string()),
            ("PHY", d.phy.to_string()),
            ("data length", d.data_length.to_string()),
            ("device version", d.version.to_string()),
            ("device build", d.build_id.to_string()),
            ("board", r.environment.board.to_string()),
            ("access point", r.environment.access_point.to_string()),
            ("distance", r.environment.distance.to_string()),
            ("host OS", r.environment.os.to_string()),
            ("host CPU", r.environment.cpu.to_string()),
            ("mix", r.run.mix.to_string()),
        ]
    };
    facts(a)
        .into_iter()
        .zip(facts(b))
        .filter(|((_, x), (_, y))| x != y)
        .map(|((what, x), (_, y))| Difference { what, a: x, b: y })
        .collect()
}

/// The comparison as Markdown.
pub fn markdown(a: &Report, b: &Report) -> String {
    let mut out = String::from("# bleRPC field reports compared (B / A)\n\n");
    let diffs = differences(a, b);
    if diffs.is_empty() {
        out.push_str("Same environment, link and mix.\n");
    } else {
        out.push_str("**Different environment** (these explain most differences below):\n\n");
        out.push_str("| | A | B |\n|---|---|---|\n");
        for d in &diffs {
            let _ = writeln!(out, "| {} | {} | {} |", d.what, d.a, d.b);
        }
    }
    let ratio = |x: f64, y: f64| {
        if x > 0.0 {
            format!("{:.2}×", y / x)
        } else {
            "–".to_string()
        }
    };
    out.push_str("\n| figure | A | B | B / A |\n|---|---:|---:|---:|\n");
    let mut row = |name: String, x: f64, y: f64| {
        let _ = writeln!(out, "| {name} | {x:.2} | {y:.2} | {} |", ratio(x, y));
    };
    row(
        "calls/s".into(),
        a.throughput.calls_per_s,
        b.throughput.calls_per_s,
    );
    row(
        "KiB/s down".into(),
        a.throughput.down_bytes_per_s / 1024.0,
        b.throughput.down_bytes_per_s / 1024.0,
    );
    row(
        "KiB/s up".into(),
        a.throughput.up_bytes_per_s / 1024.0,
        b.throughput.up_bytes_per_s / 1024.0,
    );
    for (kind, la) in &a.latency {
        if let Some(lb) = b.latency.get(kind) {
            row(format!("{kind} p50 ms"), la.p50_ms, lb.p50_ms);
            row(format!("{kind} p95 ms"), la.p95_ms, lb.p95_ms);
            row(format!("{kind} p99 ms"), la.p99_ms, lb.p99_ms);
        }
    }
    row(
        "failed calls".into(),
        a.run.failed as f64,
        b.run.failed as f64,
    );
    row(
        "reconnects".into(),
        a.reconnects.len() as f64,
        b.reconnects.len() as f64,
    );
    out
}
