//! The one-call-at-a-time rows as an SVG chart (`blerpc-bench loopback --svg FILE`): one panel
//! per transport, one group of bars per payload, each bar a variant's p50 over the bare
//! baseline's (median of the per-repetition ratios, as the tables show them), with the bare
//! baseline at 1 and the target as a dashed line. The sealed baseline's bar is the cipher's own
//! share of the ratio, which no E2E-encrypted exchange can go below.

use std::fmt::Write as _;

use super::measure::{Transport, Variant};
use super::report::{Report, Row, Targets, size};

const PANEL_W: f64 = 460.0;
const PANEL_H: f64 = 300.0;
const LEFT: f64 = 52.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 40.0;
const LEGEND_H: f64 = 70.0;

/// The bars of a group, in order: variant, label, fill.
const BARS: [(Variant, &str, &str); 3] = [
    (Variant::BlerpcE2e, "bleRPC E2E", "#1f77b4"),
    (Variant::BlerpcPlain, "bleRPC plain", "#9ecae1"),
    (
        Variant::BareAead,
        "bare + AES-GCM (the cipher alone)",
        "#ff9f1c",
    ),
];

/// Per payload, each bar's ratio (in [`BARS`] order; `None`: not measured).
type Groups = Vec<(usize, Vec<Option<f64>>)>;

use crate::plot::svg_escape as esc;

/// The one-call-at-a-time rows of `transport`, by payload.
fn rows(report: &Report, transport: Transport) -> Groups {
    let mut payloads: Vec<usize> = report
        .rows
        .iter()
        .filter(|r| r.key.transport == transport && r.key.clients == 1 && r.key.window == 1)
        .map(|r| r.key.payload)
        .collect();
    payloads.sort_unstable();
    payloads.dedup();
    payloads
        .into_iter()
        .map(|payload| {
            let ratio = |variant: Variant| {
                report
                    .rows
                    .iter()
                    .find(|r: &&Row| {
                        r.key.transport == transport
                            && r.key.clients == 1
                            && r.key.window == 1
                            && r.key.payload == payload
                            && r.key.variant == variant
                    })
                    .and_then(|r| r.p50_vs_bare)
            };
            (payload, BARS.iter().map(|(v, _, _)| ratio(*v)).collect())
        })
        .collect()
}

/// The chart, or `None` when the run has no ratio to draw (no bare rows).
pub fn svg(report: &Report, targets: &Targets) -> Option<String> {
    let panels: Vec<(Transport, Groups, f64)> = [
        (Transport::Tcp, targets.vs_bare_tcp),
        (Transport::Tls, targets.vs_bare_tls),
    ]
    .into_iter()
    .map(|(t, target)| (t, rows(report, t), target))
    .filter(|(_, rows, _)| rows.iter().any(|(_, v)| v.iter().any(Option::is_some)))
    .collect();
    if panels.is_empty() {
        return None;
    }
    let width = PANEL_W * panels.len() as f64;
    let height = PANEL_H + LEGEND_H;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    s.push_str(r##"<rect width="100%" height="100%" fill="#fff"/>"##);
    s.push('\n');
    // The axis is shared: from below the lowest bar (at most 0.8; bars start at the bare
    // baseline's 1) to above the tallest, in steps of a "nice" size.
    let values = || {
        panels.iter().flat_map(|(_, rows, target)| {
            rows.iter()
                .flat_map(|(_, v)| v.iter().flatten().copied())
                .chain([*target])
        })
    };
    let (lo, hi) = (
        values().fold(0.8f64, f64::min),
        values().fold(1.2f64, f64::max),
    );
    let step = [0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0]
        .into_iter()
        .find(|s| (hi - lo) / s <= 8.0)
        .unwrap_or(10.0);
    let axis = Axis {
        min: (lo / step).floor() * step,
        max: (hi / step).ceil() * step,
        step,
    };
    for (i, (transport, rows, target)) in panels.iter().enumerate() {
        panel(&mut s, PANEL_W * i as f64, *transport, rows, *target, axis);
    }
    let y = PANEL_H + 14.0;
    for (i, (_, label, fill)) in BARS.iter().enumerate() {
        let x = 12.0 + 230.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{}" width="12" height="12" fill="{fill}"/><text x="{}" y="{}">{}</text>"#,
            y - 10.0,
            x + 17.0,
            y,
            esc(label)
        );
    }
    let _ = writeln!(
        s,
        r##"<text x="12" y="{}">p50 ÷ bare p50, one call at a time (the ratio per repetition, then the median); 1 = the bare echo; red dashes: the target</text>"##,
        y + 22.0
    );
    let _ = writeln!(
        s,
        r##"<text x="12" y="{}">{}</text>"##,
        y + 40.0,
        esc(&format!(
            "medians of {} interleaved repetition{}; blerpc-bench loopback ({})",
            report.reps,
            if report.reps == 1 { "" } else { "s" },
            if report.release_build {
                "release build"
            } else {
                "DEBUG build: not representative"
            }
        ))
    );
    s.push_str("</svg>\n");
    Some(s)
}

/// The value axis shared by the panels.
#[derive(Clone, Copy, Debug)]
struct Axis {
    min: f64,
    max: f64,
    step: f64,
}

fn panel(
    s: &mut String,
    x0: f64,
    transport: Transport,
    rows: &[(usize, Vec<Option<f64>>)],
    target: f64,
    axis: Axis,
) {
    let (left, right) = (x0 + LEFT, x0 + PANEL_W - RIGHT);
    let (top, bottom) = (TOP, PANEL_H - BOTTOM);
    let span = (axis.max - axis.min).max(f64::EPSILON);
    let y = |v: f64| bottom - (v.clamp(axis.min, axis.max) - axis.min) / span * (bottom - top);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" font-size="13" font-weight="bold">{} — bleRPC p50 over the bare echo (target ≤ {target:.2}×)</text>"#,
        left,
        transport.label()
    );
    // Grid lines, one per step.
    let lines = (span / axis.step).round() as usize;
    for i in 0..=lines {
        let v = axis.min + axis.step * i as f64;
        let yy = y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{right}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{v:.2}×</text>"##,
            left - 4.0,
            yy + 4.0
        );
    }
    let one = y(1.0);
    let _ = writeln!(
        s,
        r##"<line x1="{left}" y1="{one:.1}" x2="{right}" y2="{one:.1}" stroke="#333"/>"##
    );
    let group_w = (right - left) / rows.len().max(1) as f64;
    let bar_w = (group_w * 0.8) / BARS.len() as f64;
    for (g, (payload, ratios)) in rows.iter().enumerate() {
        let gx = left + group_w * g as f64 + group_w * 0.1;
        for (b, ratio) in ratios.iter().enumerate() {
            let Some(r) = ratio else { continue };
            let fill = BARS.get(b).map_or("#999", |(_, _, f)| f);
            let x = gx + bar_w * b as f64;
            let (y1, y2) = (y(*r).min(one), y(*r).max(one));
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{y1:.1}" width="{:.1}" height="{:.1}" fill="{fill}"><title>{r:.2}×</title></rect><text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="9">{r:.2}</text>"#,
                bar_w - 2.0,
                (y2 - y1).max(0.5),
                x + (bar_w - 2.0) / 2.0,
                y(*r) - 3.0
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            gx + group_w * 0.4,
            bottom + 16.0,
            esc(&size(*payload))
        );
    }
    let t = y(target);
    let _ = writeln!(
        s,
        r##"<line x1="{left}" y1="{t:.1}" x2="{right}" y2="{t:.1}" stroke="#d62728" stroke-dasharray="6 4"/>"##
    );
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
        let svg = svg(&report, &Targets::default()).unwrap();
        // Two payloads × three bars; one panel (no TLS rows), one target line.
        assert_eq!(svg.matches("<title>").count(), 6, "{svg}");
        assert!(svg.contains("<title>1.40×</title>"), "{svg}");
        assert!(svg.contains("(target ≤ 1.15×)"), "{svg}");
        assert!(!svg.contains("TLS —"), "{svg}");
        assert!(svg.contains(">64 KiB<"), "{svg}");
        // Every bar and label inside the drawing.
        let height: f64 = svg
            .split("height=\"")
            .nth(1)
            .and_then(|h| h.split('"').next())
            .unwrap()
            .parse()
            .unwrap();
        for part in svg.split(" y=\"").skip(1) {
            let v: f64 = part.split('"').next().unwrap().parse().unwrap();
            assert!((0.0..=height).contains(&v), "y={v} outside 0..{height}");
        }
        // Nothing to compare with: no chart.
        report.rows.retain(|r| r.key.variant == Variant::BlerpcE2e);
        for r in &mut report.rows {
            r.p50_vs_bare = None;
        }
        assert!(super::svg(&report, &Targets::default()).is_none());
    }
}
