//! GPU tests of the headless runner on the machine's Vulkan device (lavapipe in CI), with the
//! validation layer and synchronization validation on.

mod common;

use std::path::Path;

use upscale_demo::app::headless::{self, HeadlessArgs};
use upscale_demo::upscale::Pattern;

/// Frame 11 with the default `render.msaa` (4).
const REFERENCE: &str = "tests/reference/headless_320x180_frame11_msaa4.png";
/// The same frame without MSAA, as the game rendered it before `render.msaa` existed.
const REFERENCE_MSAA1: &str = "tests/reference/headless_320x180_frame11_msaa1.png";

/// Frame 11 of the scripted path, bilinear, must be a real scene and match the stored reference.
#[test]
fn headless_frame_is_a_real_scene_matching_the_reference() {
    let out = common::out_dir("headless_reference");
    let config = common::small_config();
    assert_eq!(config.render.msaa, 4, "the default");
    let summary = headless::run(
        &config,
        &HeadlessArgs {
            frames: 12,
            out: out.clone(),
            pattern: Some(Pattern::Bilinear),
            switch_every: None,
            ..Default::default()
        },
    )
    .unwrap();
    common::assert_clean_teardown(&summary);
    assert_eq!(summary.frames, 12);
    assert_eq!(summary.render_size, [160, 90]);
    assert_eq!(summary.output_size, [320, 180]);
    assert_eq!(summary.msaa, 4);
    assert_eq!(summary.validation_enabled, common::expect_validation());
    assert_eq!(
        summary.validation_errors, 0,
        "validation errors: see the log above"
    );
    for stage in ["scene", "upscale", "composite", "ui"] {
        assert!(
            summary.stages.contains_key(stage),
            "stage {stage} missing: {:?}",
            summary.stages.keys()
        );
    }
    let frame = summary.frame_ms.expect("frame times");
    assert!(frame.p50_ms > 0.0 && frame.p99_ms >= frame.p50_ms);

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    for key in [
        "frames",
        "pattern",
        "device",
        "render_size",
        "output_size",
        "validation_errors",
        "frame_ms",
        "stages",
    ] {
        assert!(json.get(key).is_some(), "summary.json lacks {key}");
    }
    assert!(json["stages"]["scene"]["p50_ms"].as_f64().unwrap() > 0.0);
    // The file on disk is the one rewritten after teardown.
    assert_eq!(json["teardown"]["leaked_allocations"], 0);
    assert_eq!(json["teardown"]["validation_errors"], 0);

    let last = image::open(out.join("last.png")).unwrap().to_rgb8();
    assert_eq!(last.dimensions(), (320, 180));
    let std = common::luma_std(&last);
    assert!(std > 20.0, "last.png looks blank (luma std {std:.1})");
    assert_matches_reference(&last, REFERENCE);
}

/// With `render.msaa = 1` the scene pass is the single-sample pass it was before MSAA: the frame
/// matches the reference recorded then (unchanged file).
#[test]
fn headless_frame_without_msaa_matches_the_aliased_reference() {
    let out = common::out_dir("headless_reference_msaa1");
    let mut config = common::small_config();
    config.render.msaa = 1;
    let args = HeadlessArgs {
        frames: 12,
        out: out.clone(),
        pattern: Some(Pattern::Bilinear),
        ..Default::default()
    };
    let summary = headless::run(&config, &args).unwrap();
    common::assert_clean_teardown(&summary);
    assert_eq!(summary.msaa, 1);
    assert_eq!(summary.validation_errors, 0);
    let last = image::open(out.join("last.png")).unwrap().to_rgb8();
    assert_matches_reference(&last, REFERENCE_MSAA1);
}

/// Tolerance: mean absolute difference ≤ 1.0 level per channel and ≤ 0.5 % of channels off by
/// more than 24 levels (rasterisation and LLVM code generation may differ slightly between CPUs).
/// `UPDATE_REFERENCE=1 cargo test --test headless` rewrites the references after a deliberate
/// change.
fn assert_matches_reference(last: &image::RgbImage, reference: &str) {
    let reference_path = Path::new(env!("CARGO_MANIFEST_DIR")).join(reference);
    if std::env::var("UPDATE_REFERENCE").as_deref() == Ok("1") {
        last.save(&reference_path).unwrap();
    }
    let expected = image::open(&reference_path)
        .unwrap_or_else(|e| panic!("{reference}: {e} (UPDATE_REFERENCE=1 recreates it)"))
        .to_rgb8();
    let (mean, far) = common::image_diff(last, &expected, 24);
    assert!(
        mean <= 1.0 && far <= 0.005,
        "differs from {reference}: mean {mean:.3}, far {far:.4}"
    );
}

/// A different frame of the scripted path gives a different image (the path really moves), and
/// the same frame twice gives the same image (it is deterministic).
#[test]
fn scripted_path_is_deterministic_and_moves() {
    let config = common::small_config();
    let render = |frames, name| {
        let out = common::out_dir(name);
        let args = HeadlessArgs {
            frames,
            out: out.clone(),
            pattern: None,
            switch_every: None,
            ..Default::default()
        };
        let s = headless::run(&config, &args).unwrap();
        common::assert_clean_teardown(&s);
        assert_eq!(s.validation_errors, 0);
        image::open(out.join("last.png")).unwrap().to_rgb8()
    };
    let a = render(5, "determinism_a");
    let b = render(5, "determinism_b");
    let c = render(40, "determinism_c");
    let (same, _) = common::image_diff(&a, &b, 24);
    assert!(same < 0.01, "same frame differs between runs: {same}");
    let (moved, _) = common::image_diff(&a, &c, 24);
    assert!(moved > 3.0, "frame 4 and frame 39 look alike: {moved}");
}
