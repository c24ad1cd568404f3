//! Turning what people paste into PDU bytes.
//!
//! One captured PDU (one GATT write or notification) is one hex string. Accepted forms, all
//! case-insensitive:
//!
//! ```text
//! 0000c4026400            gapless
//! 00 00 c4 02 64 00       spaces (quote the argument)
//! 00:00:c4:02:64:00       colons (Wireshark "copy as hex"), also '-' ',' '_'
//! 0x0000c4026400          one 0x prefix ...
//! 0x00 0x00 0xc4 0x02     ... or one per group
//! ```
//!
//! Every separator-delimited group must have an even number of digits, so `0 c4` is rejected
//! rather than guessed at. Files and stdin hold one PDU per line; `#` starts a comment and blank
//! lines are skipped.

/// One PDU as the user gave it, before hex decoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PduInput {
    /// Where it came from, for messages: `argument 3`, `line 7 of capture.txt`, `line 2 of stdin`.
    pub source: String,
    /// The hex text (comments already removed).
    pub text: String,
}

impl PduInput {
    /// A PDU from the `position`-th (1-based) positional argument.
    pub fn arg(position: usize, text: impl Into<String>) -> Self {
        PduInput {
            source: format!("argument {position}"),
            text: text.into(),
        }
    }

    /// PDUs from the lines of a file or stdin, named `name` in messages.
    pub fn lines(name: &str, content: &str) -> Vec<Self> {
        content
            .lines()
            .enumerate()
            .filter_map(|(i, line)| {
                let text = line.split('#').next().unwrap_or_default().trim();
                (!text.is_empty()).then(|| PduInput {
                    source: format!("line {} of {name}", i + 1),
                    text: text.to_owned(),
                })
            })
            .collect()
    }
}

/// Why a hex string does not decode. `position` is a 0-based character index into the text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HexError {
    /// A character that is neither a hex digit nor a separator.
    #[error("invalid hex digit {ch:?} at char {position}")]
    InvalidChar {
        /// The character.
        ch: char,
        /// Its 0-based character position.
        position: usize,
    },
    /// A group of digits between separators has an odd length.
    #[error("odd number of hex digits ({digits}) in the group starting at char {position}")]
    OddGroup {
        /// Position of the group's first digit.
        position: usize,
        /// Number of digits in the group.
        digits: usize,
    },
    /// `0x` with no digits after it.
    #[error("`0x` without digits at char {position}")]
    EmptyPrefix {
        /// Position of the `0`.
        position: usize,
    },
    /// No hex digits at all.
    #[error("no hex digits (empty PDU)")]
    Empty,
}

impl HexError {
    /// The character position the error points at, if any.
    pub fn position(&self) -> Option<usize> {
        match *self {
            HexError::InvalidChar { position, .. }
            | HexError::OddGroup { position, .. }
            | HexError::EmptyPrefix { position } => Some(position),
            HexError::Empty => None,
        }
    }
}

fn is_separator(c: char) -> bool {
    c.is_whitespace() || matches!(c, ':' | '-' | ',' | '_')
}

/// Decodes one PDU written in any of the accepted hex forms.
pub fn parse_hex(text: &str) -> Result<Vec<u8>, HexError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::with_capacity(chars.len() / 2);
    let mut i = 0;
    while i < chars.len() {
        if chars.get(i).copied().is_some_and(is_separator) {
            i += 1;
            continue;
        }
        // A group: optional 0x prefix, then digits up to the next separator.
        let group_start = i;
        let prefixed = chars.get(i) == Some(&'0') && matches!(chars.get(i + 1), Some('x' | 'X'));
        if prefixed {
            i += 2;
        }
        let digits_start = i;
        let mut high: Option<u8> = None;
        while let Some(&c) = chars.get(i) {
            if is_separator(c) {
                break;
            }
            let Some(v) = c.to_digit(16).and_then(|v| u8::try_from(v).ok()) else {
                return Err(HexError::InvalidChar { ch: c, position: i });
            };
            match high.take() {
                Some(h) => out.push(h << 4 | v),
                None => high = Some(v),
            }
            i += 1;
        }
        let digits = i - digits_start;
        if prefixed && digits == 0 {
            return Err(HexError::EmptyPrefix {
                position: group_start,
            });
        }
        if high.is_some() {
            return Err(HexError::OddGroup {
                position: digits_start,
                digits,
            });
        }
    }
    if out.is_empty() {
        return Err(HexError::Empty);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_forms() {
        let want = vec![0x00, 0x00, 0xc4, 0x02, 0x64, 0x00];
        for s in [
            "0000c4026400",
            "0000C4026400",
            "00 00 c4 02 64 00",
            "00:00:c4:02:64:00",
            "0x0000c4026400",
            "0X0000c4026400",
            "0x00 0x00 0xc4 0x02 0x64 0x00",
            "  0000 c402 6400\t",
            "00-00-c4-02-64-00",
        ] {
            assert_eq!(parse_hex(s), Ok(want.clone()), "{s:?}");
        }
    }

    #[test]
    fn errors_point_at_the_character() {
        assert_eq!(
            parse_hex("0000g400"),
            Err(HexError::InvalidChar {
                ch: 'g',
                position: 4
            })
        );
        assert_eq!(
            parse_hex("00 0 c4"),
            Err(HexError::OddGroup {
                position: 3,
                digits: 1
            })
        );
        assert_eq!(
            parse_hex("abc"),
            Err(HexError::OddGroup {
                position: 0,
                digits: 3
            })
        );
        assert_eq!(
            parse_hex("00 0x"),
            Err(HexError::EmptyPrefix { position: 3 })
        );
        assert_eq!(parse_hex(" : "), Err(HexError::Empty));
        // A multi-byte character is one position.
        assert_eq!(
            parse_hex("00é0"),
            Err(HexError::InvalidChar {
                ch: 'é',
                position: 2
            })
        );
    }

    #[test]
    fn lines_skip_comments_and_blanks() {
        let pdus = PduInput::lines(
            "cap.txt",
            "# header\n0000c400  # timeout req\n\n  0500d40102\n",
        );
        assert_eq!(
            pdus,
            vec![
                PduInput {
                    source: "line 2 of cap.txt".into(),
                    text: "0000c400".into()
                },
                PduInput {
                    source: "line 4 of cap.txt".into(),
                    text: "0500d40102".into()
                },
            ]
        );
    }
}
