//! `render.jitter` end to end on lavapipe with validation on: headless runs are deterministic
//! with the Halton jitter on (the same frames twice), the jitter does change the frame the
//! upscaler reads, and the renderer walks the sequence frame by frame and restarts it on a reset
//! and with a new upscaler; motion vectors and depth are kept only while something reads them.

mod common;

use std::path::Path;

use glam::Vec2;
use upscale_demo::app::config::Config;
use upscale_demo::app::headless::{self, HeadlessArgs, Runner};
use upscale_demo::game::jitter;
use upscale_demo::render::composite::DebugView;
use upscale_demo::upscale::Pattern;

fn config(jitter: &str) -> Config {
    let text = format!(
        "[render]\noutput_width = 320\noutput_height = 180\nscale = 2\njitter = \"{jitter}\"\n"
    );
    Config::parse(&text, Path::new("tests/jitter.toml")).unwrap()
}

/// Runs 6 frames headless; returns (input.png, last.png).
fn run(name: &str, jitter: &str) -> (image::RgbImage, image::RgbImage) {
    let out = common::out_dir(name);
    let summary = headless::run(
        &config(jitter),
        &HeadlessArgs {
            frames: 6,
            out: out.clone(),
            pattern: Some(Pattern::Bilinear),
            ..Default::default()
        },
    )
    .unwrap();
    common::assert_clean_teardown(&summary);
    assert_eq!(
        summary.validation_errors, 0,
        "validation errors: see the log"
    );
    let read = |f| image::open(out.join(f)).unwrap().to_rgb8();
    (read("input.png"), read("last.png"))
}

#[test]
fn jittered_headless_runs_are_deterministic() {
    let a = run("jitter_a", "halton");
    let b = run("jitter_b", "halton");
    assert!(a.0 == b.0 && a.1 == b.1, "two jittered runs differ");
    let plain = run("jitter_off", "off");
    let (diff, _) = common::image_diff(&a.0, &plain.0, 32);
    assert!(
        diff > 0.5,
        "the jitter changed nothing (mean difference {diff:.3})"
    );
    // "auto" with a pattern that keeps no history is "off", frame for frame.
    let auto = run("jitter_auto", "auto");
    assert!(auto.0 == plain.0 && auto.1 == plain.1);
}

#[test]
fn the_renderer_walks_the_sequence_and_restarts_it() {
    let mut r = Runner::new(&config("halton"), Pattern::Bilinear).unwrap();
    let len = jitter::sequence_len(2.0);
    assert_eq!(len, 32);
    let current = |r: &Runner| r.session.renderer.scene_targets().jitter();
    for n in 0..3 {
        r.frame(n, false).unwrap();
        assert_eq!(current(&r), jitter::jitter(n, len), "frame {n}");
    }
    r.session.renderer.reset_history();
    r.frame(3, false).unwrap();
    assert_eq!(current(&r), jitter::jitter(0, len), "a reset restarts it");
    r.frame(4, false).unwrap();
    assert_eq!(current(&r), jitter::jitter(1, len));
    let other = r
        .available_patterns()
        .into_iter()
        .find(|&p| p != Pattern::Bilinear);
    let other = other.expect("a second pattern runs here (in-stream on lavapipe)");
    r.session.switch(other);
    assert_eq!(r.session.renderer.pattern(), other);
    r.frame(5, false).unwrap();
    assert_eq!(
        current(&r),
        jitter::jitter(0, len),
        "a new upscaler restarts it"
    );
    assert_eq!(r.session.gpu.validation_errors(), 0, "see the log");
    drop(r);

    let mut off = Runner::new(&config("off"), Pattern::Bilinear).unwrap();
    off.frame(0, false).unwrap();
    assert_eq!(off.session.renderer.scene_targets().jitter(), Vec2::ZERO);
}

/// The scene pass keeps motion vectors and depth only while something reads them: a temporal
/// upscaler or the debug view. A spatial pattern's frame carries neither.
#[test]
fn motion_and_depth_are_kept_only_while_read() {
    let mut r = Runner::new(&config("auto"), Pattern::Bilinear).unwrap();
    let kept = |r: &Runner| {
        let targets = r.session.renderer.scene_targets();
        let inputs = targets.frame_inputs(false);
        assert_eq!(inputs.motion.is_some(), targets.keeps_temporal());
        assert_eq!(inputs.depth.is_some(), targets.keeps_temporal());
        targets.keeps_temporal()
    };
    r.frame(0, false).unwrap();
    assert!(!kept(&r), "bilinear reads no motion or depth");
    r.session.renderer.set_debug_view(DebugView::Motion);
    r.frame(1, false).unwrap();
    assert!(kept(&r), "the debug view shows them");
    r.session.renderer.set_debug_view(DebugView::Off);
    r.frame(2, false).unwrap();
    assert!(!kept(&r));
    r.session.switch(Pattern::Taau);
    r.frame(3, false).unwrap();
    assert!(kept(&r), "taau reads them");
    r.session.switch(Pattern::Bilinear);
    r.frame(4, false).unwrap();
    assert!(!kept(&r));
    assert_eq!(r.session.gpu.validation_errors(), 0, "see the log");
}
