//! GPU tests of `upscale-demo dataset` and the offscreen frame source on lavapipe, with the
//! validation layer (synchronization validation on): the low-resolution image is exactly the
//! game's frame, the output is deterministic, and the held-out views stay apart from training.

mod common;

use std::path::Path;

use upscale_demo::app::dataset::{self, DatasetArgs};
use upscale_demo::app::frames::FrameSource;
use upscale_demo::app::headless::{self, HeadlessArgs};
use upscale_demo::game::camera;
use upscale_demo::game::poses::MARGIN;
use upscale_demo::upscale::Pattern;

fn rgb(path: &Path) -> image::RgbImage {
    image::open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .to_rgb8()
}

/// The frame source's low-resolution image of scripted frame 11 equals, pixel for pixel, the
/// image the game's frame loop handed its upscaler for that frame (headless `input.png`).
#[test]
fn low_res_frame_is_exactly_the_games_frame() {
    let out = common::out_dir("dataset_vs_headless");
    let config = common::small_config();
    let args = HeadlessArgs {
        frames: 12,
        out: out.clone(),
        pattern: Some(Pattern::Bilinear),
        switch_every: None,
        ..Default::default()
    };
    headless::run(&config, &args).unwrap();
    let game = rgb(&out.join("input.png"));

    let mut source = FrameSource::new(&config, 2).unwrap();
    let (cam, time) = camera::scripted(11);
    let pair = source.render_view(cam, time).unwrap().finish();
    assert_eq!(
        source.gpu.validation_errors(),
        0,
        "validation errors: see the log"
    );
    let lr = image::DynamicImage::ImageRgba8(pair.lr).to_rgb8();
    assert_eq!(lr.dimensions(), (160, 90));
    assert_eq!(pair.hr.dimensions(), (320, 180));
    assert!(
        lr == game,
        "offscreen low-res frame differs from headless input.png"
    );
    // The reference is the same view: close to an upscale of the low-res frame, not identical.
    let up = image::imageops::resize(&lr, 320, 180, image::imageops::FilterType::Triangle);
    let hr = image::DynamicImage::ImageRgba8(pair.hr).to_rgb8();
    let (mean, _) = common::image_diff(&up, &hr, 24);
    assert!(
        mean > 0.0 && mean < 20.0,
        "reference vs bilinear: mean diff {mean}"
    );
}

#[test]
fn dataset_is_complete_deterministic_and_split() {
    let config = common::small_config();
    let make = |name: &str| {
        let out = common::out_dir(name);
        let args = DatasetArgs {
            out: out.clone(),
            count: 6,
            seed: 5,
            supersample: 2,
        };
        let s = dataset::run(&config, &args).unwrap();
        assert_eq!(s.validation_errors, 0, "validation errors: see the log");
        assert_eq!((s.train.len(), s.val.len()), (6, 4));
        out
    };
    let a = make("dataset_a");
    let b = make("dataset_b");
    for (split, n) in [("train", 6), ("val", 4)] {
        for k in 0..n {
            for (suffix, size) in [("lr", (160, 90)), ("hr", (320, 180))] {
                let name = format!("{split}/{k:05}_{suffix}.png");
                let img = rgb(&a.join(&name));
                assert_eq!(img.dimensions(), size, "{name}");
                assert!(common::luma_std(&img) > 5.0, "{name} looks blank");
                assert!(
                    img == rgb(&b.join(&name)),
                    "{name} differs between two runs"
                );
            }
        }
    }
    assert!(!a.join("train/00006_lr.png").exists() && !a.join("val/00004_lr.png").exists());

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(a.join("dataset.json")).unwrap()).unwrap();
    let ground = |p: &serde_json::Value| {
        let v = p["pos"].as_array().unwrap();
        (v[0].as_f64().unwrap(), v[2].as_f64().unwrap())
    };
    for v in json["val"].as_array().unwrap() {
        for t in json["train"].as_array().unwrap() {
            let ((vx, vz), (tx, tz)) = (ground(v), ground(t));
            let d = ((vx - tx).powi(2) + (vz - tz).powi(2)).sqrt();
            assert!(d > MARGIN as f64, "a val view is {d} m from a train view");
        }
    }
}
