//! The command line: the subcommands and their flags (clap), turned into the library's
//! argument structs.

use std::path::PathBuf;

use clap::{ArgGroup, Args, Parser, Subcommand};

use upscale_demo::app::dataset::sequences::SequenceArgs as SequenceDatasetArgs;
use upscale_demo::app::dataset::DatasetArgs;
use upscale_demo::app::quality::sequence::SequenceArgs;
use upscale_demo::app::quality::QualityArgs;
use upscale_demo::app::run_model::{RunEngine, RunModelArgs};
use upscale_demo::infer::Precision;
use upscale_demo::render::compare::CompareSide;
use upscale_demo::upscale::Pattern;

#[derive(Parser)]
#[command(
    name = "upscale-demo",
    version,
    about = "Real-time AI-upscaling demo game on Vulkan",
    args_override_self = true
)]
pub(crate) struct Cli {
    /// Config file (default: config.toml of the project).
    #[arg(long, global = true)]
    pub(crate) config: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    /// Quit after this many frames (windowed smoke tests).
    #[arg(long)]
    pub(crate) exit_after_frames: Option<u64>,
    /// Write summary.json here when the window closes.
    #[arg(long)]
    pub(crate) summary: Option<PathBuf>,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Render the scripted camera path offscreen; writes last.png and summary.json.
    Headless(HeadlessCli),
    /// One inference of an ONNX model on .pb tensors (ONNX TensorProto), written as .pb.
    RunModel(RunModelCli),
    /// Render low-res / supersampled PNG pairs of seeded random views, or (--sequences) camera
    /// sequences with jitter, motion vectors and depth (training data).
    Dataset(DatasetCli),
    /// PSNR/SSIM of a model (cpu-roundtrip or in-stream), bilinear, bicubic and the native
    /// render vs the supersampled reference on the held-out views.
    Quality(QualityCli),
    /// Benchmark every available pattern x model x resolution; writes report.{json,csv,md,png}.
    Bench(BenchCli),
    /// Compare two images of the same size (e.g. two patterns' last.png of the same frame):
    /// largest per-channel difference, differing pixels, PSNR-RGB.
    ImageDiff(ImageDiffCli),
    /// Regenerate the texture PNGs in assets/.
    GenAssets(GenAssetsCli),
}

#[derive(Args)]
pub(crate) struct HeadlessCli {
    /// Frames to render (default 60; 10000 with --soak).
    #[arg(long)]
    pub(crate) frames: Option<u64>,
    #[arg(long, default_value = "out/headless")]
    pub(crate) out: PathBuf,
    /// Upscaler pattern (default: from the config).
    #[arg(long, value_parser = parse_pattern)]
    pub(crate) pattern: Option<Pattern>,
    /// ONNX model for the ML patterns (default: from the config).
    #[arg(long)]
    pub(crate) model: Option<PathBuf>,
    /// Cycle through the available patterns every N frames (default 30 with --soak).
    #[arg(long)]
    pub(crate) switch_every: Option<u64>,
    /// Turn the compare view on; its right side: native, bilinear, in-stream or taau.
    #[arg(long, value_parser = parse_compare_side)]
    pub(crate) compare: Option<CompareSide>,
    /// The compare view's divider, 0..1 from the left.
    #[arg(long)]
    pub(crate) divider: Option<f32>,
    /// The compare view's right side shows the current output's error against native as a
    /// false-colour heatmap (|luma difference| x 8).
    #[arg(long, requires = "compare")]
    pub(crate) heatmap: bool,
    /// Output size WxH instead of the config's (render size = output / render.scale).
    #[arg(long, value_parser = parse_size)]
    pub(crate) output_size: Option<(u32, u32)>,
    /// Long run: switch pattern every --switch-every frames and model every --model-every,
    /// report validation errors, memory growth and frame-time spikes (summary.json "soak").
    #[arg(long)]
    pub(crate) soak: bool,
    /// With --soak: switch model every N frames.
    #[arg(long, default_value_t = 500)]
    pub(crate) model_every: u64,
    /// With --soak: the models to cycle, comma-separated (default: models/*.onnx, the test
    /// model and a model the loader refuses).
    #[arg(long, value_delimiter = ',')]
    pub(crate) models: Vec<PathBuf>,
}

#[derive(Args)]
pub(crate) struct BenchCli {
    #[arg(long, default_value = "out/bench")]
    pub(crate) out: PathBuf,
    /// Comma-separated ONNX models (default: every models/*.onnx, not models/test/).
    #[arg(long, value_delimiter = ',')]
    pub(crate) models: Option<Vec<PathBuf>>,
    /// Comma-separated render:output sizes [default: 960x540:1920x1080,640x360:1280x720].
    #[arg(long)]
    pub(crate) res: Option<String>,
    /// Comma-separated patterns (default: all four; unavailable ones are reported, not run).
    #[arg(long, value_delimiter = ',', value_parser = parse_pattern)]
    pub(crate) patterns: Option<Vec<Pattern>>,
    /// Warm-up frames per run, not measured; at least 4 [default: 10].
    #[arg(long)]
    pub(crate) warmup: Option<u64>,
    /// Measured frames per run [default: 100].
    #[arg(long)]
    pub(crate) frames: Option<u64>,
    /// How many of the measured frames get a PSNR against the native render [default: 3].
    #[arg(long)]
    pub(crate) psnr_frames: Option<u64>,
    /// The native reference is rendered at this many times the output size, box-filtered
    /// (as `quality` does); 1: a plain native render.
    #[arg(long, default_value_t = 3)]
    pub(crate) supersample: u32,
    /// PyTorch reference timings (JSON from tools/reference/) to show beside in-stream.
    #[arg(long)]
    pub(crate) reference: Option<PathBuf>,
    /// A smoke run: 64x36:128x72, 4 warm-up and 5 measured frames, PSNR on 2 (flags given
    /// explicitly still win).
    #[arg(long)]
    pub(crate) quick: bool,
    /// No progress bar.
    #[arg(long)]
    pub(crate) no_progress: bool,
}

#[derive(Args)]
pub(crate) struct RunModelCli {
    #[arg(long)]
    pub(crate) model: PathBuf,
    /// One per graph input, in order.
    #[arg(long = "input", required = true)]
    pub(crate) inputs: Vec<PathBuf>,
    /// One per graph output (or one: further outputs get .1.pb, .2.pb, ...).
    #[arg(long = "output", required = true)]
    pub(crate) outputs: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "in-stream")]
    pub(crate) engine: RunEngine,
    /// The in-stream engine's storage precision (fp16 needs shaderFloat16 and 16-bit storage).
    #[arg(long, value_parser = parse_precision, default_value = "fp32")]
    pub(crate) precision: Precision,
    /// The reference plan (one dispatch per op, the direct conv kernel) instead of the fused
    /// fast path.
    #[arg(long)]
    pub(crate) reference: bool,
    /// Print what the plan chose (dispatches, kernels, barriers, what was not fused).
    #[arg(long)]
    pub(crate) plan: bool,
}

// Exactly one of --count (single views) and --sequences: clap says so when neither or both come.
#[derive(Args)]
#[command(group(ArgGroup::new("what").required(true).args(["count", "sequences"])))]
pub(crate) struct DatasetCli {
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Training pairs of single views; the held-out val split gets count/8 (at least 4).
    #[arg(
        long,
        required_unless_present = "sequences",
        conflicts_with = "sequences"
    )]
    pub(crate) count: Option<u64>,
    /// Instead of single views: this many training camera sequences of --length consecutive
    /// frames (jittered colour, motion vectors, depth, unjittered target); the held-out val
    /// split gets sequences/8 (at least 2).
    #[arg(long)]
    pub(crate) sequences: Option<u64>,
    /// With --sequences: frames per sequence [default: 32, one jitter period at x2].
    // `conflicts_with` rather than `requires = "sequences"`: clap let `--count 2 --length 4`
    // through with `requires` beside the group (seen with clap 4 here).
    #[arg(long, conflicts_with = "count")]
    pub(crate) length: Option<u64>,
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// The reference is rendered at this many times the output size, then box-filtered.
    #[arg(long, default_value_t = 3)]
    pub(crate) supersample: u32,
}

#[derive(Args)]
pub(crate) struct QualityCli {
    /// The model to score (with --sequence: only this model; default there: models/*.onnx).
    #[arg(long, required_unless_present = "sequence")]
    pub(crate) model: Option<PathBuf>,
    #[arg(long, value_parser = parse_pattern, default_value = "cpu-roundtrip", conflicts_with = "sequence")]
    pub(crate) pattern: Pattern,
    /// Held-out views [default: 16]; with --sequence: frames per sequence [default: 64].
    #[arg(long)]
    pub(crate) frames: Option<u64>,
    /// Seed of the held-out pose stream (the dataset's --seed).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    #[arg(long, default_value_t = 3)]
    pub(crate) supersample: u32,
    /// Write quality.json here.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// The in-stream engine's storage precision (--pattern in-stream; with --sequence the
    /// config's `upscale.precision` is used).
    #[arg(long, value_parser = parse_precision, default_value = "fp32", conflicts_with = "sequence")]
    pub(crate) precision: Precision,
    /// Measure every pattern (x model) in motion on held-out camera sequences, through the
    /// game's renderer: PSNR-Y, SSIM-Y and tPSNR-Y per frame.
    #[arg(long)]
    pub(crate) sequence: bool,
    /// With --sequence: how many sequences (the scripted path, then walks).
    #[arg(long, default_value_t = 8, requires = "sequence")]
    pub(crate) sequences: u64,
    /// With --sequence: the first frames of each sequence reported apart.
    #[arg(long, default_value_t = 8, requires = "sequence")]
    pub(crate) warmup: u64,
    /// With --sequence: comma-separated patterns (default: all; unavailable ones are listed).
    #[arg(long, value_delimiter = ',', value_parser = parse_pattern, requires = "sequence")]
    pub(crate) patterns: Option<Vec<Pattern>>,
    /// With --sequence: no progress bar.
    #[arg(long, requires = "sequence")]
    pub(crate) no_progress: bool,
}

/// What `quality` was asked to do.
pub(crate) enum QualityCommand {
    Still(QualityArgs),
    Sequence(SequenceArgs),
}

impl QualityCli {
    pub(crate) fn command(self) -> anyhow::Result<QualityCommand> {
        if !self.sequence {
            return Ok(QualityCommand::Still(QualityArgs {
                model: self
                    .model
                    .expect("clap requires --model without --sequence"),
                pattern: self.pattern,
                frames: self.frames.unwrap_or(16),
                seed: self.seed,
                supersample: self.supersample,
                out: self.out,
                precision: self.precision,
            }));
        }
        let mut args = SequenceArgs::new()?;
        if let Some(m) = self.model {
            args.models = vec![m];
        }
        if let Some(p) = self.patterns {
            args.patterns = p;
        }
        args.frames = self.frames.unwrap_or(args.frames);
        args.sequences = self.sequences;
        args.warmup = self.warmup;
        args.seed = self.seed;
        args.supersample = self.supersample;
        args.out = self.out;
        args.progress = !self.no_progress;
        Ok(QualityCommand::Sequence(args))
    }
}

#[derive(Args)]
pub(crate) struct ImageDiffCli {
    pub(crate) a: PathBuf,
    pub(crate) b: PathBuf,
    /// Fail (exit 1) when some channel differs by more than this many 1/255 steps.
    #[arg(long)]
    pub(crate) max: Option<u8>,
}

#[derive(Args)]
pub(crate) struct GenAssetsCli {
    #[arg(long, default_value = "assets")]
    pub(crate) out: PathBuf,
}

impl From<RunModelCli> for RunModelArgs {
    fn from(c: RunModelCli) -> Self {
        RunModelArgs {
            model: c.model,
            inputs: c.inputs,
            outputs: c.outputs,
            engine: c.engine,
            precision: c.precision,
            reference: c.reference,
            print_plan: c.plan,
        }
    }
}

/// What `dataset` was asked to make.
pub(crate) enum DatasetCommand {
    Views(DatasetArgs),
    Sequences(SequenceDatasetArgs),
}

impl DatasetCli {
    pub(crate) fn command(self) -> DatasetCommand {
        match self.sequences {
            Some(sequences) => DatasetCommand::Sequences(SequenceDatasetArgs {
                out: self.out,
                sequences,
                length: self.length.unwrap_or(32),
                seed: self.seed,
                supersample: self.supersample,
            }),
            None => DatasetCommand::Views(DatasetArgs {
                out: self.out,
                count: self
                    .count
                    .expect("clap requires --count without --sequences"),
                seed: self.seed,
                supersample: self.supersample,
            }),
        }
    }
}

pub(crate) fn parse_precision(s: &str) -> Result<Precision, String> {
    Precision::parse(s).ok_or_else(|| format!("unknown precision \"{s}\"; one of: fp32, fp16"))
}

pub(crate) fn parse_compare_side(s: &str) -> Result<CompareSide, String> {
    CompareSide::parse(s).ok_or_else(|| {
        let all: Vec<_> = CompareSide::ALL.iter().map(|c| c.name()).collect();
        format!("unknown compare side \"{s}\"; one of: {}", all.join(", "))
    })
}

pub(crate) fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("\"{s}\" is not a size; write it as WIDTHxHEIGHT, e.g. 128x72");
    let (w, h) = s.split_once('x').ok_or_else(bad)?;
    Ok((w.parse().map_err(|_| bad())?, h.parse().map_err(|_| bad())?))
}

pub(crate) fn parse_pattern(s: &str) -> Result<Pattern, String> {
    Pattern::parse(s)
        .ok_or_else(|| format!("unknown pattern \"{s}\"; one of: {}", Pattern::names()))
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory as _, Parser as _};

    use super::*;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn quality_flags_and_defaults_reach_the_library_args() {
        let cli = Cli::try_parse_from([
            "upscale-demo",
            "quality",
            "--model",
            "m.onnx",
            "--pattern",
            "in-stream",
            "--frames",
            "4",
        ])
        .unwrap();
        let Some(Command::Quality(q)) = cli.command else {
            panic!("not parsed as quality");
        };
        let Ok(QualityCommand::Still(args)) = q.command() else {
            panic!("not a still-frame quality run");
        };
        assert_eq!(args.model, PathBuf::from("m.onnx"));
        assert_eq!(args.pattern, Pattern::InStream);
        assert_eq!((args.frames, args.seed, args.supersample), (4, 1, 3));
        assert!(args.out.is_none());
    }

    #[test]
    fn an_unknown_pattern_names_the_known_ones() {
        let err =
            Cli::try_parse_from(["upscale-demo", "quality", "--model", "m", "--pattern", "x"])
                .err()
                .unwrap()
                .to_string();
        assert!(err.contains("in-stream"), "{err}");
    }

    #[test]
    fn sizes_are_width_x_height() {
        assert_eq!(parse_size("128x72"), Ok((128, 72)));
        assert!(parse_size("128").unwrap_err().contains("WIDTHxHEIGHT"));
        assert!(parse_size("ax72").is_err());
    }
}
