//! Line charts drawn by plotters on a `<canvas>` (pure Rust; the browser draws the text,
//! so no font files ship with the app). A chart redraws when its lines change.

use crate::format::{envs_label, si};
use leptos::prelude::*;
use plotters::prelude::*;
use plotters_canvas::CanvasBackend;

const BG: RGBColor = RGBColor(0x18, 0x20, 0x29);
const GRID: RGBColor = RGBColor(0x26, 0x30, 0x40);
const MUTED: RGBColor = RGBColor(0x8a, 0x96, 0xa3);

/// One series of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub name: String,
    pub color: (u8, u8, u8),
    pub points: Vec<(f64, f64)>,
}

/// The axes' ranges for some lines: the data's, padded so that a flat line or a single
/// point still gets a visible range.
pub fn bounds(lines: &[Line]) -> ((f64, f64), (f64, f64)) {
    let pts = || lines.iter().flat_map(|l| l.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts() {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return ((0.0, 1.0), (0.0, 1.0));
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let pad = match y1 - y0 {
        d if d < 1e-12 => y0.abs().max(1.0) * 0.1,
        d => d * 0.05,
    };
    ((x0, x1), (y0 - pad, y1 + pad))
}

/// Points on log axes: x as log₂, y as log₁₀ (non-positive values dropped).
pub fn log_points(lines: &[Line]) -> Vec<Line> {
    lines
        .iter()
        .map(|l| Line {
            points: l.points.iter().filter(|p| p.0 > 0.0 && p.1 > 0.0).map(|&(x, y)| (x.log2(), y.log10())).collect(),
            ..l.clone()
        })
        .collect()
}

fn draw(canvas: web_sys::HtmlCanvasElement, title: &str, lines: &[Line], log: bool) -> Result<(), String> {
    let logged;
    let lines = if log {
        logged = log_points(lines);
        &logged[..]
    } else {
        lines
    };
    type Format = fn(f64) -> String;
    let (fx, fy): (Format, Format) = if log { (|x| envs_label(x.exp2()), |y| si(10f64.powf(y))) } else { (si, si) };
    let backend = CanvasBackend::with_canvas_object(canvas).ok_or("the canvas has no 2D context")?;
    let root = backend.into_drawing_area();
    let e = |e: &dyn std::fmt::Debug| format!("{e:?}");
    root.fill(&BG).map_err(|x| e(&x))?;
    let ((x0, x1), (y0, y1)) = bounds(lines);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 14).into_font().color(&MUTED))
        .margin(8)
        .x_label_area_size(22)
        .y_label_area_size(54)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .light_line_style(GRID)
        .bold_line_style(GRID)
        .axis_style(MUTED)
        .label_style(("sans-serif", 11).into_font().color(&MUTED))
        .x_labels(5)
        .y_labels(5)
        .x_label_formatter(&|x| fx(*x))
        .y_label_formatter(&|y| fy(*y))
        .draw()
        .map_err(|x| e(&x))?;
    for line in lines {
        let (r, g, b) = line.color;
        let color = RGBColor(r, g, b);
        // Measured points (log charts) get a marker; streamed series are dense lines.
        let markers = if log { line.points.clone() } else { Vec::new() };
        chart.draw_series(markers.into_iter().map(|p| Circle::new(p, 3, color.filled()))).map_err(|x| e(&x))?;
        chart
            .draw_series(LineSeries::new(line.points.iter().copied(), color.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(line.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2)));
    }
    if lines.len() > 1 {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(BG.mix(0.85))
            .border_style(GRID)
            .label_font(("sans-serif", 11).into_font().color(&MUTED))
            .draw()
            .map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))
}

/// A fixed-size chart (no layout jump while data streams); `log` puts both axes on a
/// log scale (x base 2, labelled as batch sizes; y base 10).
#[component]
pub fn Chart(
    title: &'static str,
    testid: &'static str,
    lines: Signal<Vec<Line>>,
    #[prop(optional)] log: bool,
) -> impl IntoView {
    let node = NodeRef::<leptos::html::Canvas>::new();
    Effect::new(move |_| {
        let lines = lines.get();
        if let Some(canvas) = node.get() {
            if let Err(e) = draw(canvas, title, &lines, log) {
                leptos::logging::warn!("chart {title}: {e}");
            }
        }
    });
    view! { <canvas node_ref=node class="chart" width="560" height="220" data-testid=testid></canvas> }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_data_and_are_never_empty() {
        let line = |points: Vec<(f64, f64)>| vec![Line { name: "x".into(), color: (0, 0, 0), points }];
        assert_eq!(bounds(&[]), ((0.0, 1.0), (0.0, 1.0)));
        let ((x0, x1), (y0, y1)) = bounds(&line(vec![(0.0, 10.0), (100.0, 30.0)]));
        assert_eq!((x0, x1), (0.0, 100.0));
        assert!(y0 < 10.0 && y1 > 30.0);
        let ((x0, x1), (y0, y1)) = bounds(&line(vec![(5.0, 500.0)]));
        assert!(x1 > x0 && y1 > y0, "one point still has a range");
    }

    #[test]
    fn log_axes_take_log2_of_x_and_log10_of_y_and_drop_what_has_no_log() {
        let l = log_points(&[Line {
            name: "x".into(),
            color: (0, 0, 0),
            points: vec![(1.0, 10.0), (1024.0, 1e6), (0.0, 5.0)],
        }]);
        assert_eq!(l[0].points, vec![(0.0, 1.0), (10.0, 6.0)]);
    }
}
