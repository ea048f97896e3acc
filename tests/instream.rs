//! Pattern 3 (in-stream Vulkan compute) on lavapipe with validation on: whole models against
//! ONNX Runtime, the frame against the CPU roundtrip, a 60-frame headless run, live switching,
//! and the `run-model` command.

mod common;

use std::path::{Path, PathBuf};

use upscale_demo::app::config::Config;
use upscale_demo::app::headless::{self, HeadlessArgs};
use upscale_demo::gpu::{Gpu, Validation};
use upscale_demo::infer::{self, tensor, Engine, Graph, InferError, Plan, Precision};
use upscale_demo::upscale::model::{self, ExecutionProvider, OrtModel};
use upscale_demo::upscale::{self, Pattern};

/// Whole-model tolerance against ONNX Runtime (max abs, fp32 both sides).
const MODEL_TOLERANCE: f32 = 1e-4;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn init_ort() {
    let loc = model::locate_runtime_in(None, std::env::var_os("ORT_DYLIB_PATH"), &[root()])
        .expect("ONNX Runtime not found; put libonnxruntime.so.1.30.0 into .deps/onnxruntime/");
    model::init_runtime(&loc.path).expect("ONNX Runtime failed to load");
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

fn max_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// The in-stream engine on one input; also returns the op labels.
fn in_stream(path: &Path, shape: &[usize], input: &[f32]) -> (Vec<f32>, Vec<usize>, Vec<String>) {
    let graph = Graph::load(path).unwrap();
    let plan = Plan::new(&graph, &[shape.to_vec()]).unwrap();
    let (gpu, _) = Gpu::new(Validation::from_env(), &[], "", None).unwrap();
    let engine = Engine::new(&gpu, plan).unwrap();
    let out = engine.run(&gpu, &[input]).unwrap().remove(0);
    let out_shape = engine.output(0).1.shape.clone();
    let labels = engine.labels().iter().map(|s| s.to_string()).collect();
    engine.destroy(&gpu);
    assert_eq!(gpu.validation_errors(), 0);
    (out, out_shape, labels)
}

fn ort(path: &Path, shape: &[usize], input: &[f32]) -> Vec<f32> {
    init_ort();
    let (mut m, info) = OrtModel::load(path, ExecutionProvider::Cpu, Some(1)).unwrap();
    let s = info.scale as usize;
    let out_shape = [shape[0], shape[1], shape[2] * s, shape[3] * s];
    let mut out = vec![0.0; out_shape.iter().product()];
    let mut x = input.to_vec();
    m.run(
        &mut x,
        [shape[0], shape[1], shape[2], shape[3]],
        &mut out,
        out_shape,
    )
    .unwrap();
    out
}

#[test]
fn tiny_x2_matches_the_stored_reference_pair() {
    let dir = root().join("models/test");
    let read = |name: &str| -> Vec<f32> {
        bytemuck::pod_collect_to_vec(&std::fs::read(dir.join(name)).unwrap())
    };
    let (out, shape, labels) = in_stream(
        &dir.join("tiny_x2.onnx"),
        &[1, 3, 7, 5],
        &read("tiny_x2.in.f32"),
    );
    assert_eq!(shape, vec![1, 3, 14, 10]);
    assert_eq!(
        labels,
        [
            "Conv+Relu:conv1",
            "Conv:conv2",
            "DepthToSpace:depth_to_space"
        ]
    );
    let e = max_err(&out, &read("tiny_x2.out.f32"));
    println!("tiny_x2 vs stored ONNX Runtime output: max abs error {e:.3e}");
    assert!(e <= MODEL_TOLERANCE, "{e}");
}

/// Fixtures ONNX Runtime runs but the engine must refuse (an op it does not have).
const ENGINE_UNSUPPORTED: &[&str] = &["softplus_x2.onnx"];

/// Every ONNX image upscaler under models/ (ONNX Runtime accepts it as one): the in-stream
/// engine equals ONNX Runtime within 1e-4 on the same random input; the ENGINE_UNSUPPORTED
/// fixtures are refused as unsupported, and no other model is.
#[test]
fn every_model_matches_onnx_runtime() {
    init_ort();
    let mut models = Vec::new();
    collect(&root().join("models"), &mut models);
    let mut checked = 0;
    for path in models {
        let Ok((_, info)) = OrtModel::load(&path, ExecutionProvider::Cpu, Some(1)) else {
            println!(
                "{}: not an image upscaler for ONNX Runtime, skipped",
                path.display()
            );
            continue;
        };
        let (h, w) = (
            info.input_height.unwrap_or(17) as usize,
            info.input_width.unwrap_or(23) as usize,
        );
        if ENGINE_UNSUPPORTED.iter().any(|name| path.ends_with(name)) {
            let err = infer::plan_upscaler(&path, w as u32, h as u32).err();
            assert!(
                matches!(err, Some(InferError::Unsupported { .. })),
                "{}: expected an unsupported op, got {err:?}",
                path.display()
            );
            println!("{}: unsupported by the engine, as meant", path.display());
            continue;
        }
        let shape = [1, 3, h, w];
        let x = random(3 * h * w, 99);
        let (got, _, labels) = in_stream(&path, &shape, &x);
        let want = ort(&path, &shape, &x);
        let e = max_err(&got, &want);
        println!(
            "{}: {} ops {labels:?}: max abs error vs ONNX Runtime {e:.3e}",
            path.display(),
            labels.len()
        );
        assert!(e <= MODEL_TOLERANCE, "{}: {e}", path.display());
        checked += 1;
    }
    assert!(checked >= 4, "only {checked} models checked");
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|e| e == "onnx") {
            out.push(p);
        }
    }
}

fn config(pattern: &str, model: &str) -> Config {
    let mut config = common::small_config();
    config.upscale.pattern = pattern.into();
    config.upscale.model = root().join("models/test").join(model);
    config
}

fn headless_run(
    config: &Config,
    out: &Path,
    frames: u64,
    switch_every: Option<u64>,
) -> upscale_demo::app::summary::Summary {
    let args = HeadlessArgs {
        frames,
        out: out.to_path_buf(),
        pattern: None,
        switch_every,
        ..Default::default()
    };
    let summary = headless::run(config, &args).unwrap();
    common::assert_clean_teardown(&summary);
    assert_eq!(summary.validation_enabled, common::expect_validation());
    assert_eq!(
        summary.validation_errors, 0,
        "validation errors: see the log"
    );
    summary
}

/// The same frame through in-stream and cpu-roundtrip: identical input, output within 1/255
/// per channel (both quantise the same float results; the float results differ by < 1e-4).
#[test]
fn in_stream_frame_equals_cpu_roundtrip() {
    let mut images = Vec::new();
    for pattern in ["in-stream", "cpu-roundtrip"] {
        let out = common::out_dir(&format!("instream_vs_{pattern}"));
        let summary = headless_run(&config(pattern, "tiny_x2.onnx"), &out, 4, None);
        assert_eq!(summary.pattern, pattern);
        let input = image::open(out.join("input.png")).unwrap().to_rgba8();
        let last = image::open(out.join("last.png")).unwrap().to_rgba8();
        images.push((input, last));
    }
    let (a, b) = (&images[0], &images[1]);
    assert_eq!(
        a.0.as_raw(),
        b.0.as_raw(),
        "both patterns were given the same frame"
    );
    assert!(common::luma_std(&image::DynamicImage::ImageRgba8(a.1.clone()).to_rgb8()) > 20.0);
    let max_diff =
        a.1.as_raw()
            .iter()
            .zip(b.1.as_raw())
            .map(|(x, y)| x.abs_diff(*y))
            .max()
            .unwrap();
    println!("in-stream vs cpu-roundtrip: max difference {max_diff}/255");
    assert!(
        max_diff <= 1,
        "in-stream differs from cpu-roundtrip by {max_diff}/255"
    );
}

#[test]
fn sixty_headless_frames_are_validation_clean_with_a_span_per_layer() {
    let out = common::out_dir("instream_60");
    let summary = headless_run(&config("in-stream", "tiny_x2.onnx"), &out, 60, None);
    assert_eq!(summary.pattern, "in-stream");
    // The fused plan: the pre-process runs inside the first conv, DepthToSpace and the
    // post-process inside the last, and the two convs run as one chain dispatch (the first
    // one's output stays in shared memory); no conversion passes of their own.
    let chain = "Conv+Relu+Conv+DepthToSpace:conv1+conv2";
    for stage in ["upscale", chain] {
        assert!(
            summary.stages.contains_key(stage),
            "no {stage} in {:?}",
            summary.stages.keys()
        );
    }
    for stage in ["to_tensor", "from_tensor"] {
        assert!(!summary.stages.contains_key(stage), "{stage} was not fused");
    }
    let layers: Vec<&str> = summary.layers.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        layers,
        [chain],
        "summary.layers lists the dispatches in execution order"
    );
    let engine = summary.engine.as_ref().expect("summary.engine");
    // precision = "auto": fp16 where the device stores it (lavapipe does).
    let (fp16, coopmat) = {
        let (gpu, _) = Gpu::new(Validation::from_env(), &[], "", None).unwrap();
        (
            Precision::Fp16.unsupported_on(&gpu.info).is_none(),
            infer::plan::choose_coopmat(&gpu.info).is_ok(),
        )
    };
    assert_eq!(
        engine.precision,
        if fp16 {
            Precision::Fp16
        } else {
            Precision::Fp32
        }
    );
    assert_eq!(
        engine.conv_path, "packed",
        "lavapipe has no cooperative matrix"
    );
    assert_eq!((engine.dispatches, engine.fused_groups), (1, 1));
    // The overlay's line says why the convs are not on the matrix units.
    assert!(
        coopmat
            || summary.pattern_note.contains("packed conv")
                && summary.pattern_note.contains("cooperative_matrix"),
        "{}",
        summary.pattern_note
    );
    assert_eq!(summary.host_copy_bytes, 0, "no host step");
    assert_eq!(summary.bus_bytes, 0);
}

#[test]
fn live_switching_through_in_stream_is_validation_clean() {
    let out = common::out_dir("instream_switching");
    let summary = headless_run(&config("bilinear", "skip_x2.onnx"), &out, 14, Some(3));
    assert!(
        summary.patterns_used.contains(&"in-stream".to_string()),
        "{:?}",
        summary.patterns_used
    );
}

#[test]
fn probe_explains_why_in_stream_cannot_run() {
    let ml = upscale_demo::app::session::ml_settings(&config("in-stream", "tiny_x2.onnx")).unwrap();
    assert_eq!(
        upscale::probe(Pattern::InStream, &ml, (160, 90), (320, 180)),
        Ok(())
    );
    let why = upscale::probe(Pattern::InStream, &ml, (160, 90), (640, 360)).unwrap_err();
    assert!(
        why.contains("tiny_x2.onnx") && why.contains("[1, 3, 360, 640]"),
        "{why}"
    );
    let mut bad = ml.clone();
    bad.model = root().join("models/test/one_channel.onnx");
    let why = upscale::probe(Pattern::InStream, &bad, (160, 90), (320, 180)).unwrap_err();
    assert!(why.contains("one_channel.onnx"), "{why}");
}

#[test]
fn run_model_command_gives_the_same_tensor_on_both_engines() {
    let dir = common::out_dir("run_model");
    let input = dir.join("input.pb");
    let x = random(3 * 9 * 11, 5);
    let proto = tensor::to_proto("input", &[1, 3, 9, 11], &x);
    std::fs::write(
        &input,
        onnx_protobuf::Message::write_to_bytes(&proto).unwrap(),
    )
    .unwrap();
    let model = root().join("models/test/skip_x2.onnx");
    let mut results = Vec::new();
    for engine in ["in-stream", "ort"] {
        let output = dir.join(format!("{engine}.pb"));
        let status = std::process::Command::new(common::demo_exe())
            .args(["run-model", "--model"])
            .arg(&model)
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(&output)
            .args(["--engine", engine])
            .env(
                "ORT_DYLIB_PATH",
                model::locate_runtime_in(None, None, &[root()])
                    .unwrap()
                    .path,
            )
            .status()
            .unwrap();
        assert!(status.success(), "{engine} failed");
        let t = upscale_demo::app::run_model::read_tensor(&output).unwrap();
        assert_eq!(t.shape, vec![1, 3, 18, 22]);
        results.push(t.data);
    }
    let e = max_err(&results[0], &results[1]);
    println!("run-model in-stream vs ort: max abs error {e:.3e}");
    assert!(e <= MODEL_TOLERANCE, "{e}");
}
