mod cli;

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Parser as _;

use upscale_demo::app::bench::{self, BenchArgs};
use upscale_demo::app::config::Config;
use upscale_demo::app::dataset::{self, DatasetArgs};
use upscale_demo::app::headless::{self, HeadlessArgs};
use upscale_demo::app::quality::sequence::SequenceArgs;
use upscale_demo::app::quality::{self, QualityArgs};
use upscale_demo::app::run_model;
use upscale_demo::app::soak::{self, SoakArgs};
use upscale_demo::app::window::{self, WindowArgs};
use upscale_demo::app::{has_display, paths};
use upscale_demo::game::textures;
use upscale_demo::gpu::Validation;
use upscale_demo::render::stats::stage_rank;

use cli::{BenchCli, Cli, Command, DatasetCommand, HeadlessCli, QualityCommand};

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
    upscale_demo::fault::arm_from_env()?;
    let config = load_config(cli.config.as_deref())?;
    let config_file = cli.config.as_ref().map_or_else(
        || paths::root().join("config.toml").display().to_string(),
        |p| p.display().to_string(),
    );
    match cli.command {
        Some(Command::Bench(b)) => run_bench(&config, config_file, b),
        Some(Command::RunModel(r)) => {
            for t in run_model::run(&r.into())? {
                println!("{} {:?}", t.name, t.shape);
            }
            Ok(())
        }
        Some(Command::ImageDiff(d)) => image_diff(&d.a, &d.b, d.max),
        Some(Command::GenAssets(g)) => {
            textures::write_all(&g.out)?;
            println!("textures written to {}", g.out.display());
            Ok(())
        }
        Some(Command::Dataset(d)) => match d.command() {
            DatasetCommand::Views(args) => run_dataset(&config, &args),
            DatasetCommand::Sequences(args) => run_sequence_dataset(&config, &args),
        },
        Some(Command::Quality(q)) => match q.command()? {
            QualityCommand::Still(args) => run_quality(&config, &args),
            QualityCommand::Sequence(args) => run_quality_sequence(&config, &args),
        },
        Some(Command::Headless(h)) => run_headless_command(config, h),
        None => run_window(config, cli.exit_after_frames, cli.summary),
    }
}

fn run_quality(config: &Config, args: &QualityArgs) -> anyhow::Result<()> {
    let report = quality::run(config, args)?;
    println!("{}", quality::table(&report));
    if let Some(dir) = &args.out {
        println!("wrote {}", dir.join("quality.json").display());
    }
    Ok(())
}

fn run_quality_sequence(config: &Config, args: &SequenceArgs) -> anyhow::Result<()> {
    let report = quality::sequence::run(config, args)?;
    println!("{}", quality::sequence::table(&report));
    if let Some(dir) = &args.out {
        println!("wrote {}", dir.join("quality.json").display());
    }
    anyhow::ensure!(
        report.validation_errors == 0 || Validation::from_env() != Validation::Required,
        "{} validation errors (see the log)",
        report.validation_errors
    );
    Ok(())
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
    let t = report.teardown;
    println!(
        "teardown: {} leaked allocations, {} validation errors",
        t.leaked_allocations, t.validation_errors
    );
    fail_on_teardown_problem(t.problem())
}

/// Under `UPSCALE_VALIDATION=1` a teardown problem fails the run; otherwise it is a warning
/// (it is in the summary or report either way).
fn fail_on_teardown_problem(problem: Option<String>) -> anyhow::Result<()> {
    match problem {
        Some(why) if Validation::from_env() == Validation::Required => anyhow::bail!("{why}"),
        Some(why) => {
            tracing::warn!("{why}");
            Ok(())
        }
        None => Ok(()),
    }
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
    let what = format!("{} train + {} val pairs", s.train.len(), s.val.len());
    print_dataset(&what, &s.header, "", &args.out);
    Ok(())
}

fn run_sequence_dataset(
    config: &Config,
    args: &dataset::sequences::SequenceArgs,
) -> anyhow::Result<()> {
    let s = dataset::sequences::run(config, args)?;
    let what = format!(
        "{} train + {} val sequences of {} frames",
        s.train.len(),
        s.val.len(),
        s.length
    );
    print_dataset(
        &what,
        &s.header,
        ", jittered, with motion and depth",
        &args.out,
    );
    Ok(())
}

/// The line a finished `dataset` prints.
fn print_dataset(what: &str, h: &dataset::DatasetHeader, middle: &str, out: &Path) {
    println!(
        "{what} ({}, reference {}x supersampled) in {} on {}, validation errors {}",
        h.sizes(middle),
        h.supersample,
        out.display(),
        h.device,
        h.validation_errors
    );
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
            heatmap: h.heatmap,
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
                heatmap: false,
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
    if let Some(t) = s.teardown {
        println!(
            "  teardown: {} leaked allocations, {} validation errors",
            t.leaked_allocations, t.validation_errors
        );
    }
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
    check_teardown(&s)
}

/// Under `UPSCALE_VALIDATION=1`, a leak or a validation error at teardown fails the run (it is
/// always reported in summary.json and logged).
fn check_teardown(s: &upscale_demo::app::summary::Summary) -> anyhow::Result<()> {
    if let Some(t) = s.teardown {
        println!(
            "teardown: {} leaked allocations, {} validation errors",
            t.leaked_allocations, t.validation_errors
        );
    }
    fail_on_teardown_problem(s.teardown_failure())
}
