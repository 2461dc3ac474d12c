//! SVG plots: a bar chart of every arm's packet rate with 95% CI error bars (and the
//! individual runs as dots), and for sweeps a line plot of the metric against the swept value.

use super::analysis::ExperimentResult;
use super::BenchError;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// File names (relative to the output directory) of an experiment's plots.
pub fn plot_files(e: &ExperimentResult) -> Vec<String> {
    let mut v = vec![format!("{}-mpps.svg", e.name)];
    if !e.sweeps.is_empty() {
        v.push(format!("{}-sweep.svg", e.name));
    }
    v
}

/// Draws the experiment's plots into `out`; returns the files written.
pub fn plots(e: &ExperimentResult, out: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let mut files = Vec::new();
    let bars = out.join(format!("{}-mpps.svg", e.name));
    if bar_chart(e, &bars).map_err(|msg| BenchError::Plot { path: bars.display().to_string(), msg })? {
        files.push(bars);
    }
    if !e.sweeps.is_empty() {
        let p = out.join(format!("{}-sweep.svg", e.name));
        if sweep_chart(e, &p).map_err(|msg| BenchError::Plot { path: p.display().to_string(), msg })? {
            files.push(p);
        }
    }
    Ok(files)
}

fn color(i: usize) -> RGBColor {
    const C: [RGBColor; 8] = [
        RGBColor(0x1f, 0x77, 0xb4),
        RGBColor(0xff, 0x7f, 0x0e),
        RGBColor(0x2c, 0xa0, 0x2c),
        RGBColor(0xd6, 0x27, 0x28),
        RGBColor(0x94, 0x67, 0xbd),
        RGBColor(0x8c, 0x56, 0x4b),
        RGBColor(0xe3, 0x77, 0xc2),
        RGBColor(0x7f, 0x7f, 0x7f),
    ];
    C[i % C.len()]
}

/// Bar per arm: mean Mpps, 95% CI whiskers, one dot per run. Ok(false) when no arm has data.
fn bar_chart(e: &ExperimentResult, path: &Path) -> Result<bool, String> {
    let arms: Vec<_> = e.arms.iter().filter(|a| a.mpps.is_some()).collect();
    if arms.is_empty() {
        return Ok(false);
    }
    let k = arms.len();
    let ymax = arms
        .iter()
        .flat_map(|a| {
            let m = a.mpps.as_ref().map(|m| m.ci95.1.max(m.max)).unwrap_or(0.0);
            std::iter::once(m).chain(a.samples.iter().map(|s| s.mpps))
        })
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.15;
    let width = (170 * k as u32 + 160).clamp(520, 1400);
    let root = SVGBackend::new(path, (width, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let labels: Vec<String> = arms.iter().map(|a| a.label.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{}: packet rate per arm (mean, 95% CI, runs)", e.name), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        // Integer ranges are inclusive in plotters: 0..k-1 gives the k segments.
        .build_cartesian_2d((0usize..k - 1).into_segmented(), 0.0..ymax)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc("Mpps")
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => labels.get(*i).cloned().unwrap_or_default(),
            SegmentValue::Last => String::new(),
        })
        .x_label_style(("sans-serif", 12))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, a) in arms.iter().enumerate() {
        let Some(m) = &a.mpps else { continue };
        let c = color(i);
        let mut bar = Rectangle::new([(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), m.mean)], c.mix(0.55).filled());
        bar.set_margin(0, 0, 18, 18);
        chart.draw_series(std::iter::once(bar)).map_err(|e| e.to_string())?;
        let (lo, hi) = m.ci95;
        // One run has no interval: no whisker, the label sits on the bar.
        let whisker = lo.is_finite() && hi.is_finite();
        let label_y = if whisker { hi } else { m.mean };
        let black = BLACK.stroke_width(2);
        if whisker {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(SegmentValue::CenterOf(i), lo), (SegmentValue::CenterOf(i), hi)],
                    black,
                )))
                .map_err(|e| e.to_string())?;
            for y in [lo, hi] {
                chart
                    .draw_series(std::iter::once(
                        EmptyElement::at((SegmentValue::CenterOf(i), y)) + PathElement::new(vec![(-8, 0), (8, 0)], black),
                    ))
                    .map_err(|e| e.to_string())?;
            }
        }
        let n = a.samples.len().max(1) as i32;
        chart
            .draw_series(a.samples.iter().enumerate().map(|(j, s)| {
                let dx = (j as i32 - n / 2) * 4 + 14;
                EmptyElement::at((SegmentValue::CenterOf(i), s.mpps)) + Circle::new((dx, 0), 3, c.filled())
            }))
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((SegmentValue::CenterOf(i), label_y))
                    + Text::new(format!("{:.3}", m.mean), (-16, -18), ("sans-serif", 12)),
            ))
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())?;
    Ok(true)
}

/// Metric against the swept value: one line per series through the means, CI whiskers,
/// and the least-squares fit dashed. Ok(false) when there is nothing to draw.
fn sweep_chart(e: &ExperimentResult, path: &Path) -> Result<bool, String> {
    let pts: Vec<(f64, f64, f64, f64)> = e.sweeps.iter().flat_map(|s| s.points.iter().copied()).collect();
    if pts.is_empty() {
        return Ok(false);
    }
    let fin = |v: &f64| v.is_finite();
    let xmin = pts.iter().map(|p| p.0).filter(fin).fold(f64::INFINITY, f64::min);
    let xmax = pts.iter().map(|p| p.0).filter(fin).fold(f64::NEG_INFINITY, f64::max);
    let ymax = pts.iter().map(|p| p.3.max(p.1)).filter(fin).fold(0.0f64, f64::max).max(1e-3) * 1.1;
    if !(xmin.is_finite() && xmax.is_finite()) {
        return Ok(false);
    }
    let pad = ((xmax - xmin) * 0.05).max(0.5);
    let metric = e.sweeps[0].metric;
    let y_desc = metric_desc(metric);
    let root = SVGBackend::new(path, (760, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{}: {} vs {}", e.name, y_desc, e.sweeps[0].x_label), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((xmin - pad)..(xmax + pad), 0.0..ymax)
        .map_err(|e| e.to_string())?;
    chart.configure_mesh().x_desc(e.sweeps[0].x_label.clone()).y_desc(y_desc).draw().map_err(|e| e.to_string())?;
    for (i, sw) in e.sweeps.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(sw.points.iter().map(|p| (p.0, p.1)), c.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(format!(
                "{} (slope {:.3}, r² {})",
                sw.series,
                sw.slope,
                if sw.r2.is_finite() { format!("{:.3}", sw.r2) } else { "-".into() }
            ))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart.draw_series(sw.points.iter().map(|p| Circle::new((p.0, p.1), 4, c.filled()))).map_err(|e| e.to_string())?;
        // Whiskers where there is an interval (not for a point of one run).
        for p in sw.points.iter().filter(|p| p.2.is_finite() && p.3.is_finite()) {
            chart.draw_series(std::iter::once(PathElement::new(vec![(p.0, p.2), (p.0, p.3)], BLACK))).map_err(|e| e.to_string())?;
        }
        // The fit, dashed (short segments).
        let (x0, x1) = (xmin, xmax);
        let segs = 40;
        chart
            .draw_series((0..segs).step_by(2).map(|j| {
                let xa = x0 + (x1 - x0) * j as f64 / segs as f64;
                let xb = x0 + (x1 - x0) * (j + 1) as f64 / segs as f64;
                PathElement::new(vec![(xa, sw.intercept + sw.slope * xa), (xb, sw.intercept + sw.slope * xb)], c.mix(0.6))
            }))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())?;
    Ok(true)
}

/// What a sweep metric is, in words.
pub fn metric_desc(m: &str) -> &'static str {
    match m {
        "mpps" => "Mpps",
        "cpu_ns_per_packet" => "CPU ns per packet",
        _ => "wall ns per packet",
    }
}
