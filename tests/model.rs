//! Model loading and inference against the real ONNX Runtime library.
//!
//! The runtime is found the way the app finds it (`locate_runtime`), which in this
//! crate resolves `<crate>/.deps/onnxruntime/libonnxruntime.so.<version>`.

use std::path::{Path, PathBuf};

use anyhow::Result;
use upscale_demo::upscale::model::{
    ExecutionProvider, ModelError, OrtModel, RuntimeInfo, ScaleSource,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models/test")
        .join(name)
}

fn runtime() -> RuntimeInfo {
    let deps_root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let loc = upscale_demo::upscale::model::locate_runtime_in(
        None,
        std::env::var_os("ORT_DYLIB_PATH"),
        &[deps_root],
    )
    .expect("ONNX Runtime not found; put libonnxruntime.so.1.30.0 into .deps/onnxruntime/");
    upscale_demo::upscale::model::init_runtime(&loc.path).expect("ONNX Runtime failed to load")
}

fn read_f32(path: &Path) -> Vec<f32> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

fn load(name: &str) -> Result<(OrtModel, upscale_demo::upscale::model::ModelInfo), ModelError> {
    runtime();
    OrtModel::load(&fixture(name), ExecutionProvider::Cpu, Some(1))
}

#[test]
fn runtime_reports_version_and_providers() {
    let info = runtime();
    assert!(info.version.starts_with("1.30"), "{info:?}");
    assert!(
        info.providers.iter().any(|p| p == "CPUExecutionProvider"),
        "{info:?}"
    );
    assert_eq!(runtime(), info, "second init returns the first outcome");
}

#[test]
fn tiny_x2_scale_from_metadata() -> Result<()> {
    let (_, info) = load("tiny_x2.onnx")?;
    assert_eq!(info.scale, 2);
    assert_eq!(info.scale_source, ScaleSource::Metadata);
    assert_eq!(
        (info.input_name.as_str(), info.output_name.as_str()),
        ("input", "output")
    );
    assert_eq!(info.channels, 3);
    assert_eq!((info.input_height, info.input_width), (None, None));
    Ok(())
}

#[test]
fn no_scale_meta_scale_from_probe() -> Result<()> {
    let (_, info) = load("no_scale_meta.onnx")?;
    assert_eq!(info.scale, 2);
    assert_eq!(info.scale_source, ScaleSource::ShapeProbe);
    Ok(())
}

#[test]
fn run_matches_python_reference_in_place() -> Result<()> {
    let (mut model, _) = load("tiny_x2.onnx")?;
    let mut input = read_f32(&fixture("tiny_x2.in.f32"));
    let expected = read_f32(&fixture("tiny_x2.out.f32"));
    assert_eq!((input.len(), expected.len()), (3 * 7 * 5, 3 * 14 * 10));

    let mut output = vec![f32::NAN; expected.len()];
    let out_ptr = output.as_ptr();
    for _ in 0..3 {
        output.fill(f32::NAN);
        model.run(&mut input, [1, 3, 7, 5], &mut output, [1, 3, 14, 10])?;
        assert_eq!(output.as_ptr(), out_ptr);
        let max_err = output
            .iter()
            .zip(&expected)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(max_err <= 1e-5, "max abs error {max_err}");
    }

    // A different output buffer (and then a different size) must rebind, not reuse.
    let mut other = vec![0.0f32; expected.len()];
    model.run(&mut input, [1, 3, 7, 5], &mut other, [1, 3, 14, 10])?;
    assert_eq!(other, output);
    let mut small_in = vec![0.5f32; 3 * 4 * 6];
    let mut small_out = vec![f32::NAN; 3 * 8 * 12];
    model.run(&mut small_in, [1, 3, 4, 6], &mut small_out, [1, 3, 8, 12])?;
    assert!(small_out.iter().all(|v| v.is_finite()));
    Ok(())
}

#[test]
fn run_rejects_wrong_shapes() -> Result<()> {
    let (mut model, _) = load("tiny_x2.onnx")?;
    let mut input = vec![0.0f32; 3 * 7 * 5];
    let mut output = vec![0.0f32; 3 * 14 * 10];
    let err = model
        .run(&mut input, [1, 3, 7, 5], &mut output, [1, 3, 7, 5])
        .unwrap_err();
    assert!(matches!(err, ModelError::Run(_)), "{err:?}");
    assert!(
        err.to_string().contains("tiny_x2.onnx") && err.to_string().contains("[1, 3, 14, 10]"),
        "{err}"
    );
    let err = model
        .run(&mut input[..10], [1, 3, 7, 5], &mut output, [1, 3, 14, 10])
        .unwrap_err();
    assert!(
        err.to_string().contains("input buffer has 10 floats"),
        "{err}"
    );
    Ok(())
}

#[test]
fn missing_file_is_not_found() {
    let path = fixture("does_not_exist.onnx");
    let err = OrtModel::load(&path, ExecutionProvider::Cpu, None).unwrap_err();
    assert_eq!(err, ModelError::NotFound(path.clone()));
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[test]
fn random_bytes_are_invalid() {
    runtime();
    let dir = std::env::temp_dir().join(format!("upscale-model-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("garbage.onnx");
    // Fixed xorshift bytes: reproducible and not a protobuf ONNX model.
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let bytes: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&path, bytes).unwrap();
    let err = OrtModel::load(&path, ExecutionProvider::Cpu, None).unwrap_err();
    assert!(matches!(err, ModelError::Invalid { .. }), "{err:?}");
    assert!(err.to_string().contains("garbage.onnx"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn empty_and_truncated_models_are_invalid_with_the_file_named() {
    runtime();
    let dir = std::env::temp_dir().join(format!("upscale-model-cut-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tiny = std::fs::read(fixture("tiny_x2.onnx")).unwrap();
    for (name, bytes) in [
        ("empty.onnx", &[][..]),
        ("half.onnx", &tiny[..tiny.len() / 2]),
        ("one_byte_short.onnx", &tiny[..tiny.len() - 1]),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let err = OrtModel::load(&path, ExecutionProvider::Cpu, None).unwrap_err();
        assert!(matches!(err, ModelError::Invalid { .. }), "{name}: {err:?}");
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "model {}: ONNX Runtime cannot load it: ",
                path.display()
            )),
            "{msg}"
        );
        assert!(
            msg.ends_with(
                "check that the file is a complete .onnx model made of standard ONNX operators"
            ),
            "{msg}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_operator_onnx_runtime_does_not_know_is_named() {
    let err = load("custom_op_x2.onnx").unwrap_err();
    assert!(matches!(err, ModelError::Invalid { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("com.example:Sharpen(-1) is not a registered function/op"),
        "{err}"
    );
}

#[test]
fn dynamic_channels_are_not_an_image_model() {
    let err = load("dynamic_channels.onnx").unwrap_err();
    assert!(matches!(err, ModelError::NotImage { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("dynamic_channels.onnx: input 'input' has a dynamic channel dimension; the upscaler needs NCHW float32 with 3 channels"),
        "{err}"
    );
}

#[test]
fn one_channel_model_is_not_an_image_model() {
    let err = load("one_channel.onnx").unwrap_err();
    assert!(matches!(err, ModelError::NotImage { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("one_channel.onnx"), "{msg}");
    assert!(
        msg.contains("input 'input' has 1 channel(s); the upscaler needs NCHW float32 with 3 channels in and out"),
        "{msg}"
    );
}

#[test]
fn size_mismatch_names_sizes_and_config_keys() -> Result<()> {
    let (_, info) = load("tiny_x2.onnx")?;
    OrtModel::check_sizes(&info, (640, 360), (1280, 720))?;
    let err = OrtModel::check_sizes(&info, (320, 180), (1280, 720)).unwrap_err();
    assert!(
        matches!(err, ModelError::SizeMismatch { scale: 2, .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    for needle in [
        "320x180",
        "1280x720",
        "640x360",
        "x2",
        "render.output_width",
        "render.scale",
        "tiny_x2.onnx",
    ] {
        assert!(msg.contains(needle), "missing {needle:?} in: {msg}");
    }
    Ok(())
}

#[test]
fn cuda_is_unavailable_on_cpu_runtime() {
    let rt = runtime();
    if rt.providers.iter().any(|p| p == "CUDAExecutionProvider") {
        eprintln!("skipped: this ONNX Runtime build has CUDA");
        return;
    }
    let err = OrtModel::load(&fixture("tiny_x2.onnx"), ExecutionProvider::Cuda, None).unwrap_err();
    let ModelError::ProviderUnavailable {
        ref provider,
        ref available,
        ..
    } = err
    else {
        panic!("expected ProviderUnavailable, got {err:?}");
    };
    assert_eq!(provider, "CUDAExecutionProvider");
    assert_eq!(available, &rt.providers);
    let msg = err.to_string();
    assert!(
        msg.contains("CUDAExecutionProvider") && msg.contains("CPUExecutionProvider"),
        "{msg}"
    );
}

#[test]
fn provider_names_parse() {
    assert_eq!(
        "cpu".parse::<ExecutionProvider>(),
        Ok(ExecutionProvider::Cpu)
    );
    assert_eq!(
        " CUDA ".parse::<ExecutionProvider>(),
        Ok(ExecutionProvider::Cuda)
    );
    let err = "vulkan".parse::<ExecutionProvider>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown execution provider \"vulkan\"; allowed values: cpu, cuda"
    );
}

#[test]
#[ignore = "prints every error message for review: cargo test -- --ignored --nocapture"]
fn print_messages() {
    runtime();
    for name in ["does_not_exist.onnx", "one_channel.onnx"] {
        println!(
            "{}\n",
            OrtModel::load(&fixture(name), ExecutionProvider::Cpu, None).unwrap_err()
        );
    }
    println!(
        "{}\n",
        OrtModel::load(&fixture("tiny_x2.onnx"), ExecutionProvider::Cuda, None).unwrap_err()
    );
    println!(
        "{}\n",
        OrtModel::load(&fixture("tiny_x2.in.f32"), ExecutionProvider::Cpu, None).unwrap_err()
    );
    let (_, info) = load("tiny_x2.onnx").unwrap();
    println!(
        "{}\n",
        OrtModel::check_sizes(&info, (320, 180), (1280, 720)).unwrap_err()
    );
}

#[test]
fn model_can_move_to_a_worker_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<OrtModel>();
    assert_send::<ModelError>();
}
