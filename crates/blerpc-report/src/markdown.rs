//! A report as Markdown: what a person reads first (the JSON has everything).

use std::fmt::Write as _;

use crate::schema::Report;

/// The report's summary as Markdown.
pub fn summary(r: &Report) -> String {
    let mut out = String::new();
    let e = &r.environment;
    let _ = writeln!(out, "# bleRPC field report\n");
    let _ = writeln!(out, "| | |\n|---|---|");
    for (name, value) in [
        ("link", format!("{} ({})", r.link.url, r.link.kind)),
        ("TLS", r.link.tls.to_string()),
        (
            "encryption",
            if r.link.encrypted {
                "end to end".to_string()
            } else {
                "none".to_string()
            },
        ),
        ("ATT MTU (central)", r.link.att_mtu.to_string()),
        (
            "connection interval (device)",
            r.device.before.conn_interval_us.to_string(),
        ),
        ("PHY (device)", r.device.before.phy.to_string()),
        ("RSSI dBm (device)", r.device.before.rssi_dbm.to_string()),
        ("device version", r.device.before.version.to_string()),
        ("device build", r.device.before.build_id.to_string()),
        ("board", e.board.to_string()),
        ("access point", e.access_point.to_string()),
        ("distance", e.distance.to_string()),
        (
            "host",
            format!("{} · kernel {} · {}", e.os, e.kernel, e.cpu),
        ),
        ("BLE adapter", e.ble_adapter.to_string()),
        ("note", e.note.to_string()),
        ("mix", r.run.mix.to_string()),
        (
            "duration",
            format!(
                "{:.1} s asked, {:.1} s run",
                r.run.duration_s, r.run.elapsed_s
            ),
        ),
        (
            "calls",
            format!(
                "{} ({} ok, {} failed), {:.1}/s",
                r.run.calls, r.run.ok, r.run.failed, r.throughput.calls_per_s
            ),
        ),
        (
            "payload",
            format!(
                "{:.1} KiB/s up, {:.1} KiB/s down",
                r.throughput.up_bytes_per_s / 1024.0,
                r.throughput.down_bytes_per_s / 1024.0
            ),
        ),
        ("reconnects", r.reconnects.len().to_string()),
    ] {
        let _ = writeln!(out, "| {name} | {value} |");
    }
    let _ = writeln!(
        out,
        "\n| call | count | p50 ms | p95 ms | p99 ms | max ms | mean ms |\n|---|---:|---:|---:|---:|---:|---:|"
    );
    for (kind, l) in &r.latency {
        let _ = writeln!(
            out,
            "| {kind} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            l.count, l.p50_ms, l.p95_ms, l.p99_ms, l.max_ms, l.mean_ms
        );
    }
    if r.failures.is_empty() {
        let _ = writeln!(out, "\nNo call failed.");
    } else {
        let _ = writeln!(out, "\n| failure | calls |\n|---|---:|");
        for (class, n) in &r.failures {
            let _ = writeln!(out, "| {class} | {n} |");
        }
    }
    if !r.reconnects.is_empty() {
        let _ = writeln!(
            out,
            "\n| lost at s | reason | back after ms |\n|---:|---|---|"
        );
        for c in &r.reconnects {
            let back = match c.reconnected_after_ms.value() {
                Some(ms) => format!("{ms:.0}"),
                None => c.reconnected_after_ms.to_string(),
            };
            let _ = writeln!(out, "| {:.1} | {} | {back} |", c.at_s, c.reason);
        }
    }
    out
}
