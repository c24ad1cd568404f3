//! `codec`: the blerpc-proto codec path and key exchange against the reference Python library,
//! measured side by side in one run and printed as a table.
//!
//! ```text
//! cargo run --release -p blerpc-bench -- codec [--reps 5] [--provider all] [--json out.json]
//! ```
//!
//! Repetitions are interleaved (Rust, Python, Rust, Python, ...) so that load on a shared machine
//! hits both sides alike. Each repetition takes `--samples` samples per workload on each side; a
//! sample times a batch of iterations (calibrated to `--sample-ms`, or `--iters`) and yields
//! ns/op. The table reports the median over all samples of all repetitions and the ratio
//! Python / Rust, with the range of the per-repetition ratios.
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::stats::median;
use anyhow::{Context as _, Result, bail, ensure};
use blerpc_demo::progress::Steps;

pub use blerpc_codec_workloads::{CodecPath, KeyExchange, MTU, Workload, expected_pdus};
use blerpc_proto::crypto::{CryptoProvider, RustCrypto};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// Benchmark of the bleRPC codec path and key exchange, Rust (blerpc-proto) against the
/// reference Python library (blerpc-protocol 0.8.0) measured in the same run.
#[derive(clap::Args, Debug)]
pub struct CodecArgs {
    /// Interleaved repetitions (Rust, Python, Rust, Python, ...).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Samples per workload per repetition, on each side.
    #[arg(long, default_value_t = 10)]
    samples: usize,
    /// Fixed iterations per sample on both sides (default: calibrate each side to --sample-ms).
    #[arg(long)]
    iters: Option<u64>,
    /// Target duration of one sample when calibrating, in milliseconds.
    #[arg(long, default_value_t = 20.0)]
    sample_ms: f64,
    /// Python interpreter with blerpc-protocol==0.8.0 installed (default: $BLERPC_VENV/bin/python,
    /// else .venv/bin/python at the repository root).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Skip the reference (for profiling the Rust side alone).
    #[arg(long)]
    no_python: bool,
    /// Crypto provider(s) for the Rust side.
    #[arg(long, value_enum, default_value_t = ProviderArg::All)]
    provider: ProviderArg,
    /// Only these workloads (comma-separated: enc_8k,enc_echo,plain_8k,kx).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ProviderArg {
    Rustcrypto,
    Ring,
    AwsLc,
    Host,
    All,
}

/// A provider compiled into this binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Provider {
    RustCrypto,
    #[cfg(feature = "ring")]
    Ring,
    #[cfg(feature = "aws-lc-rs")]
    AwsLc,
    #[cfg(all(feature = "ring", feature = "aws-lc-rs"))]
    Host,
}

impl Provider {
    fn compiled() -> Vec<Provider> {
        vec![
            Provider::RustCrypto,
            #[cfg(feature = "ring")]
            Provider::Ring,
            #[cfg(feature = "aws-lc-rs")]
            Provider::AwsLc,
            #[cfg(all(feature = "ring", feature = "aws-lc-rs"))]
            Provider::Host,
        ]
    }
    fn name(self) -> &'static str {
        match self {
            Provider::RustCrypto => "rustcrypto",
            #[cfg(feature = "ring")]
            Provider::Ring => "ring",
            #[cfg(feature = "aws-lc-rs")]
            Provider::AwsLc => "aws-lc",
            #[cfg(all(feature = "ring", feature = "aws-lc-rs"))]
            Provider::Host => "host",
        }
    }
    /// `true` for the provider `blerpc_proto::crypto::DefaultProvider` names in this build.
    fn is_default(self) -> bool {
        let default = std::any::type_name::<blerpc_proto::crypto::DefaultProvider>();
        let this = match self {
            Provider::RustCrypto => std::any::type_name::<RustCrypto>(),
            #[cfg(feature = "ring")]
            Provider::Ring => std::any::type_name::<blerpc_proto::crypto::Ring>(),
            #[cfg(feature = "aws-lc-rs")]
            Provider::AwsLc => std::any::type_name::<blerpc_proto::crypto::AwsLc>(),
            #[cfg(all(feature = "ring", feature = "aws-lc-rs"))]
            Provider::Host => std::any::type_name::<blerpc_proto::crypto::Host>(),
        };
        default == this
    }
    fn selected(arg: ProviderArg) -> Result<Vec<Provider>> {
        let all = Provider::compiled();
        let want = match arg {
            ProviderArg::All => return Ok(all),
            ProviderArg::Rustcrypto => "rustcrypto",
            ProviderArg::Ring => "ring",
            ProviderArg::AwsLc => "aws-lc",
            ProviderArg::Host => "host",
        };
        match all.into_iter().find(|p| p.name() == want) {
            Some(p) => Ok(vec![p]),
            None => bail!(
                "provider {want} is not compiled in; build with `--features {}`",
                match want {
                    "aws-lc" => "aws-lc-rs",
                    "host" => "ring,aws-lc-rs",
                    other => other,
                }
            ),
        }
    }
}

/// Untimed warm-up before the samples of each repetition (both sides).
const WARMUP: std::time::Duration = std::time::Duration::from_millis(300);

/// How many iterations per sample and how many samples.
#[derive(Clone, Copy, Debug)]
struct Plan {
    samples: usize,
    iters: Option<u64>,
    sample_ms: f64,
}

/// Times `f`: calibrates a batch size (doubling until a batch takes `sample_ms`) unless fixed,
/// then returns (iterations per sample, ns/op of each sample).
fn measure(plan: Plan, mut f: impl FnMut() -> Result<()>) -> Result<(u64, Vec<f64>)> {
    // Untimed warm-up: after the other side's turn the caches are cold and the vCPU may have
    // clocked down; without this the first samples of every repetition read 2x slow.
    let warm = Instant::now();
    while warm.elapsed() < WARMUP {
        f()?;
    }
    let iters = match plan.iters {
        Some(n) => n.max(1),
        None => {
            let mut n = 1u64;
            loop {
                let t = Instant::now();
                for _ in 0..n {
                    f()?;
                }
                if t.elapsed().as_secs_f64() * 1e3 >= plan.sample_ms || n >= 1 << 30 {
                    break n;
                }
                n *= 2;
            }
        }
    };
    let mut out = Vec::with_capacity(plan.samples);
    for _ in 0..plan.samples {
        let t = Instant::now();
        for _ in 0..iters {
            f()?;
        }
        // ns and iteration counts stay far below 2^52, so the f64 conversions are exact.
        out.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    Ok((iters, out))
}

fn run_workload<P: CryptoProvider>(
    w: Workload,
    provider: P,
    plan: Plan,
) -> Result<(u64, Vec<f64>)> {
    if w == Workload::Kx {
        let mut kx = KeyExchange::new(provider, 0x00b1_e4bc)?;
        kx.verify()?;
        measure(plan, || {
            black_box(kx.run_once()?);
            Ok(())
        })
    } else {
        let mut path = CodecPath::new(w, &provider)?;
        path.verify(expected_pdus(w))?;
        measure(plan, || {
            black_box(path.run_once()?);
            Ok(())
        })
    }
}

fn run_rust(w: Workload, p: Provider, plan: Plan) -> Result<(u64, Vec<f64>)> {
    match p {
        Provider::RustCrypto => run_workload(w, RustCrypto, plan),
        #[cfg(feature = "ring")]
        Provider::Ring => run_workload(w, blerpc_proto::crypto::Ring, plan),
        #[cfg(feature = "aws-lc-rs")]
        Provider::AwsLc => run_workload(w, blerpc_proto::crypto::AwsLc, plan),
        #[cfg(all(feature = "ring", feature = "aws-lc-rs"))]
        Provider::Host => run_workload(w, blerpc_proto::crypto::Host, plan),
    }
}

#[derive(Deserialize, Debug)]
struct PyReport {
    library: String,
    cryptography: String,
    openssl: String,
    python: String,
    results: BTreeMap<String, PySamples>,
}

#[derive(Deserialize, Debug)]
struct PySamples {
    iters: u64,
    samples_ns_per_op: Vec<f64>,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python_path(arg: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(p) = arg {
        ensure!(p.exists(), "--python {} does not exist", p.display());
        return Ok(p);
    }
    let venv = std::env::var_os("BLERPC_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv"));
    let python = venv.join("bin/python");
    if python.exists() {
        return Ok(python);
    }
    bail!(
        "no reference Python at {}.\nCreate the venv with the reference library:\n  \
         python3 -m venv .venv && .venv/bin/pip install -r tools/vectors/requirements.txt\n\
         (at the repository root), or pass --python PATH / set BLERPC_VENV, or use --no-python.",
        python.display()
    )
}

fn run_python(python: &Path, workloads: &[Workload], plan: Plan) -> Result<PyReport> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/codec_ref.py");
    let names: Vec<&str> = workloads.iter().map(|w| w.name()).collect();
    let mut cmd = Command::new(python);
    cmd.arg(&script)
        .arg("--workloads")
        .arg(names.join(","))
        .arg("--samples")
        .arg(plan.samples.to_string())
        .arg("--sample-ms")
        .arg(plan.sample_ms.to_string())
        .arg("--iters")
        .arg(plan.iters.unwrap_or(0).to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    let out = cmd
        .output()
        .with_context(|| format!("running {} {}", python.display(), script.display()))?;
    ensure!(
        out.status.success(),
        "the reference driver failed ({}); is blerpc-protocol==0.8.0 installed in {}?",
        out.status,
        python.display()
    );
    serde_json::from_slice(&out.stdout).context("parsing the reference driver's JSON")
}

/// Samples of one side of one row, kept per repetition.
#[derive(Default, Debug)]
struct Series {
    iters: Vec<u64>,
    reps: Vec<Vec<f64>>,
}

impl Series {
    fn push(&mut self, iters: u64, samples: Vec<f64>) {
        self.iters.push(iters);
        self.reps.push(samples);
    }
    fn all(&self) -> Vec<f64> {
        self.reps.iter().flatten().copied().collect()
    }
    fn rep_medians(&self) -> Vec<f64> {
        self.reps.iter().map(|r| median(r)).collect()
    }
}

#[derive(Serialize)]
struct RowJson {
    workload: String,
    provider: String,
    default_provider: bool,
    rust_median_ns: f64,
    python_median_ns: Option<f64>,
    ratio: Option<f64>,
    ratio_min_rep: Option<f64>,
    ratio_max_rep: Option<f64>,
    target: f64,
    pass: Option<bool>,
    rust_iters_per_sample: Vec<u64>,
    python_iters_per_sample: Vec<u64>,
    rust_samples_ns: Vec<Vec<f64>>,
    python_samples_ns: Vec<Vec<f64>>,
}

#[derive(Serialize)]
struct ReportJson {
    command: String,
    cpu: String,
    cores: usize,
    rustc: String,
    reference: Option<String>,
    reps: usize,
    samples_per_rep: usize,
    rows: Vec<RowJson>,
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// Runs `blerpc-bench codec`: `Ok(false)` if a target was missed.
pub fn run(args: &CodecArgs) -> Result<bool> {
    ensure!(
        args.reps >= 1 && args.samples >= 1,
        "--reps and --samples must be at least 1"
    );
    let plan = Plan {
        samples: args.samples,
        iters: args.iters,
        sample_ms: args.sample_ms,
    };
    let providers = Provider::selected(args.provider)?;
    let workloads: Vec<Workload> = if args.only.is_empty() {
        Workload::ALL.to_vec()
    } else {
        args.only
            .iter()
            .map(|s| Workload::from_name(s).with_context(|| format!("unknown workload {s}")))
            .collect::<Result<_>>()?
    };
    let python = if args.no_python {
        None
    } else {
        Some(python_path(args.python.clone())?)
    };

    // Rows: (workload, provider); plain_8k does not touch the crypto provider, so it gets one row.
    let mut rows: Vec<(Workload, Option<Provider>)> = Vec::new();
    for &w in &workloads {
        if w.uses_crypto() {
            rows.extend(providers.iter().map(|&p| (w, Some(p))));
        } else {
            rows.push((w, None));
        }
    }
    let mut rust: BTreeMap<(Workload, Option<Provider>), Series> = BTreeMap::new();
    let mut py: BTreeMap<Workload, Series> = BTreeMap::new();
    let mut reference = None;

    let started = Instant::now();
    let per_rep = rows.len() + usize::from(python.is_some());
    let steps = Steps::new("codec", (per_rep * args.reps) as u64);
    for rep in 1..=args.reps {
        for &(w, p) in &rows {
            steps.phase(&format!(
                "rep {rep}/{}: rust {}/{}",
                args.reps,
                w.name(),
                p.map_or("-", Provider::name)
            ));
            let (iters, samples) = run_rust(w, p.unwrap_or(Provider::RustCrypto), plan)
                .with_context(|| format!("rust {}", w.name()))?;
            rust.entry((w, p)).or_default().push(iters, samples);
            steps.step(true);
        }
        if let Some(python) = &python {
            steps.phase(&format!("rep {rep}/{}: python (the reference)", args.reps));
            let report = run_python(python, &workloads, plan)?;
            for &w in &workloads {
                let s = report
                    .results
                    .get(w.name())
                    .with_context(|| format!("reference did not report {}", w.name()))?;
                py.entry(w)
                    .or_default()
                    .push(s.iters, s.samples_ns_per_op.clone());
            }
            if !report.library.ends_with(" 0.8.0") {
                steps.line(&format!(
                    "warning: reference is {}, not 0.8.0",
                    report.library
                ));
            }
            reference = Some(format!(
                "{} ({}, cryptography {}, {})",
                report.library, report.python, report.cryptography, report.openssl
            ));
            steps.step(true);
        }
        if !steps.is_bar() {
            steps.line(&format!("codec: repetition {rep}/{} done", args.reps));
        }
    }
    steps.finish(&format!("done in {:.1} s", started.elapsed().as_secs_f64()));

    // Table.
    let cpu = cpu_model();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    println!("bleRPC codec benchmark: blerpc-proto vs the reference, same run");
    println!("host:      {cpu}, {cores} cores");
    println!(
        "reference: {}",
        reference.as_deref().unwrap_or("not run (--no-python)")
    );
    println!(
        "method:    {} interleaved reps x {} samples per side; median ns/op over all samples; \
         MTU {}; ratio = Python / Rust (min..max of per-rep ratios)",
        args.reps, args.samples, MTU
    );
    println!(
        "kx (Rust): ephemeral keys and nonces from ChaCha20Rng (seeded CSPRNG); reference: OpenSSL RNG"
    );
    println!();
    let header = [
        "workload", "provider", "rust", "python", "ratio", "per-rep", "target", "result",
    ];
    let mut lines: Vec<[String; 8]> = Vec::new();
    let mut json_rows = Vec::new();
    for &(w, p) in &rows {
        let r = rust.get(&(w, p)).context("missing rust series")?;
        let r_med = median(&r.all());
        let py_s = py.get(&w);
        let p_med = py_s.map(|s| median(&s.all()));
        let ratio = p_med.map(|m| m / r_med);
        let rep_ratios: Vec<f64> = py_s
            .map(|s| {
                s.rep_medians()
                    .iter()
                    .zip(r.rep_medians())
                    .map(|(py, rs)| py / rs)
                    .collect()
            })
            .unwrap_or_default();
        let rmin = rep_ratios.iter().copied().reduce(f64::min);
        let rmax = rep_ratios.iter().copied().reduce(f64::max);
        let pass = ratio.map(|x| x >= w.target());
        let prov = match p {
            Some(p) if p.is_default() => format!("{} (default)", p.name()),
            Some(p) => p.name().to_owned(),
            None => "(none)".to_owned(),
        };
        lines.push([
            w.name().to_owned(),
            prov.clone(),
            fmt_ns(r_med),
            p_med.map_or("-".into(), fmt_ns),
            ratio.map_or("-".into(), |x| format!("{x:.1}x")),
            match (rmin, rmax) {
                (Some(a), Some(b)) => format!("{a:.1}..{b:.1}"),
                _ => "-".into(),
            },
            format!("{}x", w.target()),
            match pass {
                Some(true) => "PASS".into(),
                Some(false) => "FAIL".into(),
                None => "-".into(),
            },
        ]);
        json_rows.push(RowJson {
            workload: w.name().into(),
            provider: p.map_or("none", Provider::name).into(),
            default_provider: p.is_some_and(Provider::is_default),
            rust_median_ns: r_med,
            python_median_ns: p_med,
            ratio,
            ratio_min_rep: rmin,
            ratio_max_rep: rmax,
            target: w.target(),
            pass,
            rust_iters_per_sample: r.iters.clone(),
            python_iters_per_sample: py_s.map(|s| s.iters.clone()).unwrap_or_default(),
            rust_samples_ns: r.reps.clone(),
            python_samples_ns: py_s.map(|s| s.reps.clone()).unwrap_or_default(),
        });
    }
    let mut widths = header.map(str::len);
    for l in &lines {
        for (wd, cell) in widths.iter_mut().zip(l) {
            *wd = (*wd).max(cell.chars().count());
        }
    }
    let print_row = |cells: &[String]| {
        let mut s = String::new();
        for (i, (cell, wd)) in cells.iter().zip(widths).enumerate() {
            let pad = wd.saturating_sub(cell.chars().count());
            // Text columns left-aligned, numbers right-aligned.
            if i < 2 || i == 7 {
                s.push_str(cell);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(cell);
            }
            s.push_str("  ");
        }
        println!("{}", s.trim_end());
    };
    print_row(&header.map(String::from));
    print_row(&widths.map(|w| "-".repeat(w)));
    for l in &lines {
        print_row(l);
    }

    if let Some(path) = &args.json {
        let report = ReportJson {
            command,
            cpu,
            cores,
            rustc: rustc_version(),
            reference,
            reps: args.reps,
            samples_per_rep: args.samples,
            rows: json_rows,
        };
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(true)
}

fn rustc_version() -> String {
    Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "unknown".into(), |s| s.trim().to_owned())
}
