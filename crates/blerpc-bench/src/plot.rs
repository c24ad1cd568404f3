//! Shared pieces of the suites' SVG charts.

/// `s` as SVG text: `&`, `<` and `>` escaped (the charts' labels).
pub(crate) fn svg_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
