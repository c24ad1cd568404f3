//! Text tables whose columns are as wide as their widest cell: every table the lab prints.
//!
//! ```
//! use blerpc_bench::table::{Align, Table};
//!
//! let mut t = Table::new(["benchmark", "ms", "ratio"]).align(2, Align::Right);
//! t.row(["echo_roundtrip", "30.0", "1.00"]);
//! t.row(["counter_stream", "3.0", "0.91"]);
//! assert_eq!(
//!     t.plain("  "),
//!     "  benchmark       ms    ratio\n  --------------  ----  -----\n  \
//!      echo_roundtrip  30.0   1.00\n  counter_stream  3.0    0.91\n"
//! );
//! ```

use std::fmt::Write as _;

/// Where a column's cells sit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Left (text).
    Left,
    /// Right (numbers).
    Right,
}

/// A header and rows of cells.
#[derive(Clone, Debug, Default)]
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers, every column left-aligned.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        let header: Vec<String> = header.into_iter().map(Into::into).collect();
        Table {
            align: vec![Align::Left; header.len()],
            header,
            rows: Vec::new(),
        }
    }

    /// Aligns column `index` (from 0).
    pub fn align(mut self, index: usize, align: Align) -> Table {
        if let Some(a) = self.align.get_mut(index) {
            *a = align;
        }
        self
    }

    /// Adds a row (missing cells are blank, extra ones are dropped).
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let mut cells: Vec<String> = cells.into_iter().map(Into::into).collect();
        cells.resize(self.header.len(), String::new());
        self.rows.push(cells);
    }

    /// Whether no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    fn widths(&self) -> Vec<usize> {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        widths
    }

    fn cell(s: &mut String, cell: &str, width: usize, align: Align) {
        let pad = " ".repeat(width.saturating_sub(cell.chars().count()));
        match align {
            Align::Left => {
                s.push_str(cell);
                s.push_str(&pad);
            }
            Align::Right => {
                s.push_str(&pad);
                s.push_str(cell);
            }
        }
    }

    /// The header, a rule of dashes, then the rows, each line made of the cells padded to
    /// their column's width: `start`, the cells joined by `between`, `end`; no trailing blanks.
    fn lines(&self, start: &str, between: &str, end: &str) -> String {
        let widths = self.widths();
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        let mut out = String::new();
        for row in std::iter::once(&self.header)
            .chain(std::iter::once(&rule))
            .chain(&self.rows)
        {
            let mut line = String::from(start);
            for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
                if i > 0 {
                    line.push_str(between);
                }
                Self::cell(&mut line, cell, *w, self.align[i]);
            }
            line.push_str(end);
            let _ = writeln!(out, "{}", line.trim_end());
        }
        out
    }

    /// Columns two spaces apart, a rule under the header, each line after `indent`.
    pub fn plain(&self, indent: &str) -> String {
        self.lines(indent, "  ", "")
    }

    /// A Markdown table (`| a | b |`), pasteable into the docs.
    pub fn pipe(&self) -> String {
        self.lines("| ", " | ", " |")
    }
}

/// The width prose lines are wrapped to.
pub const WIDTH: usize = 100;

/// `text` wrapped at spaces to [`WIDTH`] columns, each line ending in a newline.
pub fn wrap(text: &str) -> String {
    wrap_hanging(text, "")
}

/// `text` wrapped at spaces to [`WIDTH`] columns, lines after the first starting with
/// `indent`.
pub fn wrap_hanging(text: &str, indent: &str) -> String {
    let mut out = String::new();
    // The first line keeps the text's own leading blanks.
    let lead = &text[..text.len() - text.trim_start().len()];
    let mut line = lead.to_string();
    let mut start = line.len();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let len = line.chars().count();
        if len > start && len + 1 + word.chars().count() > WIDTH {
            out.push_str(line.trim_end());
            out.push('\n');
            line = indent.to_string();
            start = indent.len();
        } else if line.len() > start {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_table_pads_every_cell_and_right_aligns_numbers() {
        let mut t = Table::new(["row", "p50"]).align(1, Align::Right);
        t.row(["TCP 64 B", "0.0712 ms"]);
        t.row(["TLS", "1 ms"]);
        assert_eq!(
            t.pipe(),
            "| row      |       p50 |\n| -------- | --------- |\n| TCP 64 B | 0.0712 ms |\n\
             | TLS      |      1 ms |\n"
        );
    }

    #[test]
    fn prose_wraps_at_spaces_with_a_hanging_indent() {
        let text = format!("{} tail", "word ".repeat(30));
        let wrapped = wrap_hanging(&text, "  ");
        let lines: Vec<&str> = wrapped.lines().collect();
        assert_eq!(lines.len(), 2, "{wrapped}");
        assert!(
            lines.iter().all(|l| l.chars().count() <= WIDTH),
            "{wrapped}"
        );
        assert!(
            lines[1].starts_with("  word") && lines[1].ends_with(" tail"),
            "{wrapped}"
        );
        assert_eq!(wrap("short"), "short\n");
        assert_eq!(wrap_hanging("   indented", "   "), "   indented\n");
        // A word longer than the width stays whole.
        let long = "x".repeat(WIDTH + 5);
        assert_eq!(wrap(&long), format!("{long}\n"));
    }

    #[test]
    fn short_rows_are_padded_and_wide_characters_count_once() {
        let mut t = Table::new(["a", "b"]);
        t.row(["×"]);
        t.row(["xx", "y", "dropped"]);
        assert_eq!(t.plain(""), "a   b\n--  -\n×\nxx  y\n");
    }
}
