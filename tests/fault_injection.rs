//! Faults injected, not waited for: the k-th fallible step (an image, buffer, pipeline,
//! sampler, imported or exported memory, model load, ONNX Runtime session, CUDA import) of
//! start-up, of a pattern, model or precision switch and of turning the compare view on is made
//! to fail, for every k along each path. Each run must recover (fall back or keep the previous
//! state, saying why) or stop with the fault's message, and leave 0 leaked allocations and 0
//! validation errors through teardown. On lavapipe with validation; tiny sizes (32x18 -> 64x36).
//!
//! The step counter is global, so everything runs in one test, one armed stretch at a time.

mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use upscale_demo::app::config::Config;
use upscale_demo::app::headless::Runner;
use upscale_demo::fault::{self, Fault, Record};
use upscale_demo::gpu::device::last_teardown;
use upscale_demo::infer::PrecisionChoice;
use upscale_demo::upscale::Pattern;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn config(domain: &str) -> Config {
    let text = format!(
        "[render]\noutput_width = 64\noutput_height = 36\nscale = 2\n\
         [upscale]\nshared_domain = \"{domain}\"\n"
    );
    let mut config = Config::parse(&text, Path::new("tests/fault_injection.toml")).unwrap();
    config.upscale.model = root().join("models/test/tiny_x2.onnx");
    config
}

/// How the runs of one path ended.
#[derive(Default)]
struct Tally {
    points: usize,
    recovered: usize,
    stopped: usize,
}

impl Tally {
    fn line(&self, path: &str) -> String {
        format!(
            "fault injection: {path}: {} injection points, {} recovered, {} stopped cleanly",
            self.points, self.recovered, self.stopped
        )
    }
}

/// Renders `count` frames after `*n`, advancing it.
fn frames(r: &mut Runner, n: &mut u64, count: u64) {
    for _ in 0..count {
        r.frame(*n, false).unwrap();
        *n += 1;
    }
}

/// Everything a recovered run says about what went wrong: the notice and the reasons next to
/// greyed patterns and the pattern's own note.
fn said(r: &Runner) -> String {
    let s = &r.session;
    let mut text = s.notice.clone().unwrap_or_default();
    for (p, why) in s.patterns() {
        if let Err(why) = why {
            text += &format!("\n{p}: {why}");
        }
    }
    text + "\n" + &s.renderer.describe()
}

/// The fault that fired in `record`, checked against the step the clean run named; `outcome`
/// is how the run ended, for the message when no fault fired.
fn fired(
    record: &Record,
    k: usize,
    clean: &[String],
    path: &str,
    outcome: &dyn std::fmt::Debug,
) -> Fault {
    let fault = record.fired.clone().unwrap_or_else(|| {
        panic!(
            "{path}: step {k} never came ({} steps: {:?}); the run ended with {outcome:?}",
            record.steps.len(),
            record.steps
        )
    });
    assert_eq!(
        fault.what,
        clean[k - 1],
        "{path}: step {k} is not the clean run's (non-deterministic path?)"
    );
    fault
}

/// The device's whole life, teardown included, left nothing: read after the `Gpu` is gone.
fn assert_clean_teardown(path: &str, k: usize) {
    let t = last_teardown().expect("a Gpu was dropped");
    assert_eq!(
        (t.leaked_allocations, t.validation_errors),
        (0, 0),
        "{path}, fault at step {k}: leaked allocations / validation errors (the log names them)"
    );
}

/// Start-up on `pattern` with step `fail_at` failing: the steps counted, and how it ended
/// (Ok: what it said after two frames; Err: the error).
fn start_up(
    config: &Config,
    pattern: Pattern,
    fail_at: Option<u32>,
) -> (Record, Result<String, String>) {
    fault::start(fail_at);
    let runner = Runner::new(config, pattern);
    let record = fault::stop();
    let outcome = match runner {
        Ok(mut r) => {
            assert_eq!(
                r.session.gpu.instance.validation_enabled,
                common::expect_validation()
            );
            // Frames pass no injection point: the checks stay off the per-frame path.
            fault::start(None);
            let mut n = 0;
            frames(&mut r, &mut n, 2);
            let per_frame = fault::stop().steps;
            assert!(per_frame.is_empty(), "steps in a frame: {per_frame:?}");
            Ok(said(&r))
        }
        Err(e) => Err(format!("{e:#}")),
    };
    (record, outcome)
}

/// Every step of start-up on `pattern`, failed in turn.
fn start_up_path(config: &Config, pattern: Pattern, label: &str) -> Tally {
    let (clean, outcome) = start_up(config, pattern, None);
    if let Err(e) = outcome {
        panic!("{label}: a clean start-up failed: {e}");
    }
    assert_clean_teardown(label, 0);
    let clean = clean.steps;
    assert!(!clean.is_empty(), "{label}: no injection point on the path");
    println!("{label}: steps {clean:?}");
    let mut tally = Tally {
        points: clean.len(),
        ..Default::default()
    };
    for k in 1..=clean.len() {
        let (record, outcome) = start_up(config, pattern, Some(k as u32));
        let fault = fired(&record, k, &clean, label, &outcome);
        let text = fault.to_string();
        match outcome {
            Ok(said) => {
                assert!(
                    said.contains(&text),
                    "{label}: recovered from {text} without saying it: {said}"
                );
                tally.recovered += 1;
            }
            Err(e) => {
                assert!(
                    e.contains(&text),
                    "{label}: stopped, but not with {text}: {e}"
                );
                tally.stopped += 1;
            }
        }
        assert_clean_teardown(label, k);
    }
    tally
}

/// gpu-allocator allocations alive now: equal before and after a refused switch, or it leaked.
fn live_allocations(r: &Runner) -> usize {
    r.session
        .gpu
        .allocator()
        .generate_report()
        .allocations
        .len()
}

/// Every step of `switch` (from the state `reset` returns to), failed in turn on one device:
/// a refused switch keeps the previous state and says the fault; a switch that went through
/// anyway must have said it too. After each, `reset` (unarmed) and three frames, and the live
/// allocations must be what they were before.
fn switch_path(
    r: &mut Runner,
    label: &str,
    switch: &dyn Fn(&mut Runner) -> Result<(), String>,
    reset: &dyn Fn(&mut Runner),
) -> Tally {
    let mut n = 100;
    frames(r, &mut n, 3);
    let before = live_allocations(r);
    fault::start(None);
    let result = switch(r);
    let clean = fault::stop().steps;
    if let Err(e) = result {
        panic!("{label}: a clean switch failed: {e}");
    }
    assert!(!clean.is_empty(), "{label}: no injection point on the path");
    println!("{label}: steps {clean:?}");
    frames(r, &mut n, 2);
    reset(r);
    frames(r, &mut n, 3);
    assert_eq!(
        live_allocations(r),
        before,
        "{label}: the clean switch and back"
    );
    let mut tally = Tally {
        points: clean.len(),
        ..Default::default()
    };
    for k in 1..=clean.len() {
        fault::start(Some(k as u32));
        let result = switch(r);
        let record = fault::stop();
        let text = fired(&record, k, &clean, label, &result).to_string();
        match result {
            Err(why) => {
                assert!(
                    why.contains(&text),
                    "{label}: refused, but not with {text}: {why}"
                );
                let notice = r.session.notice.as_deref().unwrap_or_default();
                assert!(
                    notice.contains(&text),
                    "{label}: the notice lacks {text}: {notice}"
                );
            }
            Ok(()) => {
                let said = said(r);
                assert!(
                    said.contains(&text),
                    "{label}: went through past {text} without saying it: {said}"
                );
            }
        }
        tally.recovered += 1;
        frames(r, &mut n, 2);
        reset(r);
        frames(r, &mut n, 3);
        assert_eq!(
            live_allocations(r),
            before,
            "{label}, fault at step {k}: allocations leaked (the names: teardown's log)"
        );
    }
    tally
}

/// A pattern switch as the session does it, with its outcome as a Result.
fn switch_pattern(r: &mut Runner, to: Pattern) -> Result<(), String> {
    r.session.switch(to);
    if r.session.renderer.pattern() == to {
        Ok(())
    } else {
        Err(r.session.notice.clone().unwrap_or_default())
    }
}

/// The pattern switches, from bilinear to each ML pattern, on one device.
fn pattern_switches(tallies: &mut Vec<(String, Tally)>) {
    let mut r = Runner::new(&config("host"), Pattern::Bilinear).unwrap();
    for to in [
        Pattern::CpuRoundtrip,
        Pattern::SharedMemory,
        Pattern::InStream,
    ] {
        let label = format!("pattern switch bilinear -> {to}");
        let tally = switch_path(&mut r, &label, &|r| switch_pattern(r, to), &|r| {
            switch_pattern(r, Pattern::Bilinear).unwrap()
        });
        tallies.push((label, tally));
    }
    let watch = r.session.gpu.teardown_watch();
    let errors = r.session.gpu.validation_errors();
    drop(r);
    let t = watch.report().unwrap();
    assert_eq!(
        (t.leaked_allocations, t.validation_errors, errors),
        (0, 0, 0),
        "pattern switches: teardown (leaked, teardown validation errors, earlier errors)"
    );
}

/// The in-stream engine's precision switched (fp32, then back to auto), on one device.
fn precision_switch(tallies: &mut Vec<(String, Tally)>) {
    let mut r = Runner::new(&config("host"), Pattern::InStream).unwrap();
    assert_eq!(r.session.renderer.pattern(), Pattern::InStream);
    let label = "precision switch auto -> fp32 on in-stream".to_string();
    let tally = switch_path(
        &mut r,
        &label,
        &|r| r.session.switch_precision(PrecisionChoice::Fp32),
        &|r| r.session.switch_precision(PrecisionChoice::Auto).unwrap(),
    );
    tallies.push((label, tally));
    let errors = r.session.gpu.validation_errors();
    drop(r);
    let t = last_teardown().unwrap();
    assert_eq!(
        (t.leaked_allocations, t.validation_errors, errors),
        (0, 0, 0),
        "precision switch: teardown"
    );
}

/// The compare view turned on next to bilinear, each right side it can show, on one device.
fn compare_view(tallies: &mut Vec<(String, Tally)>) {
    let mut r = Runner::new(&config("host"), Pattern::Bilinear).unwrap();
    let sides: Vec<_> = r
        .session
        .compare_sides()
        .into_iter()
        .filter(|s| s.1.is_ok())
        .collect();
    assert!(sides.len() > 1, "{sides:?}");
    for (side, _) in sides {
        let label = format!("compare view on: bilinear | {side}");
        let on = move |r: &mut Runner| {
            r.session.set_compare(Some(side));
            match r.session.renderer.compare_side() {
                Some(s) if s == side => Ok(()),
                _ => Err(r.session.notice.clone().unwrap_or_default()),
            }
        };
        let off = |r: &mut Runner| {
            r.session.set_compare(None);
            assert_eq!(r.session.renderer.compare_side(), None);
        };
        let tally = switch_path(&mut r, &label, &on, &off);
        tallies.push((label, tally));
    }
    let errors = r.session.gpu.validation_errors();
    drop(r);
    let t = last_teardown().unwrap();
    assert_eq!(
        (t.leaked_allocations, t.validation_errors, errors),
        (0, 0, 0),
        "compare view: teardown"
    );
}

/// The model switches, tiny_x2 -> fast_x2 on each ML pattern, on one device per pattern.
fn model_switches(tallies: &mut Vec<(String, Tally)>) {
    let tiny = root().join("models/test/tiny_x2.onnx");
    let fast = root().join("models/fast_x2.onnx");
    for on in [
        Pattern::CpuRoundtrip,
        Pattern::SharedMemory,
        Pattern::InStream,
    ] {
        let mut r = Runner::new(&config("host"), on).unwrap();
        assert_eq!(r.session.renderer.pattern(), on);
        let label = format!("model switch on {on}");
        let tally = switch_path(&mut r, &label, &|r| r.session.switch_model(&fast), &|r| {
            r.session.switch_model(&tiny).unwrap()
        });
        tallies.push((label.clone(), tally));
        assert_eq!(r.session.renderer.pattern(), on);
        let errors = r.session.gpu.validation_errors();
        drop(r);
        let t = last_teardown().unwrap();
        assert_eq!(
            (t.leaked_allocations, t.validation_errors, errors),
            (0, 0, 0),
            "{label}: teardown"
        );
    }
}

/// The cuda domain's points (CUDA memory and semaphore imports, its ONNX Runtime session) need
/// an NVIDIA GPU, its driver and the GPU build of ONNX Runtime: where the forced domain cannot
/// run, they are reported skipped with the reason, not passed.
fn cuda_domain(tallies: &mut Vec<(String, Tally)>) {
    let config = config("cuda");
    let (_, outcome) = start_up(&config, Pattern::SharedMemory, None);
    let said = outcome.expect("start-up falls back when the cuda domain cannot run");
    let label = "start-up shared-memory (cuda domain)";
    if said.contains("using bilinear") {
        let why = said.lines().next().unwrap_or_default();
        println!("fault injection: {label}: SKIPPED (not passed): {why}");
        return;
    }
    let tally = start_up_path(&config, Pattern::SharedMemory, label);
    tallies.push((label.into(), tally));
}

/// A bare Vulkan instance alive for the whole test, so that the driver stays loaded between
/// the test's hundreds of start-ups. On the H200 (NVIDIA 580) the 29th instance created in one
/// process after the previous one was destroyed failed with VK_ERROR_INCOMPATIBLE_DRIVER ("Unable
/// to find a Vulkan driver"): the loader unloads the driver with the last instance and the
/// driver could not be loaded again that often. The game creates one instance per process.
struct KeepDriverLoaded {
    _entry: ash::Entry,
    instance: ash::Instance,
}

impl KeepDriverLoaded {
    fn new() -> Self {
        // SAFETY: the loader library stays loaded while `_entry` lives.
        let entry = unsafe { ash::Entry::load() }.expect("the Vulkan loader");
        let app = ash::vk::ApplicationInfo::default().api_version(ash::vk::API_VERSION_1_3);
        let info = ash::vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: a plain instance, destroyed in Drop before the entry goes.
        let instance = unsafe { entry.create_instance(&info, None) }.expect("a Vulkan instance");
        KeepDriverLoaded {
            _entry: entry,
            instance,
        }
    }
}

impl Drop for KeepDriverLoaded {
    fn drop(&mut self) {
        // SAFETY: nothing was created from this instance.
        unsafe { self.instance.destroy_instance(None) };
    }
}

#[test]
fn every_fallible_step_of_start_up_and_switches_fails_cleanly() {
    let _driver = KeepDriverLoaded::new();
    // Leaks are logged by name at teardown: show errors (RUST_LOG for more).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "error".into()),
        )
        .with_test_writer()
        .try_init();
    let t0 = Instant::now();
    let mut tallies = Vec::new();
    for (pattern, domain) in [
        (Pattern::Bilinear, "host"),
        (Pattern::CpuRoundtrip, "host"),
        (Pattern::SharedMemory, "host"),
        (Pattern::InStream, "host"),
    ] {
        let label = format!("start-up {pattern}");
        let tally = start_up_path(&config(domain), pattern, &label);
        tallies.push((label, tally));
    }
    cuda_domain(&mut tallies);
    pattern_switches(&mut tallies);
    model_switches(&mut tallies);
    precision_switch(&mut tallies);
    compare_view(&mut tallies);
    for (label, tally) in &tallies {
        println!("{}", tally.line(label));
    }
    let points: usize = tallies.iter().map(|t| t.1.points).sum();
    println!(
        "fault injection: {points} points over {} paths in {:.0} s",
        tallies.len(),
        t0.elapsed().as_secs_f64()
    );
}
