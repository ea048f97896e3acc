//! `headless --soak`: a long offscreen run that switches pattern every `pattern_every` frames
//! and model every `model_every` frames, and reports what would betray a leak or a stall:
//! validation errors, resident memory (RSS) and GPU memory at the start and the end, and frames
//! far slower than their pattern's usual.
//!
//! Memory is sampled in the same state each time (bilinear on the first model, at the end of a
//! bilinear block, once per model cycle), so two samples differ only by what leaked. The first
//! cycle is warm-up (ONNX Runtime, shader and layer caches fill on first use): `start` is the
//! sample of the second cycle when the run has one, `end` the last sample.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use serde::Serialize;

use super::config::Config;
use super::headless::Runner;
use super::models;
use super::summary::Summary;
use crate::gpu::frame::FRAMES_IN_FLIGHT;
use crate::gpu::Gpu;
use crate::upscale::Pattern;

/// A frame this many times slower than the median of its (pattern, model) is a spike.
pub const SPIKE_FACTOR: f64 = 10.0;
/// Memory may grow this much (percent) from start to end before the soak fails.
pub const MAX_GROWTH_PCT: f64 = 5.0;
/// Frames after a switch that still pay for it (the previous pattern's frames in flight, first
/// inference); their spikes are counted apart.
const SETTLE_FRAMES: u64 = FRAMES_IN_FLIGHT as u64 + 1;
/// Spikes listed in the report (all are counted).
const SPIKES_LISTED: usize = 20;

pub struct SoakArgs {
    pub frames: u64,
    pub out: PathBuf,
    pub pattern_every: u64,
    pub model_every: u64,
    /// Cycled in order; the first must be usable (the run starts on it and samples memory on it).
    pub models: Vec<PathBuf>,
}

/// The models `--soak` cycles when none are given: the shipped ones, the small test model, and
/// one the loader refuses (so every cycle also takes the refused-switch path).
pub fn default_models(root: &Path) -> Vec<PathBuf> {
    let mut list: Vec<PathBuf> = models::list(root, &root.join("models/fast_x2.onnx"))
        .into_iter()
        .filter(|m| m.parent() == Some(&root.join("models")))
        .collect();
    list.push(root.join("models/test/tiny_x2.onnx"));
    list.push(root.join("models/test/one_channel.onnx"));
    list
}

#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct MemorySample {
    pub frame: u64,
    /// Resident set of the process (VmRSS), bytes.
    pub rss_bytes: u64,
    /// Bytes in live gpu-allocator allocations (buffers, images, egui's).
    pub gpu_allocated_bytes: u64,
    /// Bytes of device memory blocks gpu-allocator holds (allocated plus free space in them).
    pub gpu_reserved_bytes: u64,
}

impl MemorySample {
    pub fn take(frame: u64, gpu: &Gpu) -> anyhow::Result<Self> {
        release_free_heap();
        let report = gpu.allocator().generate_report();
        Ok(Self {
            frame,
            rss_bytes: resident_bytes()?,
            gpu_allocated_bytes: report.total_allocated_bytes,
            gpu_reserved_bytes: report.total_capacity_bytes,
        })
    }
}

/// Hands the C heap's free pages back to the system, so RSS counts live memory rather than
/// what malloc keeps after the many short-lived ONNX Runtime sessions and their threads (each
/// thread's arena keeps its high-water mark, which otherwise shows as growth that is no leak).
fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: glibc's malloc_trim only returns free memory; it is safe to call at any time.
        unsafe { malloc_trim(0) };
    }
}

/// This process's resident set size from `/proc/self/status` (Linux).
pub fn resident_bytes() -> anyhow::Result<u64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    parse_vm_rss(&status).context("no VmRSS line in /proc/self/status")
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// One frame's wall time (overlay, record, submit, and the wait for its slot's previous frame;
/// switches excluded) and what it ran.
#[derive(Clone, Copy, Debug)]
pub struct FrameTime {
    pub frame: u64,
    pub ms: f64,
    pub pattern: Pattern,
    /// Index into the run's model labels.
    pub model: usize,
    /// Within `SETTLE_FRAMES` of a pattern or model switch.
    pub after_switch: bool,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Spike {
    pub frame: u64,
    pub ms: f64,
    /// The median of the frames of the same pattern and model, away from switches.
    pub median_ms: f64,
    pub pattern: String,
    pub model: String,
}

#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Times {
    pub count: usize,
    pub p50_ms: f64,
    pub max_ms: f64,
}

impl Times {
    fn of(mut ms: Vec<f64>) -> Self {
        ms.sort_by(f64::total_cmp);
        Self {
            count: ms.len(),
            p50_ms: median(&ms).unwrap_or(0.0),
            max_ms: ms.last().copied().unwrap_or(0.0),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct SoakReport {
    pub frames: u64,
    pub seconds: f64,
    pub pattern_every: u64,
    pub model_every: u64,
    pub models: Vec<String>,
    pub validation_enabled: bool,
    pub validation_errors: u32,
    /// One sample per model cycle, in the same state each time (see the module documentation).
    pub memory: Vec<MemorySample>,
    pub start: Option<MemorySample>,
    pub end: Option<MemorySample>,
    pub rss_growth_pct: Option<f64>,
    pub gpu_growth_pct: Option<f64>,
    /// Whether the growth counts for the verdict: only with at least three samples, so that
    /// `start` is past the warm-up cycle (a shorter soak compares against warm-up, before every
    /// pattern and model has allocated what it keeps, and reports growth that is no leak).
    pub memory_judged: bool,
    /// Median frame of the whole run (all patterns), ms.
    pub frame_ms_median: f64,
    /// Frames over SPIKE_FACTOR x their (pattern, model) median, away from switches: the
    /// count, and the first few.
    pub spike_count: usize,
    pub spikes: Vec<Spike>,
    /// Such frames within SETTLE_FRAMES of a switch (they wait for the previous pattern's frames).
    pub switch_spike_count: usize,
    /// Host time of the switch calls themselves (upscaler creation, model loading, probes).
    pub pattern_switch: Times,
    pub model_switch: Times,
    /// Empty when the soak passed; else why not.
    pub failures: Vec<String>,
}

/// Steady-state spikes (the first `SPIKES_LISTED`, and their count) and the count of spikes
/// just after a switch. The median is taken per (pattern, model) over steady frames.
pub fn find_spikes(frames: &[FrameTime], labels: &[String]) -> (Vec<Spike>, usize, usize) {
    let mut groups: HashMap<(Pattern, usize), Vec<f64>> = HashMap::new();
    for f in frames.iter().filter(|f| !f.after_switch) {
        groups.entry((f.pattern, f.model)).or_default().push(f.ms);
    }
    let medians: HashMap<(Pattern, usize), f64> = groups
        .into_iter()
        .filter_map(|(k, mut v)| {
            v.sort_by(f64::total_cmp);
            Some((k, median(&v)?))
        })
        .collect();
    let (mut spikes, mut count, mut after_switch) = (Vec::new(), 0, 0);
    for f in frames {
        let Some(&m) = medians.get(&(f.pattern, f.model)) else {
            continue;
        };
        if f.ms <= SPIKE_FACTOR * m {
            continue;
        }
        if f.after_switch {
            after_switch += 1;
            continue;
        }
        count += 1;
        if spikes.len() < SPIKES_LISTED {
            spikes.push(Spike {
                frame: f.frame,
                ms: f.ms,
                median_ms: m,
                pattern: f.pattern.name().into(),
                model: labels.get(f.model).cloned().unwrap_or_default(),
            });
        }
    }
    (spikes, count, after_switch)
}

fn median(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// Growth from `start` to `end` in percent.
pub fn growth_pct(start: u64, end: u64) -> f64 {
    if start == 0 {
        return 0.0;
    }
    (end as f64 - start as f64) / start as f64 * 100.0
}

/// The warm-up rule of the module documentation: the second sample when there are at least
/// three (so start and end are both after warm-up), else the first.
fn start_and_end(samples: &[MemorySample]) -> (Option<MemorySample>, Option<MemorySample>) {
    let start = if samples.len() >= 3 {
        samples.get(1)
    } else {
        samples.first()
    };
    (start.copied(), samples.last().copied())
}

/// The pass/fail rule: no validation error, memory growth under MAX_GROWTH_PCT, and (with
/// validation required) the layer really on.
fn failures(report: &SoakReport, validation_required: bool) -> Vec<String> {
    let mut why = Vec::new();
    if report.validation_errors > 0 {
        why.push(format!("{} validation errors", report.validation_errors));
    }
    if validation_required && !report.validation_enabled {
        why.push("the validation layer was not on".into());
    }
    let judged = [
        ("RSS", report.rss_growth_pct),
        ("GPU memory", report.gpu_growth_pct),
    ];
    for (name, growth) in judged.into_iter().filter(|_| report.memory_judged) {
        if let Some(g) = growth.filter(|g| *g >= MAX_GROWTH_PCT) {
            why.push(format!("{name} grew {g:.1} % (limit {MAX_GROWTH_PCT} %)"));
        }
    }
    why
}

pub fn run(config: &Config, args: &SoakArgs) -> anyhow::Result<Summary> {
    anyhow::ensure!(args.frames > 0, "--frames must be at least 1");
    anyhow::ensure!(
        args.pattern_every > 0 && args.model_every > 0,
        "--switch-every and --model-every must be at least 1"
    );
    let Some(first) = args.models.first() else {
        anyhow::bail!("--soak needs at least one model");
    };
    let mut config = config.clone();
    config.upscale.model = first.clone();
    let mut r = Runner::new(&config, Pattern::Bilinear)?;
    let mut log = SoakLog::new(args, r.session.models().1);
    let started = Instant::now();
    let progress_every = (args.frames / 20).max(1);
    for n in 0..args.frames {
        log.switch_model_if_due(&mut r, n);
        log.switch_pattern_if_due(&mut r, n);
        let t = Instant::now();
        r.frame(n, n + 1 == args.frames)?;
        log.frame_done(&r, n, t.elapsed().as_secs_f64() * 1e3)?;
        if (n + 1) % progress_every == 0 {
            tracing::info!(
                "soak: frame {}/{} ({:.0} s)",
                n + 1,
                args.frames,
                started.elapsed().as_secs_f64()
            );
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    r.save_pngs(&args.out)?;
    let used = std::mem::take(&mut log.used);
    let report = log.report(&r, seconds);
    let mut summary = Summary::new(&r.session, used);
    summary.soak = Some(report);
    super::headless::finish(r, summary, &args.out)
}

/// What the soak loop records as it goes: frame times, memory samples, switch times.
struct SoakLog<'a> {
    args: &'a SoakArgs,
    /// Frames per full model cycle; memory is sampled once per cycle.
    cycle: u64,
    /// The session's index of the first model (memory is sampled while it runs).
    first_index: usize,
    frames: Vec<FrameTime>,
    memory: Vec<MemorySample>,
    pattern_ms: Vec<f64>,
    model_ms: Vec<f64>,
    /// Patterns that ran, by name, in order of first use.
    used: Vec<String>,
    /// Frames since the last switch (`u64::MAX` before the first).
    since_switch: u64,
    /// The running model as an index into `args.models` (for the spike groups).
    model: usize,
}

impl<'a> SoakLog<'a> {
    fn new(args: &'a SoakArgs, first_index: usize) -> Self {
        Self {
            args,
            cycle: args.model_every * args.models.len() as u64,
            first_index,
            frames: Vec::with_capacity(args.frames as usize),
            memory: Vec::new(),
            pattern_ms: Vec::new(),
            model_ms: Vec::new(),
            used: vec![Pattern::Bilinear.name().to_string()],
            since_switch: u64::MAX,
            model: 0,
        }
    }

    fn switch_model_if_due(&mut self, r: &mut Runner, n: u64) {
        let args = self.args;
        if n == 0 || !n.is_multiple_of(args.model_every) {
            return;
        }
        let m = &args.models[(n / args.model_every) as usize % args.models.len()];
        let t = Instant::now();
        // A refused model leaves the previous one running; the session counts it.
        let _ = r.session.switch_model(m);
        self.model_ms.push(t.elapsed().as_secs_f64() * 1e3);
        self.since_switch = 0;
        let (list, current) = r.session.models();
        self.model = args
            .models
            .iter()
            .position(|m| models::same_file(m, &list[current]))
            .unwrap_or(usize::MAX);
    }

    fn switch_pattern_if_due(&mut self, r: &mut Runner, n: u64) {
        let every = self.args.pattern_every;
        if n == 0 || !n.is_multiple_of(every) {
            return;
        }
        let available = r.available_patterns();
        let next = available[(n / every) as usize % available.len()];
        if next != r.session.renderer.pattern() {
            let t = Instant::now();
            r.session.switch(next);
            self.pattern_ms.push(t.elapsed().as_secs_f64() * 1e3);
            self.since_switch = 0;
            if !self.used.iter().any(|u| u == next.name()) {
                self.used.push(next.name().into());
            }
        }
    }

    /// Records frame `n`'s time and, once per model cycle at a settled bilinear frame on the
    /// first model, a memory sample (so start and end are taken in the same state).
    fn frame_done(&mut self, r: &Runner, n: u64, ms: f64) -> anyhow::Result<()> {
        let pattern = r.session.renderer.pattern();
        self.frames.push(FrameTime {
            frame: n,
            ms,
            pattern,
            model: self.model,
            after_switch: self.since_switch < SETTLE_FRAMES,
        });
        self.since_switch = self.since_switch.saturating_add(1);
        let every = self.args.pattern_every;
        let sampled = self.memory.last().map(|s| s.frame / self.cycle);
        let canonical = pattern == Pattern::Bilinear
            && r.session.models().1 == self.first_index
            && (n + 1).is_multiple_of(every)
            && self.since_switch >= every.min(SETTLE_FRAMES * 2);
        if canonical && sampled != Some(n / self.cycle) {
            self.memory.push(MemorySample::take(n, &r.session.gpu)?);
        }
        Ok(())
    }

    fn report(self, r: &Runner, seconds: f64) -> SoakReport {
        let args = self.args;
        let labels: Vec<String> = args
            .models
            .iter()
            .map(|m| models::label(&super::paths::root(), m))
            .collect();
        let memory = self.memory;
        let (start, end) = start_and_end(&memory);
        let growth = |f: fn(&MemorySample) -> u64| Some(growth_pct(f(&start?), f(&end?)));
        let (spikes, spike_count, switch_spike_count) = find_spikes(&self.frames, &labels);
        let mut all: Vec<f64> = self.frames.iter().map(|f| f.ms).collect();
        all.sort_by(f64::total_cmp);
        let gpu = &r.session.gpu;
        let mut report = SoakReport {
            frames: args.frames,
            seconds,
            pattern_every: args.pattern_every,
            model_every: args.model_every,
            models: labels,
            validation_enabled: gpu.instance.validation_enabled,
            validation_errors: gpu.validation_errors(),
            rss_growth_pct: growth(|s| s.rss_bytes),
            gpu_growth_pct: growth(|s| s.gpu_allocated_bytes),
            memory_judged: memory.len() >= 3,
            memory,
            start,
            end,
            frame_ms_median: median(&all).unwrap_or(0.0),
            spike_count,
            spikes,
            switch_spike_count,
            pattern_switch: Times::of(self.pattern_ms),
            model_switch: Times::of(self.model_ms),
            failures: Vec::new(),
        };
        let required = std::env::var("UPSCALE_VALIDATION").as_deref() == Ok("1");
        report.failures = failures(&report, required);
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ft(frame: u64, ms: f64, pattern: Pattern, after_switch: bool) -> FrameTime {
        FrameTime {
            frame,
            ms,
            pattern,
            model: 0,
            after_switch,
        }
    }

    #[test]
    fn spikes_are_judged_against_their_own_pattern() {
        let labels = vec!["m.onnx".to_string()];
        let mut frames = Vec::new();
        for n in 0..20 {
            frames.push(ft(n, 2.0, Pattern::Bilinear, false));
        }
        for n in 20..40 {
            // In-stream is 30x slower than bilinear: slow, but no spike of its own.
            frames.push(ft(n, 60.0, Pattern::InStream, n == 20));
        }
        frames.push(ft(40, 25.0, Pattern::Bilinear, false));
        frames.push(ft(41, 700.0, Pattern::InStream, false));
        frames.push(ft(42, 25.0, Pattern::Bilinear, true));
        let (spikes, count, after_switch) = find_spikes(&frames, &labels);
        assert_eq!(count, 2);
        assert_eq!(after_switch, 1, "frame 42 pays for a switch");
        assert_eq!(spikes[0].frame, 40);
        assert_eq!(spikes[0].median_ms, 2.0);
        assert_eq!(spikes[1].frame, 41);
        assert_eq!(spikes[1].median_ms, 60.0);
        assert_eq!(spikes[1].model, "m.onnx");
    }

    #[test]
    fn growth_and_warm_up() {
        assert_eq!(growth_pct(200, 210), 5.0);
        assert_eq!(growth_pct(200, 190), -5.0);
        let s = |frame, rss| MemorySample {
            frame,
            rss_bytes: rss,
            gpu_allocated_bytes: 0,
            gpu_reserved_bytes: 0,
        };
        let samples = [s(9, 100), s(129, 150), s(249, 151)];
        assert_eq!(
            start_and_end(&samples),
            (Some(samples[1]), Some(samples[2])),
            "the first cycle is warm-up"
        );
        assert_eq!(
            start_and_end(&samples[..2]),
            (Some(samples[0]), Some(samples[1]))
        );
        assert_eq!(start_and_end(&[]), (None, None));
    }

    #[test]
    fn vm_rss_is_read_in_bytes() {
        let status = "Name:\tx\nVmPeak:\t  9000 kB\nVmRSS:\t    1234 kB\nThreads:\t1\n";
        assert_eq!(parse_vm_rss(status), Some(1234 * 1024));
        assert_eq!(parse_vm_rss("Name:\tx\n"), None);
        assert!(
            resident_bytes().unwrap() > 1 << 20,
            "this test process has > 1 MiB"
        );
    }

    #[test]
    fn failures_name_each_broken_rule() {
        let mut r = SoakReport {
            frames: 1,
            seconds: 0.0,
            pattern_every: 1,
            model_every: 1,
            models: vec![],
            validation_enabled: true,
            validation_errors: 0,
            memory: vec![],
            start: None,
            end: None,
            rss_growth_pct: Some(4.9),
            gpu_growth_pct: Some(0.0),
            memory_judged: true,
            frame_ms_median: 0.0,
            spike_count: 3,
            spikes: vec![],
            switch_spike_count: 0,
            pattern_switch: Times::default(),
            model_switch: Times::default(),
            failures: vec![],
        };
        assert!(
            failures(&r, true).is_empty(),
            "spikes are reported, not failed"
        );
        r.validation_errors = 2;
        r.gpu_growth_pct = Some(5.0);
        r.validation_enabled = false;
        assert_eq!(
            failures(&r, true),
            [
                "2 validation errors",
                "the validation layer was not on",
                "GPU memory grew 5.0 % (limit 5 %)"
            ]
        );
        // Fewer than three samples: start is the warm-up sample; growth is shown, not judged.
        r.memory_judged = false;
        assert_eq!(
            failures(&r, true),
            ["2 validation errors", "the validation layer was not on"]
        );
    }
}
