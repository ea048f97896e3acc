//! Model switches at run time (the overlay's picker, the M key): a model that cannot run is
//! refused with its reason in the notice while the previous model keeps running; a good one
//! takes over. On lavapipe with validation; tiny sizes (64x36 -> 128x72).

mod common;

use std::path::{Path, PathBuf};

use upscale_demo::app::config::Config;
use upscale_demo::app::headless::Runner;
use upscale_demo::infer::precision::PrecisionChoice;
use upscale_demo::render::compare::CompareSide;
use upscale_demo::upscale::Pattern;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn config(model: &str) -> Config {
    let text = "[render]\noutput_width = 128\noutput_height = 72\nscale = 2\n";
    let mut config = Config::parse(text, Path::new("tests/model_switch.toml")).unwrap();
    config.upscale.model = root().join(model);
    config
}

/// Renders `count` frames after `*n`, advancing it.
fn frames(r: &mut Runner, n: &mut u64, count: u64) {
    for _ in 0..count {
        r.frame(*n, false).unwrap();
        *n += 1;
    }
}

fn current_model(r: &Runner) -> PathBuf {
    let (list, i) = r.session.models();
    list[i].clone()
}

/// Writes the bad model files a user could pick: empty, truncated, random bytes.
fn bad_files(dir: &Path) -> [PathBuf; 3] {
    let empty = dir.join("empty.onnx");
    std::fs::write(&empty, []).unwrap();
    let quality = std::fs::read(root().join("models/quality_x2.onnx")).unwrap();
    let truncated = dir.join("truncated.onnx");
    std::fs::write(&truncated, &quality[..quality.len() / 2]).unwrap();
    let random = dir.join("random.onnx");
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let bytes: Vec<u8> = (0..3000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect();
    std::fs::write(&random, bytes).unwrap();
    [empty, truncated, random]
}

/// Every kind of bad model, picked while cpu-roundtrip runs tiny_x2: each is refused with its
/// own reason (from ONNX Runtime's loader and the in-stream planner), the game keeps rendering
/// on tiny_x2, and a good model afterwards is taken.
#[test]
fn bad_models_are_refused_with_their_reason_and_the_previous_model_keeps_running() {
    let dir = common::out_dir("model_switch_bad");
    let [empty, truncated, random] = bad_files(&dir);
    let fixture = |name: &str| root().join("models/test").join(name);
    let cases: Vec<(PathBuf, Vec<&str>)> = vec![
        (
            dir.join("missing.onnx"),
            vec!["no pattern can run it", "does not exist", "cannot read it"],
        ),
        (
            empty,
            vec!["ONNX Runtime cannot load it", "in-stream: model", "no graph"],
        ),
        (
            truncated,
            vec!["ONNX Runtime cannot load it", "not a valid ONNX protobuf"],
        ),
        (
            random,
            vec!["ONNX Runtime cannot load it", "not a valid ONNX protobuf"],
        ),
        (
            fixture("custom_op_x2.onnx"),
            vec![
                "com.example:Sharpen(-1) is not a registered function/op",
                "made of standard ONNX operators",
                "\"sharpen\" has op type com.example::Sharpen, which the in-stream engine does not support",
            ],
        ),
        (
            fixture("dynamic_channels.onnx"),
            vec!["cpu-roundtrip cannot run it", "has a dynamic channel dimension"],
        ),
        (
            fixture("one_channel.onnx"),
            vec!["has 1 channel(s)", "dimension 1 fixed to 1"],
        ),
        (
            fixture("espcn_x2_160x90.onnx"),
            vec![
                "fixed size of 160x90 but the render size is 64x36",
                "dimension 2 fixed to 90",
            ],
        ),
    ];
    let mut r = Runner::new(&config("models/test/tiny_x2.onnx"), Pattern::CpuRoundtrip).unwrap();
    assert_eq!(r.session.renderer.pattern(), Pattern::CpuRoundtrip);
    let tiny = current_model(&r);
    let mut n = 0;
    frames(&mut r, &mut n, 3);
    for (model, expected) in &cases {
        let why = r.session.switch_model(model).unwrap_err();
        let name = model.file_name().unwrap().to_str().unwrap();
        assert!(why.contains(name), "names the picked file: {why}");
        for part in expected {
            assert!(why.contains(part), "{name}: {part:?} missing from: {why}");
        }
        assert!(
            why.ends_with("; still running models/test/tiny_x2.onnx"),
            "{why}"
        );
        assert!(
            why.matches("(os error").count() <= 1,
            "an OS error is said once: {why}"
        );
        assert_eq!(r.session.notice.as_deref(), Some(why.as_str()));
        assert_eq!(r.session.renderer.pattern(), Pattern::CpuRoundtrip);
        assert_eq!(current_model(&r), tiny);
        frames(&mut r, &mut n, 2);
    }
    assert_eq!(r.session.switches.models_refused, cases.len() as u64);

    r.session
        .switch_model(&root().join("models/fast_x2.onnx"))
        .unwrap();
    assert_eq!(r.session.notice, None);
    assert_eq!(r.session.model_label(), "models/fast_x2.onnx");
    assert!(r.session.patterns().iter().all(|p| p.1.is_ok()));
    frames(&mut r, &mut n, 2);
    r.session.switch(Pattern::InStream);
    assert_eq!(r.session.renderer.pattern(), Pattern::InStream);
    frames(&mut r, &mut n, 2);
    assert_eq!(r.session.switches.models, 1);
    assert_eq!(r.session.gpu.validation_errors(), 0);
}

/// A model ONNX Runtime runs but the in-stream engine cannot (Softplus): refused while
/// in-stream runs; taken on cpu-roundtrip, where in-stream is then greyed with the reason and
/// the P key's order skips it.
#[test]
fn a_model_only_onnx_runtime_can_run_greys_out_in_stream() {
    let softplus = root().join("models/test/softplus_x2.onnx");
    let mut r = Runner::new(&config("models/test/tiny_x2.onnx"), Pattern::InStream).unwrap();
    assert_eq!(r.session.renderer.pattern(), Pattern::InStream);
    let mut n = 0;
    frames(&mut r, &mut n, 2);
    let why = r.session.switch_model(&softplus).unwrap_err();
    assert!(
        why.starts_with("models/test/softplus_x2.onnx: in-stream cannot run it: model ")
            && why.contains(
                "node \"relu1\" has op type Softplus, which the in-stream engine does not support"
            ),
        "{why}"
    );
    assert!(
        r.session.next_model().ends_with("models/test/tiny_x2.onnx"),
        "M walks on past the refused model, not back to it: {}",
        r.session.next_model().display()
    );
    frames(&mut r, &mut n, 2);

    r.session.switch(Pattern::CpuRoundtrip);
    r.session.switch_model(&softplus).unwrap();
    assert_eq!(r.session.renderer.pattern(), Pattern::CpuRoundtrip);
    let in_stream = &r.session.patterns()[3];
    assert_eq!(in_stream.0, Pattern::InStream);
    assert!(
        in_stream.1.as_ref().unwrap_err().contains("Softplus"),
        "{:?}",
        in_stream.1
    );
    frames(&mut r, &mut n, 2);
    r.session.switch(Pattern::SharedMemory);
    assert_eq!(r.session.next_pattern(), Pattern::Taau, "in-stream skipped");
    frames(&mut r, &mut n, 2);
    assert_eq!(r.session.gpu.validation_errors(), 0);
}

/// Render size x model scale != output size, found at run time: a x2 model cannot fill a
/// 128x72 output from a 32x18 render, on any pattern.
#[test]
fn a_model_whose_scale_does_not_fit_the_sizes_is_refused() {
    let mut config = config("models/quality_x2.onnx");
    config.render.render_width = Some(32);
    config.render.render_height = Some(18);
    let mut r = Runner::new(&config, Pattern::Bilinear).unwrap();
    let mut n = 0;
    frames(&mut r, &mut n, 2);
    let why = r
        .session
        .switch_model(&root().join("models/test/tiny_x2.onnx"))
        .unwrap_err();
    for part in [
        "models/test/tiny_x2.onnx: no pattern can run it",
        "upscales x2, so render size 32x18 gives 64x36, but the output size is 128x72",
        "for render size 32x18 the model outputs [1, 3, 36, 64], the output image needs [1, 3, 72, 128]",
        "still running models/quality_x2.onnx",
    ] {
        assert!(why.contains(part), "{part:?} missing from: {why}");
    }
    frames(&mut r, &mut n, 2);
    assert_eq!(r.session.renderer.pattern(), Pattern::Bilinear);
    assert_eq!(r.session.gpu.validation_errors(), 0);
}

/// Renders two frames and says which of them told the upscalers to start their history over.
fn resets(r: &mut Runner, n: &mut u64) -> [bool; 2] {
    [0, 1].map(|_| {
        r.frame(*n, false).unwrap();
        *n += 1;
        r.session.renderer.last_frame_reset()
    })
}

/// `FrameInputs::reset` is set on the first frame after each change that invalidates an
/// upscaler's history (a new renderer, a pattern, model or precision switch, the compare view
/// toggled, a restart) and on no other frame; a switch to the pattern already running changes
/// nothing and resets nothing.
#[test]
fn history_resets_on_the_first_frame_after_each_change_only() {
    let tiny = root().join("models/test/tiny_x2.onnx");
    let mut r = Runner::new(&config("models/test/tiny_x2.onnx"), Pattern::Bilinear).unwrap();
    let mut n = 0;
    assert_eq!(resets(&mut r, &mut n), [true, false], "first frames");
    r.session.switch(Pattern::Bilinear);
    assert_eq!(resets(&mut r, &mut n), [false, false], "no switch");
    r.session.switch(Pattern::InStream);
    assert_eq!(r.session.renderer.pattern(), Pattern::InStream);
    assert_eq!(resets(&mut r, &mut n), [true, false], "pattern switch");
    r.session.switch_model(&tiny).unwrap();
    assert_eq!(resets(&mut r, &mut n), [true, false], "model switch");
    r.session.switch_precision(PrecisionChoice::Fp32).unwrap();
    assert_eq!(resets(&mut r, &mut n), [true, false], "precision switch");
    r.session.set_compare(Some(CompareSide::Native));
    assert!(r.session.renderer.compare_side().is_some());
    assert_eq!(resets(&mut r, &mut n), [true, false], "compare view on");
    r.session.set_compare(None);
    assert_eq!(resets(&mut r, &mut n), [true, false], "compare view off");
    r.session.restart();
    assert_eq!(resets(&mut r, &mut n), [true, false], "restart");
    assert_eq!(r.session.gpu.validation_errors(), 0);
}
