//! `upscale-demo quality --sequence` end to end on lavapipe: two short sequences at 64x36 →
//! 128x72 with the test model, every pattern through the renderer. quality.json holds per-frame
//! arrays and aggregates for every method, and a second run gives the same numbers.

mod common;

use std::path::{Path, PathBuf};

use upscale_demo::app::config::Config;
use upscale_demo::app::quality::sequence::{self, SequenceArgs};

fn tiny_config() -> Config {
    let text = "[render]\noutput_width = 128\noutput_height = 72\nscale = 2\n\
                [upscale]\nmodel = \"models/test/tiny_x2.onnx\"\n";
    Config::parse(text, Path::new("tests/tiny.toml")).unwrap()
}

fn args(out: PathBuf) -> SequenceArgs {
    SequenceArgs {
        sequences: 2,
        frames: 10,
        warmup: 3,
        supersample: 2,
        models: vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("models/test/tiny_x2.onnx")],
        out: Some(out),
        progress: false,
        ..SequenceArgs::new().unwrap()
    }
}

fn read_json(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("quality.json")).unwrap()).unwrap()
}

#[test]
fn sequence_report_has_per_frame_scores_and_is_deterministic() {
    let config = tiny_config();
    let (a, b) = (
        common::out_dir("quality_sequence_a"),
        common::out_dir("quality_sequence_b"),
    );
    let report = sequence::run(&config, &args(a.clone())).unwrap();
    assert_eq!(
        report.validation_errors, 0,
        "validation errors: see the log"
    );
    sequence::run(&config, &args(b.clone())).unwrap();
    let (ja, jb) = (read_json(&a), read_json(&b));
    assert_eq!(ja["methods"], jb["methods"], "two runs of one seed differ");

    assert_eq!(ja["mode"], "sequence");
    assert_eq!(ja["complete"], true);
    assert_eq!(
        (ja["frames"].as_u64(), ja["warmup_frames"].as_u64()),
        (Some(10), Some(3))
    );
    assert_eq!(ja["render_size"], serde_json::json!([64, 36]));
    assert_eq!(ja["output_size"], serde_json::json!([128, 72]));
    assert!(ja["tpsnr"]
        .as_str()
        .unwrap()
        .contains("Y(out_t) - Y(out_t-1)"));
    let seqs = ja["sequences"].as_array().unwrap();
    assert_eq!(seqs.len(), 2);
    assert_eq!(seqs[0]["kind"], "scripted");
    assert_eq!(seqs[1]["kind"], "walk");
    assert_eq!(seqs[1]["frames"].as_array().unwrap().len(), 10);

    let methods = ja["methods"].as_array().unwrap();
    let names: Vec<&str> = methods
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    for expected in ["bicubic", "native", "bilinear", "in-stream tiny_x2"] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    for m in methods {
        let name = m["method"].as_str().unwrap();
        // Jittered exactly when the pattern keeps history (render.jitter = auto).
        assert_eq!(m["jittered"], m["temporal"], "{name}");
        let per_seq = m["sequences"].as_array().unwrap();
        assert_eq!(per_seq.len(), 2, "{name}");
        for s in per_seq {
            let psnr = s["psnr_y"].as_array().unwrap();
            let ssim = s["ssim_y"].as_array().unwrap();
            let tpsnr = s["tpsnr_y"].as_array().unwrap();
            assert_eq!(
                (psnr.len(), ssim.len(), tpsnr.len()),
                (10, 10, 10),
                "{name}"
            );
            assert!(tpsnr[0].is_null(), "{name}: frame 0 has no predecessor");
            for t in 0..10 {
                let p = psnr[t].as_f64().unwrap();
                let q = ssim[t].as_f64().unwrap();
                assert!((10.0..60.0).contains(&p), "{name} frame {t}: PSNR-Y {p}");
                assert!(q > 0.0 && q <= 1.0, "{name} frame {t}: SSIM-Y {q}");
                if t > 0 {
                    let tp = tpsnr[t].as_f64().unwrap();
                    assert!(tp > 10.0 && tp <= 100.0, "{name} frame {t}: tPSNR-Y {tp}");
                }
            }
        }
        for (range, frames) in [("warmup", 6), ("steady", 14)] {
            let agg = &m[range];
            assert_eq!(agg["frames"], frames, "{name} {range}");
            for key in ["psnr_y", "ssim_y", "tpsnr_y"] {
                assert!(agg[key].as_f64().is_some(), "{name} {range}.{key}");
            }
        }
    }
    let table = sequence::table(&report);
    assert!(
        table.contains("tPSNR-Y") && table.contains("native"),
        "{table}"
    );
}
