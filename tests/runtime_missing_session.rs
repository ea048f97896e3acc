//! Without a loadable ONNX Runtime the game still starts: the ML patterns are greyed out with
//! the reason and bilinear runs. (Own test binary: the runtime is loaded once per process.)

mod common;

use ash::vk;
use upscale_demo::app::session::Session;
use upscale_demo::upscale::Pattern;

#[test]
fn missing_runtime_greys_out_ml_patterns_and_keeps_the_game_running() {
    let mut config = common::small_config();
    config.upscale.pattern = "cpu-roundtrip".into();
    config.onnxruntime.library = "/nonexistent/ort/libonnxruntime.so".into();
    let session = Session::new(
        &config,
        None,
        vk::Format::R8G8B8A8_UNORM,
        Pattern::CpuRoundtrip,
    )
    .unwrap();
    assert_eq!(session.renderer.pattern(), Pattern::Bilinear);
    let reason = session
        .patterns()
        .iter()
        .find(|p| p.0 == Pattern::CpuRoundtrip)
        .unwrap()
        .1
        .clone()
        .unwrap_err();
    assert!(
        reason.contains("/nonexistent/ort/libonnxruntime.so"),
        "{reason}"
    );
    assert!(reason.contains("ONNX Runtime"), "{reason}");
    assert!(session
        .notice
        .as_deref()
        .unwrap_or("")
        .contains("cpu-roundtrip"));
    assert_eq!(session.gpu.validation_errors(), 0);
}
