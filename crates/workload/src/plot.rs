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
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if v <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

impl Chart {
    pub fn svg(&self) -> String {
        let (w, h) = (720.0, 420.0);
        let (l, r, t, b) = (80.0, 180.0, 40.0, 60.0);
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
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
        );
        let _ = write!(
            s,
            r#"<rect width="{w}" height="{h}" fill="white"/><text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
            l + pw / 2.0,
            esc(&self.title)
        );
        // Axes, grid and ticks.
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
            r##"<line x1="{l}" x2="{l}" y1="{t}" y2="{}" stroke="#000"/><line x1="{l}" x2="{}" y1="{}" y2="{}" stroke="#000"/>"##,
            t + ph,
            l + pw,
            t + ph,
            t + ph
        );
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text><text transform="translate(18,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
            l + pw / 2.0,
            h - 18.0,
            esc(&self.x_label),
            t + ph / 2.0,
            esc(&self.y_label)
        );
        for (i, se) in self.series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            let pts: Vec<String> = se
                .points
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            // Every other series dashed, so that series lying on each other both show.
            let dash = if i % 2 == 1 {
                r#" stroke-dasharray="7,4""#
            } else {
                ""
            };
            let _ = write!(
                s,
                r#"<polyline fill="none" stroke="{c}" stroke-width="2"{dash} points="{}"/>"#,
                pts.join(" ")
            );
            // Markers where they stay apart; a dense series is its line alone.
            if se.points.len() <= 40 {
                for &(x, y) in &se.points {
                    let _ = write!(
                        s,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"/>"#,
                        px(x),
                        py(y)
                    );
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
        }
        s.push_str("</svg>\n");
        s
    }
}

fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
