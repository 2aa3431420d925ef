//! Scatter plots drawn in text, as upstream's iocost-tune `format` prints them: an 80 × 24
//! character face, markers per series (`■` fitted line, `●` data points, `×` rejected points),
//! a y axis with its label written vertically and an x axis with its tick labels centred.
//!
//! Upstream draws these with the `plotlib` 0.5 crate. This is our own renderer of the same
//! layout: tick choice (the largest step of 1, 2, 4 or 5 × 10ⁿ giving the fewest ticks not above
//! the maximum), cell rounding and the overlay of layers. It keeps plotlib's byte-counting
//! quirk when a layer is laid over one with multi-byte markers — widths are measured in bytes
//! and cells are zipped as characters — because the printed rows depend on it.

use std::collections::HashMap;

/// How a series' points are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Square,
    Circle,
    Cross,
}

impl Marker {
    fn glyph(self) -> char {
        match self {
            Marker::Square => '■',
            Marker::Circle => '●',
            Marker::Cross => '×',
        }
    }
}

/// One axis: its range, the ticks chosen for it and its label.
#[derive(Debug, Clone)]
pub struct Axis {
    pub min: f64,
    pub max: f64,
    pub ticks: Vec<f64>,
    pub label: String,
}

impl Axis {
    /// An axis over `[min, max]` with at most `max_ticks` ticks. `None` if the range is
    /// empty or not finite (nothing sensible to draw).
    pub fn new(min: f64, max: f64, max_ticks: usize, label: &str) -> Option<Axis> {
        if min >= max || min.is_nan() || !min.is_finite() || !max.is_finite() || max_ticks == 0 {
            return None;
        }
        let ticks = ticks_for(min, max, max_ticks)?;
        Some(Axis {
            min,
            max,
            ticks,
            label: label.to_string(),
        })
    }

    /// The cell a value falls in, counted from the axis' start.
    fn cell(&self, value: f64, cells: u32) -> i32 {
        let per_cell = (self.max - self.min) / f64::from(cells);
        ((value - self.min) / per_cell).round() as i32
    }

    /// Cell → tick value. Ticks landing in one cell: the last one wins.
    fn tick_cells(&self, cells: u32) -> HashMap<i32, f64> {
        self.ticks
            .iter()
            .map(|&t| (self.cell(t, cells), t))
            .collect()
    }
}

/// Step candidates are 1, 2, 4 and 5 times a power of ten.
const BASE_STEPS: [f64; 4] = [1.0, 2.0, 4.0, 5.0];

fn steps_of_decade(v: f64) -> [f64; 4] {
    let scale = 10f64.powf(v.log10().floor());
    BASE_STEPS.map(|s| s * scale)
}

/// The first candidate step at or above `v`.
fn first_step_from(v: f64) -> f64 {
    let steps = steps_of_decade(v);
    steps
        .iter()
        .copied()
        .find(|s| *s >= v)
        .unwrap_or(steps[0] * 10.0)
}

/// The candidate step after `cur`.
fn step_after(cur: f64) -> f64 {
    let steps = steps_of_decade(cur);
    steps
        .iter()
        .copied()
        .find(|s| *s > cur)
        .unwrap_or(steps[0] * 10.0)
}

/// Rounds away floating-point noise to five decimals, as the tick values are printed.
fn tidy(x: f64) -> f64 {
    (x * 100_000.0).round() / 100_000.0
}

/// The ticks of `[min, max]` at `step`: through zero when the range spans it, else from the
/// end nearer zero.
fn ticks_at(min: f64, max: f64, step: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    if min <= 0.0 {
        if max >= 0.0 {
            let mut neg: Vec<f64> = (1..)
                .map(|n| -tidy(f64::from(n) * step))
                .take_while(|v| *v >= min)
                .collect();
            neg.reverse();
            ticks.extend(neg);
            ticks.push(0.0);
            ticks.extend(
                (1..)
                    .map(|n| tidy(f64::from(n) * step))
                    .take_while(|v| *v <= max),
            );
        } else {
            let mut neg: Vec<f64> = (0..)
                .map(|n| -tidy(f64::from(n) * step - max))
                .take_while(|v| *v >= min)
                .collect();
            neg.reverse();
            ticks.extend(neg);
        }
    } else {
        ticks.extend(
            (0..)
                .map(|n| tidy(f64::from(n) * step + min))
                .take_while(|v| *v <= max),
        );
    }
    ticks
}

/// The largest step giving as few ticks as the smallest step that fits `max_ticks`.
fn ticks_for(min: f64, max: f64, max_ticks: usize) -> Option<Vec<f64>> {
    let count = |s: f64| ticks_at(min, max, s).len();
    let mut step = first_step_from((max - min) / max_ticks as f64);
    // Each candidate is at least 1.25 × the last: a few hundred cover any finite range.
    let mut tries = 0;
    while count(step) > max_ticks {
        step = step_after(step);
        tries += 1;
        if tries > 2000 || !step.is_finite() {
            return None;
        }
    }
    let n = count(step);
    let mut best = f64::NEG_INFINITY;
    let mut s = first_step_from(step);
    while count(s) == n {
        best = best.max(s);
        s = step_after(s);
        if !s.is_finite() {
            break;
        }
    }
    Some(ticks_at(min, max, best))
}

/// One series: its points and marker.
pub struct Series<'a> {
    pub points: &'a [(f64, f64)],
    pub marker: Marker,
}

/// Renders `series` (drawn in order, later ones on top) on a `width` × `height` face.
pub fn render(x: &Axis, y: &Axis, series: &[Series], width: u32, height: u32) -> String {
    let (y_axis, y_label_width) = y_axis_text(y, height);
    let (x_axis, x_start) = x_axis_text(x, width);
    let gutter = (y_label_width as i32 + 3).max(-x_start) as u32;
    let view_width = width + 1 + gutter + 1;
    let view_height = height + 4;
    let mut view = blank(view_width, view_height);
    for s in series {
        let face = face_points(s, x, y, width, height);
        // Each series is first laid on an empty face, as plotlib's scatter layer is.
        let face = overlay(&blank(width, height), &face, 0, 0);
        view = overlay(&view, &face, gutter as i32 + 1, 0);
    }
    let view = overlay(&view, &y_axis, gutter as i32 - 2 - y_label_width as i32, 0);
    overlay(&view, &x_axis, gutter as i32, height as i32)
}

fn blank(width: u32, height: u32) -> String {
    vec![" ".repeat(width as usize); height as usize].join("\n")
}

/// The y axis: the label written top to bottom down the left, the tick values right-aligned,
/// a `-` at each tick and the axis line (`+` at the bottom). Returns it and the tick values'
/// width.
fn y_axis_text(y: &Axis, height: u32) -> (String, usize) {
    let ticks = y.tick_cells(height);
    let label_width = ticks
        .values()
        .map(|v| v.to_string().len())
        .max()
        .unwrap_or(0);
    // Centred in at least height + 1 cells; a longer label keeps its last height + 1.
    let label: Vec<char> = format!("{: ^w$}", y.label, w = height as usize + 1)
        .chars()
        .collect();
    let mut lines = Vec::new();
    // Bottom (row 0) to top, paired with the label from its end; then flipped.
    for row in 0..=height as usize {
        let ch = label[label.len() - 1 - row];
        let (value, tick) = match ticks.get(&(row as i32)) {
            Some(v) => (v.to_string(), "-"),
            None => (String::new(), " "),
        };
        let line = if row == 0 { '+' } else { '|' };
        lines.push(format!(
            "{} {:>w$}{}{}",
            ch,
            value,
            tick,
            line,
            w = label_width
        ));
    }
    lines.reverse();
    (lines.join("\n"), label_width)
}

/// A tick label under the x axis: centred on its cell in an odd number of cells.
struct XLabel {
    text: String,
    cell: i32,
}

impl XLabel {
    fn footprint(&self) -> usize {
        self.text.len() | 1
    }

    fn start(&self) -> i32 {
        self.cell - self.footprint() as i32 / 2
    }
}

/// The x axis: the line, the tick marks, the tick labels and the axis label centred under the
/// face. Returns it and where its labels start relative to the axis' first cell.
fn x_axis_text(x: &Axis, width: u32) -> (String, i32) {
    let ticks = x.tick_cells(width);
    let marks: String = (0..=width as i32)
        .map(|c| if ticks.contains_key(&c) { '|' } else { ' ' })
        .collect();
    let mut labels: Vec<XLabel> = ticks
        .iter()
        .map(|(&cell, &v)| XLabel {
            text: v.to_string(),
            cell,
        })
        .collect();
    labels.sort_by_key(|l| l.cell);
    let start = labels.iter().map(XLabel::start).min().unwrap_or(0);
    let mut text = String::new();
    for l in &labels {
        let gap = l.start() - start - text.len() as i32;
        if gap > 0 {
            text.extend(std::iter::repeat_n(' ', gap as usize));
        } else {
            for _ in 0..-gap {
                text.pop();
            }
        }
        text.push_str(&format!("{: ^w$}", l.text, w = l.footprint()));
    }
    let line = format!("+{}", "-".repeat(width as usize));
    let label = format!("{: ^w$}", x.label, w = width as usize);
    let s = if start > 0 {
        let pad = " ".repeat(start as usize);
        format!("{}\n{}\n{}{}\n{}", line, marks, pad, text, label)
    } else {
        let pad = " ".repeat(-start as usize);
        format!(
            "{}{}\n{}{}\n{}\n{}{}",
            pad, line, pad, marks, text, pad, label
        )
    };
    (s, start)
}

/// One series' markers on an empty face, top row first.
fn face_points(s: &Series, x: &Axis, y: &Axis, width: u32, height: u32) -> String {
    let cells: std::collections::HashSet<(i32, i32)> = s
        .points
        .iter()
        .map(|&(px, py)| (x.cell(px, width), y.cell(py, height)))
        .collect();
    let glyph = s.marker.glyph();
    let mut rows = Vec::with_capacity(height as usize);
    for row in (1..=height as i32).rev() {
        let line: String = (1..=width as i32)
            .map(|col| {
                if cells.contains(&(col, row)) {
                    glyph
                } else {
                    ' '
                }
            })
            .collect();
        rows.push(line);
    }
    rows.join("\n")
}

/// Lays `over` on `under`, shifted right by `x` and down by `y`: `over`'s spaces show `under`.
/// Widths are counted in bytes and cells in characters, as plotlib does; a row comes out as
/// long as the shorter of the two in characters.
pub fn overlay(under: &str, over: &str, x: i32, y: i32) -> String {
    let under_rows: Vec<&str> = under.split('\n').collect();
    let under_width = under_rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let mut rows: Vec<String> = over.split('\n').map(str::to_string).collect();
    let over_width = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    if y < 0 {
        rows.drain(..(-y as usize).min(rows.len()));
    } else if y > 0 {
        let mut top = vec![" ".repeat(over_width); y as usize];
        top.append(&mut rows);
        rows = top;
    }
    if x < 0 {
        rows = rows
            .iter()
            .map(|r| r.chars().skip(-x as usize).collect())
            .collect();
    } else if x > 0 {
        let pad = " ".repeat(x as usize);
        rows = rows.iter().map(|r| format!("{}{}", pad, r)).collect();
    }
    let over_width = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    if rows.len() < under_rows.len() {
        let n = under_rows.len() - rows.len();
        rows.extend(std::iter::repeat_n(" ".repeat(over_width), n));
    }
    if under_width > over_width {
        let pad = " ".repeat(under_width - over_width);
        for r in rows.iter_mut() {
            r.push_str(&pad);
        }
    }
    under_rows
        .iter()
        .zip(rows.iter())
        .map(|(u, o)| {
            u.chars()
                .zip(o.chars())
                .map(|(uc, oc)| if oc == ' ' { uc } else { oc })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_take_the_largest_step_with_the_fewest_ticks() {
        assert_eq!(
            ticks_for(0.0, 10.0, 6).unwrap(),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        );
        assert_eq!(
            ticks_for(0.0, 135.3, 6).unwrap(),
            vec![0.0, 40.0, 80.0, 120.0]
        );
        assert_eq!(
            ticks_for(1.0, 2.0, 6).unwrap(),
            vec![1.0, 1.2, 1.4, 1.6, 1.8, 2.0]
        );
        assert_eq!(
            ticks_for(-3.0, -1.0, 6).unwrap(),
            vec![-3.0, -2.6, -2.2, -1.8, -1.4, -1.0]
        );
        assert_eq!(step_after(1.0), 2.0);
        assert_eq!(step_after(5.0), 10.0);
        assert_eq!(first_step_from(3.0), 4.0);
        assert_eq!(first_step_from(8.0), 10.0);
    }

    #[test]
    fn overlay_shows_under_through_spaces_and_shifts() {
        assert_eq!(overlay(" ooo ", "  #  ", 0, 0), " o#o ");
        assert_eq!(
            overlay(" o o o o o o o o o o ", "# # # # #", 2, 0),
            " o#o#o#o#o#o o o o o "
        );
        assert_eq!(
            overlay("     \n   o \n o  o\nooooo\no o o", "  #\n## ", 1, 2),
            "     \n   o \n o #o\no##oo\no o o"
        );
        assert_eq!(
            overlay("     \n   o \n o  o\nooooo\no o o", "###\n###\n###", -1, -1),
            "##   \n## o \n o  o\nooooo\no o o"
        );
        assert_eq!(
            overlay("oo\noo", "    \n  # \n #  \n    ", -1, -1),
            "o#\n#o"
        );
    }

    #[test]
    fn markers_land_in_rounded_cells() {
        let x = Axis::new(-3.575, 9.075, 6, "").unwrap();
        let y = Axis::new(-1.735, 5.635, 6, "").unwrap();
        let pts = [
            (-3.0, 2.3),
            (-1.6, 5.3),
            (0.3, 0.7),
            (4.3, -1.4),
            (6.4, 4.3),
            (8.5, 3.7),
        ];
        let s = Series {
            points: &pts,
            marker: Marker::Circle,
        };
        let face = face_points(&s, &x, &y, 20, 10);
        let want = [
            "  ●                 ",
            "                    ",
            "               ●    ",
            "                  ● ",
            "                    ",
            "●                   ",
            "                    ",
            "     ●              ",
            "                    ",
            "                    ",
        ]
        .join("\n");
        assert_eq!(face, want);
    }

    #[test]
    fn empty_or_reversed_ranges_draw_nothing() {
        assert!(Axis::new(1.0, 1.0, 6, "").is_none());
        assert!(Axis::new(2.0, 1.0, 6, "").is_none());
        assert!(Axis::new(0.0, f64::INFINITY, 6, "").is_none());
        assert!(Axis::new(f64::NAN, 1.0, 6, "").is_none());
    }
}
