//! The reference vectors on the host: every family with the pure-Rust provider, and the families
//! that use the crypto provider once more per provider (`ring`, `aws-lc-rs` features), all on
//! heap buffers, where no case is too large. One test per family and provider; each lists every
//! failing case by name. The microcontroller's fixed buffers run here too (`fixed_buffers`),
//! skipping exactly the cases longer than they hold.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use blerpc_proto::crypto::CryptoProvider;
use blerpc_vectors::{Buffers, Family, Fixed, Heap, Outcome, Scratch, check_family, vectors};

/// What one run of a family gave.
#[derive(Default)]
struct Tally {
    passed: usize,
    skipped: Vec<String>,
    failed: Vec<String>,
}

fn run<P: CryptoProvider, B: Buffers>(
    family: Family,
    provider: &P,
    scratch: &mut Scratch<B>,
) -> Tally {
    let tree = vectors().expect("the embedded vectors");
    let mut tally = Tally::default();
    check_family(
        &tree,
        family,
        provider,
        scratch,
        &mut |case, outcome| match outcome {
            Outcome::Passed => tally.passed += 1,
            Outcome::Skipped(s) => tally.skipped.push(format!("{case}: {s}")),
            Outcome::Failed(f) => tally.failed.push(format!("  {case}: {f}")),
        },
    );
    tally
}

/// Runs `family` on heap buffers: every check passes, none is skipped.
fn check<P: CryptoProvider>(family: Family, provider: P) {
    let tally = run(family, &provider, &mut Scratch::<Heap>::new());
    assert!(
        tally.failed.is_empty(),
        "{} checks of {}.json failed:\n{}",
        tally.failed.len(),
        family.name(),
        tally.failed.join("\n")
    );
    assert_eq!(
        tally.skipped,
        Vec::<String>::new(),
        "heap buffers hold every case"
    );
    // The file's envelope and at least one case.
    assert!(
        tally.passed >= 2,
        "{}: {} checks",
        family.name(),
        tally.passed
    );
}

/// One test per family, with `$provider`.
macro_rules! families {
    ($provider:expr; $($test:ident => $family:ident),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                super::check(blerpc_vectors::Family::$family, $provider);
            }
        )*
    };
}

mod rustcrypto {
    families!(blerpc_proto::crypto::RustCrypto;
        assembly => Assembly,
        commands => Commands,
        control => Control,
        invalid => Invalid,
        key_exchange => KeyExchange,
        large_messages => LargeMessages,
        long_containers => LongContainers,
        session => Session,
        splits => Splits,
        tid_wrap => TidWrap,
    );
}

/// The families that use the provider ([`Family::uses_provider`]), once more per provider.
#[cfg(any(feature = "ring", feature = "aws-lc-rs"))]
macro_rules! provider_families {
    ($provider:expr) => {
        families!($provider;
            invalid => Invalid,
            key_exchange => KeyExchange,
            large_messages => LargeMessages,
            long_containers => LongContainers,
            session => Session,
        );
        #[test]
        fn these_are_the_families_that_use_the_provider() {
            let ours = [
                blerpc_vectors::Family::Invalid,
                blerpc_vectors::Family::KeyExchange,
                blerpc_vectors::Family::LargeMessages,
                blerpc_vectors::Family::LongContainers,
                blerpc_vectors::Family::Session,
            ];
            for f in blerpc_vectors::Family::ALL {
                assert_eq!(f.uses_provider(), ours.contains(&f), "{}", f.name());
            }
        }
    };
}

#[cfg(feature = "ring")]
mod ring {
    provider_families!(blerpc_proto::crypto::Ring);
}

#[cfg(feature = "aws-lc-rs")]
mod aws_lc {
    provider_families!(blerpc_proto::crypto::AwsLc);
}

/// Every file of `testdata/vectors/` is a family the tests above run.
#[test]
fn every_vector_file_is_a_family() {
    let tree = vectors().unwrap();
    let files: BTreeSet<&str> = tree.root().as_object().unwrap().map(|(k, _)| k).collect();
    let families: BTreeSet<&str> = Family::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(files, families);
    let on_disk: BTreeSet<String> = std::fs::read_dir(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/vectors"
    ))
    .unwrap()
    .filter_map(|e| {
        let name = e.unwrap().file_name().into_string().unwrap();
        name.strip_suffix(".json").map(str::to_owned)
    })
    .collect();
    assert_eq!(on_disk, families.iter().map(|s| s.to_string()).collect());
}

/// The QEMU image's buffers (`firmware/qemu-test`: 128 KiB messages), on the host: every case
/// passes except those needing a longer message, which are skipped, by name.
#[test]
fn fixed_buffers() {
    type Mcu = Fixed<{ 128 * 1024 }, 1024>;
    // Seven 128 KiB buffers: on the heap, built on a thread with room for the temporaries.
    let tally = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(|| {
            let mut scratch = Box::new(Scratch::<Mcu>::new());
            let mut all = Tally::default();
            for family in Family::ALL {
                let t = run(family, &blerpc_proto::crypto::RustCrypto, &mut scratch);
                all.passed += t.passed;
                all.skipped.extend(t.skipped);
                all.failed.extend(t.failed);
            }
            all
        })
        .unwrap()
        .join()
        .unwrap();
    assert!(tally.failed.is_empty(), "{}", tally.failed.join("\n"));
    assert_eq!(
        tally.skipped,
        [
            "split_1mib_mtu512: needs a 1048576-byte message, the buffers hold 131072",
            "split_300000_mtu21_smallest_negotiable: needs a 300000-byte message, the buffers hold 131072",
            "split_5000000_large_seq_wraps: needs a 5000000-byte message, the buffers hold 131072",
        ]
    );
    assert!(tally.passed >= 420, "{} checks passed", tally.passed);
}
