//! # blerpc-vectors: the reference vectors, checked once for every platform
//!
//! `testdata/vectors/*.json` (generated from the reference `blerpc-protocol` 0.8.0 by
//! `tools/vectors/gen.py`, plus our extensions' files from `large.py` and `long.py`) checked
//! against `blerpc-proto` in both directions:
//!
//! - reference bytes → our parser → our values → our emitter → the same bytes;
//! - our splitter, encoders, handshake typestates, sessions and connections, fed the vector's
//!   inputs (fixed keys and nonces injected), produce the reference bytes;
//! - every invalid or edge input gives the error, or the deliberate divergence, named in the
//!   case's `expect` block (`tools/vectors/README.md` maps the names onto our enums).
//!
//! The crate is `no_std` and needs no allocator, so the same checks run in the host tests
//! (`tests/vectors.rs`, once per crypto provider) and on a Cortex-M33 under QEMU
//! (`firmware/qemu-test`). `build.rs` converts the JSON files into one binary tree
//! ([`tree`] gives the layout) that both embed as [`VECTORS`].
//!
//! ```text
//!  testdata/vectors/*.json --build.rs--> VECTORS --tree::Tree--> check_family::<P, B>(family)
//!                                                                  | one Outcome per case
//!                       host: Heap buffers, every provider    MCU: Fixed buffers, RustCrypto
//! ```
//!
//! What a platform can hold is its [`Buffers`]: a case that needs a longer message than they
//! hold is [`Outcome::Skipped`] with the sizes (never failed); with `Heap` buffers (feature
//! `alloc`) nothing is skipped.
//!
//! ## Where each check runs
//!
//! | | host (`cargo test -p blerpc-vectors`) | Cortex-M33 under QEMU (`firmware/qemu-test`) |
//! |---|---|---|
//! | buffers | `Heap` (`Vec<u8>`) | [`Fixed`]: 128 KiB messages, 1 KiB connection buffers, no allocator |
//! | providers | `RustCrypto` for every family; `Ring` and `AwsLc` (features `ring`, `aws-lc-rs`) for the families that use one ([`Family::uses_provider`]) | `RustCrypto` |
//! | cases | all | all but the three splits of 300,000 bytes, 1 MiB and 5 MB (`large_messages`, `long_containers`), and on a 32-bit target the split of 2^32 bytes, whose length no `usize` holds |
//! | `split_to_vec` | compared with the other split APIs (feature `alloc`) | not linked |
#![no_std]
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]

#[cfg(feature = "alloc")]
extern crate alloc;

mod assembly;
mod commands;
mod connection;
mod control;
mod errors;
pub mod fail;
mod format;
mod invalid;
mod key_exchange;
mod large;
mod long;
mod payload;
mod session;
mod splits;
pub mod tree;

use blerpc_proto::assemble::{Assembler, AssemblerConfig};
use blerpc_proto::buf::{ArrayBuf, Buffer};
use blerpc_proto::crypto::CryptoProvider;

pub use fail::Fail;
pub use tree::{Node, Tree};

/// The vector files, converted by `build.rs` (layout: [`tree`]).
pub static VECTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/vectors.bin"));

/// The embedded vectors, checked from end to end.
pub fn vectors() -> Result<Tree<'static>, Fail> {
    Tree::parse(VECTORS)
}

/// One vector file of `testdata/vectors/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `splits.json`: messages split at many MTUs, and the reference's own failures.
    Splits,
    /// `tid_wrap.json`: 258 consecutive transactions, the transaction id wrapping.
    TidWrap,
    /// `control.json`: every CONTROL message both ways, and the ignored ones.
    Control,
    /// `commands.json`: command packets both ways.
    Commands,
    /// `key_exchange.json`: the primitives and steps, and two recorded transcripts.
    KeyExchange,
    /// `session.json`: sealed frames, nonces, counter exhaustion, refused frames.
    Session,
    /// `assembly.json`: reassembly results container by container.
    Assembly,
    /// `invalid.json`: malformed input and where we succeed where the reference fails.
    Invalid,
    /// `large_messages.json`: the large-message extension (`tools/vectors/large.py`).
    LargeMessages,
    /// `long_containers.json`: the long-container extension (`tools/vectors/long.py`).
    LongContainers,
}

impl Family {
    /// Every family, in file order.
    pub const ALL: [Family; 10] = [
        Family::Assembly,
        Family::Commands,
        Family::Control,
        Family::Invalid,
        Family::KeyExchange,
        Family::LargeMessages,
        Family::LongContainers,
        Family::Session,
        Family::Splits,
        Family::TidWrap,
    ];

    /// The file stem.
    pub const fn name(self) -> &'static str {
        match self {
            Family::Splits => "splits",
            Family::TidWrap => "tid_wrap",
            Family::Control => "control",
            Family::Commands => "commands",
            Family::KeyExchange => "key_exchange",
            Family::Session => "session",
            Family::Assembly => "assembly",
            Family::Invalid => "invalid",
            Family::LargeMessages => "large_messages",
            Family::LongContainers => "long_containers",
        }
    }

    /// `true` if the family's checks use the crypto provider (worth running once per provider).
    pub const fn uses_provider(self) -> bool {
        matches!(
            self,
            Family::KeyExchange
                | Family::Session
                | Family::Invalid
                | Family::LargeMessages
                | Family::LongContainers
        )
    }
}

/// The result of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every comparison held.
    Passed,
    /// The case needs more than this platform's buffers hold.
    Skipped(Skip),
    /// A comparison failed.
    Failed(Fail),
}

/// Why a case was not run: it needs a message (or a length) of `needed` bytes, and this
/// platform's buffers hold `capacity` (a length over `usize::MAX` cannot be held anywhere).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Skip {
    /// The bytes the case needs.
    pub needed: u64,
    /// The bytes this platform's message buffers hold.
    pub capacity: usize,
}

impl core::fmt::Display for Skip {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if usize::try_from(self.needed).is_err() {
            write!(
                f,
                "needs a length of {} bytes, over this target's usize",
                self.needed
            )
        } else {
            write!(
                f,
                "needs a {}-byte message, the buffers hold {}",
                self.needed, self.capacity
            )
        }
    }
}

/// What ended a check early: a failure, or a case too large for the platform.
#[derive(Debug)]
pub(crate) enum Stop {
    Fail(Fail),
    Skip(Skip),
}

impl From<Fail> for Stop {
    fn from(f: Fail) -> Self {
        Stop::Fail(f)
    }
}

impl<T> fail::At for Result<T, Stop> {
    fn at(self, item: usize) -> Self {
        self.map_err(|s| match s {
            Stop::Fail(f) => Stop::Fail(f.at(item)),
            skip => skip,
        })
    }
}

/// The result of a check in progress.
pub(crate) type Check = Result<(), Stop>;

/// The buffer types a platform checks with.
pub trait Buffers {
    /// Whole messages, frames and containers, and the assembler's slots. A case whose message
    /// is longer than their capacity is skipped; the reference's own files need 65,535 bytes
    /// (the longest classic message), the extensions' files up to 5,000,000.
    type Message: Buffer + Default;
    /// The buffers of the central and peripheral state machines the checks drive (the ignored
    /// controls, the recorded transcripts: messages of a few dozen bytes).
    type Connection: Buffer + Default;
}

/// Fixed buffers, no allocator: messages up to `M` bytes, connection buffers of `C` bytes.
#[derive(Debug)]
pub struct Fixed<const M: usize, const C: usize>;

impl<const M: usize, const C: usize> Buffers for Fixed<M, C> {
    type Message = ArrayBuf<M>;
    type Connection = ArrayBuf<C>;
}

/// Heap buffers (`Vec<u8>`): every case fits.
#[cfg(feature = "alloc")]
#[derive(Debug)]
pub struct Heap;

#[cfg(feature = "alloc")]
impl Buffers for Heap {
    type Message = alloc::vec::Vec<u8>;
    type Connection = alloc::vec::Vec<u8>;
}

/// The working memory of the checks: three message buffers and a four-slot assembler (with
/// [`Fixed`] buffers, seven times `M` bytes: the caller places it, e.g. in a `static`).
#[derive(Debug)]
pub struct Scratch<B: Buffers> {
    /// A payload, plaintext or command being built.
    message: B::Message,
    /// A sealed frame, a packet, or a second payload.
    frame: B::Message,
    /// One container (emitted or built from a descriptor).
    container: B::Message,
    /// Reassembly; reset and reconfigured by each check that uses it.
    assembler: Assembler<B::Message, 4>,
}

impl<B: Buffers> Scratch<B> {
    /// Fresh buffers.
    pub fn new() -> Self {
        Scratch {
            message: B::Message::default(),
            frame: B::Message::default(),
            container: B::Message::default(),
            assembler: Assembler::new(AssemblerConfig::default()),
        }
    }

    /// The longest message a check can use.
    pub fn capacity(&self) -> usize {
        self.message.capacity_limit()
    }
}

impl<B: Buffers> Default for Scratch<B> {
    fn default() -> Self {
        Self::new()
    }
}

/// `needed` as a length, if `buf` can hold that many bytes; else the skip.
pub(crate) fn fits<M: Buffer>(buf: &M, needed: u64) -> Result<usize, Stop> {
    let capacity = buf.capacity_limit();
    usize::try_from(needed)
        .ok()
        .filter(|&n| n <= capacity)
        .ok_or(Stop::Skip(Skip { needed, capacity }))
}

/// `buf` resized to exactly `len` bytes (zero-filled), or the skip if it cannot hold them.
pub(crate) fn sized<M: Buffer>(buf: &mut M, len: usize) -> Result<&mut [u8], Stop> {
    buf.truncate(0);
    buf.try_resize(len).map_err(|e| {
        Stop::Skip(Skip {
            needed: len as u64,
            capacity: e.capacity,
        })
    })?;
    Ok(buf.as_mut_slice())
}

/// What a family check gets: the provider, the memory, and the family's whole file (for cases
/// that refer to another case).
pub(crate) struct Ctx<'c, P, B: Buffers> {
    pub provider: &'c P,
    pub scratch: &'c mut Scratch<B>,
    pub doc: Node<'c>,
}

/// Checks every case of `family` in `tree` with `provider` and `scratch`, reporting each
/// outcome to `report` as `(case name, outcome)`. The file itself (its envelope: family,
/// schema, generator, unique names) is reported first, as the case `(file)`.
pub fn check_family<P: CryptoProvider, B: Buffers>(
    tree: &Tree<'_>,
    family: Family,
    provider: &P,
    scratch: &mut Scratch<B>,
    report: &mut dyn FnMut(&str, Outcome),
) {
    let outcome = |check: Check| match check {
        Ok(()) => Outcome::Passed,
        Err(Stop::Fail(f)) => Outcome::Failed(f),
        Err(Stop::Skip(s)) => Outcome::Skipped(s),
    };
    let Some(doc) = tree.root().get(family.name()) else {
        report(
            "(file)",
            Outcome::Failed(Fail::new("the family's file is not in the vectors")),
        );
        return;
    };
    report("(file)", outcome(envelope(family, doc).map_err(Stop::from)));
    let Ok(cases) = doc.list("cases") else {
        return;
    };
    let mut ctx = Ctx {
        provider,
        scratch,
        doc,
    };
    for case in cases {
        let name = case.str("name").unwrap_or("(unnamed)");
        let check = match family {
            Family::Splits => splits::check(&mut ctx, case),
            Family::TidWrap => splits::check_tid_wrap(&mut ctx, case),
            Family::Control => control::check(&mut ctx, case),
            Family::Commands => commands::check(&mut ctx, case),
            Family::KeyExchange => key_exchange::check(&mut ctx, case),
            Family::Session => session::check(&mut ctx, case),
            Family::Assembly => assembly::check(&mut ctx, case),
            Family::Invalid => invalid::check(&mut ctx, case),
            Family::LargeMessages => large::check(&mut ctx, case),
            Family::LongContainers => long::check(&mut ctx, case),
        };
        report(name, outcome(check));
    }
}

/// The envelope every file shares, and what each generator promises about its file.
fn envelope(family: Family, doc: Node<'_>) -> Result<(), Fail> {
    fail::ensure(doc.str("family")? == family.name(), "family")?;
    fail::same_int("schema_version", doc.u64("schema_version")?, 1)?;
    let cases = doc.list("cases")?;
    fail::ensure(cases.remaining() > 0, "no cases")?;
    for (i, case) in cases.enumerate() {
        let name = case.str("name").map_err(|f| f.at(i))?;
        let dups = cases.filter(|c| c.str("name") == Ok(name)).count();
        fail::ensure(dups == 1, "duplicate case name").map_err(|f| f.at(i))?;
    }
    match family {
        Family::LargeMessages => large::envelope(doc),
        Family::LongContainers => long::envelope(doc),
        _ => {
            fail::ensure(doc.str("generator")? == "tools/vectors/gen.py", "generator")?;
            fail::ensure(
                doc.str("reference")? == "blerpc-protocol 0.8.0",
                "reference",
            )
        }
    }
}
