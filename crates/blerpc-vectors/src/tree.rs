//! The binary form of the vector files, and its reader.
//!
//! `build.rs` converts every `testdata/vectors/*.json` file into one tree of the same shape
//! (no schema is applied): the root is an object of file stem → that file's document.
//!
//! ```text
//! file   = MAGIC value
//! value  = tag:u8 body                        integers little-endian
//!   0 null | 1 false | 2 true                 (no body)
//!   3 uint    u64
//!   4 neg     i64                             (a negative integer)
//!   5 text    len:u32 UTF-8
//!   6 bytes   len:u32 bytes                   (a JSON string of an even number of lowercase
//!                                              hex digits, decoded; "" is empty bytes)
//!   7 list    count:u32 size:u32 value*       (size: the bytes of the items)
//!   8 object  count:u32 size:u32 (key_len:u8 key value)*
//! ```
//!
//! [`Tree::parse`] checks the whole file once (every tag, length and key, every text UTF-8);
//! after that, navigation only looks things up, and a lookup that finds nothing or a value of
//! another type is a [`Fail`] naming the field.

use crate::fail::Fail;
pub use crate::format::MAGIC;
use crate::format::{BYTES, FALSE, LIST, NEG, NULL, OBJECT, TEXT, TRUE, UINT};

/// The deepest nesting [`Tree::parse`] accepts (the vectors nest 7 deep).
const MAX_DEPTH: usize = 16;

const MALFORMED: Fail = Fail::new("the vector file is malformed");

/// A checked vector file.
#[derive(Clone, Copy, Debug)]
pub struct Tree<'a> {
    root: Node<'a>,
}

impl<'a> Tree<'a> {
    /// Checks `file` from end to end and returns its root.
    pub fn parse(file: &'a [u8]) -> Result<Self, Fail> {
        let body = file
            .strip_prefix(MAGIC.as_slice())
            .ok_or(Fail::new("not a vector file (magic)"))?;
        let (root, rest) = split_value(body)?;
        if !rest.is_empty() {
            return Err(MALFORMED);
        }
        validate(root, 0)?;
        Ok(Tree { root })
    }

    /// The root object (file stem → document).
    pub fn root(&self) -> Node<'a> {
        self.root
    }
}

/// One value of the tree.
#[derive(Clone, Copy, Debug)]
pub struct Node<'a> {
    tag: u8,
    /// The body after the tag; for a list or object, the items after count and size.
    body: &'a [u8],
    /// The item count of a list or object.
    count: u32,
}

fn take(bytes: &[u8], n: usize) -> Result<(&[u8], &[u8]), Fail> {
    if bytes.len() < n {
        return Err(MALFORMED);
    }
    Ok(bytes.split_at(n))
}

fn u32_at(bytes: &[u8]) -> Result<(u32, &[u8]), Fail> {
    let (head, rest) = take(bytes, 4)?;
    let mut b = [0; 4];
    b.copy_from_slice(head);
    Ok((u32::from_le_bytes(b), rest))
}

/// Splits the first value off `bytes`.
fn split_value(bytes: &[u8]) -> Result<(Node<'_>, &[u8]), Fail> {
    let (&tag, rest) = bytes.split_first().ok_or(MALFORMED)?;
    let (body, count, rest) = match tag {
        NULL | FALSE | TRUE => (&[][..], 0, rest),
        UINT | NEG => {
            let (body, rest) = take(rest, 8)?;
            (body, 0, rest)
        }
        TEXT | BYTES => {
            let (len, rest) = u32_at(rest)?;
            let (body, rest) = take(rest, len as usize)?;
            (body, 0, rest)
        }
        LIST | OBJECT => {
            let (count, rest) = u32_at(rest)?;
            let (size, rest) = u32_at(rest)?;
            let (body, rest) = take(rest, size as usize)?;
            (body, count, rest)
        }
        _ => return Err(MALFORMED),
    };
    Ok((Node { tag, body, count }, rest))
}

/// Splits the first object entry (`key_len key value`) off `bytes`.
fn split_entry(bytes: &[u8]) -> Result<(&str, Node<'_>, &[u8]), Fail> {
    let (&len, rest) = bytes.split_first().ok_or(MALFORMED)?;
    let (key, rest) = take(rest, usize::from(len))?;
    let key = core::str::from_utf8(key).map_err(|_| MALFORMED)?;
    let (value, rest) = split_value(rest)?;
    Ok((key, value, rest))
}

fn validate(node: Node<'_>, depth: usize) -> Result<(), Fail> {
    if depth > MAX_DEPTH {
        return Err(MALFORMED);
    }
    let mut rest = node.body;
    match node.tag {
        TEXT => {
            core::str::from_utf8(node.body).map_err(|_| MALFORMED)?;
            rest = &[];
        }
        LIST => {
            for _ in 0..node.count {
                let (item, after) = split_value(rest)?;
                validate(item, depth + 1)?;
                rest = after;
            }
        }
        OBJECT => {
            for _ in 0..node.count {
                let (_, item, after) = split_entry(rest)?;
                validate(item, depth + 1)?;
                rest = after;
            }
        }
        _ => rest = &[],
    }
    if rest.is_empty() {
        Ok(())
    } else {
        Err(MALFORMED)
    }
}

impl<'a> Node<'a> {
    /// `true` for JSON `null`.
    pub fn is_null(&self) -> bool {
        self.tag == NULL
    }

    /// A boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self.tag {
            FALSE => Some(false),
            TRUE => Some(true),
            _ => None,
        }
    }

    /// A non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        let b: [u8; 8] = self.body.try_into().ok()?;
        (self.tag == UINT).then(|| u64::from_le_bytes(b))
    }

    /// A string that is not hex (or the empty string).
    pub fn as_str(&self) -> Option<&'a str> {
        match self.tag {
            TEXT => core::str::from_utf8(self.body).ok(),
            BYTES if self.body.is_empty() => Some(""),
            _ => None,
        }
    }

    /// A hex string, decoded.
    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        (self.tag == BYTES).then_some(self.body)
    }

    /// The items of a list.
    pub fn as_list(&self) -> Option<Items<'a>> {
        (self.tag == LIST).then_some(Items {
            rest: self.body,
            left: self.count,
        })
    }

    /// The entries of an object, in key order.
    pub fn as_object(&self) -> Option<Entries<'a>> {
        (self.tag == OBJECT).then_some(Entries {
            rest: self.body,
            left: self.count,
        })
    }

    /// The number of items of a list or entries of an object (0 for anything else).
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// `true` if [`Node::len`] is 0.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The value of `key` in an object (`None` if absent or not an object).
    pub fn get(&self, key: &str) -> Option<Node<'a>> {
        self.as_object()?.find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The value of `key`, which must be present.
    pub fn field(&self, key: &'static str) -> Result<Node<'a>, Fail> {
        self.get(key).ok_or(Fail::field("missing field", key))
    }

    /// `self[key]` as text.
    pub fn str(&self, key: &'static str) -> Result<&'a str, Fail> {
        self.get(key)
            .and_then(|v| v.as_str())
            .ok_or(Fail::field("field missing or not text", key))
    }

    /// `self[key]` as bytes (a hex string).
    pub fn bytes(&self, key: &'static str) -> Result<&'a [u8], Fail> {
        self.get(key)
            .and_then(|v| v.as_bytes())
            .ok_or(Fail::field("field missing or not hex", key))
    }

    /// `self[key]` as exactly `N` bytes.
    pub fn array<const N: usize>(&self, key: &'static str) -> Result<[u8; N], Fail> {
        self.bytes(key)?
            .try_into()
            .map_err(|_| Fail::field("field has the wrong length", key))
    }

    /// `self[key]` as a non-negative integer.
    pub fn u64(&self, key: &'static str) -> Result<u64, Fail> {
        self.get(key)
            .and_then(|v| v.as_u64())
            .ok_or(Fail::field("field missing or not an unsigned integer", key))
    }

    /// `self[key]` as an integer of type `T`.
    pub fn int<T: TryFrom<u64>>(&self, key: &'static str) -> Result<T, Fail> {
        T::try_from(self.u64(key)?).map_err(|_| Fail::field("integer out of range", key))
    }

    /// `self[key]` as a `usize`.
    pub fn usize(&self, key: &'static str) -> Result<usize, Fail> {
        self.int(key)
    }

    /// `self[key]` as a `u32`.
    pub fn u32(&self, key: &'static str) -> Result<u32, Fail> {
        self.int(key)
    }

    /// `self[key]` as a `u16`.
    pub fn u16(&self, key: &'static str) -> Result<u16, Fail> {
        self.int(key)
    }

    /// `self[key]` as a `u8`.
    pub fn u8(&self, key: &'static str) -> Result<u8, Fail> {
        self.int(key)
    }

    /// `self[key]` as a boolean.
    pub fn bool(&self, key: &'static str) -> Result<bool, Fail> {
        self.get(key)
            .and_then(|v| v.as_bool())
            .ok_or(Fail::field("field missing or not a boolean", key))
    }

    /// `self[key]` as a list.
    pub fn list(&self, key: &'static str) -> Result<Items<'a>, Fail> {
        self.get(key)
            .and_then(|v| v.as_list())
            .ok_or(Fail::field("field missing or not a list", key))
    }
}

/// The items of a list.
#[derive(Clone, Copy, Debug)]
pub struct Items<'a> {
    rest: &'a [u8],
    left: u32,
}

impl<'a> Iterator for Items<'a> {
    type Item = Node<'a>;
    fn next(&mut self) -> Option<Node<'a>> {
        self.left = self.left.checked_sub(1)?;
        let (item, rest) = split_value(self.rest).ok()?;
        self.rest = rest;
        Some(item)
    }
}

impl Items<'_> {
    /// Items not yet returned.
    pub fn remaining(&self) -> usize {
        self.left as usize
    }
}

/// The entries of an object.
#[derive(Clone, Copy, Debug)]
pub struct Entries<'a> {
    rest: &'a [u8],
    left: u32,
}

impl<'a> Iterator for Entries<'a> {
    type Item = (&'a str, Node<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        self.left = self.left.checked_sub(1)?;
        let (key, value, rest) = split_entry(self.rest).ok()?;
        self.rest = rest;
        Some((key, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `{"a": [1, "0aff", null], "b": "text", "c": -2, "d": true, "e": ""}`, by hand.
    const FILE: &[u8] = &[
        b'B', b'L', b'R', b'P', b'C', b'V', b'T', b'1', //
        OBJECT, 5, 0, 0, 0, 60, 0, 0, 0, //
        1, b'a', LIST, 3, 0, 0, 0, 17, 0, 0, 0, //
        UINT, 1, 0, 0, 0, 0, 0, 0, 0, //
        BYTES, 2, 0, 0, 0, 0x0a, 0xff, //
        NULL, //
        1, b'b', TEXT, 4, 0, 0, 0, b't', b'e', b'x', b't', //
        1, b'c', NEG, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, //
        1, b'd', TRUE, //
        1, b'e', BYTES, 0, 0, 0, 0, //
    ];

    #[test]
    fn reads_every_kind_of_value() -> Result<(), Fail> {
        let root = Tree::parse(FILE)?.root();
        let mut a = root.list("a")?;
        assert_eq!(a.remaining(), 3);
        assert_eq!(a.next().and_then(|n| n.as_u64()), Some(1));
        assert_eq!(a.next().and_then(|n| n.as_bytes()), Some(&[0x0a, 0xff][..]));
        assert!(a.next().is_some_and(|n| n.is_null()));
        assert!(a.next().is_none());
        assert_eq!(root.str("b")?, "text");
        assert!(root.u64("c").is_err(), "a negative integer is not a u64");
        assert!(root.bool("d")?);
        // The empty string reads as text and as bytes.
        assert_eq!(root.str("e")?, "");
        assert_eq!(root.bytes("e")?, &[][..]);
        assert!(root.bytes("b").is_err() && root.get("z").is_none());
        let keys: [&str; 5] = core::array::from_fn(|i| {
            root.as_object()
                .and_then(|mut e| e.nth(i))
                .map_or("", |(k, _)| k)
        });
        assert_eq!(keys, ["a", "b", "c", "d", "e"]);
        Ok(())
    }

    #[test]
    fn refuses_a_damaged_file() {
        assert!(Tree::parse(FILE).is_ok());
        assert!(Tree::parse(&FILE[..FILE.len() - 1]).is_err());
        let mut bad = [0u8; FILE.len()];
        bad.copy_from_slice(FILE);
        bad[8] = 9; // an unknown tag
        assert!(Tree::parse(&bad).is_err());
        bad[8] = OBJECT;
        bad[13] = 59; // the object's size one byte short
        assert!(Tree::parse(&bad).is_err());
        bad[13] = 60;
        bad[52] = 0xff; // invalid UTF-8 in the text
        assert!(Tree::parse(&bad).is_err());
        assert!(Tree::parse(b"BLRPCVT0\x00").is_err());
    }
}
