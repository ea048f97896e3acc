//! Teardown is part of the result: a run that falls back at start-up (the configured pattern
//! cannot be built) must leave nothing behind when the device is destroyed.

mod common;

use std::path::Path;

use ash::vk;
use upscale_demo::app::config::Config;
use upscale_demo::app::headless::{self, HeadlessArgs};
use upscale_demo::gpu::{Destroy as _, Gpu, Image, ImageDesc, Validation};

fn small_image(gpu: &Gpu, name: &str) -> Image {
    let size = vk::Extent2D {
        width: 7,
        height: 5,
    };
    let desc = ImageDesc::new_2d(
        size,
        vk::Format::R8G8B8A8_UNORM,
        vk::ImageUsageFlags::SAMPLED,
    );
    Image::new(gpu, name, desc).unwrap()
}

/// The teardown figures are real: an image nobody destroyed is one leaked allocation (and, with
/// the layer, validation errors at vkDestroyDevice); a guard dropped early destroys its image,
/// a kept one hands it over.
#[test]
fn teardown_counts_what_was_not_destroyed_and_guards_release_theirs() {
    let (gpu, _) = Gpu::new(Validation::from_env(), &[], "", None).unwrap();
    drop(small_image(&gpu, "guarded, dropped").guard(&gpu));
    let kept = small_image(&gpu, "guarded, kept").guard(&gpu).keep();
    kept.destroy(&gpu);
    let _forgotten = small_image(&gpu, "never destroyed");
    let watch = gpu.teardown_watch();
    assert!(watch.report().is_none(), "no report while the device lives");
    drop(gpu);
    let t = watch.report().expect("a report once the Gpu is dropped");
    assert_eq!(t.leaked_allocations, 1, "only the unguarded image: {t:?}");
    if common::expect_validation() {
        assert!(
            t.validation_errors > 0,
            "vkDestroyDevice with a live image: {t:?}"
        );
    }
    assert!(t.problem().unwrap().contains("1 leaked GPU allocations"));
}

/// A model the in-stream engine refuses (an op it does not have) on the in-stream pattern: the
/// renderer for it fails after the scene's resources exist, and the session falls back to
/// bilinear. Before the constructors cleaned up after themselves this leaked 11 allocations
/// (scene targets and textures, world buffers, the upscaled output) and drew
/// VUID-vkDestroyDevice-device-00378.
#[test]
fn a_start_up_fallback_tears_down_clean_and_keeps_its_notice() {
    let out = common::out_dir("teardown_fallback");
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/test/custom_op_x2.onnx");
    let text = format!(
        "[render]\noutput_width = 128\noutput_height = 72\nscale = 2\n\
         [upscale]\npattern = \"in-stream\"\nmodel = \"{}\"\n",
        model.display()
    );
    let config = Config::parse(&text, Path::new("tests/teardown.toml")).unwrap();
    let args = HeadlessArgs {
        frames: 3,
        out: out.clone(),
        ..Default::default()
    };
    let summary = headless::run(&config, &args).unwrap();
    assert_eq!(summary.pattern, "bilinear", "fell back");
    assert_eq!(summary.output_size, [128, 72]);
    let notice = summary.notice.as_deref().expect("the fallback notice");
    assert!(notice.contains("in-stream is not available"), "{notice}");
    assert_eq!(summary.validation_enabled, common::expect_validation());
    common::assert_clean_teardown(&summary);
    assert_eq!(summary.validation_errors, 0, "through teardown");

    // summary.json is the one rewritten after teardown, notice kept.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(json["teardown"]["leaked_allocations"], 0, "{json}");
    assert_eq!(json["teardown"]["validation_errors"], 0, "{json}");
    assert_eq!(json["validation_errors"], 0);
    assert!(json["notice"].as_str().unwrap().contains("using bilinear"));
}
