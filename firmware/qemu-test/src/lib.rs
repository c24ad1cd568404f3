//! # blerpc-fw-qemu-test: the core on the microcontroller's own code generation
//!
//! The checks the test image runs, `no_std` and without an allocator, so they run unchanged on
//! a Cortex-M33 under QEMU (`src/main.rs`, machine `mps2-an505`, semihosting) and natively on
//! the host (`cargo run -p blerpc-fw-qemu-test`):
//!
//! | part | what it checks |
//! |---|---|
//! | [`vectors`] | every embedded reference vector both ways: splits, control, commands, session frames, the key exchange, reassembly |
//! | [`session`] | a full encrypted session in memory: the core's central against the firmware's own connection and demo service, the reference's 12 functional tests and the service's limits |
//! | [`memory`] | what one firmware connection costs in RAM on this CPU (`size_of`) |
//!
//! [`run`] runs them all and returns a [`Tally`]: counts per family, printed as a table.
#![no_std]

pub mod blob;
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

/// Passed and failed checks per family, in the order first seen.
#[derive(Debug, Default)]
pub struct Tally {
    rows: [(&'static str, u32, u32); 16],
    len: usize,
}

impl Tally {
    fn row(&mut self, family: &'static str) -> &mut (&'static str, u32, u32) {
        let at = self.rows[..self.len]
            .iter()
            .position(|r| r.0 == family)
            .unwrap_or_else(|| {
                let at = self.len.min(self.rows.len() - 1);
                self.rows[at] = (family, 0, 0);
                self.len = (at + 1).max(self.len);
                at
            });
        &mut self.rows[at]
    }
    /// Counts a passed check.
    pub fn pass(&mut self, family: &'static str) {
        self.row(family).1 += 1;
    }
    /// Counts a failed check.
    pub fn fail(&mut self, family: &'static str) {
        self.row(family).2 += 1;
    }
    /// `(family, passed, failed)` rows.
    pub fn rows(&self) -> &[(&'static str, u32, u32)] {
        &self.rows[..self.len]
    }
    /// Totals `(passed, failed)`.
    pub fn totals(&self) -> (u32, u32) {
        self.rows()
            .iter()
            .fold((0, 0), |(p, f), r| (p + r.1, f + r.2))
    }
}

/// Runs everything; each failure is reported to `log` as `(case, what)`.
pub fn run(scratch: &mut vectors::Scratch, log: &mut dyn FnMut(&str, &str)) -> Tally {
    let mut tally = Tally::default();
    vectors::run(scratch, &mut tally, log);
    session::run(&mut tally, log);
    tally
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::{boxed::Box, format, string::String, vec::Vec};

    /// The image's checks, natively: every vector and the whole session pass.
    #[test]
    fn every_check_passes_on_the_host_too() {
        let mut scratch = Box::new(crate::vectors::Scratch::new());
        let mut failures: Vec<String> = Vec::new();
        let tally = crate::run(&mut scratch, &mut |case, what| {
            failures.push(format!("{case}: {what}"))
        });
        assert!(failures.is_empty(), "{failures:?}");
        let (passed, failed) = tally.totals();
        assert_eq!(failed, 0);
        assert!(passed >= 270, "{passed} checks ran");
    }
}
