//! `render.jitter` end to end on lavapipe with validation on: headless runs are deterministic
//! with the Halton jitter on (the same frames twice), and the jitter does change the frame the
//! upscaler reads.

mod common;

use std::path::Path;

use upscale_demo::app::config::Config;
use upscale_demo::app::headless::{self, HeadlessArgs};
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
