//! `upscale-demo quality` end to end on lavapipe with the test model: the report has the three
//! methods (and native) with plausible, finite figures, the in-stream engine scores the model as
//! ONNX Runtime does, and unsupported patterns are refused with the reason.

mod common;

use std::path::Path;

use upscale_demo::app::quality::{self, QualityArgs};
use upscale_demo::upscale::Pattern;

fn args(out: &Path, pattern: Pattern) -> QualityArgs {
    QualityArgs {
        model: Path::new(env!("CARGO_MANIFEST_DIR")).join("models/test/tiny_x2.onnx"),
        pattern,
        frames: 2,
        seed: 1,
        supersample: 2,
        out: Some(out.to_path_buf()),
        precision: upscale_demo::infer::Precision::Fp32,
    }
}

#[test]
fn quality_reports_model_bilinear_and_bicubic() {
    let out = common::out_dir("quality_tiny");
    let report = quality::run(&common::small_config(), &args(&out, Pattern::CpuRoundtrip)).unwrap();
    assert_eq!(
        report.validation_errors, 0,
        "validation errors: see the log"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("quality.json")).unwrap()).unwrap();
    assert_eq!(json["frames"], 2);
    assert_eq!(json["render_size"], serde_json::json!([160, 90]));
    assert_eq!(json["output_size"], serde_json::json!([320, 180]));
    assert!(json["model_path"]
        .as_str()
        .unwrap()
        .ends_with("tiny_x2.onnx"));
    for method in ["model", "bilinear", "bicubic"] {
        for key in ["psnr_y", "psnr_rgb", "ssim_y", "ssim_rgb"] {
            let v = json[method][key].as_f64().unwrap_or(f64::NAN);
            assert!(v.is_finite() && v > 0.0, "{method}.{key} = {v}");
        }
        let ssim = json[method]["ssim_y"].as_f64().unwrap();
        assert!(ssim <= 1.0, "{method} SSIM {ssim}");
    }
    for method in ["bilinear", "bicubic"] {
        let psnr = json[method]["psnr_y"].as_f64().unwrap();
        assert!(
            (15.0..60.0).contains(&psnr),
            "{method} PSNR-Y {psnr} dB is implausible"
        );
    }
    // The output-size render sits closer to the supersampled reference than any x2 of the
    // low-resolution frame with a fixed filter.
    let native = json["native"]["psnr_y"].as_f64().unwrap();
    let bicubic = json["bicubic"]["psnr_y"].as_f64().unwrap();
    assert!(
        native > bicubic && native < 60.0,
        "native {native} dB, bicubic {bicubic} dB"
    );
    let table = quality::table(&report);
    assert!(
        table.contains("bicubic") && table.contains("PSNR-Y") && table.contains("native"),
        "{table}"
    );
}

#[test]
fn in_stream_engine_scores_the_model_as_onnx_runtime_does() {
    let out = common::out_dir("quality_in_stream");
    let config = common::small_config();
    let ort = quality::run(&config, &args(&out, Pattern::CpuRoundtrip)).unwrap();
    let engine = quality::run(&config, &args(&out, Pattern::InStream)).unwrap();
    assert_eq!(
        engine.validation_errors, 0,
        "validation errors: see the log"
    );
    assert_eq!(engine.pattern, "in-stream");
    // Same frames, same model: outputs agree within 1/255 per channel (the pattern tests), so
    // the scores can differ only by a rounding flip here and there.
    for (what, a, b) in [
        ("PSNR-Y", ort.model.psnr_y, engine.model.psnr_y),
        ("PSNR-RGB", ort.model.psnr_rgb, engine.model.psnr_rgb),
        (
            "SSIM-Y",
            ort.model.ssim_y * 100.0,
            engine.model.ssim_y * 100.0,
        ),
    ] {
        assert!((a - b).abs() < 0.05, "{what}: ORT {a} vs in-stream {b}");
    }
    // The reference methods do not depend on the pattern.
    assert_eq!(ort.bicubic.psnr_y, engine.bicubic.psnr_y);
    // fp16 storage (where the device has it) scores within 0.05 dB of fp32 on the same frames.
    let fp16 = QualityArgs {
        precision: upscale_demo::infer::Precision::Fp16,
        ..args(&out, Pattern::InStream)
    };
    match quality::run(&config, &fp16) {
        Ok(half) => {
            assert_eq!(half.validation_errors, 0, "validation errors: see the log");
            let (a, b) = (engine.model.psnr_y, half.model.psnr_y);
            assert!((a - b).abs() <= 0.05, "PSNR-Y fp32 {a} vs fp16 {b}");
        }
        Err(e) => {
            let why = format!("{e:#}");
            assert!(why.contains("shaderFloat16"), "{why}");
            println!("fp16 skipped: {why}");
        }
    }
}

#[test]
fn quality_refuses_patterns_it_does_not_measure() {
    let out = common::out_dir("quality_bad_pattern");
    for pattern in [Pattern::Bilinear, Pattern::SharedMemory] {
        let err = quality::run(&common::small_config(), &args(&out, pattern)).unwrap_err();
        let err = format!("{err:#}");
        assert!(
            err.contains("cpu-roundtrip") && err.contains("in-stream"),
            "{err}"
        );
    }
}
