//! The reference benchmarks (`benchmarks.md` §1), with the reference's exact parameters,
//! warm-ups and formulas, run over any connected client; and the published figures (§1.1).
//!
//! | benchmark | action | metric |
//! |---|---|---|
//! | `flash_read_throughput` | warm-up `flash_read(0, 8192)`, then 10 × `flash_read(0, 8192)` | KB/s = 81920/1024/elapsed; ms/call |
//! | `flash_read_overhead` | warm-up `flash_read(0, 1)`, then 20 × `flash_read(0, 1)` | ms/call |
//! | `echo_roundtrip` | warm-up `echo("x")`, then 50 × `echo("hello")` | ms/call |
//! | `data_write_throughput` | 200 bytes `i % 256`; warm-up, then 20 × `data_write` | KB/s = 4000/1024/elapsed; ms/call |
//! | `counter_stream` | `counter_stream(count = 20)`, no warm-up | ms/item = elapsed/20 |
//! | `counter_upload` | 20 × `{seq: i, value: 10 i}`, no warm-up | ms/item = elapsed/20 |
//!
//! "KB" is 1024 bytes of application payload. Time is `tokio::time::Instant`: virtual time on
//! a paused runtime (the simulated link), real time otherwise.

use std::time::Duration;

use tokio::time::Instant;

use blerpc_demo::pb;

/// The reference benchmark names, in the order the runners use.
pub const BENCHMARKS: [&str; 6] = [
    "flash_read_throughput",
    "flash_read_overhead",
    "echo_roundtrip",
    "data_write_throughput",
    "counter_stream",
    "counter_upload",
];

/// What a benchmark's `ms` is per.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    /// Milliseconds per call.
    Call,
    /// Milliseconds per stream item.
    Item,
}

impl Per {
    /// `ms/call` or `ms/item`.
    pub fn unit(self) -> &'static str {
        match self {
            Per::Call => "ms/call",
            Per::Item => "ms/item",
        }
    }
}

/// One benchmark's result.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchResult {
    /// The reference name.
    pub name: &'static str,
    /// Timed calls (or stream items).
    pub count: u32,
    /// Total timed duration.
    pub elapsed: Duration,
    /// Milliseconds per call or per item.
    pub ms: f64,
    /// What `ms` is per.
    pub per: Per,
    /// KB/s (1024-byte KB of application payload) for the throughput benchmarks.
    pub kb_per_s: Option<f64>,
    /// Repetitions this result is the mean of (1: the reference's single run).
    pub reps: u32,
    /// The fastest and slowest repetition's `ms`.
    pub ms_range: (f64, f64),
}

impl BenchResult {
    fn new(
        name: &'static str,
        count: u32,
        elapsed: Duration,
        per: Per,
        bytes: Option<u64>,
    ) -> Self {
        let secs = elapsed.as_secs_f64();
        BenchResult {
            name,
            count,
            elapsed,
            ms: secs * 1000.0 / f64::from(count),
            per,
            kb_per_s: bytes.map(|b| {
                if secs > 0.0 {
                    b as f64 / 1024.0 / secs
                } else {
                    f64::INFINITY
                }
            }),
            reps: 1,
            ms_range: (
                secs * 1000.0 / f64::from(count),
                secs * 1000.0 / f64::from(count),
            ),
        }
    }

    /// The mean of several runs of the same benchmark: total time over total calls, so KB/s
    /// and ms stay consistent. `None` for an empty slice.
    pub fn mean(runs: &[BenchResult]) -> Option<BenchResult> {
        let first = runs.first()?;
        let count: u32 = runs.iter().map(|r| r.count).sum();
        let elapsed: Duration = runs.iter().map(|r| r.elapsed).sum();
        let bytes = first.kb_per_s.map(|_| match first.name {
            "flash_read_throughput" => 81920 * runs.len() as u64,
            _ => 4000 * runs.len() as u64,
        });
        let mut r = BenchResult::new(first.name, count, elapsed, first.per, bytes);
        r.count = first.count;
        r.elapsed = elapsed / runs.len() as u32;
        r.reps = runs.len() as u32;
        let (lo, hi) = runs.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
            (lo.min(x.ms), hi.max(x.ms))
        });
        r.ms_range = (lo, hi);
        Some(r)
    }

    /// The result as the publication prints it: `56.6 KB/s, 141.3 ms/call`, `3.3 ms/item (66 ms)`.
    pub fn display(&self) -> String {
        fmt_cell(
            self.kb_per_s,
            self.ms,
            self.per,
            self.elapsed.as_secs_f64() * 1000.0,
        )
    }
}

/// A figure as the publication prints it (one decimal) from 1 up (none from 1000), and with
/// three significant digits below 1 (a link much faster than BLE: 0.0172, never 0.0).
pub fn num(v: f64) -> String {
    if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if !v.is_finite() || v == 0.0 || v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        let digits = (2 - v.abs().log10().floor() as i32).clamp(0, 9) as usize;
        format!("{v:.digits$}")
    }
}

/// Formats a cell like the publication's table.
pub fn fmt_cell(kb_per_s: Option<f64>, ms: f64, per: Per, total_ms: f64) -> String {
    let (kb, ms_s) = (kb_per_s.map(num), num(ms));
    match (kb, per) {
        (Some(kb), _) => format!("{kb} KB/s, {ms_s} {}", per.unit()),
        (None, Per::Item) if total_ms >= 1.0 => {
            format!("{ms_s} {} ({total_ms:.0} ms)", per.unit())
        }
        (None, Per::Item) => format!("{ms_s} {} ({} ms)", per.unit(), num(total_ms)),
        (None, Per::Call) => format!("{ms_s} {}", per.unit()),
    }
}

fn err(e: blerpc::Error) -> String {
    e.to_string()
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(what()) }
}

async fn flash_read(c: &pb::BlerpcClient, length: u32) -> Result<(), String> {
    let r = c
        .flash_read(pb::FlashReadRequest { address: 0, length })
        .await
        .map_err(err)?;
    check(r.data.len() == length as usize, || {
        format!("flash_read returned {} bytes, asked {length}", r.data.len())
    })
}

async fn echo(c: &pb::BlerpcClient, message: &str) -> Result<(), String> {
    let r = c
        .echo(pb::EchoRequest {
            message: message.into(),
        })
        .await
        .map_err(err)?;
    check(r.message == message, || "echo returned other text".into())
}

async fn data_write(c: &pb::BlerpcClient, data: &[u8]) -> Result<(), String> {
    let r = c
        .data_write(pb::DataWriteRequest {
            data: data.to_vec().into(),
        })
        .await
        .map_err(err)?;
    check(r.length as usize == data.len(), || {
        format!("data_write counted {}, sent {}", r.length, data.len())
    })
}

/// Runs one benchmark by its reference name.
pub async fn run_one(c: &pb::BlerpcClient, name: &'static str) -> Result<BenchResult, String> {
    match name {
        "flash_read_throughput" => {
            flash_read(c, 8192).await?;
            let t = Instant::now();
            for _ in 0..10 {
                flash_read(c, 8192).await?;
            }
            Ok(BenchResult::new(
                name,
                10,
                t.elapsed(),
                Per::Call,
                Some(81920),
            ))
        }
        "flash_read_overhead" => {
            flash_read(c, 1).await?;
            let t = Instant::now();
            for _ in 0..20 {
                flash_read(c, 1).await?;
            }
            Ok(BenchResult::new(name, 20, t.elapsed(), Per::Call, None))
        }
        "echo_roundtrip" => {
            echo(c, "x").await?;
            let t = Instant::now();
            for _ in 0..50 {
                echo(c, "hello").await?;
            }
            Ok(BenchResult::new(name, 50, t.elapsed(), Per::Call, None))
        }
        "data_write_throughput" => {
            let data: Vec<u8> = (0..200u32).map(|i| (i % 256) as u8).collect();
            data_write(c, &data).await?;
            let t = Instant::now();
            for _ in 0..20 {
                data_write(c, &data).await?;
            }
            Ok(BenchResult::new(
                name,
                20,
                t.elapsed(),
                Per::Call,
                Some(4000),
            ))
        }
        "counter_stream" => {
            let t = Instant::now();
            let items = c
                .counter_stream(pb::CounterStreamRequest { count: 20 })
                .await
                .map_err(err)?
                .collect_vec()
                .await
                .map_err(err)?;
            let elapsed = t.elapsed();
            check(items.len() == 20, || {
                format!("{} items, expected 20", items.len())
            })?;
            for (i, it) in (0u32..).zip(&items) {
                check(
                    it.seq == i && i64::from(it.value) == 10 * i64::from(i),
                    || format!("item {i} is seq={} value={}", it.seq, it.value),
                )?;
            }
            Ok(BenchResult::new(name, 20, elapsed, Per::Item, None))
        }
        "counter_upload" => {
            let items = (0..20u32).map(|i| pb::CounterUploadRequest {
                seq: i,
                value: (i * 10) as i32,
            });
            let t = Instant::now();
            let r = c.counter_upload(items).await.map_err(err)?;
            let elapsed = t.elapsed();
            check(r.received_count == 20, || {
                format!("received_count {}, sent 20", r.received_count)
            })?;
            Ok(BenchResult::new(name, 20, elapsed, Per::Item, None))
        }
        other => Err(format!("unknown benchmark {other}")),
    }
}

/// Runs every benchmark in order; a failed one is reported and the rest still run.
pub async fn run_all(c: &pb::BlerpcClient) -> Vec<(&'static str, Result<BenchResult, String>)> {
    run_all_reps(c, 1).await
}

/// Runs every benchmark `reps` times in a row (each with its warm-up) and reports the mean
/// ([`BenchResult::mean`]). A link with random delays (a real radio, or a simulated profile
/// with host jitter) makes one run of the 20-item stream a single sample of a random time;
/// the mean of several is what a table should compare. `reps = 1` is the reference's run.
pub async fn run_all_reps(
    c: &pb::BlerpcClient,
    reps: u32,
) -> Vec<(&'static str, Result<BenchResult, String>)> {
    run_all_reps_with(c, reps, |_, _| {}).await
}

/// [`run_all_reps`], calling `done(name, passed)` after each benchmark (a progress display).
pub async fn run_all_reps_with(
    c: &pb::BlerpcClient,
    reps: u32,
    mut done: impl FnMut(&'static str, bool),
) -> Vec<(&'static str, Result<BenchResult, String>)> {
    let mut out = Vec::with_capacity(BENCHMARKS.len());
    for name in BENCHMARKS {
        let mut runs = Vec::new();
        let mut failed = None;
        for _ in 0..reps.max(1) {
            match run_one(c, name).await {
                Ok(r) => runs.push(r),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let result = match failed {
            Some(e) => Err(e),
            None => BenchResult::mean(&runs).ok_or_else(|| "no runs".to_string()),
        };
        done(name, result.is_ok());
        out.push((name, result));
    }
    out
}

/// A published figure (`benchmarks.md` §1.1: nRF54L15 DK peripheral, E2E encryption, ATT MTU
/// 247, CI 15 ms).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Published {
    /// Milliseconds per call or per item.
    pub ms: f64,
    /// KB/s, for the throughput benchmarks.
    pub kb_per_s: Option<f64>,
    /// Total milliseconds, for the stream benchmarks (20 items).
    pub total_ms: Option<f64>,
}

impl Published {
    /// The figure as the publication prints it.
    pub fn display(&self, per: Per) -> String {
        fmt_cell(
            self.kb_per_s,
            self.ms,
            per,
            self.total_ms.unwrap_or(self.ms * 20.0),
        )
    }
}

const fn tp(kb: f64, ms: f64) -> Published {
    Published {
        ms,
        kb_per_s: Some(kb),
        total_ms: None,
    }
}
const fn call(ms: f64) -> Published {
    Published {
        ms,
        kb_per_s: None,
        total_ms: None,
    }
}
const fn item(ms: f64, total: f64) -> Published {
    Published {
        ms,
        kb_per_s: None,
        total_ms: Some(total),
    }
}

/// The publication's columns: the central platforms.
pub const PUBLISHED_PLATFORMS: [&str; 4] = ["macos", "ios", "android", "web"];

/// The published figures for `platform` (`macos`, `ios`, `android`, `web`), in [`BENCHMARKS`]
/// order; `None` for a platform the publication has no column for.
pub fn published(platform: &str) -> Option<[Published; 6]> {
    Some(match platform {
        "macos" => [
            tp(56.6, 141.3),
            call(30.1),
            call(30.0),
            tp(6.5, 30.1),
            item(3.3, 66.0),
            item(2.9, 59.0),
        ],
        "ios" => [
            tp(55.5, 144.1),
            call(30.0),
            call(30.6),
            tp(6.4, 30.6),
            item(3.1, 62.0),
            item(3.8, 75.0),
        ],
        "android" => [
            tp(83.5, 95.8),
            call(38.4),
            call(38.2),
            tp(4.8, 40.7),
            item(2.8, 55.0),
            item(5.9, 118.0),
        ],
        "web" => [
            tp(57.4, 139.3),
            call(30.0),
            call(30.0),
            tp(6.5, 30.0),
            item(3.1, 61.0),
            item(2.8, 56.0),
        ],
        _ => return None,
    })
}

/// The published figure of one benchmark on one platform.
pub fn published_one(platform: &str, bench: &str) -> Option<Published> {
    let i = BENCHMARKS.iter().position(|b| *b == bench)?;
    published(platform).map(|p| p[i])
}

/// Whether a benchmark's headline figure is a throughput (KB/s) rather than a time.
pub fn is_throughput(bench: &str) -> bool {
    matches!(bench, "flash_read_throughput" | "data_write_throughput")
}

/// What the reference calls "per" for a benchmark.
pub fn per(bench: &str) -> Per {
    if matches!(bench, "counter_stream" | "counter_upload") {
        Per::Item
    } else {
        Per::Call
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_match_the_reference() {
        let r = BenchResult::new(
            "flash_read_throughput",
            10,
            Duration::from_millis(1413),
            Per::Call,
            Some(81920),
        );
        assert!((r.ms - 141.3).abs() < 1e-9);
        assert!((r.kb_per_s.unwrap_or(0.0) - 56.617).abs() < 0.01);
        assert_eq!(r.display(), "56.6 KB/s, 141.3 ms/call");
        let s = BenchResult::new(
            "counter_stream",
            20,
            Duration::from_millis(66),
            Per::Item,
            None,
        );
        assert_eq!(s.display(), "3.3 ms/item (66 ms)");
        // A fast link keeps three significant digits instead of printing 0.0.
        let fast = BenchResult::new(
            "counter_stream",
            20,
            Duration::from_micros(344),
            Per::Item,
            None,
        );
        assert_eq!(fast.display(), "0.0172 ms/item (0.344 ms)");
        assert_eq!(num(0.211), "0.211");
        assert_eq!(num(150.04), "150.0");
        assert_eq!(num(0.0), "0.0");
        assert_eq!(
            published_one("android", "data_write_throughput").map(|p| p.display(Per::Call)),
            Some("4.8 KB/s, 40.7 ms/call".into())
        );
        assert!(published("nrf54l15").is_none());
        let a = BenchResult::new(
            "counter_stream",
            20,
            Duration::from_millis(45),
            Per::Item,
            None,
        );
        let b = BenchResult::new(
            "counter_stream",
            20,
            Duration::from_millis(60),
            Per::Item,
            None,
        );
        let m = BenchResult::mean(&[a, b]).unwrap();
        assert_eq!((m.ms, m.reps, m.ms_range), (2.625, 2, (2.25, 3.0)));
        assert_eq!(m.elapsed, Duration::from_micros(52500));
        let f = BenchResult::new(
            "flash_read_throughput",
            10,
            Duration::from_millis(1500),
            Per::Call,
            Some(81920),
        );
        let m = BenchResult::mean(&[f.clone(), f]).unwrap();
        assert!((m.kb_per_s.unwrap() - 53.333).abs() < 0.01 && (m.ms - 150.0).abs() < 1e-9);
    }
}
