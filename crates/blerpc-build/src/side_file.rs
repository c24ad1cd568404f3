//! The stream-direction side file (`streaming.txt`).
//!
//! The reference generator reads one entry per line, `<command> p2c|c2p`, with `#` comments and
//! blank lines ignored (`wire.md` §4). An entry overrides what the `.proto` says about that
//! command, and is the only way to mark a stream in a file without `service` blocks. For an
//! `rpc` that streams both ways it keeps one of the two directions (the format has no spelling
//! for a bidirectional stream, which the reference's generators do not know).
//!
//! ```text
//! # command        direction
//! counter_stream   p2c   # peripheral -> central
//! counter_upload   c2p   # central -> peripheral
//! ```
//!
//! Unlike the reference, which skips lines it cannot read, a malformed line is an error naming
//! the file and line: a typo there silently turns a stream into a unary call otherwise.

use std::collections::BTreeMap;
use std::path::Path;

use crate::Error;

/// The direction of a streaming command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// `p2c`: peripheral → central. One request, then a stream of responses (a server stream).
    PeripheralToCentral,
    /// `c2p`: central → peripheral. A stream of requests, then one response (a client stream).
    CentralToPeripheral,
}

impl Direction {
    /// The side-file spelling: `p2c` or `c2p`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PeripheralToCentral => "p2c",
            Self::CentralToPeripheral => "c2p",
        }
    }
}

/// One side-file entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The stream direction.
    pub direction: Direction,
    /// The 1-based line it was read from.
    pub line: usize,
}

/// A parsed side file: command name → direction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SideFile {
    entries: BTreeMap<String, Entry>,
}

impl SideFile {
    /// Reads and parses a side file.
    pub fn read(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path).map_err(|error| Error::Io {
            path: path.to_owned(),
            error,
        })?;
        Self::parse(&text).map_err(|(line, message)| Error::SideFile {
            path: path.to_owned(),
            line,
            message,
        })
    }

    /// Parses side-file text. On error, returns the 1-based line and what is wrong with it.
    ///
    /// Accepted: `<command> <p2c|c2p>` separated by any whitespace, `#` to the end of a line is a
    /// comment, blank lines are skipped. The same command listed twice with the same direction is
    /// accepted; with different directions it is an error.
    pub fn parse(text: &str) -> Result<Self, (usize, String)> {
        let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let content = raw.split_once('#').map_or(raw, |(before, _)| before).trim();
            if content.is_empty() {
                continue;
            }
            let fields: Vec<&str> = content.split_whitespace().collect();
            let [name, direction] = fields.as_slice() else {
                return Err((
                    line,
                    format!("expected `<command> p2c|c2p`, found `{content}`"),
                ));
            };
            let direction = match *direction {
                "p2c" => Direction::PeripheralToCentral,
                "c2p" => Direction::CentralToPeripheral,
                other => {
                    return Err((
                        line,
                        format!("unknown direction `{other}` for `{name}` (expected p2c or c2p)"),
                    ));
                }
            };
            if let Some(previous) = entries.get(*name).cloned() {
                if previous.direction != direction {
                    return Err((
                        line,
                        format!(
                            "`{name}` is {} here but {} on line {}",
                            direction.as_str(),
                            previous.direction.as_str(),
                            previous.line
                        ),
                    ));
                }
                continue;
            }
            entries.insert((*name).to_owned(), Entry { direction, line });
        }
        Ok(Self { entries })
    }

    /// The entry for a command, if any.
    pub fn get(&self, command: &str) -> Option<&Entry> {
        self.entries.get(command)
    }

    /// All entries, by command name.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.entries
            .iter()
            .map(|(name, entry)| (name.as_str(), entry))
    }

    /// Whether the file has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_side_file() {
        let side = SideFile::parse(
            "# Streaming commands\n\
             # <command> <p2c|c2p>\n\
             \n\
             counter_stream p2c\n\
             counter_upload c2p\n",
        )
        .unwrap();
        assert_eq!(
            side.get("counter_stream"),
            Some(&Entry {
                direction: Direction::PeripheralToCentral,
                line: 4
            })
        );
        assert_eq!(
            side.get("counter_upload"),
            Some(&Entry {
                direction: Direction::CentralToPeripheral,
                line: 5
            })
        );
        assert_eq!(side.get("echo"), None);
        assert_eq!(side.entries().count(), 2);
    }

    #[test]
    fn whitespace_trailing_comments_and_crlf() {
        let side = SideFile::parse("  a\tp2c   # trailing\r\n\r\n\tb  c2p\r\n   # only\n").unwrap();
        assert_eq!(
            side.get("a").map(|e| e.direction),
            Some(Direction::PeripheralToCentral)
        );
        assert_eq!(
            side.get("b").map(|e| e.direction),
            Some(Direction::CentralToPeripheral)
        );
    }

    #[test]
    fn empty_and_comment_only() {
        assert!(SideFile::parse("").unwrap().is_empty());
        assert!(SideFile::parse("# nothing\n\n   \n").unwrap().is_empty());
    }

    #[test]
    fn malformed_lines_name_the_line() {
        assert_eq!(
            SideFile::parse("a p2c\nb\n").unwrap_err(),
            (2, "expected `<command> p2c|c2p`, found `b`".to_owned())
        );
        assert_eq!(
            SideFile::parse("a p2c extra").unwrap_err(),
            (
                1,
                "expected `<command> p2c|c2p`, found `a p2c extra`".to_owned()
            )
        );
        assert_eq!(
            SideFile::parse("\n\na bidi").unwrap_err(),
            (
                3,
                "unknown direction `bidi` for `a` (expected p2c or c2p)".to_owned()
            )
        );
        // Directions are lower-case only.
        assert!(SideFile::parse("a P2C").is_err());
    }

    #[test]
    fn duplicates() {
        let side = SideFile::parse("a p2c\na p2c\n").unwrap();
        assert_eq!(side.get("a").map(|e| e.line), Some(1));
        assert_eq!(
            SideFile::parse("a p2c\n# x\na c2p\n").unwrap_err(),
            (3, "`a` is c2p here but p2c on line 1".to_owned())
        );
    }
}
