//! `upscale-demo quality --sequence`: the upscalers measured in motion, on held-out camera
//! sequences (`game::sequences`: the scripted path and seeded walks through the held-out cells,
//! the animation running at 60 frames per second).
//!
//! Every pattern (× every model, for the ML ones) runs as the game runs it: the frames go through
//! the real renderer in a headless session (jittered projection while the pattern is temporal
//! and `render.jitter` allows it, motion vectors and depth in its `FrameInputs`), each sequence
//! starting with a history reset. Each output frame is scored against the same view rendered
//! unjittered at `supersample ×` the output size and box-filtered in linear light (the target of
//! `quality` and `dataset`): PSNR-Y and SSIM-Y per frame, and tPSNR-Y (`metrics`: the PSNR of the
//! frame-to-frame difference against the target's) per frame from the second on. The first
//! `warmup` frames of every sequence are aggregated apart (a temporal upscaler's history is
//! still filling). Beside the patterns: `bicubic` (CPU, of the unjittered render-size frame) and
//! `native` (the view drawn once at output size), as `quality` reports them.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context as _;
use ash::vk;
use image::imageops::{self, FilterType};
use indicatif::{ProgressBar, ProgressStyle};

use crate::app::config::Config;
use crate::app::frames::FrameSource;
use crate::app::headless::{self, OffscreenTarget};
use crate::app::session::Session;
use crate::app::{bench, dataset};
use crate::game::sequences::{self, Sequence};
use crate::upscale::Pattern;

mod report;

use report::{model_stem, score_frames};
pub use report::{
    table, Aggregate, MethodReport, SequenceReport, SequenceScores, Unavailable, TPSNR_DEFINITION,
};

/// Frames of each sequence reported apart as warm-up, by default.
pub const WARMUP: u64 = 8;

pub struct SequenceArgs {
    pub sequences: u64,
    pub frames: u64,
    pub warmup: u64,
    pub seed: u64,
    pub supersample: u32,
    /// Empty: every `models/*.onnx`.
    pub models: Vec<PathBuf>,
    pub patterns: Vec<Pattern>,
    pub out: Option<PathBuf>,
    /// Draw a progress bar on stderr (when it is a terminal).
    pub progress: bool,
}

impl SequenceArgs {
    /// The defaults: 8 sequences × 64 frames, 8 of them warm-up, every pattern and shipped model.
    pub fn new() -> anyhow::Result<Self> {
        Ok(Self {
            sequences: 8,
            frames: 64,
            warmup: WARMUP,
            seed: 1,
            supersample: 3,
            models: bench::shipped_models()?,
            patterns: Pattern::ALL.to_vec(),
            out: None,
            progress: true,
        })
    }
}

/// A pattern with the model it runs.
#[derive(Clone, Debug)]
struct Run {
    pattern: Pattern,
    model: Option<PathBuf>,
}

impl Run {
    fn label(&self) -> String {
        match &self.model {
            Some(m) => format!("{} {}", self.pattern, model_stem(m)),
            None => self.pattern.to_string(),
        }
    }
}

/// Patterns without a model first, then each model's patterns: one model switch per model and
/// sequence.
fn plan_runs(args: &SequenceArgs) -> Vec<Run> {
    let mut runs: Vec<Run> = args
        .patterns
        .iter()
        .filter(|p| !p.caps().needs_model)
        .map(|&pattern| Run {
            pattern,
            model: None,
        })
        .collect();
    for m in &args.models {
        runs.extend(
            args.patterns
                .iter()
                .filter(|p| p.caps().needs_model)
                .map(|&pattern| Run {
                    pattern,
                    model: Some(m.clone()),
                }),
        );
    }
    runs
}

/// What the sequence runs share: the reference renderer, the game session and the report.
struct Measure<'a> {
    args: &'a SequenceArgs,
    source: FrameSource,
    session: Session,
    target: OffscreenTarget,
    runs: Vec<Run>,
    /// Index into `report.methods` per run, None while not yet known or unavailable.
    slots: Vec<Option<usize>>,
    /// The model the session's ML patterns run now.
    loaded: Option<PathBuf>,
    report: SequenceReport,
    bar: ProgressBar,
    started: Instant,
}

pub fn run(config: &Config, args: &SequenceArgs) -> anyhow::Result<SequenceReport> {
    anyhow::ensure!(args.sequences > 0, "--sequences must be at least 1");
    anyhow::ensure!(
        args.frames >= 2,
        "--frames must be at least 2 (tPSNR needs pairs)"
    );
    anyhow::ensure!(
        args.warmup < args.frames,
        "--warmup {} leaves no frame after the warm-up of a {}-frame sequence",
        args.warmup,
        args.frames
    );
    anyhow::ensure!(!args.patterns.is_empty(), "--patterns: give at least one");
    for m in &args.models {
        anyhow::ensure!(
            crate::app::paths::resolve(m).is_file(),
            "--models: {} does not exist",
            m.display()
        );
    }
    let mut measure = Measure::new(config, args)?;
    let ran = measure.all();
    let waited = measure.session.renderer.wait_all(&measure.session.gpu);
    measure.bar.finish_and_clear();
    let Measure {
        source,
        session,
        target,
        mut report,
        started,
        ..
    } = measure;
    target.destroy(&session.gpu);
    report.validation_errors = source.gpu.validation_errors() + session.gpu.validation_errors();
    drop(session);
    drop(source);
    ran.and(waited)?;
    report.elapsed_s = started.elapsed().as_secs_f64();
    report.complete = true;
    if let Some(dir) = &args.out {
        dataset::write_json(&dir.join("quality.json"), &report)?;
    }
    Ok(report)
}

impl<'a> Measure<'a> {
    fn new(config: &Config, args: &'a SequenceArgs) -> anyhow::Result<Self> {
        let source = FrameSource::with_native(config, args.supersample)?;
        let mut config = config.clone();
        if let Some(m) = args.models.first() {
            config.upscale.model = m.clone();
        }
        let session = Session::new(&config, None, vk::Format::R8G8B8A8_UNORM, Pattern::Bilinear)
            .context("starting the game session the patterns run in")?;
        let target = OffscreenTarget::for_session(&session)?;
        let sequences =
            sequences::sequences(source.world(), args.seed, args.sequences, args.frames);
        let runs = plan_runs(args);
        let (render, output) = (source.render, source.output);
        let mut methods = vec![
            MethodReport::new("bicubic".into(), None, None),
            MethodReport::new("native".into(), None, None),
        ];
        if args.supersample == 1 {
            // The native render is the reference itself.
            methods.pop();
        }
        let report = SequenceReport {
            mode: "sequence",
            sequences,
            frames: args.frames,
            warmup_frames: args.warmup,
            seed: args.seed,
            supersample: args.supersample,
            render_size: [render.0, render.1],
            output_size: [output.0, output.1],
            msaa: source.msaa,
            jitter: config.render.jitter.clone(),
            tpsnr: TPSNR_DEFINITION,
            methods,
            unavailable: Vec::new(),
            device: source.gpu.info.name.clone(),
            validation_errors: 0,
            elapsed_s: 0.0,
            complete: false,
        };
        let total = args.sequences * args.frames * (1 + runs.len() as u64);
        let bar = if args.progress {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} frames · ETA {eta} · {msg}",
                )
                .expect("valid template"),
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(250));
            bar
        } else {
            ProgressBar::hidden()
        };
        Ok(Self {
            args,
            slots: vec![None; runs.len()],
            loaded: args.models.first().cloned(),
            runs,
            source,
            session,
            target,
            report,
            bar,
            started: Instant::now(),
        })
    }

    fn all(&mut self) -> anyhow::Result<()> {
        for k in 0..self.report.sequences.len() {
            let seq = self.report.sequences[k].clone();
            let label = format!("sequence {}/{} ({})", k + 1, self.args.sequences, seq.name);
            self.bar.set_message(format!("{label} · reference"));
            let refs = self.references(&seq)?;
            for i in 0..self.runs.len() {
                let run = self.runs[i].clone();
                if k > 0 && self.slots[i].is_none() {
                    // Unavailable on the first sequence: its frames leave the bar.
                    self.bar.dec_length(self.args.frames);
                    continue;
                }
                if let Err(reason) = self.prepare(&run) {
                    self.unavailable(i, &run, reason);
                    continue;
                }
                self.bar.set_message(format!("{label} · {}", run.label()));
                let (outs, jittered) = self.render_run(&seq)?;
                let scores = score_frames(&outs, &refs);
                let slot = *self.slots[i].get_or_insert_with(|| {
                    let method =
                        MethodReport::new(run.label(), Some(run.pattern), run.model.as_deref());
                    self.report.methods.push(method);
                    self.report.methods.len() - 1
                });
                let temporal = self.session.renderer.upscaler_temporal();
                let method = &mut self.report.methods[slot];
                method.jittered |= jittered;
                method.temporal |= temporal;
                method.push(
                    SequenceScores::new(&seq.name, scores, self.args.warmup as usize),
                    self.args.warmup as usize,
                );
            }
            let line = format!("quality --sequence: {label} done");
            self.bar.suspend(|| tracing::info!("{line}"));
            if let Some(dir) = &self.args.out {
                self.report.elapsed_s = self.started.elapsed().as_secs_f64();
                dataset::write_json(&dir.join("quality.json"), &self.report)?;
            }
        }
        Ok(())
    }

    /// Renders the sequence's targets (and scores bicubic and native on the way).
    fn references(&mut self, seq: &Sequence) -> anyhow::Result<Vec<image::RgbaImage>> {
        let n = seq.frames.len();
        let mut refs = Vec::with_capacity(n);
        let mut bicubic = Vec::with_capacity(n);
        let mut native = Vec::with_capacity(n);
        for t in 0..n {
            let (camera, time) = seq.camera(t);
            let pair = self.source.render_view(camera, time)?.finish();
            let (w, h) = pair.hr.dimensions();
            bicubic.push(imageops::resize(&pair.lr, w, h, FilterType::CatmullRom));
            native.extend(pair.native);
            refs.push(pair.hr);
            self.bar.inc(1);
        }
        let warmup = self.args.warmup as usize;
        for (i, outs) in [bicubic, native].iter().enumerate() {
            if outs.len() == n {
                let scores = SequenceScores::new(&seq.name, score_frames(outs, &refs), warmup);
                self.report.methods[i].push(scores, warmup);
            }
        }
        Ok(refs)
    }

    /// Loads the run's model and pattern into the session; Err: why it cannot run.
    fn prepare(&mut self, run: &Run) -> Result<(), String> {
        let s = &mut self.session;
        if let Some(model) = &run.model {
            if self.loaded.as_ref() != Some(model) {
                s.switch(Pattern::Bilinear);
                s.switch_model(&crate::app::paths::resolve(model))?;
                self.loaded = Some(model.clone());
            }
        }
        s.patterns()
            .iter()
            .find(|p| p.0 == run.pattern)
            .map_or(Ok(()), |p| p.1.clone())?;
        s.renderer
            .switch_pattern(&s.gpu, run.pattern)
            .map_err(|e| format!("failed to start: {e:#}"))
    }

    fn unavailable(&mut self, index: usize, run: &Run, reason: String) {
        let line = format!("{}: not run: {reason}", run.label());
        self.bar.suspend(|| tracing::info!("{line}"));
        self.bar.dec_length(self.args.frames);
        self.slots[index] = None;
        self.report.unavailable.push(Unavailable {
            pattern: run.pattern.name().into(),
            model: run.model.as_deref().map(model_stem),
            reason,
        });
    }

    /// The sequence through the session's renderer from a history reset, as the game would
    /// draw it; returns each composited frame and whether any was jittered.
    fn render_run(&mut self, seq: &Sequence) -> anyhow::Result<(Vec<image::RgbaImage>, bool)> {
        let s = &mut self.session;
        s.renderer.reset_history();
        let mut outs = Vec::with_capacity(seq.frames.len());
        let mut jittered = false;
        for t in 0..seq.frames.len() {
            let (camera, time) = seq.camera(t);
            s.world.set_view(camera, time);
            headless::render_captured(s, &self.target)?;
            jittered |= s.renderer.scene_targets().frame_inputs(false).jitter != [0.0, 0.0];
            s.renderer.wait_all(&s.gpu)?;
            outs.push(self.target.output_image(&s.gpu)?);
            self.bar.inc(1);
        }
        Ok((outs, jittered))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn runs_put_the_model_free_patterns_first_then_each_models_patterns() {
        let args = SequenceArgs {
            models: vec!["a.onnx".into(), "b.onnx".into()],
            ..SequenceArgs::new().unwrap()
        };
        let runs = plan_runs(&args);
        let free = Pattern::ALL
            .iter()
            .filter(|p| !p.caps().needs_model)
            .count();
        let ml = Pattern::ALL.len() - free;
        assert_eq!(runs.len(), free + 2 * ml);
        assert!(runs[..free].iter().all(|r| r.model.is_none()));
        assert!(runs[free..free + ml]
            .iter()
            .all(|r| r.model.as_deref() == Some(Path::new("a.onnx"))));
    }
}
