//! Small hand-written SVG bar charts: side-by-side panels, each with its own scale,
//! bars coloured by series, and a legend.

use std::fmt::Write;

/// Colours of series 0, 1, ... (repeating).
const COLOURS: [&str; 4] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"];
const PANEL_W: f64 = 320.0;
const PANEL_H: f64 = 220.0;
const MARGIN: f64 = 50.0;
/// Share of a bar's slot that the bar fills.
const BAR_FILL: f64 = 0.7;

/// One bar.
pub struct Bar {
    /// Text under the bar.
    pub label: String,
    /// Index into [`BarChart::series`]; picks the colour.
    pub series: usize,
    /// Height, in the panel's unit (negative values draw as 0).
    pub value: f64,
}

/// One panel: a metric with its own vertical scale.
pub struct Group {
    /// Panel title.
    pub title: String,
    /// Unit of the values, shown on the axis.
    pub unit: String,
    /// The bars, left to right.
    pub bars: Vec<Bar>,
}

/// A chart of panels side by side.
pub struct BarChart {
    /// Chart title.
    pub title: String,
    /// Legend entries, one per series.
    pub series: Vec<String>,
    /// The panels.
    pub groups: Vec<Group>,
}

impl BarChart {
    /// The chart as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        let width = MARGIN + self.groups.len() as f64 * (PANEL_W + MARGIN);
        let height = PANEL_H + 3.0 * MARGIN;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
        );
        let _ = writeln!(
            s,
            r#"<rect width="100%" height="100%" fill="white"/><text x="{}" y="20" text-anchor="middle" font-size="14">{}</text>"#,
            width / 2.0,
            escape(&self.title)
        );
        for (i, name) in self.series.iter().enumerate() {
            let x = MARGIN + i as f64 * 130.0;
            let _ = writeln!(
                s,
                r#"<rect x="{x}" y="30" width="10" height="10" fill="{}"/><text x="{}" y="39">{}</text>"#,
                COLOURS[i % COLOURS.len()],
                x + 14.0,
                escape(name)
            );
        }
        for (i, g) in self.groups.iter().enumerate() {
            let x0 = MARGIN + i as f64 * (PANEL_W + MARGIN);
            panel(&mut s, g, x0, 1.5 * MARGIN);
        }
        s.push_str("</svg>\n");
        s
    }
}

/// Draws one panel with its top-left corner at (`x0`, `y0`).
fn panel(s: &mut String, g: &Group, x0: f64, y0: f64) {
    let top = g.bars.iter().map(|b| b.value).fold(0.0, f64::max);
    let scale = if top > 0.0 {
        PANEL_H / (top * 1.15)
    } else {
        0.0
    };
    let base = y0 + PANEL_H;
    let slot = PANEL_W / g.bars.len().max(1) as f64;
    let bar_w = slot * BAR_FILL;
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle" font-size="12">{} ({})</text>"#,
        x0 + PANEL_W / 2.0,
        y0 - 4.0,
        escape(&g.title),
        escape(&g.unit)
    );
    let _ = writeln!(
        s,
        r#"<line x1="{x0}" y1="{base}" x2="{}" y2="{base}" stroke="black"/>"#,
        x0 + PANEL_W
    );
    for (j, b) in g.bars.iter().enumerate() {
        let h = b.value.max(0.0) * scale;
        let x = x0 + j as f64 * slot + (slot - bar_w) / 2.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x:.1}" y="{:.1}" width="{bar_w:.1}" height="{h:.1}" fill="{}"/>"#,
            base - h,
            COLOURS[b.series % COLOURS.len()]
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x + bar_w / 2.0,
            base - h - 3.0,
            number(b.value)
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x + bar_w / 2.0,
            base + 14.0,
            escape(&b.label)
        );
    }
}

/// A value as a short label: integers without decimals, others with one.
fn number(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Escapes text for SVG.
fn escape(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_every_bar_and_legend_entry() {
        let chart = BarChart {
            title: "a < b".into(),
            series: vec!["on".into(), "off".into()],
            groups: vec![Group {
                title: "OOD p99".into(),
                unit: "packets".into(),
                bars: vec![
                    Bar {
                        label: "x".into(),
                        series: 0,
                        value: 3.0,
                    },
                    Bar {
                        label: "x".into(),
                        series: 1,
                        value: 12.5,
                    },
                ],
            }],
        };
        let svg = chart.to_svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<rect").count(), 1 + 2 + 2);
        assert!(svg.contains("a &lt; b") && svg.contains(">12.5<"));
    }
}
