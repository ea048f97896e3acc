//! A short soak (the full one is `make soak`): 300 frames at 64x36 -> 128x72 switching pattern
//! every 10 frames and model every 40 (one of them refused), with validation. No validation
//! error, memory bounded, and the figures written where `make soak` writes them.

mod common;

use std::path::{Path, PathBuf};

use upscale_demo::app::config::Config;
use upscale_demo::app::soak::{self, SoakArgs};

#[test]
fn a_short_soak_is_validation_clean_and_does_not_grow() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = common::out_dir("soak_short");
    let config = Config::parse("", Path::new("tests/soak.toml"))
        .unwrap()
        .with_output_size(128, 72)
        .unwrap();
    let args = SoakArgs {
        frames: 300,
        out: out.clone(),
        pattern_every: 10,
        model_every: 40,
        models: vec![
            root.join("models/test/tiny_x2.onnx"),
            root.join("models/fast_x2.onnx"),
            root.join("models/test/one_channel.onnx"),
        ],
    };
    let summary = soak::run(&config, &args).unwrap();
    common::assert_clean_teardown(&summary);
    let r = summary.soak.as_ref().unwrap();
    assert_eq!(r.validation_enabled, common::expect_validation());
    assert_eq!(r.validation_errors, 0, "see the log for the messages");
    assert!(r.failures.is_empty(), "{:?}", r.failures);
    for p in [
        "bilinear",
        "cpu-roundtrip",
        "shared-memory",
        "in-stream",
        "taau",
    ] {
        assert!(
            summary.patterns_used.iter().any(|u| u == p),
            "{p} never ran"
        );
    }
    // Model switches at 40, 80, ..., 280; one_channel (at 80, 200) is refused.
    assert_eq!(summary.switches.models + summary.switches.models_refused, 7);
    assert_eq!(summary.switches.models_refused, 2);
    assert_eq!(summary.switches.patterns_refused, 0);
    assert!(summary.switches.patterns >= 25, "{:?}", summary.switches);

    // One sample per 120-frame model cycle, each at the end of a bilinear block on tiny_x2.
    let frames: Vec<u64> = r.memory.iter().map(|m| m.frame).collect();
    // Five patterns in turn: bilinear's blocks end at 9, 59, 109, 159, ...
    assert_eq!(frames, [9, 159, 259]);
    let (start, end) = (r.start.unwrap(), r.end.unwrap());
    assert_eq!(
        (start.frame, end.frame),
        (159, 259),
        "the first cycle is warm-up"
    );
    assert!(start.rss_bytes > 50 << 20, "RSS {}", start.rss_bytes);
    assert!(start.gpu_allocated_bytes > 0);
    let rss = r.rss_growth_pct.unwrap();
    let gpu = r.gpu_growth_pct.unwrap();
    println!(
        "short soak: RSS {rss:+.2} %, GPU {gpu:+.2} %, {} spikes",
        r.spike_count
    );
    assert!(rss.abs() < soak::MAX_GROWTH_PCT, "RSS changed {rss:.2} %");
    assert!(
        gpu.abs() < soak::MAX_GROWTH_PCT,
        "GPU memory changed {gpu:.2} %"
    );

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    for key in [
        "validation_errors",
        "memory",
        "start",
        "end",
        "rss_growth_pct",
        "gpu_growth_pct",
        "spike_count",
        "spikes",
        "model_switch",
    ] {
        assert!(
            json["soak"].get(key).is_some(),
            "summary.json soak lacks {key}"
        );
    }
    assert!(out.join("last.png").exists());
}
