//! Small hand-written SVG charts: bar charts (side-by-side panels, each with its own
//! scale, bars coloured by series, and a legend) and line charts of time series
//! (panels stacked vertically over a shared time axis).

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
        let mut s = svg_open(width, height, &self.title);
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
    panel_title(s, x0 + PANEL_W / 2.0, y0, &g.title, &g.unit);
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
/// The start of a standalone SVG document of `width` x `height`: a white page and
/// `title` centred at the top.
fn svg_open(width: f64, height: f64, title: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{}" y="20" text-anchor="middle" font-size="14">{}</text>"#,
        width / 2.0,
        escape(title)
    );
    s
}

/// A panel's "title (unit)" centred on `x`, just above `y0`.
fn panel_title(s: &mut String, x: f64, y0: f64, title: &str, unit: &str) {
    let _ = writeln!(
        s,
        r#"<text x="{x}" y="{}" text-anchor="middle" font-size="12">{} ({})</text>"#,
        y0 - 4.0,
        escape(title),
        escape(unit)
    );
}

fn escape(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One line of a [`LinePanel`].
pub struct Line {
    /// Legend text.
    pub name: String,
    /// (x, y) points, x increasing.
    pub points: Vec<(f64, f64)>,
}

/// One panel of a [`LineChart`]: lines sharing a vertical scale.
pub struct LinePanel {
    /// Panel title.
    pub title: String,
    /// Unit of the values.
    pub unit: String,
    /// The lines.
    pub lines: Vec<Line>,
}

/// Time-series panels stacked vertically, sharing the horizontal axis.
pub struct LineChart {
    /// Chart title.
    pub title: String,
    /// Label of the horizontal axis.
    pub x_label: String,
    /// The panels, top to bottom.
    pub panels: Vec<LinePanel>,
}

/// Colours of lines (more than the bar series: a panel may hold many ports).
const LINE_COLOURS: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];
const LINE_W: f64 = 720.0;
const LINE_H: f64 = 180.0;
/// Lines beyond this many per panel are left out of the legend (still drawn).
const LEGEND_MAX: usize = 10;

impl LineChart {
    /// The chart as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        let (x_min, x_max) = self
            .panels
            .iter()
            .flat_map(|p| p.lines.iter())
            .flat_map(|l| l.points.iter().map(|p| p.0))
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                (lo.min(x), hi.max(x))
            });
        let (x_min, x_max) = if x_min < x_max {
            (x_min, x_max)
        } else {
            (0.0, 1.0)
        };
        let slot = LINE_H + 2.0 * MARGIN;
        let width = LINE_W + 2.0 * MARGIN + 160.0;
        let height = MARGIN + self.panels.len() as f64 * slot;
        let mut s = svg_open(width, height, &self.title);
        for (i, p) in self.panels.iter().enumerate() {
            let y0 = MARGIN + i as f64 * slot + 10.0;
            self.line_panel(&mut s, p, y0, (x_min, x_max));
        }
        s.push_str("</svg>\n");
        s
    }

    fn line_panel(&self, s: &mut String, p: &LinePanel, y0: f64, (x_min, x_max): (f64, f64)) {
        let top = p
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|q| q.1))
            .fold(0.0, f64::max);
        let top = if top > 0.0 { top * 1.1 } else { 1.0 };
        let x0 = MARGIN;
        let base = y0 + LINE_H;
        let sx = |x: f64| x0 + (x - x_min) / (x_max - x_min) * LINE_W;
        let sy = |y: f64| base - y.max(0.0) / top * LINE_H;
        panel_title(s, x0 + LINE_W / 2.0, y0, &p.title, &p.unit);
        let _ = writeln!(
            s,
            r#"<polyline points="{x0},{y0} {x0},{base} {},{base}" fill="none" stroke="black"/>"#,
            x0 + LINE_W
        );
        for (v, anchor) in [(0.0, base), (top / 1.1, sy(top / 1.1))] {
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
                x0 - 4.0,
                anchor + 4.0,
                number(v)
            );
        }
        for (v, anchor) in [(x_min, "start"), (x_max, "end")] {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{}" text-anchor="{anchor}">{} {}</text>"#,
                sx(v),
                base + 14.0,
                number(v),
                escape(&self.x_label)
            );
        }
        for (j, l) in p.lines.iter().enumerate() {
            let colour = LINE_COLOURS[j % LINE_COLOURS.len()];
            let mut pts = String::new();
            for &(x, y) in &l.points {
                let _ = write!(pts, "{:.1},{:.1} ", sx(x), sy(y));
            }
            let _ = writeln!(
                s,
                r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="1"/>"#,
                pts.trim_end()
            );
            if j < LEGEND_MAX {
                let ly = y0 + 10.0 + j as f64 * 14.0;
                let lx = x0 + LINE_W + 12.0;
                let _ = writeln!(
                    s,
                    r#"<rect x="{lx}" y="{}" width="10" height="3" fill="{colour}"/><text x="{}" y="{ly}">{}</text>"#,
                    ly - 4.0,
                    lx + 14.0,
                    escape(&l.name)
                );
            }
        }
        if p.lines.len() > LEGEND_MAX {
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}">(+{} more)</text>"#,
                x0 + LINE_W + 12.0,
                y0 + 10.0 + LEGEND_MAX as f64 * 14.0,
                p.lines.len() - LEGEND_MAX
            );
        }
    }
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

    #[test]
    fn draws_every_line_and_panel() {
        let chart = LineChart {
            title: "queues".into(),
            x_label: "us".into(),
            panels: vec![
                LinePanel {
                    title: "queue".into(),
                    unit: "KB".into(),
                    lines: vec![
                        Line {
                            name: "port <0>".into(),
                            points: vec![(0.0, 1.0), (10.0, 3.0), (20.0, 2.0)],
                        },
                        Line {
                            name: "port 1".into(),
                            points: vec![(0.0, 0.0), (20.0, 5.0)],
                        },
                    ],
                },
                LinePanel {
                    title: "OOD".into(),
                    unit: "packets".into(),
                    lines: vec![Line {
                        name: "NIC 1".into(),
                        points: vec![(5.0, 7.0)],
                    }],
                },
            ],
        };
        let svg = chart.to_svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        // Two axes and three lines.
        assert_eq!(svg.matches("<polyline").count(), 2 + 3);
        assert!(svg.contains("port &lt;0&gt;") && svg.contains(">20 us<"));
    }
}
