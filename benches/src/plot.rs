//! SVG charts of per-batch insert times, one line per engine (plotters' SVG backend).

use std::path::Path;

use anyhow::{Result, anyhow};
use plotters::prelude::*;

/// One engine's batches: (keys inserted after the batch, batch time in seconds).
#[derive(Debug, Clone, Copy)]
pub struct Series<'a> {
    /// Legend label (the engine's name).
    pub label: &'a str,
    /// Points in insertion order.
    pub points: &'a [(u64, f64)],
}

/// Line colours, in series order (repeated past the end).
const COLOURS: [RGBColor; 3] = [RGBColor(31, 119, 180), RGBColor(214, 39, 40), GREEN];

#[expect(clippy::cast_precision_loss, reason = "chart coordinates")]
fn x(keys: u64) -> f64 {
    keys as f64
}

/// Draws batch time (log scale, seconds) against keys inserted for every series into the SVG
/// file `path`, 1200 × 600 pixels.
///
/// # Errors
/// The file cannot be written, or there is nothing to draw.
pub fn batch_times_svg(path: &Path, title: &str, series: &[Series<'_>]) -> Result<()> {
    let all = || series.iter().flat_map(|s| s.points.iter());
    let max_x = all()
        .map(|p| p.0)
        .max()
        .ok_or_else(|| anyhow!("no batches to plot"))?;
    let positive = || all().map(|p| p.1).filter(|&t| t > 0.0);
    let min_y = positive().fold(f64::INFINITY, f64::min);
    let max_y = positive().fold(0.0, f64::max);
    if max_y <= 0.0 {
        return Err(anyhow!("no positive batch times to plot"));
    }
    // Millions of keys on the x axis, with a decimal below 20 M so the ticks stay distinct.
    let decimals = if max_x < 20_000_000 { 1 } else { 0 };
    let root = SVGBackend::new(path, (1200, 600)).into_drawing_area();
    let e = |e: DrawingAreaErrorKind<_>| anyhow!("plot {}: {e}", path.display());
    root.fill(&WHITE).map_err(e)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            0f64..x(max_x.max(1)),
            (min_y * 0.8..max_y * 1.25).log_scale(),
        )
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("keys inserted")
        .y_desc("batch time (s, log scale)")
        .x_label_formatter(&|v| format!("{:.*}M", decimals, v / 1e6))
        .y_label_formatter(&|v| format!("{v:.3}"))
        .draw()
        .map_err(e)?;
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(
                s.points
                    .iter()
                    .filter(|p| p.1 > 0.0)
                    .map(|&(k, t)| (x(k), t)),
                colour.mix(0.8).stroke_width(1),
            ))
            .map_err(e)?
            .label(s.label)
            .legend(move |(lx, ly)| {
                PathElement::new(vec![(lx, ly), (lx + 20, ly)], colour.stroke_width(3))
            });
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_one_line_per_engine() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("batches.svg");
        let a = [(65_536, 0.20), (131_072, 0.25), (196_608, 0.22)];
        let b = [(65_536, 0.50), (131_072, 0.0), (196_608, 1.50)];
        batch_times_svg(
            &path,
            "test",
            &[
                Series {
                    label: "strata",
                    points: &a,
                },
                Series {
                    label: "rocksdb",
                    points: &b,
                },
            ],
        )?;
        let svg = std::fs::read_to_string(&path)?;
        assert!(svg.contains(">\nstrata\n<") && svg.contains(">\nrocksdb\n<"));
        // Each colour draws the data line and the legend's sample line.
        assert_eq!(svg.matches("stroke=\"#1F77B4\"").count(), 2);
        assert_eq!(svg.matches("stroke=\"#D62728\"").count(), 2);
        Ok(())
    }

    #[test]
    fn refuses_an_empty_chart() {
        let dir = std::env::temp_dir().join("strata-benches-empty-plot.svg");
        assert!(batch_times_svg(&dir, "empty", &[]).is_err());
    }
}
