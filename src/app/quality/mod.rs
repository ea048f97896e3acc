//! `upscale-demo quality`: how close an upscaling model gets to the native (supersampled) frame,
//! next to bilinear and bicubic, on the held-out views of `upscale-demo dataset`.
//!
//! With `--pattern cpu-roundtrip` (the default) the model runs exactly as that pattern runs it
//! (`rgba8_to_nchw` → `OrtModel::run` → `nchw_to_rgba8`), so the figures include the 8-bit
//! quantisation of the game's path. With `--pattern in-stream` the same tensors go through the
//! project's Vulkan compute engine instead (the in-stream pattern's engine and shaders, run as
//! one submission per frame). The views are the validation poses of the same seed as the dataset
//! (`game::poses`, split `val`), rendered afresh: no PNG round trip, nothing the model trained on.
//!
//! Beside the three methods the report has `native`: the view drawn by the same scene pass at
//! the output size (with `render.msaa`), which is what the game shows without upscaling. It is
//! the figure an upscaler is chasing, not a bound: the reference is supersampled.
//!
//! `quality --sequence` ([`sequence`]) measures every pattern in motion instead, through the
//! game's renderer.

pub use crate::metrics;

pub mod sequence;

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use image::imageops::{self, FilterType};

use super::config::Config;
use super::frames::{FramePair, FrameSource};
use super::session::ml_settings;
use crate::game::poses::{self, Split};
use crate::gpu::Gpu;
use crate::infer::{Engine, PlanOptions, Precision};
use crate::upscale::instream;
use crate::upscale::model::OrtModel;
use crate::upscale::roundtrip::{nchw_to_rgba8, rgba8_to_nchw};
use crate::upscale::Pattern;

pub struct QualityArgs {
    pub model: PathBuf,
    pub pattern: Pattern,
    pub frames: u64,
    pub seed: u64,
    pub supersample: u32,
    pub out: Option<PathBuf>,
    /// The in-stream engine's storage precision.
    pub precision: Precision,
}

/// Per-method scores, averaged over the frames (PSNR per frame, then the mean).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Scores {
    pub psnr_y: f64,
    pub psnr_rgb: f64,
    pub ssim_y: f64,
    pub ssim_rgb: f64,
}

impl Scores {
    fn measure(result: &image::RgbaImage, native: &image::RgbaImage) -> Self {
        Self {
            psnr_y: metrics::psnr_y(result, native),
            psnr_rgb: metrics::psnr_rgb(result, native),
            ssim_y: metrics::ssim_y(result, native),
            ssim_rgb: metrics::ssim_rgb(result, native),
        }
    }

    fn add(&mut self, other: &Self, weight: f64) {
        self.psnr_y += other.psnr_y * weight;
        self.psnr_rgb += other.psnr_rgb * weight;
        self.ssim_y += other.ssim_y * weight;
        self.ssim_rgb += other.ssim_rgb * weight;
    }
}

#[derive(Debug, serde::Serialize)]
pub struct QualityReport {
    pub model: Scores,
    pub bilinear: Scores,
    pub bicubic: Scores,
    /// The scene pass at output size without supersampling (absent with `--supersample 1`,
    /// where it is the reference itself).
    pub native: Option<Scores>,
    pub frames: u64,
    pub model_path: String,
    pub pattern: String,
    pub seed: u64,
    pub supersample: u32,
    pub render_size: [u32; 2],
    pub output_size: [u32; 2],
    /// Samples per pixel of the scene pass (`render.msaa`).
    pub msaa: u32,
    pub device: String,
    pub validation_errors: u32,
}

/// The model as the cpu-roundtrip pattern runs it, with its tensors allocated once.
struct RoundtripModel {
    model: OrtModel,
    input: Vec<f32>,
    output: Vec<f32>,
    in_shape: [usize; 4],
    out_shape: [usize; 4],
}

impl RoundtripModel {
    fn load(
        config: &Config,
        path: &Path,
        render: (u32, u32),
        output: (u32, u32),
    ) -> anyhow::Result<Self> {
        let mut ml = ml_settings(config)?;
        ml.model = super::paths::resolve(path);
        ml.runtime()
            .map_err(|why| anyhow::anyhow!("ONNX Runtime: {why}"))?;
        let (model, info) = OrtModel::load(&ml.model, ml.provider, ml.intra_threads)?;
        OrtModel::check_sizes(&info, render, output)?;
        let in_shape = [1, 3, render.1 as usize, render.0 as usize];
        let out_shape = [1, 3, output.1 as usize, output.0 as usize];
        Ok(Self {
            model,
            input: vec![0.0; in_shape.iter().product()],
            output: vec![0.0; out_shape.iter().product()],
            in_shape,
            out_shape,
        })
    }

    fn upscale(&mut self, lr: &image::RgbaImage) -> anyhow::Result<image::RgbaImage> {
        rgba8_to_nchw(lr.as_raw(), &mut self.input);
        self.model.run(
            &mut self.input,
            self.in_shape,
            &mut self.output,
            self.out_shape,
        )?;
        let (w, h) = (self.out_shape[3] as u32, self.out_shape[2] as u32);
        Ok(tensor_to_image(&self.output, (w, h)))
    }
}

/// An NCHW output tensor of `size` as the 8-bit image the game would show.
fn tensor_to_image(tensor: &[f32], (w, h): (u32, u32)) -> image::RgbaImage {
    let mut rgba = vec![0u8; (w * h * 4) as usize];
    nchw_to_rgba8(tensor, &mut rgba);
    image::RgbaImage::from_raw(w, h, rgba).expect("sized by the caller")
}

/// The model on the in-stream pattern's engine (Vulkan compute on the frame source's device),
/// planned as the pattern plans it: frame images in and out, the fast path in `precision`.
struct InStreamModel {
    engine: Engine,
    out_size: (u32, u32),
}

impl InStreamModel {
    fn load(
        gpu: &Gpu,
        path: &Path,
        render: (u32, u32),
        output: (u32, u32),
        precision: Precision,
    ) -> anyhow::Result<Self> {
        if let Some(why) = precision.unsupported_on(&gpu.info) {
            anyhow::bail!("--precision {precision}: {why}");
        }
        let options = PlanOptions::fast(&gpu.info, precision, true);
        let plan = instream::plan_with(&super::paths::resolve(path), render, output, &options)?;
        let engine = Engine::new(gpu, plan)?;
        Ok(Self {
            engine,
            out_size: output,
        })
    }

    fn upscale(&mut self, gpu: &Gpu, lr: &image::RgbaImage) -> anyhow::Result<image::RgbaImage> {
        let pixels = self
            .engine
            .run_frame(gpu, lr.as_raw(), lr.width(), lr.height())?;
        let (w, h) = self.out_size;
        Ok(image::RgbaImage::from_raw(w, h, pixels).expect("sized by the plan"))
    }
}

/// The model as `--pattern` runs it.
enum Upscaler {
    Roundtrip(RoundtripModel),
    InStream(InStreamModel),
}

impl Upscaler {
    fn upscale(&mut self, gpu: &Gpu, lr: &image::RgbaImage) -> anyhow::Result<image::RgbaImage> {
        match self {
            Upscaler::Roundtrip(m) => m.upscale(lr),
            Upscaler::InStream(m) => m.upscale(gpu, lr),
        }
    }

    fn destroy(self, gpu: &Gpu) {
        if let Upscaler::InStream(m) = self {
            m.engine.destroy(gpu);
        }
    }
}

pub fn run(config: &Config, args: &QualityArgs) -> anyhow::Result<QualityReport> {
    anyhow::ensure!(args.frames > 0, "--frames must be at least 1");
    anyhow::ensure!(
        matches!(args.pattern, Pattern::CpuRoundtrip | Pattern::InStream),
        "--pattern {}: quality measures cpu-roundtrip (the model through ONNX Runtime on the \
         CPU) or in-stream (the project's Vulkan engine); shared-memory runs the same ONNX \
         Runtime session as cpu-roundtrip and gives the same image within 1/255",
        args.pattern
    );
    let mut source = FrameSource::with_native(config, args.supersample)?;
    let (render, output) = (source.render, source.output);
    let mut upscaler = match args.pattern {
        Pattern::InStream => {
            InStreamModel::load(&source.gpu, &args.model, render, output, args.precision)
                .map(Upscaler::InStream)
        }
        _ => RoundtripModel::load(config, &args.model, render, output).map(Upscaler::Roundtrip),
    }
    .with_context(|| format!("loading the model {}", args.model.display()))?;
    let measured = measure(&mut source, &mut upscaler, args);
    upscaler.destroy(&source.gpu);
    let (totals, native) = measured?;
    let [model_scores, bilinear, bicubic] = totals;
    let report = QualityReport {
        model: model_scores,
        bilinear,
        bicubic,
        native,
        frames: args.frames,
        model_path: args.model.display().to_string(),
        pattern: args.pattern.name().into(),
        seed: args.seed,
        supersample: args.supersample,
        render_size: [render.0, render.1],
        output_size: [output.0, output.1],
        msaa: source.msaa,
        device: source.gpu.info.name.clone(),
        validation_errors: source.gpu.validation_errors(),
    };
    if let Some(dir) = &args.out {
        super::dataset::write_json(&dir.join("quality.json"), &report)?;
    }
    Ok(report)
}

/// Mean scores of model, bilinear and bicubic (and native, when rendered) over the views.
fn measure(
    source: &mut FrameSource,
    upscaler: &mut Upscaler,
    args: &QualityArgs,
) -> anyhow::Result<([Scores; 3], Option<Scores>)> {
    let views = poses::poses(source.world(), Split::Val, args.seed, args.frames);
    let mut totals = [Scores::default(); 3];
    let mut native_total: Option<Scores> = None;
    let weight = 1.0 / args.frames as f64;
    let progress_every = (args.frames / 10).max(1);
    for (n, pose) in views.iter().enumerate() {
        let FramePair { lr, hr, native } = source.render(pose)?;
        let (w, h) = hr.dimensions();
        let mut results = vec![
            upscaler.upscale(&source.gpu, &lr)?,
            imageops::resize(&lr, w, h, FilterType::Triangle),
            imageops::resize(&lr, w, h, FilterType::CatmullRom),
        ];
        results.extend(native);
        // SSIM at output size is the slow part: one thread per method.
        let scores: Vec<Scores> = std::thread::scope(|scope| {
            let jobs: Vec<_> = results
                .iter()
                .map(|r| scope.spawn(|| Scores::measure(r, &hr)))
                .collect();
            jobs.into_iter()
                .map(|j| j.join().expect("metrics thread panicked"))
                .collect()
        });
        for (total, score) in totals.iter_mut().zip(&scores) {
            total.add(score, weight);
        }
        if let Some(score) = scores.get(3) {
            native_total
                .get_or_insert_with(Scores::default)
                .add(score, weight);
        }
        if (n as u64 + 1).is_multiple_of(progress_every) {
            tracing::info!("quality: {}/{} frames", n + 1, args.frames);
        }
    }
    Ok((totals, native_total))
}

/// The report as a table for a person.
pub fn table(r: &QualityReport) -> String {
    let mut s = format!(
        "{} held-out frames, {}x{} (msaa {}) -> {}x{}, model {}\n{:<10} {:>10} {:>11} {:>8} {:>9}\n",
        r.frames,
        r.render_size[0],
        r.render_size[1],
        r.msaa,
        r.output_size[0],
        r.output_size[1],
        r.model_path,
        "method",
        "PSNR-Y dB",
        "PSNR-RGB dB",
        "SSIM-Y",
        "SSIM-RGB"
    );
    let methods = [
        Some(("model", &r.model)),
        Some(("bilinear", &r.bilinear)),
        Some(("bicubic", &r.bicubic)),
        r.native.as_ref().map(|n| ("native", n)),
    ];
    for (name, sc) in methods.into_iter().flatten() {
        s += &format!(
            "{name:<10} {:>10.2} {:>11.2} {:>8.4} {:>9.4}\n",
            sc.psnr_y, sc.psnr_rgb, sc.ssim_y, sc.ssim_rgb
        );
    }
    s += &format!(
        "model vs bicubic: {:+.2} dB (luma)",
        r.model.psnr_y - r.bicubic.psnr_y
    );
    if let Some(native) = &r.native {
        s += &format!(
            "; native (output size, not supersampled) vs bicubic: {:+.2} dB",
            native.psnr_y - r.bicubic.psnr_y
        );
    }
    s
}
