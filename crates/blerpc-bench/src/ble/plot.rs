//! The per-platform comparison as an SVG chart: one panel per benchmark, one group of bars
//! per platform (blerpc-rs on the simulated link, the published figure), and the physical limit
//! as a dashed mark.

use std::fmt::Write as _;

use crate::reference::{self, BENCHMARKS};

use super::ProfileRun;

const PANEL_W: f64 = 400.0;
const PANEL_H: f64 = 270.0;
const COLS: usize = 3;
const LEFT: f64 = 52.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 48.0;

use crate::plot::svg_escape as esc;

/// A "nice" axis maximum and step for values up to `max`.
fn axis(max: f64) -> (f64, f64) {
    let max = if max > 0.0 { max * 1.1 } else { 1.0 };
    let raw = max / 4.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    ((max / step).ceil() * step, step)
}

/// The chart for these runs.
pub fn svg(runs: &[ProfileRun]) -> String {
    let rows = BENCHMARKS.len().div_ceil(COLS);
    let width = PANEL_W * COLS as f64;
    let height = PANEL_H * rows as f64 + 40.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        s,
        r##"<rect width="100%" height="100%" fill="#fff"/><text x="10" y="{}" font-size="12">blue: blerpc-rs (simulated link) · grey: published (nRF54L15 DK, CI 15 ms, MTU 247) · red dashes: physical limit (full events); lower is better</text>"##,
        height - 14.0
    );
    for (i, name) in BENCHMARKS.iter().enumerate() {
        let x0 = PANEL_W * (i % COLS) as f64;
        let y0 = PANEL_H * (i / COLS) as f64;
        panel(&mut s, runs, name, x0, y0);
    }
    s.push_str("</svg>\n");
    s
}

fn panel(s: &mut String, runs: &[ProfileRun], name: &str, x0: f64, y0: f64) {
    let per = reference::per(name);
    let find = |r: &ProfileRun, list: &[(&'static str, Result<reference::BenchResult, String>)]| {
        list.iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, x)| x.as_ref().ok().map(|b| b.ms))
            .filter(|_| !r.name.is_empty())
    };
    let values: Vec<(Option<f64>, Option<f64>, Option<f64>)> = runs
        .iter()
        .map(|r| {
            let pubd = r
                .compare
                .as_deref()
                .and_then(|c| reference::published_one(c, name))
                .map(|p| p.ms);
            (find(r, &r.benchmarks), pubd, find(r, &r.limit))
        })
        .collect();
    let max = values
        .iter()
        .flat_map(|(a, b, c)| [*a, *b, *c])
        .flatten()
        .fold(0.0, f64::max);
    let (top, step) = axis(max);
    let plot_w = PANEL_W - LEFT - 16.0;
    let plot_h = PANEL_H - TOP - BOTTOM;
    let y = |v: f64| y0 + TOP + plot_h * (1.0 - v / top);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" font-size="13" font-weight="bold">{} ({})</text>"#,
        x0 + LEFT,
        y0 + 20.0,
        esc(name),
        per.unit()
    );
    let mut v = 0.0;
    while v <= top + step / 2.0 {
        let yy = y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 + LEFT,
            x0 + LEFT + plot_w,
            x0 + LEFT - 4.0,
            yy + 4.0,
            if step < 1.0 {
                format!("{v:.1}")
            } else {
                format!("{v:.0}")
            }
        );
        v += step;
    }
    let n = runs.len().max(1) as f64;
    let group = plot_w / n;
    let bar = (group * 0.32).min(28.0);
    for (k, (r, (ours, pubd, limit))) in runs.iter().zip(&values).enumerate() {
        let gx = x0 + LEFT + group * k as f64 + group / 2.0;
        let mut draw = |x: f64, val: f64, color: &str| {
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="{bar:.1}" height="{:.1}" fill="{color}"><title>{val:.2}</title></rect>"#,
                x,
                y(val),
                (y(0.0) - y(val)).max(0.0)
            );
        };
        if let Some(o) = ours {
            draw(gx - bar - 1.0, *o, "#2b6cb0");
        }
        if let Some(p) = pubd {
            draw(gx + 1.0, *p, "#a0aec0");
        }
        if let Some(l) = limit {
            let _ = writeln!(
                s,
                r##"<line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#c53030" stroke-width="2" stroke-dasharray="4 2"/>"##,
                gx - bar - 4.0,
                gx + bar + 4.0,
                y(*l),
                y(*l)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{gx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            y(0.0) + 14.0,
            esc(&r.name)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_steps_are_round() {
        assert_eq!(axis(141.3), (200.0, 50.0));
        assert_eq!(axis(3.3), (4.0, 1.0));
        assert_eq!(axis(0.0), (1.0, 0.25));
    }
}
