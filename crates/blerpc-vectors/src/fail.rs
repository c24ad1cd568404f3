//! What a failed check reports, without an allocator: a fixed description, the item it concerns
//! (container, step, operation) and, for byte strings and integers, what differed.

use core::fmt;

/// A failed check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fail {
    /// What differed or went wrong.
    pub what: &'static str,
    /// The index of the container, step or operation it concerns, if any.
    pub item: Option<usize>,
    /// The values that differed.
    pub detail: Detail,
}

/// The values behind a [`Fail`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    /// Nothing more to say.
    None,
    /// The vector field concerned.
    Field(&'static str),
    /// Two integers.
    Ints {
        /// Ours.
        got: u64,
        /// The vector's.
        want: u64,
    },
    /// Two byte strings.
    Bytes(Diff),
}

/// Where two byte strings differ, with a few bytes of each from there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Diff {
    /// The length of ours.
    pub got_len: usize,
    /// The length of the vector's.
    pub want_len: usize,
    /// The first offset where they differ (or the shorter length).
    pub at: usize,
    got: [u8; DIFF_BYTES],
    want: [u8; DIFF_BYTES],
}

/// How many bytes of each side a [`Diff`] keeps.
const DIFF_BYTES: usize = 16;

impl Diff {
    fn new(got: &[u8], want: &[u8]) -> Self {
        let at = got
            .iter()
            .zip(want)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        let window = |b: &[u8]| {
            let mut out = [0; DIFF_BYTES];
            let from = b.get(at..).unwrap_or(&[]);
            out.iter_mut().zip(from).for_each(|(o, b)| *o = *b);
            out
        };
        Diff {
            got_len: got.len(),
            want_len: want.len(),
            at,
            got: window(got),
            want: window(want),
        }
    }

    /// The bytes of ours from [`Diff::at`] (up to 16).
    pub fn got(&self) -> &[u8] {
        let n = self.got_len.saturating_sub(self.at);
        self.got.get(..n).unwrap_or(&self.got)
    }

    /// The bytes of the vector's from [`Diff::at`] (up to 16).
    pub fn want(&self) -> &[u8] {
        let n = self.want_len.saturating_sub(self.at);
        self.want.get(..n).unwrap_or(&self.want)
    }
}

impl Fail {
    /// A failure described by `what` alone.
    pub const fn new(what: &'static str) -> Self {
        Fail {
            what,
            item: None,
            detail: Detail::None,
        }
    }

    /// A failure concerning the vector field `field`.
    pub const fn field(what: &'static str, field: &'static str) -> Self {
        Fail {
            what,
            item: None,
            detail: Detail::Field(field),
        }
    }

    /// The same failure, said of item `item` (the innermost index is kept).
    pub fn at(self, item: usize) -> Self {
        Fail {
            item: self.item.or(Some(item)),
            ..self
        }
    }
}

/// Attaches an item index to the failure of a result.
pub trait At {
    /// [`Fail::at`] on the error, if any.
    fn at(self, item: usize) -> Self;
}

impl<T> At for Result<T, Fail> {
    fn at(self, item: usize) -> Self {
        self.map_err(|f| f.at(item))
    }
}

/// `Ok` if `cond`, else the failure `what`.
pub fn ensure(cond: bool, what: &'static str) -> Result<(), Fail> {
    if cond { Ok(()) } else { Err(Fail::new(what)) }
}

/// `Ok` if the integers are equal, else `what` with both.
pub fn same_int<T: TryInto<u64> + PartialEq>(
    what: &'static str,
    got: T,
    want: T,
) -> Result<(), Fail> {
    if got == want {
        return Ok(());
    }
    let int = |v: T| v.try_into().unwrap_or(u64::MAX);
    Err(Fail {
        what,
        item: None,
        detail: Detail::Ints {
            got: int(got),
            want: int(want),
        },
    })
}

/// [`same_int`] for lengths and counts.
pub fn same_len(what: &'static str, got: usize, want: usize) -> Result<(), Fail> {
    same_int(what, got, want)
}

/// `Ok` if the byte strings are equal, else `what` with where they differ.
pub fn same_bytes(what: &'static str, got: &[u8], want: &[u8]) -> Result<(), Fail> {
    if got == want {
        return Ok(());
    }
    Err(Fail {
        what,
        item: None,
        detail: Detail::Bytes(Diff::new(got, want)),
    })
}

fn hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    bytes.iter().try_for_each(|b| write!(f, "{b:02x}"))
}

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(i) = self.item {
            write!(f, "[{i}] ")?;
        }
        f.write_str(self.what)?;
        match self.detail {
            Detail::None => Ok(()),
            Detail::Field(name) => write!(f, " (field `{name}`)"),
            Detail::Ints { got, want } => write!(f, ": got {got}, want {want}"),
            Detail::Bytes(d) => {
                write!(
                    f,
                    ": got {} bytes, want {}, first difference at byte {}: got ",
                    d.got_len, d.want_len, d.at
                )?;
                hex(f, d.got())?;
                f.write_str("…, want ")?;
                hex(f, d.want())?;
                f.write_str("…")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::ToString;

    use super::*;

    #[test]
    fn says_where_bytes_differ() {
        let fail = same_bytes("frame", &[1, 2, 3, 4], &[1, 2, 9]).map_err(|f| f.at(7));
        assert_eq!(
            fail.map_err(|f| f.to_string()),
            Err(
                "[7] frame: got 4 bytes, want 3, first difference at byte 2: got 0304…, want 09…"
                    .to_string()
            )
        );
        assert_eq!(same_bytes("x", b"ab", b"ab"), Ok(()));
    }

    #[test]
    fn says_which_integers_differ() {
        let fail = same_int("mtu", 23u16, 247).map_err(|f| f.to_string());
        assert_eq!(fail, Err("mtu: got 23, want 247".to_string()));
        let field = Fail::field("missing field", "tid").at(1).at(2);
        assert_eq!(field.to_string(), "[1] missing field (field `tid`)");
    }
}
