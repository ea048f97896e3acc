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

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use ash::vk;
use image::imageops::{self, FilterType};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;

use super::metrics;
use crate::app::config::Config;
use crate::app::frames::FrameSource;
use crate::app::headless::{self, OffscreenTarget};
use crate::app::session::Session;
use crate::app::{bench, dataset};
use crate::game::sequences::{self, Sequence};
use crate::upscale::Pattern;

/// Frames of each sequence reported apart as warm-up, by default.
pub const WARMUP: u64 = 8;

/// How tPSNR-Y is defined, written into the report.
pub const TPSNR_DEFINITION: &str = "tPSNR-Y of frame t (t >= 1): 10 log10(255^2 / MSE) with \
    MSE = mean over pixels of ((Y(out_t) - Y(out_t-1)) - (Y(ref_t) - Y(ref_t-1)))^2, Y = BT.601 \
    luma on the 8-bit display-encoded values (0..255), capped at 100 dB; frame 0 of a sequence \
    has none (null)";

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

/// Means over a range of frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Aggregate {
    pub frames: u64,
    pub psnr_y: f64,
    pub ssim_y: f64,
    /// Over the frames of the range that have a predecessor.
    pub tpsnr_y: Option<f64>,
}

/// One method on one sequence: per-frame arrays and their warm-up / after-warm-up means.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SequenceScores {
    pub sequence: String,
    pub psnr_y: Vec<f64>,
    pub ssim_y: Vec<f64>,
    /// Frame 0 has none.
    pub tpsnr_y: Vec<Option<f64>>,
    pub warmup: Aggregate,
    pub steady: Aggregate,
}

/// One method (a pattern with its model, or a reference method) over every sequence.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MethodReport {
    /// "in-stream quality_x2", "bilinear", "bicubic", "native".
    pub method: String,
    /// The pattern (None for the CPU bicubic and the native render).
    pub pattern: Option<String>,
    pub model: Option<String>,
    /// The pattern keeps history (`Caps::temporal`).
    pub temporal: bool,
    /// Its frames were drawn with a jittered projection.
    pub jittered: bool,
    pub sequences: Vec<SequenceScores>,
    /// Frames 0..warm-up of every sequence.
    pub warmup: Aggregate,
    /// Frames warm-up.. of every sequence.
    pub steady: Aggregate,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Unavailable {
    pub pattern: String,
    pub model: Option<String>,
    pub reason: String,
}

#[derive(Debug, serde::Serialize)]
pub struct SequenceReport {
    pub mode: &'static str,
    pub sequences: Vec<Sequence>,
    pub frames: u64,
    pub warmup_frames: u64,
    pub seed: u64,
    pub supersample: u32,
    pub render_size: [u32; 2],
    pub output_size: [u32; 2],
    pub msaa: u32,
    /// `render.jitter`.
    pub jitter: String,
    pub tpsnr: &'static str,
    pub methods: Vec<MethodReport>,
    pub unavailable: Vec<Unavailable>,
    pub device: String,
    pub validation_errors: u32,
    pub elapsed_s: f64,
    /// False while the run is still going (the file is rewritten after every sequence).
    pub complete: bool,
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

fn model_stem(path: &Path) -> String {
    path.file_stem().map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into(),
    )
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

/// Scores of one frame: luma planes of this and the previous frame, output and reference.
fn score_frames(outs: &[image::RgbaImage], refs: &[image::RgbaImage]) -> SequenceScoresRaw {
    let per_frame: Vec<(f64, f64, Option<f64>)> = (0..outs.len())
        .into_par_iter()
        .map(|t| {
            let (o, r) = (metrics::luma(&outs[t]), metrics::luma(&refs[t]));
            let psnr = metrics::psnr_from_mse(metrics::mse(&o, &r));
            let ssim = metrics::ssim(&o, &r);
            let tpsnr = (t > 0).then(|| {
                let (op, rp) = (metrics::luma(&outs[t - 1]), metrics::luma(&refs[t - 1]));
                metrics::tpsnr_y([&op, &o], [&rp, &r])
            });
            (psnr, ssim, tpsnr)
        })
        .collect();
    SequenceScoresRaw {
        psnr_y: per_frame.iter().map(|f| f.0).collect(),
        ssim_y: per_frame.iter().map(|f| f.1).collect(),
        tpsnr_y: per_frame.iter().map(|f| f.2).collect(),
    }
}

struct SequenceScoresRaw {
    psnr_y: Vec<f64>,
    ssim_y: Vec<f64>,
    tpsnr_y: Vec<Option<f64>>,
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0u64), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// Means of the frames `range` of every sequence in `seqs`.
fn aggregate<'a>(
    seqs: impl Iterator<Item = &'a SequenceScores>,
    range: std::ops::Range<usize>,
) -> Aggregate {
    let (mut psnr, mut ssim, mut tpsnr) = (Vec::new(), Vec::new(), Vec::new());
    for s in seqs {
        let r = range.start.min(s.psnr_y.len())..range.end.min(s.psnr_y.len());
        psnr.extend_from_slice(&s.psnr_y[r.clone()]);
        ssim.extend_from_slice(&s.ssim_y[r.clone()]);
        tpsnr.extend(s.tpsnr_y[r].iter().flatten());
    }
    Aggregate {
        frames: psnr.len() as u64,
        psnr_y: mean(psnr.into_iter()).unwrap_or(f64::NAN),
        ssim_y: mean(ssim.into_iter()).unwrap_or(f64::NAN),
        tpsnr_y: mean(tpsnr.into_iter()),
    }
}

impl SequenceScores {
    fn new(sequence: &str, raw: SequenceScoresRaw, warmup: usize) -> Self {
        let mut s = Self {
            sequence: sequence.to_string(),
            psnr_y: raw.psnr_y,
            ssim_y: raw.ssim_y,
            tpsnr_y: raw.tpsnr_y,
            warmup: Aggregate::default(),
            steady: Aggregate::default(),
        };
        s.warmup = aggregate(std::iter::once(&s), 0..warmup);
        s.steady = aggregate(std::iter::once(&s), warmup..usize::MAX);
        s
    }
}

impl MethodReport {
    fn new(method: String, pattern: Option<Pattern>, model: Option<&Path>) -> Self {
        Self {
            method,
            pattern: pattern.map(|p| p.name().to_string()),
            model: model.map(model_stem),
            temporal: pattern.is_some_and(|p| p.caps().temporal),
            jittered: false,
            sequences: Vec::new(),
            warmup: Aggregate::default(),
            steady: Aggregate::default(),
        }
    }

    fn push(&mut self, scores: SequenceScores, warmup: usize) {
        self.sequences.push(scores);
        self.warmup = aggregate(self.sequences.iter(), 0..warmup);
        self.steady = aggregate(self.sequences.iter(), warmup..usize::MAX);
    }
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
                let method = &mut self.report.methods[slot];
                method.jittered |= jittered;
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

/// The report as a table for a person.
pub fn table(r: &SequenceReport) -> String {
    let mut s = format!(
        "{} held-out sequences x {} frames (first {} = warm-up), {}x{} (msaa {}) -> {}x{}, \
         jitter {}\n",
        r.sequences.len(),
        r.frames,
        r.warmup_frames,
        r.render_size[0],
        r.render_size[1],
        r.msaa,
        r.output_size[0],
        r.output_size[1],
        r.jitter,
    );
    s += &format!(
        "{:<26} {:>8} {:>8} | {:>8} {:>7} {:>8}\n",
        "method", "warm-up", "", "after warm-up", "", ""
    );
    s += &format!(
        "{:<26} {:>8} {:>8} | {:>8} {:>7} {:>8}\n",
        "", "PSNR-Y", "tPSNR-Y", "PSNR-Y", "SSIM-Y", "tPSNR-Y"
    );
    let t = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    for m in &r.methods {
        let name = if m.jittered {
            format!("{} (jittered)", m.method)
        } else {
            m.method.clone()
        };
        s += &format!(
            "{name:<26} {:>8.2} {:>8} | {:>8.2} {:>7.4} {:>8}\n",
            m.warmup.psnr_y,
            t(m.warmup.tpsnr_y),
            m.steady.psnr_y,
            m.steady.ssim_y,
            t(m.steady.tpsnr_y),
        );
    }
    for u in &r.unavailable {
        let model = u
            .model
            .as_deref()
            .map_or(String::new(), |m| format!(" {m}"));
        s += &format!("{}{model}: not run: {}\n", u.pattern, u.reason);
    }
    s += "PSNR-Y, SSIM-Y against the supersampled unjittered target; tPSNR-Y: PSNR of the \
          frame-to-frame difference against the target's (README)";
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(psnr: &[f64], tpsnr: &[Option<f64>]) -> SequenceScores {
        let raw = SequenceScoresRaw {
            psnr_y: psnr.to_vec(),
            ssim_y: vec![0.5; psnr.len()],
            tpsnr_y: tpsnr.to_vec(),
        };
        SequenceScores::new("s", raw, 2)
    }

    #[test]
    fn warm_up_and_steady_means_split_at_the_warm_up() {
        let s = scores(
            &[10.0, 20.0, 30.0, 50.0],
            &[None, Some(1.0), Some(3.0), Some(5.0)],
        );
        assert_eq!(s.warmup.frames, 2);
        assert_eq!(s.warmup.psnr_y, 15.0);
        assert_eq!(s.warmup.tpsnr_y, Some(1.0));
        assert_eq!(s.steady.frames, 2);
        assert_eq!(s.steady.psnr_y, 40.0);
        assert_eq!(s.steady.tpsnr_y, Some(4.0));
        let mut m = MethodReport::new("m".into(), Some(Pattern::Bilinear), None);
        m.push(s.clone(), 2);
        m.push(scores(&[0.0, 0.0, 0.0, 10.0], &[None; 4]), 2);
        assert_eq!(m.steady.frames, 4);
        assert_eq!(m.steady.psnr_y, 22.5);
        assert_eq!(
            m.steady.tpsnr_y,
            Some(4.0),
            "frames without tPSNR are left out"
        );
    }

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
