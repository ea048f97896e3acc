//! `upscale-demo quality` end to end on lavapipe with the test model: the report has the three
//! methods with plausible, finite figures, and unsupported patterns are refused with the reason.

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
    let table = quality::table(&report);
    assert!(
        table.contains("bicubic") && table.contains("PSNR-Y"),
        "{table}"
    );
}

#[test]
fn quality_refuses_patterns_it_does_not_measure() {
    let out = common::out_dir("quality_bad_pattern");
    let err = quality::run(&common::small_config(), &args(&out, Pattern::Bilinear)).unwrap_err();
    assert!(format!("{err:#}").contains("cpu-roundtrip"), "{err:#}");
}
