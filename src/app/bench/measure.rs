//! One pattern in one session: warm-up frames, measured frames, then the PSNR frames.
//!
//! Every run renders the same frames of the scripted camera path (0..warm-up, then the measured
//! ones), so patterns see identical scenes. The PSNR frames are rendered again after the
//! measured window, each captured and waited for: the capture copies and the waits never touch
//! the timed frames. Each PSNR frame f is rendered right after frame f − 1, which is captured
//! too, for its tPSNR-Y (f against f − 1, the cheapest pair that measures flicker). A spatial
//! upscaler keeps no state between frames, so a frame rendered again gives the image it gave
//! inside the window; a temporal one starts from a history reset [`TEMPORAL_LEAD`] frames before
//! f − 1 (the jump back to f is a camera cut), so its history is as warm as in the run.

use std::collections::BTreeSet;
use std::time::Instant;

use super::progress::Progress;
use super::report::{FramePsnr, NamedStage, PsnrReport, Resolution, RunReport};
use crate::app::headless::{render_scripted, OffscreenTarget};
use crate::app::quality::metrics;
use crate::app::session::Session;
use crate::infer::Precision;
use crate::render::stats::{self, Stats};
use crate::upscale::Pattern;

/// Frames a temporal pattern renders from a history reset before a PSNR frame's predecessor:
/// half a jitter period at x2, and past the point where taau's history stops gaining weight.
pub const TEMPORAL_LEAD: u64 = 16;

/// What one run renders.
pub struct Plan<'a> {
    pub warmup: u64,
    pub frames: u64,
    /// The native reference of each PSNR frame f, by scripted-path frame number: of f − 1 and f.
    pub native: &'a [(u64, [image::RgbaImage; 2])],
}

/// Frames rendered after the measured window for the PSNR frames of `pattern`'s run.
pub fn psnr_render_frames(pattern: Pattern, psnr_frames: u64) -> u64 {
    let lead = if pattern.caps().temporal {
        TEMPORAL_LEAD
    } else {
        0
    };
    psnr_frames * (2 + lead)
}

/// Names a run in the report.
pub struct RunKey {
    pub pattern: Pattern,
    /// The in-stream engine's precision (in-stream runs only).
    pub precision: Option<Precision>,
    pub model: Option<String>,
    pub model_path: Option<String>,
    pub resolution: Resolution,
}

impl RunKey {
    pub fn label(&self) -> String {
        let precision = self.precision.map_or(String::new(), |p| format!(" {p}"));
        format!(
            "{} {} {}{precision}",
            self.resolution.label(),
            self.model.as_deref().unwrap_or("–"),
            self.pattern
        )
    }
}

/// The scripted-path frames whose PSNR is measured: `count` frames spread evenly over the
/// measured window `warmup..warmup + frames`, first and last included.
pub fn psnr_frames(warmup: u64, frames: u64, count: u64) -> Vec<u64> {
    let count = count.min(frames);
    let picked: BTreeSet<u64> = (0..count)
        .map(|i| match count {
            1 => frames / 2,
            _ => i * (frames - 1) / (count - 1),
        })
        .collect();
    picked.into_iter().map(|f| warmup + f).collect()
}

/// Runs `key.pattern` (already switched to) through `plan` and reports what it measured.
pub fn run(
    s: &mut Session,
    egui_ctx: &egui::Context,
    target: &OffscreenTarget,
    key: RunKey,
    plan: &Plan,
    progress: &mut Progress,
) -> anyhow::Result<RunReport> {
    let started = Instant::now();
    let label = key.label();
    progress.message(&format!("{label} · warm-up"));
    for n in 0..plan.warmup {
        render_scripted(s, egui_ctx, target, n, false)?;
        progress.frame_done(&format!("{label} · warm-up {}/{}", n + 1, plan.warmup));
    }
    // A fresh window: records of warm-up frames, and their GPU spans still in flight, are dropped.
    s.renderer.stats = Stats::new(plan.frames.max(1) as usize);
    for i in 0..plan.frames {
        render_scripted(s, egui_ctx, target, plan.warmup + i, false)?;
        progress.frame_done(&format!("{label} · frame {}/{}", i + 1, plan.frames));
    }
    s.renderer.wait_all(&s.gpu)?;
    let temporal = key.pattern.caps().temporal;
    let mut report = collect(s, key, plan)?;
    let mut scores = Vec::with_capacity(plan.native.len());
    for (i, (frame, [native_prev, native])) in plan.native.iter().enumerate() {
        let frame = *frame;
        let mut done = |what: &str| {
            progress.frame_done(&format!(
                "{label} · PSNR {}/{} {what}",
                i + 1,
                plan.native.len()
            ));
        };
        if temporal {
            s.renderer.reset_history();
            for n in frame.saturating_sub(1 + TEMPORAL_LEAD)..frame.saturating_sub(1) {
                render_scripted(s, egui_ctx, target, n, false)?;
                done("history");
            }
        }
        let mut captured = Vec::with_capacity(2);
        for n in [frame.saturating_sub(1), frame] {
            render_scripted(s, egui_ctx, target, n, true)?;
            s.renderer.wait_all(&s.gpu)?;
            captured.push(target.output_image(&s.gpu)?);
            done("");
        }
        let (prev, upscaled) = (&captured[0], &captured[1]);
        let luma = metrics::luma;
        scores.push(FramePsnr {
            frame,
            psnr_y: metrics::psnr_y(upscaled, native),
            psnr_rgb: metrics::psnr_rgb(upscaled, native),
            tpsnr_y: metrics::tpsnr_y(
                [&luma(prev), &luma(upscaled)],
                [&luma(native_prev), &luma(native)],
            ),
        });
    }
    report.psnr = psnr_report(scores);
    report.elapsed_s = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Percentiles of each frame's top-level GPU spans added up (frames without spans left out).
fn gpu_frame_ms(stats: &Stats) -> Option<stats::Percentiles> {
    let sums = stats
        .records()
        .filter(|r| !r.gpu.is_empty())
        .map(|r| {
            r.gpu
                .iter()
                .filter(|(name, _)| stats::TOP_STAGES.contains(name))
                .map(|(_, ms)| ms)
                .sum()
        })
        .collect();
    stats::percentiles(sums)
}

fn psnr_report(frames: Vec<FramePsnr>) -> Option<PsnrReport> {
    if frames.is_empty() {
        return None;
    }
    let n = frames.len() as f64;
    Some(PsnrReport {
        psnr_y: frames.iter().map(|f| f.psnr_y).sum::<f64>() / n,
        psnr_rgb: frames.iter().map(|f| f.psnr_rgb).sum::<f64>() / n,
        tpsnr_y: frames.iter().map(|f| f.tpsnr_y).sum::<f64>() / n,
        frames,
    })
}

/// The measured window's figures, from the renderer's stats (PSNR still empty).
fn collect(s: &Session, key: RunKey, plan: &Plan) -> anyhow::Result<RunReport> {
    let stats = &s.renderer.stats;
    let label = key.label();
    let missing = |what: &str| anyhow::anyhow!("{label}: no {what} was recorded");
    let host: BTreeSet<&str> = stats
        .records()
        .flat_map(|r| r.host.iter().map(|(name, _)| *name))
        .collect();
    let named = |(name, p): (&str, stats::Percentiles)| NamedStage {
        name: name.to_string(),
        clock: if host.contains(name) { "host" } else { "gpu" },
        stats: p.into(),
    };
    let (layers, stages): (Vec<_>, Vec<_>) = stats
        .stages_in_order()
        .into_iter()
        .partition(|(name, _)| stats::is_layer(name));
    let renderer = &s.renderer;
    Ok(RunReport {
        pattern: key.pattern.name().into(),
        precision: key.precision.map(|p| p.name().to_string()),
        engine: renderer.engine(),
        model: key.model,
        model_path: key.model_path,
        resolution: key.resolution,
        warmup: plan.warmup,
        frames: plan.frames,
        frame_ms: stats
            .frame_ms()
            .ok_or_else(|| missing("frame time"))?
            .into(),
        cpu_ms: stats.cpu_ms().ok_or_else(|| missing("CPU time"))?.into(),
        gpu_frame_ms: gpu_frame_ms(stats).map(Into::into),
        stages: stages.into_iter().map(named).collect(),
        layers: layers.into_iter().map(named).collect(),
        host_copy_bytes: renderer.host_copy_bytes(),
        bus_bytes: renderer.bus_bytes(),
        psnr: None,
        pattern_note: renderer.describe(),
        frame_samples_ms: stats.records().filter_map(|r| r.frame_ms).collect(),
        elapsed_s: 0.0,
    })
}

#[cfg(test)]
mod tests {
    use super::psnr_frames;

    #[test]
    fn psnr_frames_spread_over_the_measured_window() {
        assert_eq!(psnr_frames(2, 10, 3), [2, 6, 11]);
        assert_eq!(psnr_frames(0, 5, 1), [2]);
        assert_eq!(
            psnr_frames(4, 2, 5),
            [4, 5],
            "at most one per measured frame"
        );
        assert!(psnr_frames(4, 10, 0).is_empty());
    }
}
