//! A file that exists but is not ONNX Runtime must give `RuntimeLoad`, not a panic.
//! Own test binary because runtime initialisation is once per process.

use upscale_demo::upscale::model::{init_runtime, ModelError};

#[test]
fn non_library_file_is_a_load_error() {
    let dir = std::env::temp_dir().join(format!("upscale-rt-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fake = dir.join("libonnxruntime.so");
    std::fs::write(&fake, b"not an ELF file").unwrap();

    let err = init_runtime(&fake).unwrap_err();
    assert!(matches!(err, ModelError::RuntimeLoad { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(&fake.display().to_string()), "{msg}");
    let _ = std::fs::remove_dir_all(&dir);
}
