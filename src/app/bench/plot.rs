//! `report.png`: one row of two charts per model × resolution group (bilinear joins every group
//! of its resolution as the baseline). Left: the GPU stages' p50 stacked per pattern, with the
//! frame p50 as a black line. Right: the measured frame times per pattern on a log axis (box
//! p25–p75, line at p50, whiskers min–max).
//!
//! Text is drawn with `ab_glyph` from a font compiled into the binary (egui's Ubuntu Light), so
//! the plot needs no fontconfig and no system fonts.

use std::path::Path;
use std::sync::Once;

use anyhow::Context as _;
use plotters::prelude::*;

use super::report::{BenchReport, Resolution, RunReport};
use crate::render::stats::TOP_STAGES;

const WIDTH: u32 = 1600;
const ROW_HEIGHT: u32 = 420;
const TITLE_HEIGHT: u32 = 60;
const STAGE_COLOURS: [RGBColor; 4] = [
    RGBColor(86, 148, 201),
    RGBColor(230, 137, 52),
    RGBColor(110, 178, 98),
    RGBColor(170, 120, 190),
];

struct Group<'a> {
    title: String,
    runs: Vec<&'a RunReport>,
}

/// Model × resolution groups in report order; bilinear-only when a resolution ran no model.
fn groups(report: &BenchReport) -> Vec<Group<'_>> {
    let mut out = Vec::new();
    for res in &report.config.resolutions {
        let at: Vec<&RunReport> = report
            .runs
            .iter()
            .filter(|r| r.resolution == *res)
            .collect();
        let baseline: Vec<&RunReport> = at.iter().copied().filter(|r| r.model.is_none()).collect();
        let mut models: Vec<&str> = Vec::new();
        for r in &at {
            if let Some(m) = r.model.as_deref() {
                if !models.contains(&m) {
                    models.push(m);
                }
            }
        }
        if models.is_empty() && !baseline.is_empty() {
            out.push(Group {
                title: ascii_label(res, "bilinear only"),
                runs: baseline.clone(),
            });
        }
        for m in models {
            let mut runs = baseline.clone();
            runs.extend(at.iter().copied().filter(|r| r.model.as_deref() == Some(m)));
            out.push(Group {
                title: ascii_label(res, m),
                runs,
            });
        }
    }
    out
}

fn ascii_label(res: &Resolution, model: &str) -> String {
    format!(
        "{model}, {}x{} -> {}x{}",
        res.render[0], res.render[1], res.output[0], res.output[1]
    )
}

fn register_font() {
    static FONT: Once = Once::new();
    FONT.call_once(|| {
        if plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            epaint_default_fonts::UBUNTU_LIGHT,
        )
        .is_err()
        {
            tracing::warn!("report.png: the built-in font did not load; text will be missing");
        }
    });
}

pub fn write_png(path: &Path, report: &BenchReport) -> anyhow::Result<()> {
    register_font();
    let groups = groups(report);
    let rows = groups.len().max(1) as u32;
    let height = TITLE_HEIGHT + rows * ROW_HEIGHT;
    let mut pixels = vec![0u8; (WIDTH * height * 3) as usize];
    draw(&mut pixels, height, report, &groups)
        .map_err(|e| anyhow::anyhow!("drawing the plots: {e}"))?;
    image::save_buffer(path, &pixels, WIDTH, height, image::ExtendedColorType::Rgb8)
        .with_context(|| format!("writing {}", path.display()))
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn draw(pixels: &mut [u8], height: u32, report: &BenchReport, groups: &[Group]) -> DrawResult {
    let root = BitMapBackend::with_buffer(pixels, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (title, body) = root.split_vertically(TITLE_HEIGHT);
    let gpu = report
        .header
        .gpu
        .as_ref()
        .map_or("no GPU", |g| g.name.as_str());
    title.titled(
        &format!(
            "upscale-demo bench - {gpu} - {} build - {}",
            report.header.build_profile, report.header.date
        ),
        ("sans-serif", 26),
    )?;
    if groups.is_empty() {
        body.titled("no runs", ("sans-serif", 22))?;
        return Ok(());
    }
    let cells = body.split_evenly((groups.len(), 2));
    for (g, pair) in groups.iter().zip(cells.chunks(2)) {
        stacked_stages(&pair[0], g)?;
        distributions(&pair[1], g)?;
    }
    root.present()?;
    Ok(())
}

fn pattern_names(g: &Group) -> Vec<String> {
    g.runs.iter().map(|r| r.pattern.clone()).collect()
}

/// Patterns sit at x = 0, 1, 2, ...; bars are drawn ±[`HALF_BAR`] around them.
fn categories(names: &[String]) -> std::ops::Range<f64> {
    -0.5..names.len() as f64 - 0.5
}

const HALF_BAR: f64 = 0.36;

/// Labels only the 1, 2 and 5 of each decade: the log axis puts a tick at every integer multiple.
fn log_label(v: f64) -> String {
    let mantissa = v / 10f64.powf(v.log10().floor());
    if [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6) {
        super::table::ms(v)
    } else {
        String::new()
    }
}

/// The pattern's name at integer positions, nothing between them.
fn category_label(names: &[String], x: f64) -> String {
    if (x - x.round()).abs() > 1e-6 || x.round() < 0.0 {
        return String::new();
    }
    names.get(x.round() as usize).cloned().unwrap_or_default()
}

fn stacked_stages(
    area: &DrawingArea<BitMapBackend, plotters::coord::Shift>,
    g: &Group,
) -> DrawResult {
    let names = pattern_names(g);
    let stack = |r: &RunReport| -> Vec<f64> {
        TOP_STAGES
            .iter()
            .map(|s| r.stage(s).map_or(0.0, |s| s.p50_ms))
            .collect()
    };
    let top = g
        .runs
        .iter()
        .map(|r| stack(r).iter().sum::<f64>().max(r.frame_ms.p50_ms))
        .fold(0.0, f64::max);
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{}: stage p50 (ms)", g.title), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(34)
        .y_label_area_size(64)
        .build_cartesian_2d(categories(&names), 0.0..(top * 1.15).max(1e-3))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(names.len().max(2))
        .x_label_formatter(&|v| category_label(&names, *v))
        .light_line_style(BLACK.mix(0.05))
        .y_desc("ms")
        .label_style(("sans-serif", 15))
        .draw()?;
    for (k, (stage, colour)) in TOP_STAGES.iter().zip(STAGE_COLOURS).enumerate() {
        let bars = g.runs.iter().enumerate().map(|(i, r)| {
            let values = stack(r);
            let bottom: f64 = values[..k].iter().sum();
            let x = i as f64;
            Rectangle::new(
                [(x - HALF_BAR, bottom), (x + HALF_BAR, bottom + values[k])],
                colour.filled(),
            )
        });
        chart
            .draw_series(bars)?
            .label(*stage)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
    }
    let frame_lines = g.runs.iter().enumerate().map(|(i, r)| {
        let y = r.frame_ms.p50_ms;
        PathElement::new(
            vec![(i as f64 - 0.45, y), (i as f64 + 0.45, y)],
            BLACK.stroke_width(2),
        )
    });
    chart
        .draw_series(frame_lines)?
        .label("frame p50")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], BLACK.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 14))
        .draw()?;
    Ok(())
}

/// (min, p25, p50, p75, max) of the samples, nearest rank.
fn five_numbers(samples: &[f64]) -> Option<[f64; 5]> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    Some([v[0], at(0.25), at(0.5), at(0.75), v[v.len() - 1]])
}

fn distributions(
    area: &DrawingArea<BitMapBackend, plotters::coord::Shift>,
    g: &Group,
) -> DrawResult {
    let names = pattern_names(g);
    let stats: Vec<Option<[f64; 5]>> = g
        .runs
        .iter()
        .map(|r| five_numbers(&r.frame_samples_ms))
        .collect();
    let (lo, hi) = log_range(&stats);
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{}: frame time (ms, log)", g.title),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(34)
        .y_label_area_size(64)
        .build_cartesian_2d(categories(&names), (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(names.len().max(2))
        .x_label_formatter(&|v| category_label(&names, *v))
        // A tick at every integer multiple of each decade (labelled at 1, 2 and 5 only), faint
        // lines, no light lines between: over three decades those merge into grey bands.
        .y_labels(40)
        .y_label_formatter(&|v| log_label(*v))
        .bold_line_style(BLACK.mix(0.08))
        .light_line_style(TRANSPARENT)
        .y_desc("ms")
        .label_style(("sans-serif", 15))
        .draw()?;
    for (i, s) in stats.iter().enumerate() {
        if let Some(five) = *s {
            let (x, wide) = (i as f64, HALF_BAR * 0.7);
            let body = [(x - wide, five[1]), (x + wide, five[3])];
            chart.draw_series([Rectangle::new(body, STAGE_COLOURS[0].filled())])?;
            chart.draw_series(box_lines(x, five))?;
        }
    }
    Ok(())
}

/// The log axis range: the samples' extremes with half a step of margin; 0.1..10 ms when there
/// are no positive samples.
fn log_range(stats: &[Option<[f64; 5]>]) -> (f64, f64) {
    let lo = stats
        .iter()
        .flatten()
        .map(|s| s[0])
        .fold(f64::INFINITY, f64::min);
    let hi = stats.iter().flatten().map(|s| s[4]).fold(0.0, f64::max);
    if lo.is_finite() && lo > 0.0 {
        (lo / 1.5, hi * 1.5)
    } else {
        (0.1, 10.0)
    }
}

/// The lines of one box at x: whiskers min..p25 and p75..max, a bold median, end caps.
fn box_lines(x: f64, [min, p25, p50, p75, max]: [f64; 5]) -> [PathElement<(f64, f64)>; 5] {
    let line = |x0: f64, x1: f64, y0: f64, y1: f64, width: u32| {
        PathElement::new(vec![(x0, y0), (x1, y1)], BLACK.stroke_width(width))
    };
    let (wide, narrow) = (HALF_BAR * 0.7, HALF_BAR * 0.3);
    [
        line(x, x, min, p25, 1),
        line(x, x, p75, max, 1),
        line(x - wide, x + wide, p50, p50, 2),
        line(x - narrow, x + narrow, min, min, 1),
        line(x - narrow, x + narrow, max, max, 1),
    ]
}

#[cfg(test)]
mod tests {
    use super::{five_numbers, log_range};

    #[test]
    fn five_numbers_by_nearest_rank() {
        let v: Vec<f64> = (1..=8).map(f64::from).collect();
        assert_eq!(five_numbers(&v), Some([1.0, 2.0, 4.0, 6.0, 8.0]));
        assert_eq!(five_numbers(&[]), None);
        assert_eq!(five_numbers(&[f64::NAN, 3.0]), Some([3.0; 5]));
    }

    #[test]
    fn the_log_axis_spans_every_sample_with_margin() {
        let stats = [
            Some([2.0, 3.0, 4.0, 5.0, 60.0]),
            None,
            Some([1.5, 2.0, 2.0, 2.0, 9.0]),
        ];
        assert_eq!(log_range(&stats), (1.0, 90.0));
        assert_eq!(log_range(&[None]), (0.1, 10.0));
        assert_eq!(log_range(&[Some([0.0; 5])]), (0.1, 10.0));
    }
}
