//! The one-call-at-a-time rows as a chart (`blerpc-bench loopback --svg FILE`): one panel per
//! transport, one group of bars per payload, each bar a variant's p50 over the bare baseline's
//! (median of the per-repetition ratios, as the tables show them), with the bare baseline at 1
//! and the target as a dashed line. The sealed baseline's bar is the cipher's own share of the
//! ratio, which no E2E-encrypted exchange can go below; gRPC's bar is what users pick instead.

use crate::plot::{BLUE, Chart, GREY, LIGHT_BLUE, Mark, ORANGE, Panel, RED, Series};

use super::measure::{Transport, Variant};
use super::report::{Report, Row, Targets, size};

/// The bars of a group, in order: variant, legend, fill.
const BARS: [(Variant, &str, plotters::style::RGBColor); 4] = [
    (Variant::BlerpcE2e, "bleRPC E2E", BLUE),
    (Variant::BlerpcPlain, "bleRPC plain", LIGHT_BLUE),
    (
        Variant::BareAead,
        "bare + AES-GCM (the cipher alone)",
        ORANGE,
    ),
    (Variant::Grpc, "gRPC (tonic)", GREY),
];

/// The panel of `transport`, or `None` when it has no ratio to draw.
fn panel(report: &Report, transport: Transport, target: f64) -> Option<Panel> {
    let one = |r: &&Row| r.key.transport == transport && r.key.clients == 1 && r.key.window == 1;
    let mut payloads: Vec<usize> = report
        .rows
        .iter()
        .filter(one)
        .map(|r| r.key.payload)
        .collect();
    payloads.sort_unstable();
    payloads.dedup();
    let ratio = |payload: usize, variant: Variant| {
        report
            .rows
            .iter()
            .filter(one)
            .find(|r| r.key.payload == payload && r.key.variant == variant)
            .and_then(|r| r.p50_vs_bare)
    };
    let series: Vec<Series> = BARS
        .iter()
        .map(|(variant, name, color)| Series {
            name: (*name).into(),
            color: *color,
            values: payloads.iter().map(|p| ratio(*p, *variant)).collect(),
        })
        .filter(|s| s.values.iter().any(Option::is_some))
        .collect();
    if series.is_empty() {
        return None;
    }
    Some(Panel {
        title: format!(
            "{}: p50 over the bare echo (target ≤ {target:.2}×)",
            transport.label()
        ),
        groups: payloads.iter().map(|p| size(*p)).collect(),
        series,
        marks: vec![Mark::Level {
            name: "target".into(),
            color: RED,
            value: target,
        }],
        base: 1.0,
        tick_suffix: "×",
        value_labels: true,
    })
}

/// The chart, or `None` when the run has no ratio to draw (no bare rows).
pub fn chart(report: &Report, targets: &Targets) -> Option<Chart> {
    let panels: Vec<Panel> = [
        (Transport::Tcp, targets.vs_bare_tcp),
        (Transport::Tls, targets.vs_bare_tls),
    ]
    .into_iter()
    .filter_map(|(t, target)| panel(report, t, target))
    .collect();
    if panels.is_empty() {
        return None;
    }
    let build = if report.release_build {
        "release build"
    } else {
        "DEBUG build: not representative"
    };
    Some(Chart {
        columns: panels.len(),
        panels,
        panel_size: (500, 320),
        notes: vec![
            "p50 ÷ bare p50, one call at a time (the ratio per repetition, then the median); \
             1 = the bare echo; lower is better"
                .into(),
            format!(
                "medians of {} interleaved repetition{}; blerpc-bench loopback ({build})",
                report.reps,
                if report.reps == 1 { "" } else { "s" },
            ),
        ],
    })
}

/// The chart as SVG, or `None` when the run has no ratio to draw.
pub fn svg(report: &Report, targets: &Targets) -> Option<String> {
    chart(report, targets).map(|c| c.svg())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::super::report::RowKey;
    use super::super::summary::Summary;
    use super::*;

    fn row(transport: Transport, payload: usize, variant: Variant, ratio: f64) -> Row {
        let summary = Summary {
            messages: 10,
            p50_ms: 0.1 * ratio,
            ..Summary::default()
        };
        Row {
            key: RowKey {
                transport,
                clients: 1,
                window: 1,
                payload,
                variant,
            },
            reps: vec![Some(summary)],
            median: Some(summary),
            errors: 0,
            first_error: None,
            unsupported: None,
            published: None,
            p50_vs_bare: (variant != Variant::Bare).then_some(ratio),
            p50_vs_plain: None,
            p50_vs_bare_aead: None,
            rate_vs_bare: None,
        }
    }

    #[test]
    fn draws_a_bar_per_ratio_and_the_target_per_transport() {
        let mut report = Report {
            reps: 3,
            ..Report::default()
        };
        for (transport, payload) in [(Transport::Tcp, 64), (Transport::Tcp, 65_536)] {
            for (variant, ratio) in [
                (Variant::BlerpcE2e, 1.4),
                (Variant::BlerpcPlain, 1.2),
                (Variant::Bare, 1.0),
                (Variant::BareAead, 1.1),
            ] {
                report.rows.push(row(transport, payload, variant, ratio));
            }
        }
        let chart = chart(&report, &Targets::default()).unwrap();
        // One panel (no TLS rows); two payloads; three bars each (no gRPC rows).
        assert_eq!(chart.panels.len(), 1);
        let panel = &chart.panels[0];
        assert_eq!(panel.groups, ["64 B", "64 KiB"]);
        let names: Vec<&str> = panel.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "bleRPC E2E",
                "bleRPC plain",
                "bare + AES-GCM (the cipher alone)"
            ]
        );
        assert_eq!(panel.series[0].values, [Some(1.4), Some(1.4)]);
        let svg = chart.svg();
        assert!(crate::plot::tests::texts(&svg).contains(&"1.40"), "{svg}");
        assert!(svg.contains("(target ≤ 1.15×)"), "{svg}");
        assert!(!svg.contains("TLS:"), "{svg}");
        assert!(crate::plot::tests::texts(&svg).contains(&"64 KiB"), "{svg}");
        crate::plot::tests::assert_inside(&svg);
        // Nothing to compare with: no chart.
        report.rows.retain(|r| r.key.variant == Variant::BlerpcE2e);
        for r in &mut report.rows {
            r.p50_vs_bare = None;
        }
        assert!(super::svg(&report, &Targets::default()).is_none());
    }
}
