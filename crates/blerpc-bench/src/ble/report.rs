//! The tables and the JSON of `blerpc-bench ble`.

use std::fmt::Write as _;
use std::time::Duration;

use crate::reference::{self, BENCHMARKS, BenchResult, Published};
use blerpc_demo::functional::TESTS;
use serde_json::{Value, json};

use super::{BleArgs, ProfileRun};
use crate::table::{Align, Table, wrap, wrap_hanging};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn fmt_ms(d: Duration) -> String {
    let v = ms(d);
    if v.fract() == 0.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.2} ms")
    }
}

/// One line describing a simulated link.
pub fn describe_link(run: &ProfileRun) -> String {
    let Some(p) = run.link else {
        return "real link".into();
    };
    let mut s = format!("CI {}", fmt_ms(p.conn_interval));
    if let (Some(init), Some(after)) = (p.initial_interval, run.interval_updated_after) {
        s += &format!(" ({} until {:.2} s)", fmt_ms(init), after.as_secs_f64());
    }
    s += &format!(
        ", ATT MTU {}, {}, event budget {}",
        p.att_mtu,
        p.phy.name(),
        fmt_ms(p.event_budget.min(p.conn_interval))
    );
    match p.central_writes_per_event {
        Some(n) => s += &format!(", {n} writes/event"),
        None => s += ", writes/event: budget-bound",
    }
    if p.central_host_delay.max > Duration::ZERO {
        s += &format!(
            ", host delay {}–{}",
            fmt_ms(p.central_host_delay.min),
            fmt_ms(p.central_host_delay.max)
        );
    }
    if p.loss > 0.0 {
        s += &format!(", loss {}", p.loss);
    }
    s
}

fn published_for(run: &ProfileRun, name: &str) -> Option<Published> {
    run.compare
        .as_deref()
        .and_then(|c| reference::published_one(c, name))
}

fn limit_for<'a>(run: &'a ProfileRun, name: &str) -> Option<&'a BenchResult> {
    run.limit
        .iter()
        .find(|(n, _)| *n == name)
        .and_then(|(_, r)| r.as_ref().ok())
}

/// Ours over published, as times (> 1: slower than published).
pub fn ratio(ours: &BenchResult, published: &Published) -> f64 {
    ours.ms / published.ms
}

/// A ratio with two decimals, or three significant digits below 0.1 (a fast link over BLE's
/// figures: 0.00149, never 0.00).
pub fn fmt_ratio(x: f64) -> String {
    if x >= 0.1 || x == 0.0 || !x.is_finite() {
        format!("{x:.2}")
    } else {
        reference::num(x)
    }
}

/// The measured result as a percentage of the physical limit (100% = full events).
pub fn percent_of_limit(ours: &BenchResult, limit: &BenchResult) -> f64 {
    100.0 * limit.ms / ours.ms
}

/// The per-profile table: each benchmark with the published figure, the ratio, the physical
/// limit and the percentage of it.
pub fn render_profile(run: &ProfileRun) -> String {
    let mut out = String::new();
    out.push_str(&wrap_hanging(
        &format!("== {} [{}]: {}", run.label, run.name, describe_link(run)),
        "   ",
    ));
    if let Some(e) = &run.error {
        let _ = writeln!(out, "   could not run: {e}");
    }
    let failed: Vec<_> = run.functional.iter().filter(|t| !t.passed()).collect();
    let _ = writeln!(
        out,
        "   functional tests: {}/{} {}",
        run.passed(),
        TESTS.len(),
        if failed.is_empty() && run.passed() == TESTS.len() {
            "PASS"
        } else {
            "FAIL"
        }
    );
    for t in failed {
        let _ = writeln!(
            out,
            "     {}: {}",
            t.name,
            t.outcome.as_ref().err().map_or("", |e| e.as_str())
        );
    }
    if run.benchmarks.is_empty() {
        return out;
    }
    let reps = run
        .benchmarks
        .iter()
        .find_map(|(_, r)| r.as_ref().ok().map(|r| r.reps))
        .unwrap_or(1);
    let mut table = Table::new([
        if reps > 1 {
            format!("benchmark (mean of {reps})")
        } else {
            "benchmark".into()
        },
        "blerpc-rs".into(),
        match &run.compare {
            Some(c) => format!("published ({c})"),
            None => "published".into(),
        },
        "ratio".into(),
        "physical limit".into(),
        "%limit".into(),
    ])
    .align(3, Align::Right)
    .align(5, Align::Right);
    for (name, r) in &run.benchmarks {
        let ours = match r {
            Ok(r) => r,
            Err(e) => {
                table.row([name.to_string(), format!("FAILED: {e}")]);
                continue;
            }
        };
        let per = reference::per(name);
        let pubd = published_for(run, name);
        let limit = limit_for(run, name);
        table.row([
            name.to_string(),
            ours.display(),
            pubd.map_or("-".into(), |p| p.display(per)),
            pubd.map_or("-".into(), |p| fmt_ratio(ratio(ours, &p))),
            limit.map_or("-".into(), |l| {
                format!("{} {}", reference::num(l.ms), l.per.unit())
            }),
            limit.map_or("-".into(), |l| format!("{:.0}%", percent_of_limit(ours, l))),
        ]);
    }
    out.push_str(&table.plain("   "));
    out.push_str(&wrap_hanging(
        "   ratio: blerpc-rs's time per call or item ÷ the published one (below 1: faster; on \
         throughput rows too, whose KB/s is the inverse); %limit: the physical limit's time ÷ \
         blerpc-rs's (100%: as fast as the link allows)",
        "   ",
    ));
    if let Some(per_call) = run.host_time_per_call() {
        let mut line = format!(
            "   host CPU per call: {:.1} µs",
            per_call.as_secs_f64() * 1e6
        );
        if let Some(p) = run.link {
            let share = per_call.as_secs_f64() / p.conn_interval.as_secs_f64() * 100.0;
            let _ = write!(
                line,
                " = {share:.3}% of a connection interval (target < 1%: {})",
                if share < 1.0 { "PASS" } else { "MISS" }
            );
        }
        let _ = write!(
            line,
            "; {} calls, {:.2} s CPU, {:.2} s real, for {:.1} s of link time",
            run.calls,
            run.cpu.as_secs_f64(),
            run.real.as_secs_f64(),
            run.link_time.as_secs_f64()
        );
        out.push_str(&wrap_hanging(&line, "   "));
    }
    if let Some(s) = &run.stats {
        let _ = writeln!(
            out,
            "   link: {} events, {} + {} data packets, {} lost packets, {} dropped writes{}",
            s.events,
            s.packets[0],
            s.packets[1],
            s.lost_packets,
            s.dropped_writes,
            s.disconnected
                .as_ref()
                .map_or(String::new(), |d| format!(", {d}"))
        );
    }
    out
}

/// The publication's table shape: one row per benchmark, one column per platform; under each
/// of our cells the published one and the ratio. Then how many cells are within ±10%.
pub fn render_comparison(runs: &[ProfileRun]) -> String {
    let mut out = String::from(
        "ms per call or per item; under each: the published figure and the ratio (time ÷ \
         published)\n",
    );
    let mut table = Table::new(
        std::iter::once("benchmark".to_string()).chain(runs.iter().map(|r| r.name.clone())),
    );
    for i in 1..=runs.len() {
        table = table.align(i, Align::Right);
    }
    let (mut within, mut cells, mut worst) = (0, 0, 0.0f64);
    for name in BENCHMARKS {
        let result = |r: &ProfileRun| {
            r.benchmarks
                .iter()
                .find(|(n, _)| *n == name)
                .and_then(|(_, x)| x.as_ref().ok())
                .cloned()
        };
        let mut ours = vec![format!("{name} ({})", reference::per(name).unit())];
        let mut pubd = vec!["  published".to_string()];
        let mut rat = vec!["  ratio".to_string()];
        for r in runs {
            let o = result(r);
            let p = published_for(r, name);
            ours.push(o.as_ref().map_or("FAILED".into(), |o| reference::num(o.ms)));
            pubd.push(p.map_or("-".into(), |p| reference::num(p.ms)));
            rat.push(match (&o, &p) {
                (Some(o), Some(p)) => {
                    let x = ratio(o, p);
                    cells += 1;
                    worst = worst.max((x - 1.0).abs());
                    if (x - 1.0).abs() <= 0.10 {
                        within += 1;
                    }
                    format!("{x:.3}")
                }
                _ => "-".into(),
            });
        }
        table.row(ours);
        table.row(pubd);
        table.row(rat);
    }
    out.push_str(&table.plain(""));
    if cells > 0 && runs.iter().all(matches_publication) {
        let _ = writeln!(
            out,
            "published cells reproduced within ±10%: {within}/{cells} (largest deviation {:.1}%)",
            worst * 100.0
        );
    } else if cells > 0 {
        out.push_str(&wrap(
            "the link differs from the published conditions (CI 15 ms, ATT MTU 247, LE 2M, no \
             loss): the published figures are there for reference, the ratios show the change",
        ));
    }
    let calls: u64 = runs.iter().map(|r| r.calls).sum();
    let real: Duration = runs.iter().map(|r| r.real).sum();
    let link: Duration = runs.iter().map(|r| r.link_time).sum();
    out += &wrap(&format!(
        "functional tests: {} (all PASS: {}); {} calls, {:.1} s of link time simulated in {:.2} s",
        runs.iter()
            .map(|r| format!("{} {}/{}", r.name, r.passed(), TESTS.len()))
            .collect::<Vec<_>>()
            .join(", "),
        if runs.iter().all(ProfileRun::ok) {
            "yes"
        } else {
            "NO"
        },
        calls,
        link.as_secs_f64(),
        real.as_secs_f64()
    ));
    out
}

/// Whether a simulated run used the published link conditions: CI 15 ms, ATT MTU 247, LE 2M,
/// no loss (a real link is compared as it is).
pub fn matches_publication(run: &ProfileRun) -> bool {
    run.link.is_none_or(|p| {
        p.conn_interval == Duration::from_millis(15)
            && p.att_mtu == 247
            && p.phy == blerpc_sim::Phy::Le2M
            && p.loss == 0.0
    })
}

/// One benchmark result as JSON (ms per call or item, count, KB/s where it applies).
pub fn result_json(r: &BenchResult) -> Value {
    let per_key = match r.per {
        reference::Per::Call => "ms_per_call",
        reference::Per::Item => "ms_per_item",
    };
    let mut v = json!({
        per_key: r.ms,
        "count": r.count,
        "elapsed_ms": ms(r.elapsed),
        "reps": r.reps,
        "ms_min": r.ms_range.0,
        "ms_max": r.ms_range.1,
    });
    if let Some(kb) = r.kb_per_s {
        v["kb_per_s"] = json!(kb);
    }
    v
}

/// Machine-readable results: each benchmark under its reference name with ms per call or per
/// item, KB/s where it applies, the published figure, the ratio, the limit, and the link.
pub fn to_json(runs: &[ProfileRun], args: &BleArgs) -> Value {
    let runs: Vec<Value> = runs
        .iter()
        .map(|run| {
            let mut benches = serde_json::Map::new();
            for (name, r) in &run.benchmarks {
                let v = match r {
                    Ok(r) => {
                        let mut v = result_json(r);
                        if let Some(p) = published_for(run, name) {
                            v["published"] = json!({
                                "ms": p.ms, "kb_per_s": p.kb_per_s, "total_ms": p.total_ms,
                            });
                            v["ratio"] = json!(ratio(r, &p));
                        }
                        if let Some(l) = limit_for(run, name) {
                            v["limit"] = result_json(l);
                            v["percent_of_limit"] = json!(percent_of_limit(r, l));
                        }
                        v
                    }
                    Err(e) => json!({ "error": e }),
                };
                benches.insert((*name).to_string(), v);
            }
            let link = run.link.map(|p| {
                json!({
                    "conn_interval_ms": ms(p.conn_interval),
                    "initial_interval_ms": p.initial_interval.map(ms),
                    "interval_updated_after_ms": run.interval_updated_after.map(ms),
                    "interval_at_benchmarks_ms": run.interval_at_benchmarks.map(ms),
                    "att_mtu": p.att_mtu,
                    "data_length": p.data_length,
                    "phy": p.phy.name(),
                    "event_budget_ms": ms(p.event_budget.min(p.conn_interval)),
                    "central_writes_per_event": p.central_writes_per_event,
                    "central_host_delay_ms": [ms(p.central_host_delay.min), ms(p.central_host_delay.max)],
                    "loss": p.loss,
                    "seed": p.seed,
                })
            });
            json!({
                "profile": run.name,
                "label": run.label,
                "compare": run.compare,
                "published_conditions": matches_publication(run),
                "link": link,
                "functional": run.functional.iter().map(|t| json!({
                    "name": t.name,
                    "pass": t.passed(),
                    "error": t.outcome.as_ref().err(),
                    "ms": ms(t.elapsed),
                })).collect::<Vec<_>>(),
                "benchmarks": benches,
                "calls": run.calls,
                "real_ms": ms(run.real),
                "cpu_ms": ms(run.cpu),
                "link_time_ms": ms(run.link_time),
                "host_us_per_call": run.host_time_per_call().map(|d| d.as_secs_f64() * 1e6),
                "error": run.error,
            })
        })
        .collect();
    json!({
        "suite": "ble",
        "method": "benchmarks.md §1: 12 functional tests, then the benchmarks 5.5 s after connect, E2E encryption on",
        "reps": args.reps,
        "runs": runs,
    })
}
