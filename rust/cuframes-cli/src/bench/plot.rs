//! The latency plot of `cuframes bench --plot`: one CDF curve per transport
//! on a log µs axis, as a self-contained SVG (written by hand: it is a few
//! lines, text, axes and one `<path>` per curve).

use std::fmt::Write;

use crate::report::percentile;

const WIDTH: f64 = 860.0;
const HEIGHT: f64 = 520.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 250.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 70.0;
const COLORS: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"];
/// Points per curve at most (the CDF is sampled evenly in rank).
const POINTS: usize = 400;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn decade_label(exp: i32) -> String {
    match exp {
        e if e < 0 => format!("{} µs", 10f64.powi(e)),
        0 => "1 µs".into(),
        1 => "10 µs".into(),
        2 => "100 µs".into(),
        3 => "1 ms".into(),
        4 => "10 ms".into(),
        5 => "100 ms".into(),
        6 => "1 s".into(),
        e => format!("10^{} µs", e),
    }
}

/// An SVG of the latency CDFs; `curves` are (name, latencies in ns, sorted).
pub fn latency_cdf_svg(title: &str, curves: &[(String, Vec<u64>)]) -> String {
    let axes = Axes::spanning(curves);
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="13">"#
    );
    let _ = writeln!(
        svg,
        r#"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="15">{}</text>"#,
        LEFT + axes.width / 2.0,
        escape(title)
    );
    axes.latency_grid(&mut svg);
    axes.fraction_grid(&mut svg);
    axes.lines_and_labels(&mut svg);
    for (i, (name, ns)) in curves.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(
            svg,
            r#"<path class="curve" data-transport="{}" d="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
            escape(name),
            axes.cdf_path(ns)
        );
        axes.legend_entry(&mut svg, i, name, ns, color);
    }
    svg.push_str("</svg>\n");
    svg
}

/// The plot area: latency decades `lo..=hi` (10^n µs) across, the
/// fraction of frames 0..1 up.
#[derive(Debug)]
struct Axes {
    lo: i32,
    hi: i32,
    width: f64,
    height: f64,
}

impl Axes {
    /// The decades around every latency of `curves` (at least one).
    fn spanning(curves: &[(String, Vec<u64>)]) -> Axes {
        let values = curves.iter().flat_map(|(_, v)| v.iter().copied());
        let min_us = values
            .clone()
            .min()
            .map_or(1.0, |ns| (ns as f64 / 1000.0).max(0.1));
        let max_us = values.max().map_or(10.0, |ns| (ns as f64 / 1000.0).max(0.1));
        let lo = min_us.log10().floor() as i32;
        let hi = (max_us.log10().ceil() as i32).max(lo + 1);
        Axes {
            lo,
            hi,
            width: WIDTH - LEFT - RIGHT,
            height: HEIGHT - TOP - BOTTOM,
        }
    }

    fn x_of(&self, us: f64) -> f64 {
        LEFT + (us.max(0.1).log10() - self.lo as f64) / (self.hi - self.lo) as f64 * self.width
    }

    fn y_of(&self, fraction: f64) -> f64 {
        TOP + (1.0 - fraction) * self.height
    }

    fn bottom(&self) -> f64 {
        TOP + self.height
    }

    /// Vertical lines: decades (labelled) and their 2..9 multiples.
    fn latency_grid(&self, svg: &mut String) {
        let bottom = self.bottom();
        for exp in self.lo..=self.hi {
            let base = 10f64.powi(exp);
            let x = self.x_of(base);
            let _ = writeln!(
                svg,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{bottom:.1}" stroke="#bbb"/>"##
            );
            let _ = writeln!(
                svg,
                r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                bottom + 20.0,
                decade_label(exp)
            );
            if exp < self.hi {
                for m in 2..10 {
                    let x = self.x_of(base * m as f64);
                    let _ = writeln!(
                        svg,
                        r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{bottom:.1}" stroke="#eee"/>"##
                    );
                }
            }
        }
    }

    /// Horizontal lines: quarters, and p99 dashed, labelled.
    fn fraction_grid(&self, svg: &mut String) {
        for (fraction, label) in [
            (0.0, "0"),
            (0.25, "0.25"),
            (0.5, "0.5"),
            (0.75, "0.75"),
            (0.99, "0.99"),
            (1.0, "1"),
        ] {
            let y = self.y_of(fraction);
            let dash = if fraction == 0.99 {
                r#" stroke-dasharray="4 3""#
            } else {
                ""
            };
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ccc"{dash}/>"##,
                LEFT + self.width
            );
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"#,
                LEFT - 8.0,
                y + 4.0
            );
        }
    }

    /// The two axes and what they measure.
    fn lines_and_labels(&self, svg: &mut String) {
        let bottom = self.bottom();
        let _ = writeln!(
            svg,
            r#"<line x1="{LEFT}" y1="{bottom:.1}" x2="{:.1}" y2="{bottom:.1}" stroke="black"/>"#,
            LEFT + self.width
        );
        let _ = writeln!(
            svg,
            r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom:.1}" stroke="black"/>"#
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">publish → subscriber ready latency (µs, log scale)</text>"#,
            LEFT + self.width / 2.0,
            HEIGHT - 20.0
        );
        let middle = TOP + self.height / 2.0;
        let _ = writeln!(
            svg,
            r#"<text x="20" y="{middle:.1}" text-anchor="middle" transform="rotate(-90 20 {middle:.1})">fraction of frames (CDF)</text>"#
        );
    }

    /// The path data of one CDF (`ns` sorted), as steps up at each
    /// latency, sampled evenly in rank; empty for no frames.
    fn cdf_path(&self, ns: &[u64]) -> String {
        let mut d = String::new();
        if ns.is_empty() {
            return d;
        }
        let n = ns.len();
        let points = n.min(POINTS);
        let mut last_y = self.y_of(0.0);
        for k in 0..points {
            let idx = if points == 1 {
                n - 1
            } else {
                k * (n - 1) / (points - 1)
            };
            let x = self.x_of(ns[idx] as f64 / 1000.0);
            let y = self.y_of((idx + 1) as f64 / n as f64);
            if k == 0 {
                let _ = write!(d, "M{x:.1},{last_y:.1}");
            }
            let _ = write!(d, " L{x:.1},{last_y:.1} L{x:.1},{y:.1}");
            last_y = y;
        }
        d
    }

    /// Curve `i`'s line, name and percentiles, right of the plot.
    fn legend_entry(&self, svg: &mut String, i: usize, name: &str, ns: &[u64], color: &str) {
        let ly = TOP + 20.0 + i as f64 * 40.0;
        let lx = LEFT + self.width + 20.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="3"/>"#,
            lx + 24.0
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 32.0,
            ly + 4.0,
            escape(name)
        );
        let stats = if ns.is_empty() {
            "no frames".to_owned()
        } else {
            format!(
                "p50 {:.1} µs, p99 {:.1} µs",
                percentile(ns, 50.0) as f64 / 1000.0,
                percentile(ns, 99.0) as f64 / 1000.0
            )
        };
        let _ = writeln!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" fill="#444">{stats}</text>"##,
            lx + 32.0,
            ly + 19.0
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_path_per_curve_and_labelled_axes() {
        let curves = vec![
            ("cuframes".to_owned(), vec![5_000, 6_000, 9_000, 40_000]),
            ("pipe".to_owned(), vec![300_000, 400_000]),
            ("a<b".to_owned(), vec![]),
        ];
        let svg = latency_cdf_svg("t & t", &curves);
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<path").count(), 3);
        assert!(svg.contains("log scale") && svg.contains("CDF"));
        assert!(svg.contains("1 µs") && svg.contains("1 ms"));
        assert!(svg.contains("t &amp; t") && svg.contains("a&lt;b"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }
}
