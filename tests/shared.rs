//! Pattern 2 (external-memory share, host domain) on lavapipe with validation and
//! synchronization validation on.

mod common;

use std::path::Path;

use ash::vk;
use upscale_demo::app::config::Config;
use upscale_demo::app::headless::{self, HeadlessArgs};
use upscale_demo::app::session::Session;
use upscale_demo::upscale::Pattern;

fn config(pattern: &str) -> Config {
    let mut config = common::small_config();
    config.upscale.pattern = pattern.into();
    config.upscale.model = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/test/tiny_x2.onnx");
    config
}

fn run(
    pattern: &str,
    frames: u64,
    name: &str,
) -> (upscale_demo::app::summary::Summary, image::RgbImage) {
    let out = common::out_dir(name);
    let args = HeadlessArgs {
        frames,
        out: out.clone(),
        pattern: None,
        switch_every: None,
        ..Default::default()
    };
    let summary = headless::run(&config(pattern), &args).unwrap();
    common::assert_clean_teardown(&summary);
    let last = image::open(out.join("last.png")).unwrap().to_rgb8();
    (summary, last)
}

/// Same frame of the scripted path through both patterns: at most 1/255 per channel apart
/// (the GPU's UNORM store and the CPU's quantisation may round a tie differently), and the
/// shared pattern copies no host bytes.
#[test]
fn shared_memory_equals_cpu_roundtrip_and_copies_nothing_on_the_host() {
    let (shared, a) = run("shared-memory", 5, "shared_vs_roundtrip_a");
    let (roundtrip, b) = run("cpu-roundtrip", 5, "shared_vs_roundtrip_b");
    assert_eq!(shared.pattern, "shared-memory");
    assert_eq!(shared.validation_enabled, common::expect_validation());
    assert_eq!(shared.validation_errors + roundtrip.validation_errors, 0);
    assert_eq!(shared.host_copy_bytes, 0);
    assert_eq!(shared.bus_bytes, 0);
    assert!(roundtrip.host_copy_bytes > 0);
    assert!(
        shared.pattern_note.starts_with("domain: host"),
        "{}",
        shared.pattern_note
    );
    for stage in ["to_tensor", "inference", "from_tensor"] {
        assert!(
            shared.stages.contains_key(stage),
            "no {stage}: {:?}",
            shared.stages.keys()
        );
    }
    let max = a
        .as_raw()
        .iter()
        .zip(b.as_raw())
        .map(|(x, y)| x.abs_diff(*y))
        .max()
        .unwrap();
    assert!(
        max <= 1,
        "shared-memory and cpu-roundtrip differ by {max}/255"
    );
    assert!(common::luma_std(&a) > 20.0);
}

/// 300 frames switching among bilinear, cpu-roundtrip and shared-memory every 10 frames.
#[test]
fn switching_among_three_patterns_for_300_frames_is_validation_clean() {
    let out = common::out_dir("shared_switching");
    let args = HeadlessArgs {
        frames: 300,
        out,
        pattern: Some(Pattern::Bilinear),
        switch_every: Some(10),
        ..Default::default()
    };
    let summary = headless::run(&config("bilinear"), &args).unwrap();
    common::assert_clean_teardown(&summary);
    assert_eq!(summary.validation_errors, 0);
    for p in ["bilinear", "cpu-roundtrip", "shared-memory"] {
        assert!(
            summary.patterns_used.iter().any(|u| u == p),
            "{p} never ran: {:?}",
            summary.patterns_used
        );
    }
}

/// A device without VK_EXT_external_memory_host (simulated by config) greys the pattern out.
#[test]
fn without_host_import_the_pattern_is_greyed_with_the_reason() {
    let mut config = config("shared-memory");
    config.gpu.external_memory_host = false;
    let session = Session::new(
        &config,
        None,
        vk::Format::R8G8B8A8_UNORM,
        Pattern::SharedMemory,
    )
    .unwrap();
    assert_eq!(session.renderer.pattern(), Pattern::Bilinear);
    let reason = session
        .patterns()
        .iter()
        .find(|p| p.0 == Pattern::SharedMemory)
        .unwrap()
        .1
        .clone()
        .unwrap_err();
    assert!(reason.contains("VK_EXT_external_memory_host"), "{reason}");
    assert!(session
        .notice
        .as_deref()
        .unwrap_or("")
        .contains("shared-memory"));
}
