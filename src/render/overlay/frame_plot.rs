//! The frame-time graph. Its y scale comes from the kept frames without their slowest few, so one
//! 15 s frame (a model switch on a software rasteriser) does not flatten the other 599; frames
//! above the scale are drawn at its top and the line under the graph says so. The axis has three
//! round labels (0, half, top) and is as wide as the widest of them.

use egui::Color32;
use egui_plot::{GridMark, HLine, Line, LineStyle, Plot, PlotPoints};

use crate::render::stats::{percentiles, Stats};

/// The scale's top is at least the slowest frame up to this many times the 95th percentile.
/// (The 95th, not the 99th: a graph of 60 frames has no 99th below its slowest frame.)
pub const OVER_P95: f64 = 2.0;

/// The graph's y range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scale {
    /// The top of the y axis (ms), a round number.
    pub top: f64,
    /// The slowest frame (ms) when it is above `top`.
    pub clipped: Option<f64>,
}

/// The scale for these frame times: up to the slowest frame, but no higher than the round
/// number at or above `OVER_P95` times the 95th percentile; and up to the frame cap's line
/// (`cap_ms`) where there is one.
pub fn scale(ms: &[f64], cap_ms: Option<f64>) -> Scale {
    let Some(p) = percentiles(ms.to_vec()) else {
        return Scale {
            top: round_up(cap_ms.unwrap_or(1.0)),
            clipped: None,
        };
    };
    let max = ms.iter().copied().fold(0.0, f64::max);
    let top = round_up(max.min(p.p95_ms * OVER_P95).max(cap_ms.unwrap_or(0.0)));
    Scale {
        top,
        clipped: (max > top).then_some(max),
    }
}

/// The smallest of 1, 2, 4, 6, 8 times a power of ten at or above `v`: its half is round too.
fn round_up(v: f64) -> f64 {
    if v.is_nan() || v <= 0.0 {
        return 1.0;
    }
    let power = 10f64.powf(v.log10().floor());
    let mantissa = [1.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        .into_iter()
        .find(|m| m * power >= v * (1.0 - 1e-9))
        .unwrap_or(10.0);
    mantissa * power
}

/// An axis label: milliseconds, or seconds from 1000 ms, without trailing zeros.
pub fn label(ms: f64) -> String {
    let trim = |v: f64| {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    if ms >= 1000.0 {
        format!("{} s", trim(ms / 1000.0))
    } else {
        trim(ms)
    }
}

/// Start-to-start frame times of the kept frames, in ms, and the frame cap's interval (`cap_ms`)
/// as a dashed line.
pub fn show(ui: &mut egui::Ui, stats: &Stats, cap_ms: Option<f64>) {
    let ms: Vec<(usize, f64)> = stats
        .records()
        .enumerate()
        .filter_map(|(i, r)| r.frame_ms.map(|ms| (i, ms)))
        .collect();
    let values: Vec<f64> = ms.iter().map(|p| p.1).collect();
    let scale = scale(&values, cap_ms);
    let top = scale.top;
    let points: PlotPoints = ms.iter().map(|&(i, v)| [i as f64, v.min(top)]).collect();
    let labels = [0.0, top / 2.0, top].map(label);
    let font = egui::TextStyle::Body.resolve(ui.style());
    let widest = labels
        .iter()
        .map(|l| {
            let galley = ui
                .painter()
                .layout_no_wrap(l.clone(), font.clone(), Color32::WHITE);
            galley.size().x
        })
        .fold(0.0, f32::max);
    Plot::new("frame time")
        .height(70.0)
        .show_axes([false, true])
        .allow_drag(false)
        .allow_zoom(false)
        .allow_scroll(false)
        // egui_plot puts 4 points of margin each side of a label.
        .y_axis_min_width(widest + 10.0)
        .y_grid_spacer(move |_| {
            [0.0, top / 2.0, top]
                .map(|value| GridMark {
                    value,
                    step_size: top / 2.0,
                })
                .to_vec()
        })
        .y_axis_formatter(|mark, _| label(mark.value))
        .show(ui, |plot| {
            // Room above and below so that the top and bottom labels are not cut in half.
            plot.set_plot_bounds_y(-0.08 * top..=1.1 * top);
            plot.line(Line::new("frame ms", points));
            if let Some(cap) = cap_ms {
                plot.hline(
                    HLine::new("fps cap", cap)
                        .color(Color32::from_rgb(120, 170, 255))
                        .style(LineStyle::dashed_loose()),
                );
            }
        });
    let mut caption = "frame time, ms".to_string();
    if let Some(cap) = cap_ms {
        caption += &format!("; dashed: the cap, {}", label(cap));
    }
    if let Some(max) = scale.clipped {
        caption += &format!(
            "; clipped at {} (p95 × {OVER_P95}): slowest {}",
            label(top),
            label(max)
        );
    }
    ui.small(caption);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_is_round_and_a_lone_slow_frame_does_not_set_it() {
        let steady = vec![16.0; 600];
        assert_eq!(
            scale(&steady, None),
            Scale {
                top: 20.0,
                clipped: None
            }
        );
        let mut spike = steady.clone();
        spike[300] = 15_000.0;
        assert_eq!(
            scale(&spike, None),
            Scale {
                top: 40.0,
                clipped: Some(15_000.0)
            }
        );
        // Right after start-up: 20 frames, one of them slow.
        let mut few = vec![30.0; 20];
        few[0] = 2_500.0;
        assert_eq!(scale(&few, None).top, 60.0);
        // A software rasteriser's ML pattern: every frame ~2.4 s.
        assert_eq!(scale(&[2400.0, 2450.0, 2380.0], None).top, 4000.0);
        assert_eq!(scale(&[], None).top, 1.0);
        assert_eq!(scale(&[0.0, 0.0], None).top, 1.0);
        // A 60 FPS cap: its line (16.7 ms) is inside the scale even while frames are faster.
        assert_eq!(scale(&[5.0; 100], Some(1000.0 / 60.0)).top, 20.0);
        assert_eq!(scale(&[], Some(1000.0 / 60.0)).top, 20.0);
    }

    #[test]
    fn round_numbers_with_round_halves() {
        for (v, top) in [
            (0.3, 0.4),
            (1.0, 1.0),
            (1.01, 2.0),
            (5.0, 6.0),
            (9.0, 10.0),
            (41.0, 60.0),
            (149.0, 200.0),
        ] {
            assert!((round_up(v) - top).abs() < 1e-9, "{v}: {}", round_up(v));
        }
    }

    #[test]
    fn labels_are_short() {
        for (ms, text) in [
            (0.0, "0"),
            (0.2, "0.2"),
            (0.30000000000000004, "0.3"),
            (20.0, "20"),
            (150.0, "150"),
            (1000.0, "1 s"),
            (3000.0, "3 s"),
            (15_000.0, "15 s"),
        ] {
            assert_eq!(label(ms), text);
        }
    }
}
