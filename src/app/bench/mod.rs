//! `upscale-demo bench`: every available pattern × model × resolution on the scripted camera
//! path, headless. Per run: warm-up frames, measured frames (per-stage and whole-frame
//! p50/p95/p99 from GPU timestamps and CPU clocks, as the overlay shows them), host and bus
//! bytes, and PSNR of the upscaled output against a native render of the same frames.
//! Writes `report.json`, `report.csv`, `report.md` and `report.png` into `--out`.
//!
//! One session (Vulkan device, renderer, upscaler) per resolution × model; the patterns of that
//! model switch inside it (a switch builds the new upscaler once, never per frame). Bilinear
//! does not depend on the model: it runs once per resolution, in the first session.

mod machine;
pub mod measure;
mod plot;
mod progress;
pub mod reference;
pub mod report;
mod table;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use ash::vk;

use super::config::Config;
use super::frames::FrameSource;
use super::headless::OffscreenTarget;
use super::paths;
use super::session::{ml_settings, Session};
use crate::game::camera;
use crate::gpu::frame::FRAMES_IN_FLIGHT;
use crate::infer::Precision;
use crate::upscale::Pattern;
use measure::{Plan, RunKey};
use progress::{Planned, Progress};
use report::{BenchReport, ConfigReport, GpuHeader, Header, Resolution, Unavailable};

pub const DEFAULT_RESOLUTIONS: &str = "960x540:1920x1080,640x360:1280x720";

pub struct BenchArgs {
    pub out: PathBuf,
    pub patterns: Vec<Pattern>,
    /// Empty: bilinear only.
    pub models: Vec<PathBuf>,
    pub resolutions: Vec<Resolution>,
    pub warmup: u64,
    pub frames: u64,
    /// How many of the measured frames get a PSNR (0: none).
    pub psnr_frames: u64,
    pub supersample: u32,
    pub reference: Option<PathBuf>,
    /// Draw a progress bar on stderr (when it is a terminal).
    pub progress: bool,
    /// For the report header.
    pub command_line: String,
    pub config_file: String,
}

impl BenchArgs {
    /// The defaults: every pattern, the shipped models, both default resolutions, 10 warm-up
    /// and 100 measured frames, PSNR on 3. `quick`: a smoke run that finishes in seconds even
    /// on a software rasteriser (64x36 → 128x72, 4 warm-up and 5 measured frames, PSNR on 2).
    pub fn new(out: PathBuf, quick: bool) -> anyhow::Result<Self> {
        let resolutions = if quick {
            vec![Resolution::parse("64x36:128x72").map_err(anyhow::Error::msg)?]
        } else {
            parse_resolutions(DEFAULT_RESOLUTIONS)?
        };
        Ok(Self {
            out,
            patterns: Pattern::ALL.to_vec(),
            models: shipped_models()?,
            resolutions,
            warmup: if quick { MIN_WARMUP } else { 10 },
            frames: if quick { 5 } else { 100 },
            psnr_frames: if quick { 2 } else { 3 },
            supersample: 3,
            reference: None,
            progress: true,
            command_line: String::new(),
            config_file: String::new(),
        })
    }
}

/// `960x540:1920x1080,640x360:1280x720`.
pub fn parse_resolutions(s: &str) -> anyhow::Result<Vec<Resolution>> {
    s.split(',')
        .map(|r| Resolution::parse(r).map_err(|e| anyhow::anyhow!("--res {e}")))
        .collect()
}

/// `models/*.onnx` of the project (not `models/test/`), sorted by name.
pub fn shipped_models() -> anyhow::Result<Vec<PathBuf>> {
    let dir = paths::root().join("models");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut models: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    models.sort();
    Ok(models)
}

fn model_stem(path: &Path) -> String {
    path.file_stem().map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into(),
    )
}

/// The config with the render and output sizes of `res`.
fn config_for(base: &Config, res: &Resolution) -> Config {
    let mut c = base.clone();
    c.render.output_width = res.output[0];
    c.render.output_height = res.output[1];
    c.render.render_width = Some(res.render[0]);
    c.render.render_height = Some(res.render[1]);
    c
}

/// A report being filled in, with what the runs need to share.
struct Bench<'a> {
    args: &'a BenchArgs,
    report: BenchReport,
    progress: Progress,
    /// Index of the next run in the plan the progress bar was given (run or skipped).
    next_run: usize,
    started: Instant,
}

/// The fewest warm-up frames that keep the measured window out of the start-up transient.
///
/// Each run starts with the GPU idle (the previous run's PSNR frames waited for it). Frame k
/// waits for frame k − `FRAMES_IN_FLIGHT`, so the first `FRAMES_IN_FLIGHT` frames return at
/// once, and the start-to-start time of frame k ≥ `FRAMES_IN_FLIGHT` + 1 covers the GPU time of
/// frame k − `FRAMES_IN_FLIGHT` − 1. Frame 0 is also slow (a new upscaler's first dispatches,
/// first touch of its memory), so the first measured frame must come after frame
/// `FRAMES_IN_FLIGHT + 1`.
pub const MIN_WARMUP: u64 = FRAMES_IN_FLIGHT as u64 + 2;

pub fn run(config: &Config, args: &BenchArgs) -> anyhow::Result<BenchReport> {
    anyhow::ensure!(args.frames > 0, "--frames must be at least 1");
    anyhow::ensure!(
        args.warmup >= MIN_WARMUP,
        "--warmup {}: at least {MIN_WARMUP}, or the first measured frames' times still include \
         filling the {FRAMES_IN_FLIGHT} frames in flight and the run's slow first frame",
        args.warmup
    );
    anyhow::ensure!(!args.patterns.is_empty(), "--patterns: give at least one");
    anyhow::ensure!(!args.resolutions.is_empty(), "--res: give at least one");
    for m in &args.models {
        anyhow::ensure!(
            paths::resolve(m).is_file(),
            "--models: {} does not exist",
            m.display()
        );
    }
    let reference = match &args.reference {
        Some(path) => Some((path, reference::load(path)?)),
        None => None,
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let mut bench = Bench {
        args,
        report: new_report(config, args),
        progress: Progress::new(plan(args), args.progress),
        next_run: 0,
        started: Instant::now(),
    };
    for res in &args.resolutions {
        bench.resolution(config, res)?;
    }
    bench.progress.bar.finish_and_clear();
    let mut report = bench.report;
    if let Some((path, file)) = &reference {
        report.reference = Some(reference::compare(path, file, &report.runs));
    }
    report.elapsed_s = bench.started.elapsed().as_secs_f64();
    report.complete = true;
    write_all(&args.out, &report, true)?;
    Ok(report)
}

fn new_report(config: &Config, args: &BenchArgs) -> BenchReport {
    let machine = machine::machine();
    let (git_commit, git_dirty) = machine::git_commit(&paths::root());
    let wants_ort = args.patterns.iter().any(|p| p.caps().onnx_runtime);
    let ort = if wants_ort && !args.models.is_empty() {
        ml_settings(config).and_then(|ml| ml.runtime().map_err(anyhow::Error::msg))
    } else {
        Err(anyhow::anyhow!(
            "not loaded: no ONNX Runtime pattern in this bench"
        ))
    };
    let psnr_frames = measure::psnr_frames(args.warmup, args.frames, args.psnr_frames);
    BenchReport {
        header: Header {
            tool: format!("upscale-demo {}", env!("CARGO_PKG_VERSION")),
            date: machine::utc_now(),
            machine,
            gpu: None,
            onnxruntime: ort.as_ref().ok().map(|rt| rt.version.clone()),
            onnxruntime_error: ort.as_ref().err().map(|e| format!("{e:#}")),
            onnxruntime_provider: config.onnxruntime.execution_provider.clone(),
            git_commit,
            git_dirty,
            build_profile: machine::build_profile().into(),
            validation_enabled: false,
            command_line: args.command_line.clone(),
        },
        config: ConfigReport {
            patterns: args.patterns.iter().map(|p| p.name().into()).collect(),
            models: args
                .models
                .iter()
                .map(|m| m.display().to_string())
                .collect(),
            resolutions: args.resolutions.clone(),
            warmup: args.warmup,
            frames: args.frames,
            psnr_frames,
            supersample: args.supersample,
            msaa: config.render.msaa,
            overlay: true,
            config_file: args.config_file.clone(),
        },
        runs: Vec::new(),
        unavailable: Vec::new(),
        reference: None,
        validation_errors: 0,
        teardown: Default::default(),
        elapsed_s: 0.0,
        complete: false,
    }
}

/// Frames a run of `pattern` renders (warm-up, measured, PSNR), for the progress bar.
fn frames_per_run(args: &BenchArgs, pattern: Pattern) -> u64 {
    let psnr = measure::psnr_frames(args.warmup, args.frames, args.psnr_frames).len() as u64;
    args.warmup + args.frames + measure::psnr_render_frames(pattern, psnr)
}

/// One session per entry: the models, or one model-less session when there are none.
fn model_slots(args: &BenchArgs) -> Vec<Option<&PathBuf>> {
    if args.models.is_empty() {
        vec![None]
    } else {
        args.models.iter().map(Some).collect()
    }
}

/// The patterns the session of the `index`-th model slot runs: those without a model in the
/// first only.
fn patterns_for(args: &BenchArgs, index: usize, model: Option<&PathBuf>) -> Vec<Pattern> {
    args.patterns
        .iter()
        .copied()
        .filter(|&p| {
            if p.caps().needs_model {
                model.is_some()
            } else {
                index == 0
            }
        })
        .collect()
}

/// The runs of these patterns: those with a precision choice (in-stream) once per precision
/// (fp32, then fp16), the others once.
fn with_precisions(patterns: &[Pattern]) -> Vec<(Pattern, Option<Precision>)> {
    patterns
        .iter()
        .flat_map(|&p| {
            if p.caps().precisions {
                Precision::ALL.iter().map(|&q| (p, Some(q))).collect()
            } else {
                vec![(p, None)]
            }
        })
        .collect()
}

/// Every run in the order the bench makes them, as if every pattern were available.
fn plan(args: &BenchArgs) -> Vec<Planned> {
    let mut plan = Vec::new();
    for res in &args.resolutions {
        for (i, model) in model_slots(args).into_iter().enumerate() {
            for (pattern, _) in with_precisions(&patterns_for(args, i, model)) {
                plan.push(Planned {
                    pattern,
                    model: model
                        .filter(|_| pattern.caps().needs_model)
                        .map(|m| model_stem(m)),
                    output_pixels: res.output[0] as u64 * res.output[1] as u64,
                    frames: frames_per_run(args, pattern),
                });
            }
        }
    }
    plan
}

impl Bench<'_> {
    /// Every model (and bilinear) at one resolution.
    fn resolution(&mut self, base: &Config, res: &Resolution) -> anyhow::Result<()> {
        let config = config_for(base, res);
        let frames = self.report.config.psnr_frames.clone();
        self.progress
            .message(&format!("{} · native reference", res.label()));
        let native = self.native(&config, &frames)?;
        let plan = Plan {
            warmup: self.args.warmup,
            frames: self.args.frames,
            native: &native,
        };
        for (i, model) in model_slots(self.args).into_iter().enumerate() {
            let patterns = patterns_for(self.args, i, model);
            if !patterns.is_empty() {
                self.session(&config, res, model, &patterns, &plan)?;
            }
        }
        Ok(())
    }

    /// The native reference of each PSNR frame and of the frame before it (for tPSNR): the
    /// scene rendered at `supersample ×` the output size and box-filtered in linear light,
    /// exactly as `quality` makes its target.
    fn native(
        &mut self,
        config: &Config,
        frames: &[u64],
    ) -> anyhow::Result<Vec<(u64, [image::RgbaImage; 2])>> {
        if frames.is_empty() {
            return Ok(Vec::new());
        }
        let mut source = FrameSource::new(config, self.args.supersample)
            .context("creating the native reference renderer")?;
        let mut native = Vec::with_capacity(frames.len());
        for &f in frames {
            let mut reference = |n| {
                let (camera, time) = camera::scripted(n);
                anyhow::Ok(source.render_view(camera, time)?.finish().hr)
            };
            native.push((f, [reference(f.saturating_sub(1))?, reference(f)?]));
        }
        self.count_gpu(&source.gpu);
        let watch = source.gpu.teardown_watch();
        drop(source);
        self.count_teardown(&watch);
        Ok(native)
    }

    fn count_gpu(&mut self, gpu: &crate::gpu::Gpu) {
        self.report.validation_errors += gpu.validation_errors();
        self.report.header.validation_enabled |= gpu.instance.validation_enabled;
        self.report.header.gpu.get_or_insert_with(|| GpuHeader {
            name: gpu.info.name.clone(),
            device_type: gpu.info.device_type.clone(),
            driver: gpu.info.driver.clone(),
            api_version: gpu.info.api_version.clone(),
        });
    }

    /// Adds what a device's teardown left (call once its `Gpu` is dropped).
    fn count_teardown(&mut self, watch: &crate::gpu::TeardownWatch) {
        let Some(t) = watch.report() else { return };
        self.report.validation_errors += t.validation_errors;
        self.report.teardown.validation_errors += t.validation_errors;
        self.report.teardown.leaked_allocations += t.leaked_allocations;
    }

    /// One session for `model` at `res`, running `patterns` in turn.
    fn session(
        &mut self,
        config: &Config,
        res: &Resolution,
        model: Option<&PathBuf>,
        patterns: &[Pattern],
        plan: &Plan,
    ) -> anyhow::Result<()> {
        let mut config = config.clone();
        if let Some(m) = model {
            config.upscale.model = m.clone();
        }
        let mut s = Session::new(&config, None, vk::Format::R8G8B8A8_UNORM, Pattern::Bilinear)?;
        let target = OffscreenTarget::for_session(&s)?;
        let ran = self.patterns(&mut s, &target, res, model, patterns, plan);
        let waited = s.renderer.wait_all(&s.gpu);
        target.destroy(&s.gpu);
        self.count_gpu(&s.gpu);
        let watch = s.gpu.teardown_watch();
        drop(s);
        self.count_teardown(&watch);
        ran.and(waited)
    }

    fn patterns(
        &mut self,
        s: &mut Session,
        target: &OffscreenTarget,
        res: &Resolution,
        model: Option<&PathBuf>,
        patterns: &[Pattern],
        plan: &Plan,
    ) -> anyhow::Result<()> {
        // A fresh context per session: its first frame sends the font texture to the new renderer.
        let egui_ctx = egui::Context::default();
        for (pattern, precision) in with_precisions(patterns) {
            let key = RunKey {
                pattern,
                precision,
                model: pattern
                    .caps()
                    .needs_model
                    .then(|| model.map(|m| model_stem(m)))
                    .flatten(),
                model_path: pattern
                    .caps()
                    .needs_model
                    .then(|| model.map(|m| m.display().to_string()))
                    .flatten(),
                resolution: *res,
            };
            let available = s
                .patterns()
                .iter()
                .find(|p| p.0 == pattern)
                .map_or(Ok(()), |p| p.1.clone())
                .and_then(|()| match precision {
                    Some(p) => match p.unsupported_on(&s.gpu.info) {
                        Some(why) => Err(why),
                        None => s.switch_precision(p.into()),
                    },
                    None => Ok(()),
                })
                .and_then(|()| {
                    s.renderer
                        .switch_pattern(&s.gpu, pattern)
                        .map_err(|e| format!("failed to start: {e:#}"))
                });
            let index = self.next_run;
            self.next_run += 1;
            if let Err(reason) = available {
                self.skip(index, key, reason);
                continue;
            }
            self.progress.start_run(index);
            let run = measure::run(s, &egui_ctx, target, key, plan, &mut self.progress)?;
            self.report.runs.push(run);
            // Rewritten after every run: a long bench that is stopped keeps what it measured.
            self.report.elapsed_s = self.started.elapsed().as_secs_f64();
            write_all(&self.args.out, &self.report, false)?;
        }
        Ok(())
    }

    fn skip(&mut self, index: usize, key: RunKey, reason: String) {
        let line = format!("{}: not run: {reason}", key.label());
        self.progress.bar.suspend(|| tracing::info!("{line}"));
        self.progress.skip_run(index);
        self.report.unavailable.push(Unavailable {
            pattern: key.pattern.name().into(),
            precision: key.precision.map(|p| p.name().to_string()),
            model: key.model,
            resolution: key.resolution,
            reason,
        });
    }
}

/// Writes report.json, .csv and .md (and .png when `plot`) into `dir`.
pub fn write_all(dir: &Path, report: &BenchReport, plot: bool) -> anyhow::Result<()> {
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    write("report.json", serde_json::to_string_pretty(report)?)?;
    write("report.csv", table::csv(report))?;
    write("report.md", table::markdown(report))?;
    if plot {
        plot::write_png(&dir.join("report.png"), report)?;
    }
    Ok(())
}
