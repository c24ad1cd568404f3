//! # blerpc-fw-qemu-test: the core on the microcontroller's own code generation
//!
//! The checks the test image runs, `no_std` and without an allocator, so they run unchanged on
//! a Cortex-M33 under QEMU (`src/main.rs`, machine `mps2-an505`, semihosting) and natively on
//! the host (`cargo run -p blerpc-fw-qemu-test`):
//!
//! | part | what it checks |
//! |---|---|
//! | [`vectors`] | every reference vector both ways, by `blerpc-vectors` (the checker the host tests run): splits, control, commands, session frames, the key exchange and its transcripts, reassembly, invalid input, the large-message and long-container extensions |
//! | [`session`] | a full encrypted session in memory: the core's central against the firmware's own connection and demo service, the reference's 12 functional tests and the service's limits |
//! | [`memory`] | what one firmware connection costs in RAM on this CPU (`size_of`) |
//!
//! [`run`] runs them all and returns a [`Tally`]: counts per family, printed as a table.
#![no_std]

pub mod memory;
pub mod session;
pub mod vectors;

/// A failed check: what differed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fail(pub &'static str);

/// `Ok` if `cond`, else the failure `what`.
pub fn ensure(cond: bool, what: &'static str) -> Result<(), Fail> {
    if cond { Ok(()) } else { Err(Fail(what)) }
}

/// Checks passed, failed and skipped of one family.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Row {
    /// The family.
    pub family: &'static str,
    /// Checks passed.
    pub passed: u32,
    /// Checks failed.
    pub failed: u32,
    /// Cases skipped (too large for this image's buffers).
    pub skipped: u32,
}

/// Rows per family, in the order first seen.
#[derive(Debug, Default)]
pub struct Tally {
    rows: [Row; 16],
    len: usize,
}

impl Tally {
    fn row(&mut self, family: &'static str) -> &mut Row {
        let at = self.rows[..self.len]
            .iter()
            .position(|r| r.family == family)
            .unwrap_or_else(|| {
                let at = self.len.min(self.rows.len() - 1);
                self.rows[at] = Row {
                    family,
                    ..Row::default()
                };
                self.len = (at + 1).max(self.len);
                at
            });
        &mut self.rows[at]
    }
    /// Counts a passed check.
    pub fn pass(&mut self, family: &'static str) {
        self.row(family).passed += 1;
    }
    /// Counts a failed check.
    pub fn fail(&mut self, family: &'static str) {
        self.row(family).failed += 1;
    }
    /// Counts a skipped case.
    pub fn skip(&mut self, family: &'static str) {
        self.row(family).skipped += 1;
    }
    /// The rows.
    pub fn rows(&self) -> &[Row] {
        &self.rows[..self.len]
    }
    /// Totals over the rows.
    pub fn totals(&self) -> Row {
        self.rows().iter().fold(Row::default(), |t, r| Row {
            family: "total",
            passed: t.passed + r.passed,
            failed: t.failed + r.failed,
            skipped: t.skipped + r.skipped,
        })
    }
}

/// A line for the log: a failed check (case, what differed), or a case skipped (case, why).
#[derive(Clone, Copy)]
pub enum Note<'a> {
    /// A check failed.
    Fail(&'a str, &'a dyn core::fmt::Display),
    /// A case was not run.
    Skip(&'a str, &'a dyn core::fmt::Display),
}

/// Runs everything; failures and skipped cases are reported to `log`.
pub fn run(scratch: &mut vectors::Scratch, log: &mut dyn FnMut(Note<'_>)) -> Tally {
    let mut tally = Tally::default();
    vectors::run(scratch, &mut tally, log);
    session::run(&mut tally, log);
    tally
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::{boxed::Box, format, string::String, vec, vec::Vec};

    use crate::Note;

    /// The image's checks, natively: every vector that fits its buffers and the whole session
    /// pass; exactly the three longest splits are skipped.
    #[test]
    fn every_check_passes_on_the_host_too() {
        // The scratch (about 900 KB) is built on a thread with room for the temporaries.
        let run = std::thread::Builder::new().stack_size(64 << 20).spawn(|| {
            let mut scratch = Box::new(crate::vectors::Scratch::new());
            let (mut failures, mut skipped): (Vec<String>, Vec<String>) = (vec![], vec![]);
            let tally = crate::run(&mut scratch, &mut |note| match note {
                Note::Fail(case, what) => failures.push(format!("{case}: {what}")),
                Note::Skip(case, why) => skipped.push(format!("{case}: {why}")),
            });
            (tally.totals(), failures, skipped)
        });
        let Some((totals, failures, skipped)) = run.ok().and_then(|t| t.join().ok()) else {
            panic!("the checks' thread failed");
        };
        assert!(failures.is_empty(), "{failures:?}");
        assert_eq!(totals.failed, 0);
        assert_eq!(skipped.len(), 3, "{skipped:?}");
        assert!(totals.passed >= 440, "{} checks passed", totals.passed);
    }
}
