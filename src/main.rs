use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

use upscale_demo::app::bench::{self, BenchArgs};
use upscale_demo::app::config::Config;
use upscale_demo::app::dataset::{self, DatasetArgs};
use upscale_demo::app::headless::{self, HeadlessArgs};
use upscale_demo::app::quality::{self, QualityArgs};
use upscale_demo::app::run_model::{self, RunEngine, RunModelArgs};
use upscale_demo::app::soak::{self, SoakArgs};
use upscale_demo::app::window::{self, WindowArgs};
use upscale_demo::app::{has_display, paths};
use upscale_demo::game::textures;
use upscale_demo::render::compare::CompareSide;
use upscale_demo::render::stats::stage_rank;
use upscale_demo::upscale::Pattern;

#[derive(Parser)]
#[command(
    name = "upscale-demo",
    version,
    about = "Real-time AI-upscaling demo game on Vulkan",
    args_override_self = true
)]
struct Cli {
    /// Config file (default: config.toml of the project).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
    /// Quit after this many frames (windowed smoke tests).
    #[arg(long)]
    exit_after_frames: Option<u64>,
    /// Write summary.json here when the window closes.
    #[arg(long)]
    summary: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Render the scripted camera path offscreen; writes last.png and summary.json.
    Headless(HeadlessCli),
    /// One inference of an ONNX model on .pb tensors (ONNX TensorProto), written as .pb.
    RunModel {
        #[arg(long)]
        model: PathBuf,
        /// One per graph input, in order.
        #[arg(long = "input", required = true)]
        inputs: Vec<PathBuf>,
        /// One per graph output (or one: further outputs get .1.pb, .2.pb, ...).
        #[arg(long = "output", required = true)]
        outputs: Vec<PathBuf>,
        #[arg(long, value_enum, default_value = "in-stream")]
        engine: RunEngine,
    },
    /// Render low-res / supersampled PNG pairs of seeded random views (training data).
    Dataset {
        #[arg(long)]
        out: PathBuf,
        /// Training pairs; the held-out val split gets count/8 (at least 4).
        #[arg(long)]
        count: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The reference is rendered at this many times the output size, then box-filtered.
        #[arg(long, default_value_t = 3)]
        supersample: u32,
    },
    /// PSNR/SSIM of a model (cpu-roundtrip or in-stream), bilinear, bicubic and the native
    /// render vs the supersampled reference on the held-out views.
    Quality {
        #[arg(long)]
        model: PathBuf,
        #[arg(long, value_parser = parse_pattern, default_value = "cpu-roundtrip")]
        pattern: Pattern,
        #[arg(long, default_value_t = 16)]
        frames: u64,
        /// Seed of the held-out pose stream (the dataset's --seed).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 3)]
        supersample: u32,
        /// Write quality.json here.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Benchmark every available pattern x model x resolution; writes report.{json,csv,md,png}.
    Bench(BenchCli),
    /// Compare two images of the same size (e.g. two patterns' last.png of the same frame):
    /// largest per-channel difference, differing pixels, PSNR-RGB.
    ImageDiff {
        a: PathBuf,
        b: PathBuf,
        /// Fail (exit 1) when some channel differs by more than this many 1/255 steps.
        #[arg(long)]
        max: Option<u8>,
    },
    /// Regenerate the texture PNGs in assets/.
    GenAssets {
        #[arg(long, default_value = "assets")]
        out: PathBuf,
    },
}

#[derive(Args)]
struct HeadlessCli {
    /// Frames to render (default 60; 10000 with --soak).
    #[arg(long)]
    frames: Option<u64>,
    #[arg(long, default_value = "out/headless")]
    out: PathBuf,
    /// Upscaler pattern (default: from the config).
    #[arg(long, value_parser = parse_pattern)]
    pattern: Option<Pattern>,
    /// ONNX model for the ML patterns (default: from the config).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Cycle through the available patterns every N frames (default 30 with --soak).
    #[arg(long)]
    switch_every: Option<u64>,
    /// Turn the compare view on; its right side: native, bilinear or in-stream.
    #[arg(long, value_parser = parse_compare_side)]
    compare: Option<CompareSide>,
    /// The compare view's divider, 0..1 from the left.
    #[arg(long)]
    divider: Option<f32>,
    /// Output size WxH instead of the config's (render size = output / render.scale).
    #[arg(long, value_parser = parse_size)]
    output_size: Option<(u32, u32)>,
    /// Long run: switch pattern every --switch-every frames and model every --model-every,
    /// report validation errors, memory growth and frame-time spikes (summary.json "soak").
    #[arg(long)]
    soak: bool,
    /// With --soak: switch model every N frames.
    #[arg(long, default_value_t = 500)]
    model_every: u64,
    /// With --soak: the models to cycle, comma-separated (default: models/*.onnx, the test
    /// model and a model the loader refuses).
    #[arg(long, value_delimiter = ',')]
    models: Vec<PathBuf>,
}

#[derive(Args)]
struct BenchCli {
    #[arg(long, default_value = "out/bench")]
    out: PathBuf,
    /// Comma-separated ONNX models (default: every models/*.onnx, not models/test/).
    #[arg(long, value_delimiter = ',')]
    models: Option<Vec<PathBuf>>,
    /// Comma-separated render:output sizes [default: 960x540:1920x1080,640x360:1280x720].
    #[arg(long)]
    res: Option<String>,
    /// Comma-separated patterns (default: all four; unavailable ones are reported, not run).
    #[arg(long, value_delimiter = ',', value_parser = parse_pattern)]
    patterns: Option<Vec<Pattern>>,
    /// Warm-up frames per run, not measured; at least 4 [default: 10].
    #[arg(long)]
    warmup: Option<u64>,
    /// Measured frames per run [default: 100].
    #[arg(long)]
    frames: Option<u64>,
    /// How many of the measured frames get a PSNR against the native render [default: 3].
    #[arg(long)]
    psnr_frames: Option<u64>,
    /// The native reference is rendered at this many times the output size, box-filtered
    /// (as `quality` does); 1: a plain native render.
    #[arg(long, default_value_t = 3)]
    supersample: u32,
    /// PyTorch reference timings (JSON from tools/reference/) to show beside in-stream.
    #[arg(long)]
    reference: Option<PathBuf>,
    /// A smoke run: 64x36:128x72, 4 warm-up and 5 measured frames, PSNR on 2 (flags given
    /// explicitly still win).
    #[arg(long)]
    quick: bool,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

fn parse_compare_side(s: &str) -> Result<CompareSide, String> {
    CompareSide::parse(s).ok_or_else(|| {
        let all: Vec<_> = CompareSide::ALL.iter().map(|c| c.name()).collect();
        format!("unknown compare side \"{s}\"; one of: {}", all.join(", "))
    })
}

fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("\"{s}\" is not a size; write it as WIDTHxHEIGHT, e.g. 128x72");
    let (w, h) = s.split_once('x').ok_or_else(bad)?;
    Ok((w.parse().map_err(|_| bad())?, h.parse().map_err(|_| bad())?))
}

fn parse_pattern(s: &str) -> Result<Pattern, String> {
    Pattern::parse(s)
        .ok_or_else(|| format!("unknown pattern \"{s}\"; one of: {}", Pattern::names()))
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,winit=warn,egui_ash_renderer=warn".into()),
        )
        .with_target(false)
        .init();
    if let Err(e) = run(Cli::parse()) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn load_config(path: Option<&Path>) -> anyhow::Result<Config> {
    match path {
        Some(p) => Ok(Config::load(p)?),
        None => {
            let default = paths::root().join("config.toml");
            if default.exists() {
                Ok(Config::load(&default)?)
            } else {
                tracing::warn!("{} not found: using built-in defaults", default.display());
                Ok(Config::default())
            }
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let config = load_config(cli.config.as_deref())?;
    let config_file = cli.config.as_ref().map_or_else(
        || paths::root().join("config.toml").display().to_string(),
        |p| p.display().to_string(),
    );
    match cli.command {
        Some(Command::Bench(b)) => run_bench(&config, config_file, b),
        Some(Command::RunModel {
            model,
            inputs,
            outputs,
            engine,
        }) => {
            let args = RunModelArgs {
                model,
                inputs,
                outputs,
                engine,
            };
            for t in run_model::run(&args)? {
                println!("{} {:?}", t.name, t.shape);
            }
            Ok(())
        }
        Some(Command::ImageDiff { a, b, max }) => image_diff(&a, &b, max),
        Some(Command::GenAssets { out }) => {
            textures::write_all(&out)?;
            println!("textures written to {}", out.display());
            Ok(())
        }
        Some(Command::Dataset {
            out,
            count,
            seed,
            supersample,
        }) => run_dataset(
            &config,
            &DatasetArgs {
                out,
                count,
                seed,
                supersample,
            },
        ),
        Some(Command::Quality {
            model,
            pattern,
            frames,
            seed,
            supersample,
            out,
        }) => {
            let args = QualityArgs {
                model,
                pattern,
                frames,
                seed,
                supersample,
                out,
            };
            let report = quality::run(&config, &args)?;
            println!("{}", quality::table(&report));
            if let Some(dir) = &args.out {
                println!("wrote {}", dir.join("quality.json").display());
            }
            Ok(())
        }
        Some(Command::Headless(h)) => run_headless_command(config, h),
        None => run_window(config, cli.exit_after_frames, cli.summary),
    }
}

fn run_bench(config: &Config, config_file: String, b: BenchCli) -> anyhow::Result<()> {
    let mut args = BenchArgs::new(b.out, b.quick)?;
    if let Some(m) = b.models {
        args.models = m;
    }
    if let Some(r) = b.res {
        args.resolutions = bench::parse_resolutions(&r)?;
    }
    if let Some(p) = b.patterns {
        args.patterns = p;
    }
    args.warmup = b.warmup.unwrap_or(args.warmup);
    args.frames = b.frames.unwrap_or(args.frames);
    args.psnr_frames = b.psnr_frames.unwrap_or(args.psnr_frames);
    args.supersample = b.supersample;
    args.reference = b.reference;
    args.progress = !b.no_progress;
    args.command_line = std::env::args().collect::<Vec<_>>().join(" ");
    args.config_file = config_file;
    let report = bench::run(config, &args)?;
    println!(
        "{} runs ({} not run) in {:.0} s, validation errors {}: wrote report.json, \
         report.csv, report.md and report.png in {}",
        report.runs.len(),
        report.unavailable.len(),
        report.elapsed_s,
        report.validation_errors,
        args.out.display()
    );
    Ok(())
}

/// `image-diff`: largest per-channel difference, differing pixels and PSNR-RGB of two images.
fn image_diff(a: &Path, b: &Path, max: Option<u8>) -> anyhow::Result<()> {
    let open = |p: &Path| {
        image::open(p)
            .map(|i| i.to_rgba8())
            .with_context(|| format!("reading {}", p.display()))
    };
    let (ia, ib) = (open(a)?, open(b)?);
    anyhow::ensure!(
        ia.dimensions() == ib.dimensions(),
        "{} is {:?} but {} is {:?}",
        a.display(),
        ia.dimensions(),
        b.display(),
        ib.dimensions()
    );
    let (largest, differing) = ia
        .pixels()
        .zip(ib.pixels())
        .fold((0u8, 0u64), |acc, (p, q)| {
            let d = p.0[..3]
                .iter()
                .zip(&q.0[..3])
                .map(|(x, y)| x.abs_diff(*y))
                .max()
                .unwrap();
            (acc.0.max(d), acc.1 + u64::from(d > 0))
        });
    println!(
        "{}x{}: max |a-b| = {largest}/255, {differing} pixels differ, PSNR-RGB {:.2} dB",
        ia.width(),
        ia.height(),
        upscale_demo::metrics::psnr_rgb(&ia, &ib)
    );
    if let Some(m) = max.filter(|&m| largest > m) {
        anyhow::bail!("the images differ by {largest}/255, more than --max {m}");
    }
    Ok(())
}

fn run_dataset(config: &Config, args: &DatasetArgs) -> anyhow::Result<()> {
    let s = dataset::run(config, args)?;
    println!(
        "{} train + {} val pairs ({}x{} (msaa {}) -> {}x{}, reference {}x supersampled) in \
         {} on {}, validation errors {}",
        s.train.len(),
        s.val.len(),
        s.render_size[0],
        s.render_size[1],
        s.msaa,
        s.output_size[0],
        s.output_size[1],
        s.supersample,
        args.out.display(),
        s.device,
        s.validation_errors
    );
    Ok(())
}

/// `headless`: the scripted path once, or (`--soak`) the long switching run.
fn run_headless_command(mut config: Config, h: HeadlessCli) -> anyhow::Result<()> {
    if let Some(m) = h.model {
        config.upscale.model = m;
    }
    if let Some((w, h)) = h.output_size {
        config = config.with_output_size(w, h)?;
    }
    if h.soak {
        let models = match h.models.is_empty() {
            true => soak::default_models(&paths::root()),
            false => h.models,
        };
        let args = SoakArgs {
            frames: h.frames.unwrap_or(10_000),
            out: h.out,
            pattern_every: h.switch_every.unwrap_or(30),
            model_every: h.model_every,
            models,
        };
        return run_soak(&config, &args);
    }
    run_headless(
        &config,
        HeadlessArgs {
            frames: h.frames.unwrap_or(60),
            out: h.out,
            pattern: h.pattern,
            switch_every: h.switch_every,
            compare: h.compare,
            divider: h.divider,
        },
    )
}

/// The game in a window; without a display, the headless scripted path instead.
fn run_window(
    config: Config,
    exit_after_frames: Option<u64>,
    summary: Option<PathBuf>,
) -> anyhow::Result<()> {
    if !has_display() {
        eprintln!(
            "No display found (DISPLAY and WAYLAND_DISPLAY are unset): running the headless mode instead.\n\
             It renders the scripted camera path; see out/headless/last.png and summary.json."
        );
        return run_headless(
            &config,
            HeadlessArgs {
                frames: exit_after_frames.unwrap_or(300),
                out: PathBuf::from("out/headless"),
                pattern: None,
                switch_every: None,
                compare: None,
                divider: None,
            },
        );
    }
    let args = WindowArgs {
        exit_after_frames,
        summary,
        screenshot_dir: PathBuf::from("screenshots"),
    };
    window::run(config, args).context("windowed run")
}

fn run_soak(config: &Config, args: &SoakArgs) -> anyhow::Result<()> {
    let s = soak::run(config, args)?;
    let r = s.soak.as_ref().expect("a soak run has a soak report");
    println!(
        "soak: {} frames at {}x{} -> {}x{} on {} in {:.0} s (median frame {:.2} ms), \
         pattern every {} frames, model every {}",
        r.frames,
        s.render_size[0],
        s.render_size[1],
        s.output_size[0],
        s.output_size[1],
        s.device.name,
        r.seconds,
        r.frame_ms_median,
        r.pattern_every,
        r.model_every
    );
    println!("  models: {}", r.models.join(", "));
    println!(
        "  switches: {} pattern ({} refused), {} model ({} refused); switch p50/max: pattern {:.0}/{:.0} ms, model {:.0}/{:.0} ms",
        s.switches.patterns,
        s.switches.patterns_refused,
        s.switches.models,
        s.switches.models_refused,
        r.pattern_switch.p50_ms,
        r.pattern_switch.max_ms,
        r.model_switch.p50_ms,
        r.model_switch.max_ms
    );
    println!(
        "  validation errors: {} (layer {})",
        r.validation_errors,
        if r.validation_enabled { "on" } else { "OFF" }
    );
    print_soak_memory(r);
    println!(
        "  frames over {}x their pattern's median: {} steady, {} right after a switch",
        soak::SPIKE_FACTOR,
        r.spike_count,
        r.switch_spike_count
    );
    for spike in &r.spikes {
        println!(
            "    frame {}: {:.1} ms ({} on {}, median {:.2} ms)",
            spike.frame, spike.ms, spike.pattern, spike.model, spike.median_ms
        );
    }
    println!("wrote {}/summary.json", args.out.display());
    if !r.failures.is_empty() {
        anyhow::bail!("soak failed: {}", r.failures.join("; "));
    }
    println!("soak passed");
    Ok(())
}

/// The soak's memory samples and growth against the limit.
fn print_soak_memory(r: &soak::SoakReport) {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    for (name, sample) in [("start", r.start), ("end", r.end)] {
        if let Some(m) = sample {
            println!(
                "  {name:<5} (frame {:>6}): RSS {:.1} MiB, GPU allocated {:.2} MiB (reserved {:.1} MiB)",
                m.frame,
                mib(m.rss_bytes),
                mib(m.gpu_allocated_bytes),
                mib(m.gpu_reserved_bytes)
            );
        }
    }
    let pct = |g: Option<f64>| g.map_or("n/a".into(), |g| format!("{g:+.2} %"));
    println!(
        "  growth: RSS {}, GPU allocated {} ({})",
        pct(r.rss_growth_pct),
        pct(r.gpu_growth_pct),
        if r.memory_judged {
            format!("limit {} %", soak::MAX_GROWTH_PCT)
        } else {
            "not judged: fewer than 3 memory samples, so start is the warm-up sample; \
             run at least 3 model cycles"
                .to_string()
        }
    );
}

fn run_headless(config: &Config, args: HeadlessArgs) -> anyhow::Result<()> {
    let out = args.out.clone();
    let s = headless::run(config, &args)?;
    let f = s.frame_ms.map_or(0.0, |p| p.p50_ms);
    println!(
        "{} frames of {} at {}x{} (msaa {}) -> {}x{} on {}: frame p50 {:.2} ms, validation errors {}",
        s.frames,
        s.pattern,
        s.render_size[0],
        s.render_size[1],
        s.msaa,
        s.output_size[0],
        s.output_size[1],
        s.device.name,
        f,
        s.validation_errors
    );
    let mut stages: Vec<_> = s.stages.iter().collect();
    stages.sort_by_key(|(name, _)| (stage_rank(name), name.as_str()));
    for (name, st) in stages {
        println!(
            "  {name:<24} p50 {:>8.3} ms  p99 {:>8.3} ms",
            st.p50_ms, st.p99_ms
        );
    }
    println!(
        "wrote {}/last.png and {}/summary.json",
        out.display(),
        out.display()
    );
    Ok(())
}
