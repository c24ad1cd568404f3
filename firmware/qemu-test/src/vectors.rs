//! The reference vectors on this CPU: every family of `blerpc-vectors` (the checker the host
//! tests run, once per provider), here with the pure-Rust provider on fixed buffers.

use blerpc_proto::crypto::RustCrypto;
use blerpc_vectors::{Family, Fixed, Outcome, check_family, vectors};

use crate::{Note, Tally};

/// The image's buffers: messages up to 128 KiB (every reference vector, and the extensions'
/// up to the sealed 100,000-byte echo; their 300 KB, 1 MiB and 5 MB splits are skipped), and
/// 1 KiB for the connections the checks drive.
pub type Buffers = Fixed<{ 128 * 1024 }, 1024>;

/// The checker's memory (about 900 KB: the caller puts it where memory allows).
pub type Scratch = blerpc_vectors::Scratch<Buffers>;

/// Runs every family; failures and skipped cases go to `log`.
pub fn run(scratch: &mut Scratch, tally: &mut Tally, log: &mut dyn FnMut(Note<'_>)) {
    let tree = match vectors() {
        Ok(tree) => tree,
        Err(f) => {
            log(Note::Fail("vector file", &f));
            tally.fail("vector file");
            return;
        }
    };
    for family in Family::ALL {
        let name = family.name();
        check_family(
            &tree,
            family,
            &RustCrypto,
            scratch,
            &mut |case, outcome| match outcome {
                Outcome::Passed => tally.pass(name),
                Outcome::Skipped(why) => {
                    tally.skip(name);
                    log(Note::Skip(case, &why));
                }
                Outcome::Failed(what) => {
                    tally.fail(name);
                    log(Note::Fail(case, &what));
                }
            },
        );
    }
}
