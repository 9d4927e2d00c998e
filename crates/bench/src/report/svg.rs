//! Inline SVG charts for the HTML report, drawn here without any library: line charts (per
//! window traces, percentile curves) and grouped bar charts (targets side by side). Every
//! chart has a title, labelled axes with units, tick labels and a legend.

use std::fmt::Write as _;

/// Chart width, px.
pub const WIDTH: f64 = 760.0;
/// Chart height, px.
pub const HEIGHT: f64 = 420.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 56.0;
const BOTTOM: f64 = 48.0;

/// Colours of series and bars, in order.
pub const PALETTE: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// The colour of series `i`, going round [`PALETTE`].
fn colour(i: usize) -> &'static str {
    crate::round_robin::pick(PALETTE, i)
        .copied()
        .unwrap_or("#000000")
}

/// One line.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// `(x, y)` points; `None` y values break the line.
    pub points: Vec<(f64, Option<f64>)>,
    /// Index into [`PALETTE`], so that one quantity keeps its colour across charts.
    pub colour: usize,
}

/// How the x axis is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum XAxis {
    /// Linear, with nice ticks.
    Linear,
    /// Percentiles on the "nines" scale: x is a percentile (0-100), drawn at
    /// `-log10(1 - p/100)`, ticks at 0, 90, 99, 99.9, ... and max.
    Nines,
}

/// A line chart.
#[derive(Debug, Clone)]
pub struct LineChart {
    /// Title above the plot.
    pub title: String,
    /// x axis label, with unit.
    pub x_label: String,
    /// y axis label, with unit.
    pub y_label: String,
    /// x axis kind.
    pub x_axis: XAxis,
    /// The lines.
    pub series: Vec<Series>,
    /// x ranges shaded grey with a caption (warm-up, cool-down).
    pub shaded: Vec<(f64, f64, String)>,
}

/// Where "max" (percentile 100) is drawn on the nines scale.
const NINES_MAX: f64 = 5.5;

fn nines(p: f64) -> f64 {
    if p >= 100.0 {
        NINES_MAX
    } else {
        (-(1.0 - p / 100.0).log10()).min(5.0)
    }
}

/// Escapes text for SVG and HTML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Nice tick positions covering `[lo, hi]`, about `n` of them.
pub fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = (hi - lo).abs();
    if !span.is_finite() || span == 0.0 {
        return vec![lo];
    }
    let raw = span / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    let mut out = Vec::new();
    let mut t = first;
    while t <= hi + step * 1e-9 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

/// A tick label: no needless decimals, thousands as `k`.
pub fn tick_label(v: f64) -> String {
    if v.abs() >= 10_000.0 {
        format!("{}k", trim(v / 1000.0))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

fn open(out: &mut String, title: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="Helvetica, Arial, sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
}

fn legend(out: &mut String, labels: &[(String, usize)]) {
    // One row (or two) under the title.
    let mut x = LEFT;
    let mut y = 38.0;
    for (label, i) in labels {
        let w = 22.0 + 6.5 * label.chars().count() as f64;
        if x + w > WIDTH - RIGHT && x > LEFT {
            x = LEFT;
            y += 14.0;
        }
        let colour = colour(*i);
        let _ = write!(
            out,
            r#"<rect x="{x}" y="{}" width="12" height="8" fill="{colour}"/><text x="{}" y="{}">{}</text>"#,
            y - 8.0,
            x + 16.0,
            y,
            escape(label)
        );
        x += w + 10.0;
    }
}

fn axes(out: &mut String, x_label: &str, y_label: &str) {
    let (x0, y0, x1, y1) = (LEFT, HEIGHT - BOTTOM, WIDTH - RIGHT, TOP);
    let _ = write!(
        out,
        r##"<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#333"/><line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#333"/><text class="x-label" x="{}" y="{}" text-anchor="middle">{}</text><text class="y-label" x="16" y="{}" text-anchor="middle" transform="rotate(-90 16 {})">{}</text>"##,
        (x0 + x1) / 2.0,
        HEIGHT - 10.0,
        escape(x_label),
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0,
        escape(y_label)
    );
}

/// The chart as an `<svg>` element.
pub fn line_chart(c: &LineChart) -> String {
    let mut out = String::new();
    open(&mut out, &c.title);
    let fx = |x: f64| match c.x_axis {
        XAxis::Linear => x,
        XAxis::Nines => nines(x),
    };
    let xs = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| fx(p.0)));
    let ys = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().filter_map(|p| p.1));
    let (mut xlo, mut xhi) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let ymax = ys.fold(0.0f64, f64::max);
    if xlo > xhi {
        (xlo, xhi) = (0.0, 1.0);
    }
    if c.x_axis == XAxis::Nines {
        (xlo, xhi) = (0.0, NINES_MAX);
    }
    if xhi <= xlo {
        xhi = xlo + 1.0;
    }
    let yticks = ticks(0.0, if ymax > 0.0 { ymax * 1.05 } else { 1.0 }, 5);
    let yhi = yticks.last().copied().unwrap_or(1.0).max(ymax).max(1e-9);
    let px = |x: f64| LEFT + (x - xlo) / (xhi - xlo) * (WIDTH - LEFT - RIGHT);
    let py = |y: f64| HEIGHT - BOTTOM - y / yhi * (HEIGHT - TOP - BOTTOM);
    for (a, b, caption) in &c.shaded {
        let (a, b) = (fx(*a).max(xlo), fx(*b).min(xhi));
        if b > a {
            let _ = write!(
                out,
                r##"<rect x="{:.1}" y="{TOP}" width="{:.1}" height="{}" fill="#eeeeee"/><text x="{:.1}" y="{}" text-anchor="middle" fill="#777" font-size="10">{}</text>"##,
                px(a),
                px(b) - px(a),
                HEIGHT - TOP - BOTTOM,
                (px(a) + px(b)) / 2.0,
                TOP + 12.0,
                escape(caption)
            );
        }
    }
    for t in &yticks {
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            py(*t) + 4.0,
            tick_label(*t),
            y = py(*t)
        );
    }
    let xticks: Vec<(f64, String)> = match c.x_axis {
        XAxis::Linear => ticks(xlo, xhi, 8)
            .into_iter()
            .map(|t| (t, tick_label(t)))
            .collect(),
        XAxis::Nines => [
            (0.0, "0%"),
            (1.0, "90%"),
            (2.0, "99%"),
            (3.0, "99.9%"),
            (4.0, "99.99%"),
            (5.0, "99.999%"),
            (NINES_MAX, "max"),
        ]
        .iter()
        .map(|(x, l)| (*x, l.to_string()))
        .collect(),
    };
    for (t, label) in &xticks {
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#333"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            HEIGHT - BOTTOM,
            HEIGHT - BOTTOM + 5.0,
            HEIGHT - BOTTOM + 18.0,
            escape(label),
            x = px(*t)
        );
    }
    axes(&mut out, &c.x_label, &c.y_label);
    for (k, s) in c.series.iter().enumerate() {
        let colour = colour(s.colour);
        // Where two series lie on each other (sent and received of a run that keeps up), the
        // first stays visible as a wide pale band under the later, thinner, dashed ones.
        let (width, dash, opacity) = match k {
            0 => (5.0, "", 0.45),
            1 => (2.0, r#" stroke-dasharray="7 4""#, 1.0),
            _ => (1.5, r#" stroke-dasharray="2 3""#, 1.0),
        };
        let mut d = String::new();
        let mut pen_down = false;
        for (x, y) in &s.points {
            match y {
                Some(y) => {
                    let _ = write!(
                        d,
                        "{}{:.1},{:.1} ",
                        if pen_down { "L" } else { "M" },
                        px(fx(*x)),
                        py(*y)
                    );
                    pen_down = true;
                }
                None => pen_down = false,
            }
        }
        let _ = write!(
            out,
            r#"<path d="{}" fill="none" stroke="{colour}" stroke-width="{width}" stroke-opacity="{opacity}"{dash}/>"#,
            d.trim_end()
        );
        if s.points.len() <= 40 {
            for (x, y) in &s.points {
                if let Some(y) = y {
                    let _ = write!(
                        out,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{colour}"/>"#,
                        px(fx(*x)),
                        py(*y)
                    );
                }
            }
        }
    }
    let labels: Vec<(String, usize)> = c
        .series
        .iter()
        .map(|s| (s.label.clone(), s.colour))
        .collect();
    legend(&mut out, &labels);
    out.push_str("</svg>");
    out
}

/// A grouped bar chart: per group (a figure) one bar per target, with its value above it.
#[derive(Debug, Clone)]
pub struct BarChart {
    /// Title above the plot.
    pub title: String,
    /// y axis label, with unit.
    pub y_label: String,
    /// Bar labels (targets), in legend and bar order.
    pub bars: Vec<String>,
    /// Groups: label and one value per bar (`None`: no bar).
    pub groups: Vec<(String, Vec<Option<f64>>)>,
}

/// The chart as an `<svg>` element.
pub fn bar_chart(c: &BarChart) -> String {
    let mut out = String::new();
    open(&mut out, &c.title);
    let ymax = c
        .groups
        .iter()
        .flat_map(|g| g.1.iter().flatten())
        .fold(0.0f64, |a, b| a.max(*b));
    let yticks = ticks(0.0, if ymax > 0.0 { ymax * 1.12 } else { 1.0 }, 5);
    let yhi = yticks
        .last()
        .copied()
        .unwrap_or(1.0)
        .max(ymax * 1.12)
        .max(1e-9);
    let py = |y: f64| HEIGHT - BOTTOM - y / yhi * (HEIGHT - TOP - BOTTOM);
    for t in &yticks {
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            py(*t) + 4.0,
            tick_label(*t),
            y = py(*t)
        );
    }
    let group_w = (WIDTH - LEFT - RIGHT) / c.groups.len().max(1) as f64;
    let bar_w = (group_w * 0.8 / c.bars.len().max(1) as f64).min(60.0);
    for (gi, (label, values)) in c.groups.iter().enumerate() {
        let gx = LEFT + gi as f64 * group_w;
        let start = gx + (group_w - bar_w * values.len() as f64) / 2.0;
        for (bi, v) in values.iter().enumerate() {
            let Some(v) = v else { continue };
            let colour = colour(bi);
            let x = start + bi as f64 * bar_w;
            let _ = write!(
                out,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{colour}"/><text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
                x + 1.0,
                py(*v),
                bar_w - 2.0,
                (HEIGHT - BOTTOM) - py(*v),
                x + bar_w / 2.0,
                py(*v) - 3.0,
                tick_label(super::compare::number(*v).parse().unwrap_or(*v))
            );
        }
        // Labels wider than their group go on two lines, split at the last space.
        let lines: Vec<&str> = match label.rsplit_once(' ') {
            Some((a, b)) if 6.5 * label.chars().count() as f64 > group_w => vec![a, b],
            _ => vec![label.as_str()],
        };
        for (li, line) in lines.iter().enumerate() {
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
                gx + group_w / 2.0,
                HEIGHT - BOTTOM + 16.0 + 13.0 * li as f64,
                escape(line)
            );
        }
    }
    axes(&mut out, "", &c.y_label);
    let labels: Vec<(String, usize)> = c.bars.iter().cloned().zip(0..).collect();
    legend(&mut out, &labels);
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ticks() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 1.0, 4), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
        assert_eq!(ticks(-1.0, 1.0, 2), vec![-1.0, 0.0, 1.0]);
        assert_eq!(tick_label(25_000.0), "25k");
        assert_eq!(tick_label(0.5), "0.5");
        assert_eq!(tick_label(3.0), "3");
    }

    #[test]
    fn charts_have_axes_and_legends() {
        let svg = line_chart(&LineChart {
            title: "T <1>".into(),
            x_label: "time (s)".into(),
            y_label: "rate (msg/s)".into(),
            x_axis: XAxis::Linear,
            series: vec![Series {
                label: "sent".into(),
                points: vec![(0.0, Some(1.0)), (1.0, None), (2.0, Some(3.0))],
                colour: 0,
            }],
            shaded: vec![(-1.0, 0.0, "warm-up".into())],
        });
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("T &lt;1&gt;"));
        assert!(svg.contains("class=\"x-label\"") && svg.contains("time (s)"));
        assert!(svg.contains(">sent</text>"));
        assert_eq!(svg.matches("M").count(), 2, "{svg}");
        let bars = bar_chart(&BarChart {
            title: "B".into(),
            y_label: "msg/s".into(),
            bars: vec!["ferry".into(), "nats".into()],
            groups: vec![("received".into(), vec![Some(10.0), Some(5.0)])],
        });
        assert_eq!(bars.matches("<rect").count(), 1 + 2 + 2, "{bars}");
    }
}
