//! An ONNX Runtime older than this build supports must be refused with both versions named,
//! and the ML patterns must then say so instead of running. The "old runtime" is a stub library
//! (compiled here with `cc`) whose `OrtGetApiBase` reports 1.16.3 and offers no API table, which
//! is how a real 1.16 answers a request for API 30. Own test binary: the runtime loads once.

use std::path::PathBuf;
use std::process::Command;

use upscale_demo::upscale::model::{init_runtime, ExecutionProvider, ModelError};
use upscale_demo::upscale::{self, MlSettings, Pattern};

const STUB: &str = r#"
#include <stddef.h>
typedef struct {
    const void *(*GetApi)(unsigned version);
    const char *(*GetVersionString)(void);
} OrtApiBase;
static const void *get_api(unsigned version) { (void)version; return NULL; }
static const char *version_string(void) { return "1.16.3"; }
static const OrtApiBase base = { get_api, version_string };
const OrtApiBase *OrtGetApiBase(void) { return &base; }
"#;

fn build_stub() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ort_too_old");
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("stub.c");
    std::fs::write(&source, STUB).unwrap();
    let lib = dir.join("libonnxruntime.so.1.16.3");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&source)
        .status()
        .expect("cannot run `cc` (the C compiler Rust links with) to build the stub runtime");
    assert!(status.success(), "building the stub runtime failed");
    lib
}

#[test]
fn a_too_old_runtime_is_refused_with_both_versions() {
    let lib = build_stub();
    let err = init_runtime(&lib).unwrap_err();
    assert!(matches!(err, ModelError::RuntimeLoad { .. }), "{err:?}");
    let msg = err.to_string();
    let head = format!("cannot load ONNX Runtime from {}: ", lib.display());
    assert!(msg.starts_with(&head), "{msg}");
    for part in [
        "got '1.16.3'",
        "expected version >= '1.30.x'",
        "this build needs ONNX Runtime 1.30 or newer",
    ] {
        assert!(msg.contains(part), "{part:?} missing from: {msg}");
    }

    let ml = MlSettings {
        model: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/test/tiny_x2.onnx"),
        library: Some(lib),
        provider: ExecutionProvider::Cpu,
        intra_threads: Some(1),
        shared_domain: Default::default(),
        precision: Default::default(),
    };
    let why = upscale::probe(Pattern::CpuRoundtrip, &ml, (64, 36), (128, 72)).unwrap_err();
    assert_eq!(why, msg, "the pattern is greyed with the same reason");
    assert_eq!(
        upscale::probe(Pattern::InStream, &ml, (64, 36), (128, 72)),
        Ok(()),
        "the in-stream engine needs no ONNX Runtime"
    );
}
