//! A wrong runtime path must give an error, not a panic, and stay the process's outcome.
//!
//! Runtime initialisation happens once per process, so this lives in its own test
//! binary (each file in tests/ is a separate process); it must contain only this test.

use std::path::Path;

use upscale_demo::upscale::model::{init_runtime, ExecutionProvider, ModelError, OrtModel};

#[test]
fn wrong_runtime_path_is_an_error_and_sticks() {
    let wrong = Path::new("/nonexistent/onnxruntime/libonnxruntime.so");
    let err = init_runtime(wrong).unwrap_err();
    assert!(matches!(err, ModelError::RuntimeMissing { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("/nonexistent/onnxruntime/libonnxruntime.so"),
        "{err}"
    );

    let good =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".deps/onnxruntime/libonnxruntime.so.1.30.0");
    assert_eq!(
        init_runtime(&good).unwrap_err(),
        err,
        "first outcome is kept"
    );

    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/test/tiny_x2.onnx");
    assert_eq!(
        OrtModel::load(&model, ExecutionProvider::Cpu, None).unwrap_err(),
        err
    );
}
