//! Progress on stderr: a bar where stderr is a terminal, plain lines where it is not (a log,
//! a pipe, CI), so that neither gets the other's escape codes or silence.
//!
//! ```
//! use blerpc_demo::progress::Steps;
//!
//! let steps = Steps::new("  macos", 3);
//! steps.phase("functional");
//! steps.step(true);
//! steps.step(true);
//! steps.phase("benchmarks");
//! steps.step(false);
//! assert_eq!((steps.done(), steps.failed()), (3, 1));
//! steps.finish("2/3 passed"); // one line either way: "  macos 2/3 passed"
//! ```

use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Counted steps of one piece of work (a profile, a link, a benchmark matrix).
#[derive(Debug)]
pub struct Steps {
    prefix: String,
    bar: Option<ProgressBar>,
    done: AtomicU64,
    failed: AtomicU64,
}

impl Steps {
    /// `total` steps under `prefix`; a bar only if stderr is a terminal.
    pub fn new(prefix: impl Into<String>, total: u64) -> Steps {
        let prefix = prefix.into();
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{prefix} [{bar:24}] {pos}/{len} {elapsed:>4} {wide_msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(prefix.clone());
            bar
        });
        Steps {
            prefix,
            bar,
            done: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    /// Whether a bar is drawn (stderr is a terminal).
    pub fn is_bar(&self) -> bool {
        self.bar.is_some()
    }

    /// Names what runs now (shown beside the bar; nothing in plain mode).
    pub fn phase(&self, what: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(what.to_string());
        }
    }

    /// One step done, passed or failed.
    pub fn step(&self, ok: bool) {
        self.done.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    /// Sets the steps done so far (for work that reports a count, not each step).
    pub fn set(&self, done: u64) {
        self.done.store(done, Ordering::Relaxed);
        if let Some(bar) = &self.bar {
            bar.set_position(done);
        }
    }

    /// Prints a line now, above the bar (or as a plain line).
    pub fn line(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => {
                let mut err = std::io::stderr().lock();
                let _ = writeln!(err, "{text}");
                let _ = err.flush();
            }
        }
    }

    /// Steps done so far.
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    /// Steps that failed so far.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Clears the bar and prints `prefix summary` as one line.
    pub fn finish(self, summary: &str) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{} {summary}", self.prefix);
        let _ = err.flush();
    }
}
