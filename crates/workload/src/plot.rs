//! Small SVG charts for scenario and job results: series of points over a shared x axis.
//!
//! Hand-written because the charts are simple (a few lines or bar groups) and the output must
//! be byte-for-byte reproducible from a seed; a plotting crate would bring fonts and
//! randomised ids.

use std::fmt::Write;

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Log scale on x (client counts 1..512).
    pub log_x: bool,
    pub series: Vec<Series>,
}

const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

fn nice_max(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 3.0, 4.0, 5.0, 10.0] {
        if v <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

/// Grouped bars: one group per category (a configuration, a mode), one bar per series in
/// each, for results whose x axis is not a quantity (lines between categories would suggest
/// values in between).
pub struct BarChart {
    pub title: String,
    pub y_label: String,
    pub categories: Vec<String>,
    pub series: Vec<BarSeries>,
}

/// One series of bars.
pub struct BarSeries {
    pub name: String,
    /// Its value in each category (`None`: no bar there).
    pub values: Vec<Option<f64>>,
    /// Index into the palette: a seed's figures take the colour of the series of ours they
    /// compare with.
    pub color: usize,
    /// Drawn pale with an outline (the seed's figures), else solid (ours).
    pub pale: bool,
}

impl BarSeries {
    pub fn ours(name: &str, color: usize, values: Vec<Option<f64>>) -> BarSeries {
        BarSeries {
            name: name.into(),
            values,
            color,
            pale: false,
        }
    }

    pub fn seed(name: &str, color: usize, values: Vec<Option<f64>>) -> BarSeries {
        BarSeries {
            pale: true,
            ..BarSeries::ours(name, color, values)
        }
    }
}

/// The legend's width for these names at the charts' font (about 7 px a character), so
/// that no name is cut at the right edge.
fn legend_width<'a>(names: impl Iterator<Item = &'a str>) -> f64 {
    let longest = names.map(|n| n.chars().count()).max().unwrap_or(0);
    (44.0 + 7.2 * longest as f64).max(120.0)
}

fn frame(s: &mut String, w: f64, h: f64, title: &str, title_x: f64) {
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        s,
        r#"<rect width="{w}" height="{h}" fill="white"/><text x="{title_x}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        esc(title)
    );
}

/// Horizontal grid lines and their labels at fifths of `y1`, the y axis' label, and the two
/// axes, for a plot area at (`l`, `t`) of `pw` x `ph`.
fn y_axis(s: &mut String, (l, t, pw, ph): (f64, f64, f64, f64), y1: f64, y_label: &str) {
    let py = |y: f64| t + ph - y / y1 * ph;
    for i in 0..=5 {
        let y = y1 * i as f64 / 5.0;
        let _ = write!(
            s,
            r##"<line x1="{l}" x2="{}" y1="{:.1}" y2="{:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            l + pw,
            py(y),
            py(y),
            l - 6.0,
            py(y) + 4.0,
            short(y)
        );
    }
    let _ = write!(
        s,
        r##"<line x1="{l}" x2="{l}" y1="{t}" y2="{}" stroke="#000"/><line x1="{l}" x2="{}" y1="{}" y2="{}" stroke="#000"/>"##,
        t + ph,
        l + pw,
        t + ph,
        t + ph
    );
    let _ = write!(
        s,
        r#"<text transform="translate(18,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
        t + ph / 2.0,
        esc(y_label)
    );
}

impl BarChart {
    pub fn svg(&self) -> String {
        let names = self.series.iter().map(|b| b.name.as_str());
        let r = legend_width(names) + 20.0;
        let (l, t, b) = (80.0, 40.0, 80.0);
        let ncat = self.categories.len().max(1) as f64;
        let pw = (140.0 * ncat).max(360.0);
        let (w, h) = (l + pw + r, 420.0);
        let ph = h - t - b;
        // Headroom above the tallest bar for its value label.
        let y1 = nice_max(
            1.08 * self
                .series
                .iter()
                .flat_map(|b| b.values.iter().flatten().copied())
                .fold(0.0, f64::max),
        );
        let py = |y: f64| t + ph - y / y1 * ph;
        let mut s = String::new();
        frame(&mut s, w, h, &self.title, l + pw / 2.0);
        y_axis(&mut s, (l, t, pw, ph), y1, &self.y_label);
        let group = pw / ncat;
        let nser = self.series.len().max(1) as f64;
        let bar = group * 0.8 / nser;
        for (ci, cat) in self.categories.iter().enumerate() {
            let gx = l + group * ci as f64;
            // A long category name goes on several lines, broken at spaces.
            for (li, line) in wrap_label(cat, (group / 7.0) as usize).iter().enumerate() {
                let _ = write!(
                    s,
                    r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
                    gx + group / 2.0,
                    t + ph + 18.0 + 15.0 * li as f64,
                    esc(line)
                );
            }
            for (si, bs) in self.series.iter().enumerate() {
                let Some(v) = bs.values.get(ci).copied().flatten() else {
                    continue;
                };
                let x = gx + group * 0.1 + bar * si as f64;
                let c = COLORS[bs.color % COLORS.len()];
                let fill = if bs.pale {
                    format!(r#"fill="{c}" fill-opacity="0.3" stroke="{c}" stroke-width="2""#)
                } else {
                    format!(r#"fill="{c}""#)
                };
                let _ = write!(
                    s,
                    r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" {fill}/><text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
                    py(v),
                    bar - 2.0,
                    t + ph - py(v),
                    x + bar / 2.0 - 1.0,
                    py(v) - 4.0,
                    short(v)
                );
            }
        }
        for (si, bs) in self.series.iter().enumerate() {
            let c = COLORS[bs.color % COLORS.len()];
            let ly = t + 10.0 + 20.0 * si as f64;
            let opacity = if bs.pale { "0.3" } else { "1" };
            let _ = write!(
                s,
                r#"<rect x="{}" y="{}" width="16" height="12" fill="{c}" fill-opacity="{opacity}" stroke="{c}"/><text x="{}" y="{}">{}</text>"#,
                l + pw + 12.0,
                ly - 10.0,
                l + pw + 34.0,
                ly + 1.0,
                esc(&bs.name)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

/// `label` in lines of at most `max` characters, broken at spaces (a longer word keeps
/// its own line).
fn wrap_label(label: &str, max: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in label.split(' ') {
        match lines.last_mut() {
            Some(l) if l.chars().count() + 1 + word.chars().count() <= max => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

impl Chart {
    pub fn svg(&self) -> String {
        let r = legend_width(self.series.iter().map(|s| s.name.as_str())) + 20.0;
        let (l, t, b) = (80.0, 40.0, 60.0);
        let (w, h) = (540.0 + r, 420.0);
        let pw = w - l - r;
        let ph = h - t - b;
        let xs: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .collect();
        let ys: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .collect();
        let fx = |x: f64| if self.log_x { x.max(1e-9).log2() } else { x };
        let x0 = xs.iter().copied().map(fx).fold(f64::INFINITY, f64::min);
        let x1 = xs.iter().copied().map(fx).fold(f64::NEG_INFINITY, f64::max);
        let (x0, x1) = if x0.is_finite() && x1 > x0 {
            (x0, x1)
        } else {
            (0.0, 1.0)
        };
        let y1 = nice_max(ys.iter().copied().fold(0.0, f64::max));
        let px = |x: f64| l + (fx(x) - x0) / (x1 - x0) * pw;
        let py = |y: f64| t + ph - y / y1 * ph;
        let mut s = String::new();
        frame(&mut s, w, h, &self.title, l + pw / 2.0);
        y_axis(&mut s, (l, t, pw, ph), y1, &self.y_label);
        // A tick per x value for a few categories (client counts); six evenly spaced ones
        // (in the axis' own scale) for a continuous series such as a time line or a CDF.
        let mut ticks: Vec<f64> = xs.clone();
        ticks.sort_by(|a, b| a.total_cmp(b));
        ticks.dedup();
        if ticks.len() > 12 {
            let unfx = |v: f64| if self.log_x { v.exp2() } else { v };
            ticks = (0..=5)
                .map(|i| unfx(x0 + (x1 - x0) * i as f64 / 5.0))
                .collect();
        }
        for x in ticks {
            let _ = write!(
                s,
                r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
                px(x),
                t + ph + 18.0,
                short(x)
            );
        }
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            l + pw / 2.0,
            h - 18.0,
            esc(&self.x_label)
        );
        for (i, se) in self.series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            let pts: Vec<String> = se
                .points
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            // Dash patterns and marker shapes cycle with the colours, so that series lying
            // on each other still both show.
            let dash = match i % 3 {
                0 => "",
                1 => r#" stroke-dasharray="7,4""#,
                _ => r#" stroke-dasharray="2,3""#,
            };
            let _ = write!(
                s,
                r#"<polyline fill="none" stroke="{c}" stroke-width="2"{dash} points="{}"/>"#,
                pts.join(" ")
            );
            // Markers where they stay apart; a dense series is its line alone.
            if se.points.len() <= 40 {
                for &(x, y) in &se.points {
                    marker(&mut s, i, px(x), py(y), c);
                }
            }
            let ly = t + 10.0 + 20.0 * i as f64;
            let _ = write!(
                s,
                r#"<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="{c}" stroke-width="3"{dash}/><text x="{}" y="{}">{}</text>"#,
                l + pw + 10.0,
                l + pw + 30.0,
                ly - 2.0,
                ly - 2.0,
                l + pw + 34.0,
                ly + 1.0,
                esc(&se.name)
            );
            if se.points.len() <= 40 {
                marker(&mut s, i, l + pw + 20.0, ly - 2.0, c);
            }
        }
        s.push_str("</svg>\n");
        s
    }
}

/// Series `i`'s marker at (`x`, `y`): a circle, a square or a triangle, in turn.
fn marker(s: &mut String, i: usize, x: f64, y: f64, c: &str) {
    let _ = match (i / 3) % 3 {
        0 => write!(s, r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{c}"/>"#),
        1 => write!(
            s,
            r#"<rect x="{:.1}" y="{:.1}" width="7" height="7" fill="none" stroke="{c}" stroke-width="1.5"/>"#,
            x - 3.5,
            y - 3.5
        ),
        _ => write!(
            s,
            r#"<polygon points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" fill="{c}"/>"#,
            x,
            y - 5.0,
            x - 4.5,
            y + 3.5,
            x + 4.5,
            y + 3.5
        ),
    };
}

fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v == v.trunc() || v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        // Three significant digits: adjacent bars' labels fit beside each other.
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn width(svg: &str) -> f64 {
        let w = svg.split("width=\"").nth(1).unwrap();
        w[..w.find('"').unwrap()].parse().unwrap()
    }

    #[test]
    fn a_bar_chart_draws_one_bar_per_value_and_labels_its_categories() {
        let long = "a legend name long enough to be cut at the old fixed width";
        let c = BarChart {
            title: "t".into(),
            y_label: "MB/s".into(),
            categories: vec!["legacy: mq-deadline, async pre/post".into(), "b".into()],
            series: vec![
                BarSeries::ours("ours", 0, vec![Some(1.0), Some(2.0)]),
                BarSeries::seed(long, 0, vec![None, Some(3.0)]),
            ],
        };
        let svg = c.svg();
        // Two bars of ours, one of the seed's (its first value is missing), two legend keys.
        assert_eq!(svg.matches("<rect x=").count(), 3 + 2, "{svg}");
        assert!(
            !svg.contains("polyline"),
            "categories are not joined by lines"
        );
        // The long category wraps at spaces instead of running into its neighbour.
        assert!(
            svg.contains(">legacy: mq-deadline,<") || svg.contains(">legacy:<"),
            "{svg}"
        );
        // The legend has room for its longest name: about 7 px a character past the plot.
        assert!(
            width(&svg) >= 80.0 + 280.0 + 7.0 * long.len() as f64,
            "{svg}"
        );
        assert!(
            svg.contains("fill-opacity=\"0.3\""),
            "the seed's bars are pale"
        );
    }

    #[test]
    fn overlapping_line_series_differ_in_dash_and_marker() {
        let pts = vec![(1.0, 1.0), (8.0, 2.0)];
        let c = Chart {
            title: "t".into(),
            x_label: "clients".into(),
            y_label: "ms".into(),
            log_x: true,
            series: (0..6)
                .map(|i| Series {
                    name: format!("series {i}"),
                    points: pts.clone(),
                })
                .collect(),
        };
        let svg = c.svg();
        for d in ["stroke-dasharray=\"7,4\"", "stroke-dasharray=\"2,3\""] {
            assert!(svg.contains(d), "{d}");
        }
        assert!(svg.contains("<circle") && svg.contains("<rect x=") && !svg.contains("<polygon"));
        assert_eq!(svg.matches("<polyline").count(), 6);
    }
}
