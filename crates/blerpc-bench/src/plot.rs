//! Every chart of the lab: panels of grouped bars with dashed marks, drawn by plotters' SVG
//! backend.
//!
//! A [`Chart`] is only data (panels of groups × series, the marks, the notes under them); the
//! suites fill one in and [`Chart::svg`] lays it out, with one legend for every panel.

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::FontTransform;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Blue: ours, first.
pub const BLUE: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
/// Light blue: ours, second.
pub const LIGHT_BLUE: RGBColor = RGBColor(0x9e, 0xca, 0xe1);
/// Green: ours, third.
pub const GREEN: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
/// Orange: a baseline.
pub const ORANGE: RGBColor = RGBColor(0xff, 0x9f, 0x1c);
/// Grey: a baseline or a published figure.
pub const GREY: RGBColor = RGBColor(0xa0, 0xae, 0xc0);
/// Dark grey: a baseline.
pub const DARK_GREY: RGBColor = RGBColor(0x7f, 0x7f, 0x7f);
/// Red: a published figure, a target or a limit.
pub const RED: RGBColor = RGBColor(0xd6, 0x27, 0x28);
/// Pink: a second published figure.
pub const PINK: RGBColor = RGBColor(0xff, 0x98, 0x96);

/// A chart: panels in a grid, then one legend and the notes.
#[derive(Clone, Debug)]
pub struct Chart {
    /// The panels, row by row.
    pub panels: Vec<Panel>,
    /// Panels per row.
    pub columns: usize,
    /// Width and height of one panel, pixels.
    pub panel_size: (u32, u32),
    /// Lines of text under the legend (method, units, the command).
    pub notes: Vec<String>,
}

/// One panel: a bar per series in each group, on one value axis.
#[derive(Clone, Debug)]
pub struct Panel {
    /// Printed above the panel.
    pub title: String,
    /// The group labels along the bottom.
    pub groups: Vec<String>,
    /// The bars: each series has one value (or none) per group.
    pub series: Vec<Series>,
    /// Dashed marks over the bars.
    pub marks: Vec<Mark>,
    /// Where bars rise from (0, or 1 for ratios where 1 is the baseline).
    pub base: f64,
    /// Appended to each tick label (`"×"` for ratios).
    pub tick_suffix: &'static str,
    /// Print each bar's value above it.
    pub value_labels: bool,
}

/// One series of bars.
#[derive(Clone, Debug)]
pub struct Series {
    /// Its legend entry.
    pub name: String,
    /// Its fill.
    pub color: RGBColor,
    /// One value per group (`None`: not measured there).
    pub values: Vec<Option<f64>>,
}

/// A dashed mark.
#[derive(Clone, Debug)]
pub enum Mark {
    /// A level across the whole panel (a target).
    Level {
        /// Its legend entry.
        name: String,
        /// Its colour.
        color: RGBColor,
        /// The level.
        value: f64,
    },
    /// A dash over each group's bars (a limit that differs per group).
    PerGroup {
        /// Its legend entry.
        name: String,
        /// Its colour.
        color: RGBColor,
        /// One level per group.
        values: Vec<Option<f64>>,
    },
}

impl Mark {
    fn legend(&self) -> (&str, RGBColor, bool) {
        match self {
            Mark::Level { name, color, .. } | Mark::PerGroup { name, color, .. } => {
                (name, *color, true)
            }
        }
    }

    fn values(&self) -> Vec<f64> {
        match self {
            Mark::Level { value, .. } => vec![*value],
            Mark::PerGroup { values, .. } => values.iter().flatten().copied().collect(),
        }
    }
}

const FONT: &str = "sans-serif";
/// plotters writes a font of size `n` as `n / 1.24` pixels: the sizes below are in pixels.
fn px(pixels: f64) -> f64 {
    pixels * 1.24
}
const LINE: u32 = 16;
const LEGEND_SWATCH: i32 = 12;
/// The advance of one character of a value label, pixels (about 0.6 of its 10-pixel size).
const LABEL_ADVANCE: f64 = 6.0;

/// A short label for `v`: as many digits as its size needs.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.1 || a == 0.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// The legend laid out in lines that fit `width`: (name, colour, is a mark, x offset) per line.
type LegendLines<'a> = Vec<Vec<(&'a str, RGBColor, bool, i32)>>;

impl Chart {
    fn legend(&self) -> Vec<(&str, RGBColor, bool)> {
        let mut out: Vec<(&str, RGBColor, bool)> = Vec::new();
        for panel in &self.panels {
            let entries = panel
                .series
                .iter()
                .map(|s| (s.name.as_str(), s.color, false))
                .chain(panel.marks.iter().map(Mark::legend));
            for entry in entries {
                if !out.iter().any(|(n, _, _)| *n == entry.0) {
                    out.push(entry);
                }
            }
        }
        out
    }

    fn legend_lines(&self, width: u32) -> LegendLines<'_> {
        let mut lines: LegendLines<'_> = vec![Vec::new()];
        let mut x = 10;
        for (name, color, mark) in self.legend() {
            // The naive font's advance is about 0.6 of its size per character.
            let w = LEGEND_SWATCH + 6 + (name.chars().count() as i32 * 7) + 18;
            if x + w > width as i32 && x > 10 {
                lines.push(Vec::new());
                x = 10;
            }
            if let Some(line) = lines.last_mut() {
                line.push((name, color, mark, x));
            }
            x += w;
        }
        lines
    }

    /// The chart as an SVG document.
    pub fn svg(&self) -> String {
        let columns = self.columns.max(1);
        let rows = self.panels.len().div_ceil(columns).max(1);
        let (pw, ph) = self.panel_size;
        let width = pw * columns as u32;
        let legend = self.legend_lines(width);
        let below = LINE * (legend.len() + self.notes.len()) as u32 + 12;
        let height = ph * rows as u32 + below;
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (width, height)).into_drawing_area();
            // Drawing into a string cannot fail; an error here would only lose the chart.
            let _ = self.draw(&root, &legend, ph * rows as u32);
            let _ = root.present();
        }
        out
    }

    fn draw(
        &self,
        root: &DrawingArea<SVGBackend<'_>, Shift>,
        legend: &LegendLines<'_>,
        panels_height: u32,
    ) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
        root.fill(&WHITE)?;
        let (top, bottom) = root.split_vertically(panels_height);
        let rows = self.panels.len().div_ceil(self.columns.max(1)).max(1);
        let cells = top.split_evenly((rows, self.columns.max(1)));
        for (panel, area) in self.panels.iter().zip(&cells) {
            panel.draw(area)?;
        }
        let text = (FONT, px(12.0)).into_font().color(&BLACK);
        let mut y = 6;
        for line in legend {
            for (name, color, mark, x) in line {
                let mid = y + LINE as i32 / 2;
                if *mark {
                    bottom.draw(&DashedPathElement::new(
                        vec![(*x, mid), (*x + LEGEND_SWATCH, mid)],
                        4,
                        2,
                        color.stroke_width(2),
                    ))?;
                } else {
                    bottom.draw(&Rectangle::new(
                        [(*x, mid - 5), (*x + LEGEND_SWATCH, mid + 5)],
                        color.filled(),
                    ))?;
                }
                bottom.draw(&Text::new(
                    name.to_string(),
                    (*x + LEGEND_SWATCH + 6, mid),
                    text.pos(Pos::new(HPos::Left, VPos::Center)),
                ))?;
            }
            y += LINE as i32;
        }
        for note in &self.notes {
            bottom.draw(&Text::new(
                note.clone(),
                (10, y + LINE as i32 / 2),
                text.pos(Pos::new(HPos::Left, VPos::Center)),
            ))?;
            y += LINE as i32;
        }
        Ok(())
    }
}

impl Panel {
    /// The value axis: from below the lowest value (at most the base) to above the tallest,
    /// with room for the value labels.
    fn range(&self) -> (f64, f64) {
        let values: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.values.iter().flatten().copied())
            .chain(self.marks.iter().flat_map(Mark::values))
            .filter(|v| v.is_finite())
            .collect();
        let lo = values.iter().copied().fold(self.base.min(0.0), f64::min);
        let lo = if self.base > 0.0 {
            // Ratio panels start a little under the lowest bar, never far below the baseline.
            values.iter().copied().fold(self.base * 0.8, f64::min) * 0.95
        } else {
            lo
        };
        let hi = values.iter().copied().fold(self.base, f64::max);
        let hi = if hi > lo { hi } else { lo + 1.0 };
        (lo, hi + (hi - lo) * 0.12)
    }

    fn draw(
        &self,
        area: &DrawingArea<SVGBackend<'_>, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
        let groups = self.groups.len().max(1);
        let (lo, hi) = self.range();
        let mut chart = ChartBuilder::on(area)
            .caption(
                &self.title,
                (FONT, px(13.0)).into_font().style(FontStyle::Bold),
            )
            .margin(8)
            .margin_right(14)
            .x_label_area_size(22)
            .y_label_area_size(48)
            .build_cartesian_2d(0f64..groups as f64, lo..hi)?;
        let suffix = self.tick_suffix;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_labels(6)
            .y_label_formatter(&|v| format!("{}{suffix}", short(*v)))
            .max_light_lines(0)
            .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
            .label_style((FONT, px(11.0)))
            .draw()?;
        let width = 0.8 / self.series.len().max(1) as f64;
        let bar_x = |group: usize, series: usize| 0.1 + group as f64 + width * series as f64;
        for (k, series) in self.series.iter().enumerate() {
            let bars = series.values.iter().enumerate().filter_map(|(g, v)| {
                let v = (*v)?;
                let x = bar_x(g, k);
                Some(Rectangle::new(
                    [(x, self.base), (x + width * 0.92, v)],
                    series.color.filled(),
                ))
            });
            chart.draw_series(bars)?;
            if self.value_labels {
                // A bar's pixel width: labels wider than it stand upright, so that neighbours
                // never overlap.
                let (left, _) = chart.backend_coord(&(0.0, lo));
                let (right, _) = chart.backend_coord(&(width, lo));
                let bar_px = f64::from((right - left).max(1));
                let labels = series.values.iter().enumerate().filter_map(|(g, v)| {
                    let v = (*v)?;
                    let x = bar_x(g, k) + width * 0.46;
                    let text = short(v);
                    let upright = text.chars().count() as f64 * LABEL_ADVANCE > bar_px;
                    // Above a bar that rises, below one that falls under the base.
                    let below = v < self.base;
                    let font = (FONT, px(10.0)).into_font().color(&BLACK);
                    let (dy, font) = match (upright, below) {
                        (false, false) => (-2, font.pos(Pos::new(HPos::Center, VPos::Bottom))),
                        (false, true) => (2, font.pos(Pos::new(HPos::Center, VPos::Top))),
                        // Rotated a quarter turn, the text's start is its bottom end.
                        (true, false) => (
                            -3,
                            font.transform(FontTransform::Rotate270)
                                .pos(Pos::new(HPos::Left, VPos::Center)),
                        ),
                        (true, true) => (
                            3,
                            font.transform(FontTransform::Rotate270)
                                .pos(Pos::new(HPos::Right, VPos::Center)),
                        ),
                    };
                    Some(EmptyElement::at((x, v)) + Text::new(text, (0, dy), font))
                });
                chart.draw_series(labels)?;
            }
        }
        if self.base != 0.0 {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(0.0, self.base), (groups as f64, self.base)],
                BLACK.stroke_width(1),
            )))?;
        }
        for mark in &self.marks {
            match mark {
                Mark::Level { color, value, .. } => {
                    chart.draw_series(std::iter::once(DashedPathElement::new(
                        vec![(0.0, *value), (groups as f64, *value)],
                        6,
                        4,
                        color.stroke_width(2),
                    )))?;
                }
                Mark::PerGroup { color, values, .. } => {
                    let dashes = values.iter().enumerate().filter_map(|(g, v)| {
                        let v = (*v)?;
                        Some(DashedPathElement::new(
                            vec![(g as f64 + 0.05, v), (g as f64 + 0.95, v)],
                            4,
                            2,
                            color.stroke_width(2),
                        ))
                    });
                    chart.draw_series(dashes)?;
                }
            }
        }
        // The group labels, centred under each group, in the label area below the plot.
        let label = (FONT, px(11.0))
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Top));
        let (x0, y0) = area.get_base_pixel();
        for (g, name) in self.groups.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(g as f64 + 0.5, lo));
            area.draw(&Text::new(
                name.clone(),
                (px - x0, py - y0 + 5),
                label.clone(),
            ))?;
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Every `attr="number"` of the document.
    pub(crate) fn numbers(svg: &str, attr: &str) -> Vec<f64> {
        let needle = format!(" {attr}=\"");
        svg.match_indices(&needle)
            .filter_map(|(at, _)| {
                svg[at + needle.len()..]
                    .split('"')
                    .next()
                    .and_then(|v| v.parse().ok())
            })
            .collect()
    }

    /// The content of every text element.
    pub(crate) fn texts(svg: &str) -> Vec<&str> {
        svg.split("<text ")
            .skip(1)
            .filter_map(|t| t.split_once('>'))
            .filter_map(|(_, rest)| rest.split("</text>").next())
            .map(str::trim)
            .collect()
    }

    /// Every text element, its bar and its mark lie inside the drawing.
    pub(crate) fn assert_inside(svg: &str) {
        let head = svg.lines().next().unwrap_or_default();
        let width = numbers(head, "width")[0];
        let height = numbers(head, "height")[0];
        for y in numbers(svg, "y") {
            assert!((0.0..=height).contains(&y), "y={y} outside 0..{height}");
        }
        for x in numbers(svg, "x") {
            assert!((0.0..=width).contains(&x), "x={x} outside 0..{width}");
        }
    }

    fn chart() -> Chart {
        Chart {
            panels: vec![Panel {
                title: "ratio & target ≤ 1.15×".into(),
                groups: vec!["64 B".into(), "64 KiB".into()],
                series: vec![
                    Series {
                        name: "ours".into(),
                        color: BLUE,
                        values: vec![Some(1.4), Some(0.9)],
                    },
                    Series {
                        name: "theirs".into(),
                        color: GREY,
                        values: vec![None, Some(1.2)],
                    },
                ],
                marks: vec![Mark::Level {
                    name: "target".into(),
                    color: RED,
                    value: 1.15,
                }],
                base: 1.0,
                tick_suffix: "×",
                value_labels: true,
            }],
            columns: 1,
            panel_size: (420, 260),
            notes: vec!["the median of 3 repetitions".into()],
        }
    }

    #[test]
    fn draws_bars_labels_marks_and_one_legend() {
        let svg = chart().svg();
        // Escaped title, group labels, value labels, legend entries and the note.
        let texts = texts(&svg);
        for text in [
            "ratio &amp; target ≤ 1.15×",
            "64 B",
            "64 KiB",
            "1.40",
            "0.90",
            "1.20",
            "1.00×",
            "ours",
            "theirs",
            "target",
            "the median of 3 repetitions",
        ] {
            assert!(texts.contains(&text), "{text} missing: {texts:?}");
        }
        // Three bars (one value missing), drawn with the series' fills.
        assert_eq!(svg.matches("fill=\"#1F77B4\"").count(), 3, "{svg}");
        assert_inside(&svg);
    }

    #[test]
    fn a_ratio_axis_starts_below_the_lowest_bar_and_ends_above_the_tallest() {
        let (lo, hi) = chart().panels[0].range();
        assert!(lo < 0.9 * 0.96 && lo > 0.5, "{lo}");
        assert!(hi > 1.4, "{hi}");
        let mut zero = chart().panels[0].clone();
        zero.base = 0.0;
        assert_eq!(zero.range().0, 0.0);
    }

    #[test]
    fn short_labels_keep_the_digits_that_matter() {
        assert_eq!(short(1234.5), "1234");
        assert_eq!(short(12.34), "12.3");
        assert_eq!(short(1.234), "1.23");
        assert_eq!(short(0.0123), "0.0123");
        assert_eq!(short(0.0), "0.00");
    }
}
