//! Newline-delimited JSON from a request body that arrives in chunks: one item per line, each
//! line at most a configured length, memory bounded by that length whatever the body sends.
//!
//! ```
//! use blerpc_gateway::ndjson::{LineError, Lines};
//!
//! let mut lines = Lines::new(16);
//! lines.push(b"{\"seq\":0}\n{\"se");
//! assert_eq!(lines.next_line(), Ok(Some((1, "{\"seq\":0}".to_string()))));
//! assert_eq!(lines.next_line(), Ok(None)); // the rest of line 2 has not come yet
//! lines.push(b"q\":1}");
//! lines.finish(); // the body ended: its last line needs no newline
//! assert_eq!(lines.next_line(), Ok(Some((2, "{\"seq\":1}".to_string()))));
//! lines.push(&[b'x'; 40]);
//! assert_eq!(lines.next_line(), Err(LineError::TooLong { line: 3, max: 16 }));
//! ```

/// A line that cannot be an item.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// The line is longer than allowed.
    #[error("line {line} is longer than {max} bytes")]
    TooLong {
        /// Its number (from 1).
        line: usize,
        /// The limit.
        max: usize,
    },
    /// The line is not UTF-8.
    #[error("line {line} is not UTF-8")]
    NotUtf8 {
        /// Its number (from 1).
        line: usize,
    },
}

/// Lines of a body, as chunks arrive (see the [module docs](self)).
#[derive(Debug)]
pub struct Lines {
    pending: Vec<u8>,
    /// Bytes of the unfinished line at the end of `pending`.
    tail: usize,
    max_line: usize,
    line: usize,
    finished: bool,
    /// The error that ended the stream, returned again by every later call.
    failed: Option<LineError>,
}

impl Lines {
    /// Lines of at most `max_line` bytes (the newline and a `\r` before it not counted).
    pub fn new(max_line: usize) -> Lines {
        Lines {
            pending: Vec::new(),
            tail: 0,
            max_line,
            line: 0,
            finished: false,
            failed: None,
        }
    }

    /// Appends a chunk of the body. Of a line longer than the limit only the first
    /// `max_line + 2` bytes are kept (enough to refuse it), so an endless line holds no more;
    /// complete lines wait for [`Lines::next_line`].
    pub fn push(&mut self, chunk: &[u8]) {
        if self.failed.is_some() {
            return; // the stream has ended in an error: nothing more is kept
        }
        for piece in chunk.split_inclusive(|&b| b == b'\n') {
            let complete = piece.last() == Some(&b'\n');
            let body = if complete {
                &piece[..piece.len() - 1]
            } else {
                piece
            };
            let room = (self.max_line + 2).saturating_sub(self.tail);
            let kept = &body[..body.len().min(room)];
            self.pending.extend_from_slice(kept);
            self.tail += kept.len();
            if complete {
                self.pending.push(b'\n');
                self.tail = 0;
            }
        }
    }

    /// The body ended: a last line without a newline is complete.
    pub fn finish(&mut self) {
        if !self.finished && self.tail > 0 {
            self.pending.push(b'\n');
            self.tail = 0;
        }
        self.finished = true;
    }

    /// The next complete, non-blank line with its number, `Ok(None)` when no complete line is
    /// left yet; an error (a line too long, or not UTF-8) ends the stream: every later call
    /// returns it again and nothing more is kept.
    pub fn next_line(&mut self) -> Result<Option<(usize, String)>, LineError> {
        loop {
            if let Some(e) = &self.failed {
                return Err(e.clone());
            }
            let Some(nl) = self.pending.iter().position(|&b| b == b'\n') else {
                if self.pending.len() > self.max_line {
                    self.fail(LineError::TooLong {
                        line: self.line + 1,
                        max: self.max_line,
                    });
                    continue;
                }
                return Ok(None);
            };
            let mut end = nl;
            if end > 0 && self.pending[end - 1] == b'\r' {
                end -= 1;
            }
            self.line += 1;
            if end > self.max_line {
                self.fail(LineError::TooLong {
                    line: self.line,
                    max: self.max_line,
                });
                continue;
            }
            let Ok(text) = std::str::from_utf8(&self.pending[..end]) else {
                self.fail(LineError::NotUtf8 { line: self.line });
                continue;
            };
            let text = text.trim().to_string();
            self.pending.drain(..=nl);
            if !text.is_empty() {
                return Ok(Some((self.line, text)));
            }
        }
    }

    /// Ends the stream with `e`: nothing more is kept or handed out.
    fn fail(&mut self, e: LineError) {
        self.pending = Vec::new();
        self.failed = Some(e);
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(lines: &mut Lines) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        while let Ok(Some(l)) = lines.next_line() {
            out.push(l);
        }
        out
    }

    #[test]
    fn lines_split_across_chunks_blank_lines_and_crlf() {
        let mut l = Lines::new(64);
        for chunk in [&b"{\"a\":1}\r"[..], b"\n\n  \n{\"b\"", b":2}\n{\"c\":3}"] {
            l.push(chunk);
        }
        l.finish();
        assert_eq!(
            all(&mut l),
            [
                (1, "{\"a\":1}".to_string()),
                (4, "{\"b\":2}".to_string()),
                (5, "{\"c\":3}".to_string())
            ]
        );
        assert_eq!(l.held(), 0);
    }

    #[test]
    fn an_endless_line_is_refused_with_bounded_memory() {
        let mut l = Lines::new(10);
        for _ in 0..1000 {
            l.push(&[b'x'; 1000]);
            assert!(l.held() <= 12, "held {}", l.held());
        }
        assert_eq!(l.next_line(), Err(LineError::TooLong { line: 1, max: 10 }));
        assert_eq!(l.next_line(), Err(LineError::TooLong { line: 1, max: 10 }));
    }

    #[test]
    fn a_long_line_after_good_ones_and_bad_utf8_are_named() {
        let mut l = Lines::new(4);
        l.push(b"ab\nabcdef\n");
        assert_eq!(l.next_line(), Ok(Some((1, "ab".to_string()))));
        assert_eq!(l.next_line(), Err(LineError::TooLong { line: 2, max: 4 }));
        let mut l = Lines::new(4);
        l.push(b"\xff\n");
        assert_eq!(l.next_line(), Err(LineError::NotUtf8 { line: 1 }));
    }
}
