//! The per-platform comparison as a chart: one panel per benchmark, one group of bars per
//! platform (blerpc-rs on the simulated link, the published figure), and the physical limit as
//! a dashed mark.

use crate::plot::{BLUE, Chart, GREY, Mark, Panel, RED, Series};
use crate::reference::{self, BENCHMARKS};

use super::ProfileRun;

/// The chart for these runs.
pub fn chart(runs: &[ProfileRun]) -> Chart {
    Chart {
        panels: BENCHMARKS.iter().map(|name| panel(runs, name)).collect(),
        columns: 3,
        panel_size: (400, 270),
        notes: vec![
            "published: nRF54L15 DK, connection interval 15 ms, MTU 247; \
             the limit: the same benchmark with full connection events; lower is better"
                .into(),
        ],
    }
}

/// The chart as SVG.
pub fn svg(runs: &[ProfileRun]) -> String {
    chart(runs).svg()
}

fn panel(runs: &[ProfileRun], name: &str) -> Panel {
    let ms = |list: &[(&'static str, Result<reference::BenchResult, String>)]| {
        list.iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, x)| x.as_ref().ok().map(|b| b.ms))
    };
    let published = |r: &ProfileRun| {
        r.compare
            .as_deref()
            .and_then(|c| reference::published_one(c, name))
            .map(|p| p.ms)
    };
    Panel {
        title: format!("{name} ({})", reference::per(name).unit()),
        groups: runs.iter().map(|r| r.name.clone()).collect(),
        series: vec![
            Series {
                name: "blerpc-rs (simulated link)".into(),
                color: BLUE,
                values: runs.iter().map(|r| ms(&r.benchmarks)).collect(),
            },
            Series {
                name: "published".into(),
                color: GREY,
                values: runs.iter().map(published).collect(),
            },
        ],
        marks: vec![Mark::PerGroup {
            name: "physical limit".into(),
            color: RED,
            values: runs.iter().map(|r| ms(&r.limit)).collect(),
        }],
        base: 0.0,
        tick_suffix: "",
        value_labels: true,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use super::*;
    use crate::reference::{BenchResult, per};

    fn result(name: &'static str, ms: f64) -> (&'static str, Result<BenchResult, String>) {
        let r = BenchResult {
            name,
            count: 10,
            elapsed: Duration::from_secs_f64(ms / 100.0),
            ms,
            per: per(name),
            kb_per_s: None,
            reps: 1,
            ms_range: (ms, ms),
        };
        (name, Ok(r))
    }

    #[test]
    fn a_panel_per_benchmark_with_ours_the_published_and_the_limit() {
        let mut run = ProfileRun::new("macos", "macOS");
        run.compare = Some("macos".into());
        run.benchmarks = BENCHMARKS.iter().map(|b| result(b, 31.25)).collect();
        run.limit = BENCHMARKS.iter().map(|b| result(b, 15.0)).collect();
        let mut failed = ProfileRun::new("web", "Web");
        failed.benchmarks = vec![(BENCHMARKS[0], Err("timed out".into()))];
        let chart = chart(&[run, failed]);
        assert_eq!(chart.panels.len(), BENCHMARKS.len());
        let echo = chart
            .panels
            .iter()
            .find(|p| p.title == "echo_roundtrip (ms/call)")
            .unwrap();
        assert_eq!(echo.groups, ["macos", "web"]);
        assert_eq!(echo.series[0].values, [Some(31.25), None]);
        let published = reference::published_one("macos", "echo_roundtrip")
            .unwrap()
            .ms;
        assert_eq!(echo.series[1].values, [Some(published), None]);
        let svg = chart.svg();
        assert!(crate::plot::tests::texts(&svg).contains(&"31.2"), "{svg}");
        assert!(
            crate::plot::tests::texts(&svg).contains(&"counter_stream (ms/item)"),
            "{svg}"
        );
        crate::plot::tests::assert_inside(&svg);
    }
}
