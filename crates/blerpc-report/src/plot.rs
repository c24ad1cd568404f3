//! A report's plots as SVG (plotters, the lab's plotting crate): the median latency and the
//! failures of each second over the run, and the latency distribution of each call kind
//! (median, p95, p99 and the slowest call).

use plotters::prelude::*;

use crate::schema::Report;

const BLUE: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const RED: RGBColor = RGBColor(0xd6, 0x27, 0x28);
/// The quantiles' shades, median first.
const SHADES: [RGBColor; 4] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x6b, 0xae, 0xd6),
    RGBColor(0x9e, 0xca, 0xe1),
    RGBColor(0xc6, 0xdb, 0xef),
];

/// A plot that could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("drawing the {what} plot: {reason}")]
pub struct PlotError {
    /// Which plot.
    pub what: &'static str,
    /// What plotters said.
    pub reason: String,
}

fn failed(what: &'static str) -> impl Fn(String) -> PlotError {
    move |reason| PlotError { what, reason }
}

/// Median latency per second (line) and failed calls per second (red marks on the axis).
pub fn latency_over_time(r: &Report) -> Result<String, PlotError> {
    let err = failed("latency over time");
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (900, 360)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let seconds = r.timeline.len().max(1) as f64;
        let top = r
            .timeline
            .iter()
            .filter_map(|s| s.p50_ms.value().copied())
            .fold(1.0f64, f64::max)
            * 1.15;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "median latency per second (failed calls in red)",
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..seconds, 0f64..top)
            .map_err(|e| err(e.to_string()))?;
        chart
            .configure_mesh()
            .x_desc("seconds into the run")
            .y_desc("p50 ms")
            .draw()
            .map_err(|e| err(e.to_string()))?;
        let points: Vec<(f64, f64)> = r
            .timeline
            .iter()
            .filter_map(|s| s.p50_ms.value().map(|ms| (f64::from(s.t_s) + 0.5, *ms)))
            .collect();
        chart
            .draw_series(LineSeries::new(points, BLUE.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?;
        let failures = r
            .timeline
            .iter()
            .filter(|s| s.failed > 0)
            .map(|s| Circle::new((f64::from(s.t_s) + 0.5, 0.0), 4, RED.filled()));
        chart
            .draw_series(failures)
            .map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(out)
}

/// Per call kind, bars for the median, p95, p99 and the slowest call.
pub fn latency_distribution(r: &Report) -> Result<String, PlotError> {
    let err = failed("latency distribution");
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (900, 360)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let kinds: Vec<(&String, [f64; 4])> = r
            .latency
            .iter()
            .map(|(k, l)| (k, [l.p50_ms, l.p95_ms, l.p99_ms, l.max_ms]))
            .collect();
        let top = kinds
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .fold(1.0f64, f64::max)
            * 1.15;
        let n = kinds.len().max(1) as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "latency by call: p50, p95, p99 and max, dark to light",
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..n, 0f64..top)
            .map_err(|e| err(e.to_string()))?;
        let names: Vec<String> = kinds.iter().map(|(k, _)| (*k).clone()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(names.len() * 2 + 1)
            .x_label_formatter(&|x| {
                let i = x.floor() as usize;
                if (x - x.floor() - 0.5).abs() < 0.26 {
                    names.get(i).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc("ms")
            .draw()
            .map_err(|e| err(e.to_string()))?;
        let bars = kinds.iter().enumerate().flat_map(|(i, (_, values))| {
            values.iter().enumerate().map(move |(j, v)| {
                let x0 = i as f64 + 0.1 + 0.2 * j as f64;
                Rectangle::new([(x0, 0.0), (x0 + 0.18, *v)], SHADES[j].filled())
            })
        });
        chart.draw_series(bars).map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(out)
}
