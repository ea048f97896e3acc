//! `upscale-demo bench` end to end on lavapipe at a tiny size: every pattern with two models,
//! plus a resolution the models cannot do (listed as not run, with the reason), and a PyTorch
//! reference file. Checks the four files, the figures' plausibility, that every ML pattern gives
//! the same PSNR for one model, and that the GPU bilinear scores as `quality`'s bilinear does.

mod common;

use std::path::{Path, PathBuf};

use image::imageops::{self, FilterType};
use serde_json::Value;
use upscale_demo::app::bench::{self, report::Resolution, BenchArgs};
use upscale_demo::app::config::Config;
use upscale_demo::app::frames::FrameSource;
use upscale_demo::app::quality::metrics;
use upscale_demo::game::camera;

const MODELS: [&str; 2] = ["models/test/tiny_x2.onnx", "models/fast_x2.onnx"];
const ML_PATTERNS: [&str; 3] = ["cpu-roundtrip", "shared-memory", "in-stream"];

fn manifest(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn args(out: &Path, reference: &Path) -> BenchArgs {
    let mut args = BenchArgs::new(out.to_path_buf(), true).unwrap();
    args.models = MODELS.iter().map(|m| manifest(m)).collect();
    // 48x27 → 128x72 is not a ×2: the ML patterns must be listed as not run there.
    args.resolutions = bench::parse_resolutions("64x36:128x72,48x27:128x72").unwrap();
    args.warmup = 4;
    args.frames = 5;
    args.psnr_frames = 2;
    args.supersample = 2;
    args.reference = Some(reference.to_path_buf());
    args.progress = false;
    args.command_line = "cargo test --test bench".into();
    args
}

fn write_reference(dir: &Path) -> PathBuf {
    let path = dir.join("reference.json");
    let text = r#"{"device": "test GPU", "torch": "2.5.1", "entries": [
        {"model": "fast_x2", "arch": "fast", "input": "64x36", "dtype": "fp32",
         "median_ms": 0.5, "p10_ms": 0.4, "p90_ms": 0.6},
        {"model": "quality_x2", "arch": "quality", "input": "960x540", "dtype": "fp16",
         "median_ms": 0.8, "p10_ms": 0.7, "p90_ms": 0.9},
        {"model": "fast_x2", "arch": "quality", "input": "64x36", "dtype": "fp32",
         "median_ms": 0.5, "p10_ms": 0.4, "p90_ms": 0.6}]}"#;
    std::fs::write(&path, text).unwrap();
    path
}

/// PSNR-Y of `quality`'s CPU bilinear (image's Triangle filter) on the bench's frames.
fn quality_bilinear_psnr(config: &Config, res: &Resolution, frames: &[u64], ss: u32) -> f64 {
    let mut config = config.clone();
    config.render.output_width = res.output[0];
    config.render.output_height = res.output[1];
    config.render.render_width = Some(res.render[0]);
    config.render.render_height = Some(res.render[1]);
    let mut source = FrameSource::new(&config, ss).unwrap();
    let mut sum = 0.0;
    for &f in frames {
        let (cam, time) = camera::scripted(f);
        let pair = source.render_view(cam, time).unwrap().finish();
        let (w, h) = pair.hr.dimensions();
        let bilinear = imageops::resize(&pair.lr, w, h, FilterType::Triangle);
        sum += metrics::psnr_y(&bilinear, &pair.hr);
    }
    assert_eq!(source.gpu.validation_errors(), 0);
    sum / frames.len() as f64
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

#[test]
fn bench_refuses_a_warmup_that_leaves_the_pipeline_filling() {
    let out = common::out_dir("bench_short_warmup");
    let mut args = args(&out, &write_reference(&out));
    args.warmup = 2;
    let e = format!(
        "{:#}",
        bench::run(&common::small_config(), &args).unwrap_err()
    );
    assert!(e.contains("--warmup 2: at least 4"), "{e}");
}

#[test]
fn bench_writes_all_reports_with_plausible_figures() {
    let out = common::out_dir("bench_quick");
    let reference = write_reference(&out);
    let config = common::small_config();
    let args = args(&out, &reference);
    let report = bench::run(&config, &args).unwrap();
    assert_eq!(
        report.validation_errors, 0,
        "validation errors: see the log"
    );
    let t = report.teardown;
    assert_eq!(
        (t.leaked_allocations, t.validation_errors),
        (0, 0),
        "teardown of the bench's devices: see the log"
    );
    for name in ["report.json", "report.csv", "report.md", "report.png"] {
        assert!(out.join(name).is_file(), "{name} missing");
    }
    let png = image::open(out.join("report.png")).unwrap();
    let (w, h) = (png.width(), png.height());
    assert!(w >= 800 && h >= 400, "report.png is {w}x{h}");

    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    check_header(&json);
    let runs = json["runs"].as_array().unwrap();
    // 64x36: bilinear, taau + 2 models × 3 ML patterns, in-stream in fp32 and fp16 (lavapipe
    // has both); 48x27: bilinear and taau only.
    assert_eq!(runs.len(), 12, "runs: {runs:#?}");
    let unavailable = json["unavailable"].as_array().unwrap();
    assert_eq!(unavailable.len(), 8, "{unavailable:#?}");
    for u in unavailable {
        assert_eq!(u["resolution"]["render"], serde_json::json!([48, 27]));
        assert!(!u["reason"].as_str().unwrap().is_empty(), "{u}");
    }
    for run in runs {
        check_run(run);
    }
    check_psnr_consistency(runs, &config, &json);
    check_markdown(
        &std::fs::read_to_string(out.join("report.md")).unwrap(),
        runs,
    );
    check_csv(&std::fs::read_to_string(out.join("report.csv")).unwrap());
    let rows = json["reference"]["rows"].as_array().unwrap();
    assert!(rows[0]["in_stream"]["layers_p50_ms"].as_f64().unwrap() > 0.0);
    assert!(
        rows[1]["in_stream"].is_null(),
        "quality_x2 at 960x540 did not run"
    );
    // Same model and size as rows[0], but timed for another architecture: not compared.
    assert!(rows[2]["in_stream"].is_null(), "{}", rows[2]);
    let why = rows[2]["arch_mismatch"].as_str().unwrap();
    assert!(
        why.contains("arch quality") && why.contains("arch fast"),
        "{why}"
    );
}

fn check_header(json: &Value) {
    let h = &json["header"];
    for key in ["hostname", "cpu_model", "cores", "ram_bytes"] {
        assert!(!h["machine"][key].is_null(), "header.machine.{key}");
    }
    for key in ["name", "driver", "api_version"] {
        assert!(
            h["gpu"][key].as_str().is_some_and(|s| !s.is_empty()),
            "header.gpu.{key}"
        );
    }
    let ort = h["onnxruntime"].as_str().unwrap_or_default();
    assert!(ort.starts_with("1."), "ONNX Runtime version {ort:?}");
    assert!(h["date"].as_str().unwrap().ends_with('Z'));
    assert!(["debug", "release"].contains(&h["build_profile"].as_str().unwrap()));
    assert!(h.get("git_commit").is_some());
    assert_eq!(h["validation_enabled"], common::expect_validation());
    assert_eq!(json["config"]["psnr_frames"], serde_json::json!([4, 8]));
    assert_eq!(json["complete"], true);
}

fn check_run(run: &Value) {
    let name = format!("{} {}", run["pattern"], run["model"]);
    let frame = &run["frame_ms"];
    assert!(
        f(&frame["p50_ms"]) > 0.0 && f(&frame["p99_ms"]) >= f(&frame["p50_ms"]),
        "{name}"
    );
    assert_eq!(
        run["frame_samples_ms"].as_array().unwrap().len(),
        5,
        "{name}"
    );
    let stages: Vec<&str> = run["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    for stage in ["scene", "upscale", "composite", "ui"] {
        assert!(
            stages.contains(&stage),
            "{name}: {stage} missing from {stages:?}"
        );
    }
    if run["pattern"] == "cpu-roundtrip" {
        assert!(run["host_copy_bytes"].as_u64().unwrap() > 0, "{name}");
        assert!(run["bus_bytes"].as_u64().unwrap() > 0, "{name}");
        let inference = run["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "inference");
        assert_eq!(inference.unwrap()["clock"], "host", "{name}");
    }
    if run["pattern"] == "in-stream" {
        assert!(
            !run["layers"].as_array().unwrap().is_empty(),
            "{name}: no layers"
        );
        let precision = run["precision"].as_str().unwrap();
        let engine = &run["engine"];
        assert_eq!(engine["precision"], precision, "{name}: {engine}");
        // lavapipe has no cooperative matrices: the packed kernels run the convs.
        assert_eq!(engine["conv_path"], "packed", "{name}: {engine}");
        assert!(
            engine["dispatches"].as_u64().unwrap() >= 1,
            "{name}: {engine}"
        );
    } else {
        assert!(run["precision"].is_null(), "{name}");
    }
    let psnr = &run["psnr"];
    for key in ["psnr_y", "psnr_rgb"] {
        let v = f(&psnr[key]);
        assert!(
            (15.0..60.0).contains(&v),
            "{name}: {key} {v} dB is implausible"
        );
    }
    assert_eq!(psnr["frames"].as_array().unwrap().len(), 2, "{name}");
    // Each PSNR frame against the frame before it: a moving camera, so below the cap.
    let t = f(&psnr["tpsnr_y"]);
    assert!(
        (10.0..60.0).contains(&t),
        "{name}: tPSNR-Y {t} dB is implausible"
    );
}

/// One model gives one image whichever pattern runs it (within 1/255, so PSNR within 0.3 dB);
/// the GPU bilinear scores within 0.5 dB of `quality`'s CPU bilinear on the same frames.
fn check_psnr_consistency(runs: &[Value], config: &Config, json: &Value) {
    let psnr_of = |pattern: &str, model: Option<&str>, render: u32| {
        let run = runs
            .iter()
            .find(|r| {
                r["pattern"] == pattern
                    && r["model"].as_str() == model
                    && r["resolution"]["render"][0] == render
            })
            .unwrap_or_else(|| panic!("no run {pattern} {model:?} {render}"));
        f(&run["psnr"]["psnr_y"])
    };
    for model in ["tiny_x2", "fast_x2"] {
        let first = psnr_of(ML_PATTERNS[0], Some(model), 64);
        for p in &ML_PATTERNS[1..] {
            let other = psnr_of(p, Some(model), 64);
            assert!(
                (first - other).abs() < 0.3,
                "{model}: {p} {other} vs {first} dB"
            );
        }
    }
    let frames: Vec<u64> = json["config"]["psnr_frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    for (res, render) in [("64x36:128x72", 64), ("48x27:128x72", 48)] {
        let res = Resolution::parse(res).unwrap();
        let ours = psnr_of("bilinear", None, render);
        let quality = quality_bilinear_psnr(config, &res, &frames, 2);
        assert!(
            (ours - quality).abs() < 0.5,
            "{res}: bench bilinear {ours:.2} dB, quality's bilinear {quality:.2} dB"
        );
    }
}

fn check_markdown(md: &str, runs: &[Value]) {
    for run in runs {
        let res = &run["resolution"];
        let prefix = format!(
            "| {} | {} | {} | {}x{}→{}x{} |",
            run["pattern"].as_str().unwrap(),
            run["precision"].as_str().unwrap_or("–"),
            run["model"].as_str().unwrap_or("–"),
            res["render"][0],
            res["render"][1],
            res["output"][0],
            res["output"][1]
        );
        let line = md
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("report.md has no row {prefix}\n{md}"));
        // frame, cpu, GPU Σ, scene, upscale, composite, ui at least: "p50 / p99" each.
        assert!(line.matches(" / ").count() >= 7, "{line}");
        let psnr = format!("{:.2}", f(&run["psnr"]["psnr_y"]));
        assert!(line.contains(&psnr), "{line} lacks PSNR {psnr}");
        let tpsnr = format!("{:.2}", f(&run["psnr"]["tpsnr_y"]));
        assert!(line.contains(&tpsnr), "{line} lacks tPSNR {tpsnr}");
    }
    for section in [
        "## Results",
        "## Not run",
        "## In-stream layers",
        "## Reference",
        "PSNR",
    ] {
        assert!(md.contains(section), "report.md lacks {section}");
    }
    assert!(md.contains("ONNX Runtime: 1."), "{md}");
}

fn check_csv(csv: &str) {
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 12 + 8, "{csv}");
    let head: Vec<&str> = lines[0].split(',').collect();
    for col in [
        "pattern",
        "model",
        "status",
        "frame_p50_ms",
        "frame_p99_ms",
        "gpu_frame_p50_ms",
        "psnr_y_db",
        "tpsnr_y_db",
        "scene_p50_ms",
        "upscale_p99_ms",
        "inference_clock",
    ] {
        assert!(head.contains(&col), "report.csv lacks column {col}");
    }
    assert_eq!(lines.iter().filter(|l| l.contains(",ok,")).count(), 12);
    assert_eq!(
        lines.iter().filter(|l| l.contains(",unavailable,")).count(),
        8
    );
}
