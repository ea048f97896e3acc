//! Pattern 1 (CPU roundtrip through ONNX Runtime) on lavapipe with validation on: its image
//! equals ONNX Runtime run directly on the same pixels, its sub-stages are measured, bad models
//! fall back to bilinear with the reason, and live switching stays validation-clean.

mod common;

use std::path::{Path, PathBuf};

use ash::vk;
use upscale_demo::app::config::Config;
use upscale_demo::app::headless::{self, HeadlessArgs};
use upscale_demo::app::session::{ml_settings, Session};
use upscale_demo::upscale::model::OrtModel;
use upscale_demo::upscale::roundtrip::{nchw_to_rgba8, rgba8_to_nchw};
use upscale_demo::upscale::Pattern;

fn tiny_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/test/tiny_x2.onnx")
}

fn roundtrip_config(model: &Path) -> Config {
    let mut config = common::small_config();
    config.upscale.pattern = "cpu-roundtrip".into();
    config.upscale.model = model.to_path_buf();
    config
}

/// Tolerance: at most 1/255 per channel (both sides quantise the same float output; ORT's
/// thread count may change the last float bit).
#[test]
fn roundtrip_output_equals_onnx_runtime_on_the_same_pixels() {
    let out = common::out_dir("roundtrip_vs_ort");
    let config = roundtrip_config(&tiny_model());
    let args = HeadlessArgs {
        frames: 4,
        out: out.clone(),
        pattern: None,
        switch_every: None,
        ..Default::default()
    };
    let summary = headless::run(&config, &args).unwrap();
    common::assert_clean_teardown(&summary);
    assert_eq!(summary.pattern, "cpu-roundtrip");
    assert_eq!(summary.validation_enabled, common::expect_validation());
    assert_eq!(summary.validation_errors, 0);
    for stage in [
        "readback",
        "to_tensor",
        "inference",
        "from_tensor",
        "upload",
        "upscale",
    ] {
        assert!(
            summary.stages.contains_key(stage),
            "no {stage} in {:?}",
            summary.stages.keys()
        );
    }
    let expected_bytes = 160 * 90 * 4 + 320 * 180 * 4;
    assert_eq!(summary.host_copy_bytes, expected_bytes);
    assert_eq!(summary.bus_bytes, expected_bytes);

    let input = image::open(out.join("input.png")).unwrap().to_rgba8();
    assert_eq!(input.dimensions(), (160, 90));
    assert!(common::luma_std(&image::DynamicImage::ImageRgba8(input.clone()).to_rgb8()) > 20.0);
    let mut tensor = vec![0.0; 3 * 160 * 90];
    rgba8_to_nchw(input.as_raw(), &mut tensor);
    let ml = ml_settings(&config).unwrap();
    ml.runtime().unwrap();
    let (mut model, _) = OrtModel::load(&ml.model, ml.provider, None).unwrap();
    let mut result = vec![0.0; 3 * 320 * 180];
    model
        .run(&mut tensor, [1, 3, 90, 160], &mut result, [1, 3, 180, 320])
        .unwrap();
    let mut expected = vec![0u8; 320 * 180 * 4];
    nchw_to_rgba8(&result, &mut expected);

    let last = image::open(out.join("last.png")).unwrap().to_rgba8();
    let max_diff = last
        .as_raw()
        .chunks(4)
        .zip(expected.chunks(4))
        .flat_map(|(a, b)| (0..3).map(move |c| a[c].abs_diff(b[c])))
        .max()
        .unwrap();
    assert!(
        max_diff <= 1,
        "cpu-roundtrip differs from ONNX Runtime by {max_diff}/255"
    );
}

/// Each bad model gives its own message; the game starts on bilinear and shows why.
#[test]
fn bad_models_fall_back_to_bilinear_with_their_reason() {
    let dir = common::out_dir("bad_models");
    let garbage = dir.join("garbage.onnx");
    std::fs::write(
        &garbage,
        (0..4096u32)
            .map(|i| (i * 7919 % 251) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let one_channel = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/test/one_channel.onnx");
    let cases: [(PathBuf, u32, &str); 4] = [
        (dir.join("missing.onnx"), 2, "does not exist"),
        (garbage, 2, "ONNX Runtime cannot load it"),
        (one_channel, 2, "has 1 channel(s)"),
        (tiny_model(), 4, "upscales x2"),
    ];
    for (model, scale, message) in cases {
        let mut config = roundtrip_config(&model);
        config.render.scale = scale;
        let session = Session::new(
            &config,
            None,
            vk::Format::R8G8B8A8_UNORM,
            Pattern::CpuRoundtrip,
        )
        .unwrap();
        assert_eq!(
            session.renderer.pattern(),
            Pattern::Bilinear,
            "{}",
            model.display()
        );
        let notice = session.notice.clone().unwrap_or_default();
        assert!(
            notice.contains(message),
            "notice for {}: {notice}",
            model.display()
        );
        let (_, availability) = session
            .patterns()
            .iter()
            .find(|p| p.0 == Pattern::CpuRoundtrip)
            .unwrap();
        let reason = availability.as_ref().unwrap_err();
        assert!(reason.contains(message), "greyed reason: {reason}");
        if scale == 2 {
            assert!(
                reason.contains(&*model.to_string_lossy()),
                "names the file: {reason}"
            );
        }
        assert_eq!(session.gpu.validation_errors(), 0);
    }
}

/// Switching between bilinear and cpu-roundtrip every 3 frames: no validation error, both used.
#[test]
fn live_switching_is_validation_clean() {
    let out = common::out_dir("roundtrip_switching");
    let mut config = roundtrip_config(&tiny_model());
    config.upscale.pattern = "bilinear".into();
    let args = HeadlessArgs {
        frames: 14,
        out,
        pattern: None,
        switch_every: Some(3),
        ..Default::default()
    };
    let summary = headless::run(&config, &args).unwrap();
    common::assert_clean_teardown(&summary);
    assert_eq!(summary.validation_errors, 0);
    assert!(summary.patterns_used.contains(&"cpu-roundtrip".to_string()));
    assert!(summary.patterns_used.contains(&"bilinear".to_string()));
}
