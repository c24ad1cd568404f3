//! The tables and the plot of `blerpc-bench scale`: medians over repetitions, the published
//! SOCKET-MANAGER figures (Linux) beside ours, and the targets marked PASS or MISS.

use std::io::Write;

use serde::Serialize;

use super::stats::{Tail, Theirs};
use super::{Run, ScaleArgs};
use crate::plot::{BLUE, Chart, DARK_GREY, GREEN, PINK, Panel, RED, Series};
use crate::stats::median;
use blerpc_cli::call::PipeliningArg;

/// Published pure latency, Linux (ms): avg, median, min, max, p90, p95.
pub const PUBLISHED_PURE: Theirs = Theirs {
    avg: 0.0249,
    median: 0.0215,
    min: 0.0203,
    max: 3.0309,
    p90: 0.0237,
    p95: 0.0274,
};

fn theirs(avg: f64, median: f64, min: f64, max: f64, p90: f64, p95: f64) -> Theirs {
    Theirs {
        avg,
        median,
        min,
        max,
        p90,
        p95,
    }
}

/// Published handshake-storm upgrade latency, Linux (ms), by connection count.
pub fn published_storm(connections: usize) -> Option<Theirs> {
    match connections {
        10_000 => Some(theirs(11.14, 10.13, 0.08, 31.91, 22.75, 24.77)),
        50_000 => Some(theirs(27.06, 25.95, 0.08, 85.12, 50.71, 53.96)),
        100_000 => Some(theirs(51.02, 49.82, 0.18, 214.39, 91.41, 100.90)),
        _ => None,
    }
}

/// Published endurance-round metric `floor(round ms) / connections`, Linux (ms).
pub fn published_rounds(connections: usize) -> Option<Theirs> {
    match connections {
        10_000 => Some(theirs(0.2269, 0.2272, 0.2039, 0.2639, 0.2320, 0.2361)),
        50_000 => Some(theirs(0.3484, 0.3461, 0.3090, 0.4249, 0.3673, 0.3728)),
        100_000 => Some(theirs(0.5531, 0.5506, 0.4930, 0.6975, 0.5753, 0.5847)),
        _ => None,
    }
}

/// Published raw TCP echo pure latency (100 B), Linux: avg only (ms).
pub const PUBLISHED_RAW_TCP_PURE_AVG: f64 = 0.0097;

/// Published raw TCP round metric "under the same load", Linux: avg only (ms).
pub fn published_raw_tcp_rounds(connections: usize) -> Option<f64> {
    match connections {
        10_000 => Some(0.2005),
        50_000 => Some(0.3121),
        100_000 => Some(0.5249),
        _ => None,
    }
}

/// Medians over the repetitions of one (connections, variant).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Row {
    /// Connections wanted.
    pub connections: usize,
    /// Variant.
    pub variant: &'static str,
    /// Repetitions.
    pub runs: usize,
    /// Fewest connections established in any repetition.
    pub established_min: usize,
    /// Storm wall time, s.
    pub storm_s: f64,
    /// Connections per second.
    pub conn_per_s: f64,
    /// Upgrade latency (ms).
    pub upgrade: Theirs,
    /// Upgrade latency tail (ms).
    pub upgrade_tail: Tail,
    /// bleRPC setup latency (ms), echo only.
    pub setup: Option<Theirs>,
    /// bleRPC setup tail (ms), echo only.
    pub setup_tail: Option<Tail>,
    /// Pure latency alone (ms).
    pub pure_alone: Theirs,
    /// Its tail.
    pub pure_alone_tail: Tail,
    /// Pure latency with all connections idle (ms).
    pub pure_idle: Theirs,
    /// Its tail.
    pub pure_idle_tail: Tail,
    /// Median over repetitions of p50(idle) / p50(alone).
    pub pure_ratio: f64,
    /// Round metric (ms).
    pub round_metric: Theirs,
    /// Per-message latency in rounds (ms).
    pub round_tail: Tail,
    /// Rounds per repetition (all client processes).
    pub rounds: f64,
    /// Messages per second in rounds.
    pub round_msgs_per_s: f64,
    /// Server bytes per idle connection (RSS).
    pub server_bytes_per_conn: f64,
    /// Server RSS with the connections idle, bytes.
    pub server_rss_after: f64,
    /// Client RSS with the connections idle, bytes.
    pub client_rss: f64,
    /// Server plus clients RSS with the connections idle, bytes.
    pub both_ends_bytes: f64,
    /// Storm CPU s: server, clients.
    pub storm_cpu: (f64, f64),
    /// Rounds CPU µs per message: server, clients.
    pub cpu_us_per_message: (f64, f64),
    /// Errors in all repetitions.
    pub errors: usize,
    /// Server worker processes.
    pub workers: usize,
    /// Client processes.
    pub clients: usize,
}

/// The summary: one row per (connections, variant), in the order run.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// The rows.
    pub rows: Vec<Row>,
}

fn med_of(runs: &[&Run], f: impl Fn(&Run) -> f64) -> f64 {
    median(&runs.iter().map(|r| f(r)).collect::<Vec<_>>())
}

fn med_theirs(runs: &[&Run], f: impl Fn(&Run) -> Theirs) -> Theirs {
    Theirs {
        avg: med_of(runs, |r| f(r).avg),
        median: med_of(runs, |r| f(r).median),
        min: med_of(runs, |r| f(r).min),
        max: med_of(runs, |r| f(r).max),
        p90: med_of(runs, |r| f(r).p90),
        p95: med_of(runs, |r| f(r).p95),
    }
}

fn med_tail(runs: &[&Run], f: impl Fn(&Run) -> Tail) -> Tail {
    Tail {
        count: med_of(runs, |r| f(r).count as f64) as u64,
        p50: med_of(runs, |r| f(r).p50),
        p99: med_of(runs, |r| f(r).p99),
        p999: med_of(runs, |r| f(r).p999),
        max: med_of(runs, |r| f(r).max),
    }
}

/// Medians over repetitions.
pub fn summarise(runs: &[Run]) -> Summary {
    let mut keys: Vec<(usize, &'static str)> = Vec::new();
    for r in runs {
        if !keys.contains(&(r.connections, r.variant)) {
            keys.push((r.connections, r.variant));
        }
    }
    let rows = keys
        .into_iter()
        .map(|(connections, variant)| {
            let rs: Vec<&Run> = runs
                .iter()
                .filter(|r| r.connections == connections && r.variant == variant)
                .collect();
            let has_setup = rs.iter().all(|r| r.setup.is_some());
            Row {
                connections,
                variant,
                runs: rs.len(),
                established_min: rs.iter().map(|r| r.established).min().unwrap_or(0),
                storm_s: med_of(&rs, |r| r.storm_s),
                conn_per_s: med_of(&rs, |r| r.conn_per_s),
                upgrade: med_theirs(&rs, |r| r.upgrade),
                upgrade_tail: med_tail(&rs, |r| r.upgrade_tail),
                setup: has_setup.then(|| med_theirs(&rs, |r| r.setup.unwrap_or_default())),
                setup_tail: has_setup.then(|| med_tail(&rs, |r| r.setup_tail.unwrap_or_default())),
                pure_alone: med_theirs(&rs, |r| r.pure_alone),
                pure_alone_tail: med_tail(&rs, |r| r.pure_alone_tail),
                pure_idle: med_theirs(&rs, |r| r.pure_idle),
                pure_idle_tail: med_tail(&rs, |r| r.pure_idle_tail),
                pure_ratio: med_of(&rs, |r| r.pure_idle.median / r.pure_alone.median.max(1e-9)),
                round_metric: med_theirs(&rs, |r| r.round_metric),
                round_tail: med_tail(&rs, |r| r.round_tail),
                rounds: med_of(&rs, |r| r.rounds as f64),
                round_msgs_per_s: med_of(&rs, |r| r.round_msgs_per_s),
                server_bytes_per_conn: med_of(&rs, |r| r.server_bytes_per_conn),
                server_rss_after: med_of(&rs, |r| r.server_rss_after as f64),
                client_rss: med_of(&rs, |r| r.client_rss as f64),
                both_ends_bytes: med_of(&rs, |r| (r.server_rss_after + r.client_rss) as f64),
                storm_cpu: (
                    med_of(&rs, |r| r.storm_cpu.0),
                    med_of(&rs, |r| r.storm_cpu.1),
                ),
                cpu_us_per_message: (
                    med_of(&rs, |r| {
                        r.rounds_cpu.0 * 1e6 / (r.round_tail.count.max(1) as f64)
                    }),
                    med_of(&rs, |r| {
                        r.rounds_cpu.1 * 1e6 / (r.round_tail.count.max(1) as f64)
                    }),
                ),
                errors: rs.iter().map(|r| r.error_count()).sum(),
                workers: rs.first().map_or(0, |r| r.workers),
                clients: rs.first().map_or(0, |r| r.clients),
            }
        })
        .collect();
    Summary { rows }
}

fn theirs_cells(t: &Theirs, digits: usize) -> String {
    format!(
        "{:.d$} | {:.d$} | {:.d$} | {:.d$} | {:.d$} | {:.d$}",
        t.avg,
        t.median,
        t.min,
        t.max,
        t.p90,
        t.p95,
        d = digits
    )
}

fn tail_cells(t: &Tail, digits: usize) -> String {
    format!(
        "{:.d$} | {:.d$} | {:.d$} | {:.d$}",
        t.p50,
        t.p99,
        t.p999,
        t.max,
        d = digits
    )
}

fn count(n: usize) -> String {
    if n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "MISS" }
}

/// Prints the tables and the targets.
pub fn print(
    out: &mut impl Write,
    args: &ScaleArgs,
    summary: &Summary,
    workers: usize,
) -> std::io::Result<()> {
    let rows = &summary.rows;
    writeln!(
        out,
        "\n## blerpc-bench scale: medians of {} repetition(s); {workers} server workers; published figures: SOCKET-MANAGER, Linux\n",
        args.repetitions.max(1)
    )?;
    writeln!(
        out,
        "### Handshake storm: upgrade latency (ms; after the request is written until the end of the response header; TCP connect excluded)\n"
    )?;
    writeln!(
        out,
        "| connections | who | avg | median | min | max | p90 | p95 | p99 | p99.9 | all open in | conn/s | errors |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")?;
    let mut levels: Vec<usize> = rows.iter().map(|r| r.connections).collect();
    levels.dedup();
    for &n in &levels {
        if let Some(p) = published_storm(n) {
            writeln!(
                out,
                "| {} | published | {} | — | — | — | — | 0 |",
                count(n),
                theirs_cells(&p, 2)
            )?;
        }
        for r in rows.iter().filter(|r| r.connections == n) {
            // The raw TCP baseline has no upgrade: only its storm time and rate.
            let (upgrade, tail) = if r.upgrade_tail.count == 0 {
                ("— | — | — | — | — | —".to_string(), "— | —".to_string())
            } else {
                (
                    theirs_cells(&r.upgrade, 2),
                    format!("{:.2} | {:.2}", r.upgrade_tail.p99, r.upgrade_tail.p999),
                )
            };
            writeln!(
                out,
                "| {} | ours, {} | {} | {} | {:.2} s | {:.0} | {} |",
                count(n),
                r.variant,
                upgrade,
                tail,
                r.storm_s,
                r.conn_per_s,
                r.errors
            )?;
        }
    }
    if rows.iter().any(|r| r.setup.is_some()) {
        let order = match args.setup_pipelining {
            None | Some(PipeliningArg::KeyExchange) => {
                "TIMEOUT, CAPABILITIES and step 1 in one flight: 2 round trips"
            }
            Some(PipeliningArg::Requests) => {
                "TIMEOUT and CAPABILITIES in one flight: 3 round trips"
            }
            Some(PipeliningArg::Off) => "one request per round trip: 4 round trips",
        };
        writeln!(
            out,
            "\n### bleRPC setup per connection (echo variant: TIMEOUT, CAPABILITIES, X25519/Ed25519 key exchange; {order}; ms)\n"
        )?;
        writeln!(
            out,
            "| connections | avg | median | min | max | p90 | p95 | p99 | p99.9 | setups/s (storm) | storm CPU s server / clients |"
        )?;
        writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|")?;
        for r in rows.iter().filter(|r| r.setup.is_some()) {
            let s = r.setup.unwrap_or_default();
            let t = r.setup_tail.unwrap_or_default();
            writeln!(
                out,
                "| {} | {} | {:.2} | {:.2} | {:.0} | {:.1} / {:.1} |",
                count(r.connections),
                theirs_cells(&s, 2),
                t.p99,
                t.p999,
                r.conn_per_s,
                r.storm_cpu.0,
                r.storm_cpu.1
            )?;
        }
    }
    let interval = if args.ping_interval_us == 0 {
        "back to back".to_string()
    } else {
        format!("one every {} µs", args.ping_interval_us)
    };
    writeln!(
        out,
        "\n### Pure latency: one connection, {} exchanges of {} B, {interval} (ms)\n",
        args.pings, args.payload
    )?;
    writeln!(
        out,
        "| connections idle | who | avg | median | min | max | p90 | p95 | p50 | p99 | p99.9 | max (hist) |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|")?;
    writeln!(
        out,
        "| ? | published (ping) | {} | — | — | — | — |",
        theirs_cells(&PUBLISHED_PURE, 4)
    )?;
    if rows.iter().any(|r| r.variant == "tcp") {
        writeln!(
            out,
            "| ? | published (raw TCP echo) | {PUBLISHED_RAW_TCP_PURE_AVG:.4} | — | — | — | — | — | — | — | — | — |"
        )?;
    }
    for r in rows {
        writeln!(
            out,
            "| 0 (before the {} storm) | ours, {} | {} | {} |",
            count(r.connections),
            r.variant,
            theirs_cells(&r.pure_alone, 4),
            tail_cells(&r.pure_alone_tail, 4)
        )?;
        writeln!(
            out,
            "| {} | ours, {} | {} | {} |",
            count(r.connections),
            r.variant,
            theirs_cells(&r.pure_idle, 4),
            tail_cells(&r.pure_idle_tail, 4)
        )?;
    }
    writeln!(
        out,
        "\n### Rounds: every connection of a client process pinged, all pongs awaited ({} s per run; metric = floor(round ms) / connections in the round, ms)\n",
        args.duration
    )?;
    writeln!(
        out,
        "| connections | who | avg | median | min | max | p90 | p95 | rounds | msg/s | per-message p50 | p99 | p99.9 | max |"
    )?;
    writeln!(
        out,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )?;
    for &n in &levels {
        if let Some(p) = published_rounds(n) {
            writeln!(
                out,
                "| {} | published | {} | — | — | — | — | — | — |",
                count(n),
                theirs_cells(&p, 4)
            )?;
        }
        if let Some(raw) = published_raw_tcp_rounds(n)
            && rows.iter().any(|r| r.variant == "tcp")
        {
            writeln!(
                out,
                "| {} | published, raw TCP | {raw:.4} | — | — | — | — | — | — | — | — | — | — | — |",
                count(n),
            )?;
        }
        for r in rows.iter().filter(|r| r.connections == n) {
            writeln!(
                out,
                "| {} | ours, {} | {} | {:.0} | {:.0} | {} |",
                count(n),
                r.variant,
                theirs_cells(&r.round_metric, 4),
                r.rounds,
                r.round_msgs_per_s,
                tail_cells(&r.round_tail, 3)
            )?;
        }
    }
    writeln!(
        out,
        "\n### Memory and CPU (RSS from /proc of every server / client process; CPU = utime + stime)\n"
    )?;
    writeln!(
        out,
        "| connections | variant | workers / clients | server RSS idle | server B/conn | clients RSS | both ends | storm CPU s (srv / cli) | rounds CPU µs/msg (srv / cli) | errors |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|")?;
    let mib = |b: f64| b / (1024.0 * 1024.0);
    for r in rows {
        writeln!(
            out,
            "| {} | {} | {} / {} | {:.0} MiB | {:.0} | {:.0} MiB | {:.2} GiB | {:.1} / {:.1} | {:.1} / {:.1} | {} |",
            count(r.connections),
            r.variant,
            r.workers,
            r.clients,
            mib(r.server_rss_after),
            r.server_bytes_per_conn,
            mib(r.client_rss),
            r.both_ends_bytes / (1024.0 * 1024.0 * 1024.0),
            r.storm_cpu.0,
            r.storm_cpu.1,
            r.cpu_us_per_message.0,
            r.cpu_us_per_message.1,
            r.errors
        )?;
    }
    writeln!(out, "\n### Targets\n")?;
    for r in rows {
        let n = count(r.connections);
        let v = r.variant;
        if v == "tcp" {
            // The baseline has no targets: it shows what the machine allows.
            let published = published_raw_tcp_rounds(r.connections)
                .map(|p| {
                    format!(
                        "; published raw TCP {p:.4} ms (× {:.1})",
                        p / r.round_metric.avg.max(1e-9)
                    )
                })
                .unwrap_or_default();
            // Only the published connection counts have a figure to be 10 × better than.
            let needs = published_rounds(r.connections)
                .map(|p| {
                    format!(
                        "; a round metric 10 × better than published needs {:.4} ms",
                        p.avg / 10.0
                    )
                })
                .unwrap_or_else(|| {
                    format!(
                        " (no published figure at {n} connections: the publication has 10k, 50k \
                         and 100k)"
                    )
                });
            writeln!(
                out,
                "- {n} tcp (baseline, no target): round metric {:.4} ms{published}{needs}",
                r.round_metric.avg,
            )?;
            continue;
        }
        let baseline = rows
            .iter()
            .find(|b| b.connections == r.connections && b.variant == "tcp");
        writeln!(
            out,
            "- {n} {v}: all {} established in ≤ 6 s with 0 errors: {:.2} s, {} errors → {}",
            r.connections,
            r.storm_s,
            r.errors,
            verdict(r.established_min == r.connections && r.storm_s <= 6.0 && r.errors == 0)
        )?;
        writeln!(
            out,
            "- {n} {v}: server ≤ 8 KiB per idle connection: {:.0} B → {}; both ends ≤ 2 GiB: {:.2} GiB → {}",
            r.server_bytes_per_conn,
            verdict(r.server_bytes_per_conn <= 8192.0),
            r.both_ends_bytes / (1024.0 * 1024.0 * 1024.0),
            verdict(r.both_ends_bytes <= 2.0 * 1024.0 * 1024.0 * 1024.0)
        )?;
        writeln!(
            out,
            "- {n} {v}: ping p50 with all idle ≤ 1.2 × alone: {:.4} vs {:.4} ms (× {:.2}) → {}",
            r.pure_idle.median,
            r.pure_alone.median,
            r.pure_ratio,
            verdict(r.pure_ratio <= 1.2)
        )?;
        if let Some(p) = published_rounds(r.connections) {
            writeln!(
                out,
                "- {n} {v}: round metric ≥ 10 × better than published {:.4} ms: {:.4} ms (× {:.1}) → {}",
                p.avg,
                r.round_metric.avg,
                p.avg / r.round_metric.avg.max(1e-9),
                verdict(r.round_metric.avg * 10.0 <= p.avg)
            )?;
        }
        if let Some(b) = baseline {
            writeln!(
                out,
                "- {n} {v}: round metric × the raw TCP baseline's: {:.4} / {:.4} ms = × {:.2}; storm × the baseline's: {:.2} / {:.2} s",
                r.round_metric.avg,
                b.round_metric.avg,
                r.round_metric.avg / b.round_metric.avg.max(1e-9),
                r.storm_s,
                b.storm_s
            )?;
        }
    }
    Ok(())
}

/// The summary as a chart: three panels of grouped bars over the connection counts (round
/// metric, median upgrade latency, server bytes per connection), ours beside the published.
pub fn chart(summary: &Summary) -> Chart {
    let mut levels: Vec<usize> = summary.rows.iter().map(|r| r.connections).collect();
    levels.dedup();
    let value = |variant: &str, get: fn(&Row) -> f64| -> Vec<Option<f64>> {
        levels
            .iter()
            .map(|n| {
                summary
                    .rows
                    .iter()
                    .find(|r| r.connections == *n && r.variant == variant)
                    .map(get)
                    .filter(|v| *v > 0.0 || variant != "tcp")
            })
            .collect()
    };
    let ours = |get: fn(&Row) -> f64| -> Vec<Series> {
        [
            ("ours, ping", "ping", BLUE),
            ("ours, echo", "echo", GREEN),
            ("ours, raw TCP", "tcp", DARK_GREY),
        ]
        .into_iter()
        .map(|(name, variant, color)| Series {
            name: name.into(),
            color,
            values: value(variant, get),
        })
        .filter(|s| s.values.iter().any(Option::is_some))
        .collect()
    };
    let published = |name: &str, color, get: &dyn Fn(usize) -> Option<f64>| Series {
        name: name.into(),
        color,
        values: levels.iter().map(|n| get(*n)).collect(),
    };
    let mut rounds = ours(|r| r.round_metric.avg);
    rounds.push(published("published", RED, &|n| {
        published_rounds(n).map(|p| p.avg)
    }));
    if summary.rows.iter().any(|r| r.variant == "tcp") {
        rounds.push(published(
            "published, raw TCP",
            PINK,
            &published_raw_tcp_rounds,
        ));
    }
    let mut storm = ours(|r| r.upgrade.median);
    storm.push(published("published", RED, &|n| {
        published_storm(n).map(|p| p.median)
    }));
    let groups: Vec<String> = levels.iter().map(|n| count(*n)).collect();
    let panel = |title: &str, series| Panel {
        title: title.into(),
        groups: groups.clone(),
        series,
        marks: Vec::new(),
        base: 0.0,
        tick_suffix: "",
        value_labels: true,
    };
    Chart {
        panels: vec![
            panel("Round metric, ms (lower is better)", rounds),
            panel("Storm: median upgrade latency, ms", storm),
            panel(
                "Server memory per idle connection, bytes",
                ours(|r| r.server_bytes_per_conn),
            ),
        ],
        columns: 3,
        panel_size: (380, 280),
        notes: vec!["connections along the bottom; blerpc-bench scale".into()],
    }
}

/// The summary's chart as SVG.
pub fn svg(summary: &Summary) -> String {
    chart(summary).svg()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_panels_with_ours_and_the_published_per_connection_count() {
        let row = |variant, metric| Row {
            connections: 100_000,
            variant,
            round_metric: Theirs {
                avg: metric,
                ..Theirs::default()
            },
            upgrade: Theirs {
                median: 10.0,
                ..Theirs::default()
            },
            server_bytes_per_conn: 6000.0,
            ..Row::default()
        };
        let summary = Summary {
            rows: vec![row("ping", 0.13), row("echo", 0.24), row("tcp", 0.10)],
        };
        let chart = chart(&summary);
        let names = |i: usize| -> Vec<String> {
            chart.panels[i]
                .series
                .iter()
                .map(|s| s.name.clone())
                .collect()
        };
        assert_eq!(
            names(0),
            [
                "ours, ping",
                "ours, echo",
                "ours, raw TCP",
                "published",
                "published, raw TCP"
            ]
        );
        assert_eq!(names(2), ["ours, ping", "ours, echo", "ours, raw TCP"]);
        assert_eq!(chart.panels[0].groups, ["100k"]);
        assert_eq!(chart.panels[0].series[3].values, [Some(0.5531)]);
        let svg = chart.svg();
        // One legend for all three panels.
        let texts = crate::plot::tests::texts(&svg);
        assert_eq!(
            texts.iter().filter(|t| **t == "published, raw TCP").count(),
            1,
            "{svg}"
        );
        assert!(texts.contains(&"0.55"), "{texts:?}");
        crate::plot::tests::assert_inside(&svg);
    }

    #[test]
    fn published_figures_are_where_the_spec_puts_them() {
        assert_eq!(published_rounds(100_000).map(|p| p.avg), Some(0.5531));
        assert_eq!(published_storm(50_000).map(|p| p.median), Some(25.95));
        assert!(published_rounds(3000).is_none());
        assert_eq!(count(100_000), "100k");
        assert_eq!(count(1500), "1500");
    }
}
