//! The `taau` pattern on lavapipe with validation (synchronization validation on): its history
//! is dropped on every reset cause, so the first frame after a reset is a fresh start's first
//! frame, bit for bit, and so is the frame after it; on a still camera it converges toward the
//! native frame and passes the spatial model; switching it with a spatial pattern for 2,000
//! frames raises no validation error.

mod common;

use std::path::{Path, PathBuf};

use common::{capture, max_channel_diff as max_diff};
use glam::Vec2;
use upscale_demo::app::config::Config;
use upscale_demo::app::frames::FrameSource;
use upscale_demo::app::headless::Runner;
use upscale_demo::game::camera;
use upscale_demo::metrics;
use upscale_demo::render::compare::CompareSide;
use upscale_demo::upscale::Pattern;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// 160x90 -> 320x180, the default (auto) jitter: on while taau runs.
fn config() -> Config {
    let text = "[render]\noutput_width = 320\noutput_height = 180\nscale = 2\n";
    let mut config = Config::parse(text, Path::new("tests/taau.toml")).unwrap();
    config.upscale.model = root().join("models/quality_x2.onnx");
    config
}

/// Frames `n` and `n + 1` of a fresh taau run started at frame `n`.
fn fresh_start(n: u64) -> [image::RgbaImage; 2] {
    let mut r = Runner::new(&config(), Pattern::Taau).unwrap();
    let out = [capture(&mut r, n), capture(&mut r, n + 1)];
    assert_eq!(r.session.gpu.validation_errors(), 0, "see the log");
    out
}

/// After each cause of a reset, taau's next two frames are exactly (tolerance 0) those of a
/// fresh taau run started at the same frame: nothing of the earlier history survives, and the
/// jitter sequence starts over with it. Without a reset the history is used: a continuing run
/// differs from a fresh start.
#[test]
fn the_first_frames_after_every_reset_equal_a_fresh_starts() {
    let mut r = Runner::new(&config(), Pattern::Taau).unwrap();
    assert_eq!(r.session.renderer.pattern(), Pattern::Taau);
    for n in 0..6 {
        r.frame(n, false).unwrap();
    }
    let continuing = capture(&mut r, 6);
    assert!(!r.session.renderer.last_frame_reset());
    assert_ne!(
        max_diff(&continuing, &fresh_start(6)[0]),
        0,
        "the history changes nothing"
    );
    // Each cause renders what it needs at frame `n` onwards (consecutive frames: no cut) and
    // returns the frame to capture next.
    type Cause = Box<dyn Fn(&mut Runner, u64) -> u64>;
    let causes: Vec<(&str, Cause)> = vec![
        (
            "restart",
            Box::new(|r, n| {
                r.session.restart();
                n
            }),
        ),
        (
            "pattern switch",
            Box::new(|r, n| {
                r.session.switch(Pattern::Bilinear);
                r.frame(n, false).unwrap();
                r.session.switch(Pattern::Taau);
                n + 1
            }),
        ),
        (
            "model switch",
            Box::new(|r, n| {
                let fast = root().join("models/fast_x2.onnx");
                r.session.switch_model(&fast).unwrap();
                n
            }),
        ),
        (
            "compare view toggled",
            Box::new(|r, n| {
                r.session.set_compare(Some(CompareSide::Native));
                assert!(r.session.renderer.compare_side().is_some());
                r.frame(n, false).unwrap();
                assert!(r.session.renderer.last_frame_reset());
                r.frame(n + 1, false).unwrap();
                r.session.set_compare(None);
                n + 2
            }),
        ),
        (
            "window resize",
            Box::new(|r, n| {
                let extent = ash::vk::Extent2D {
                    width: 800,
                    height: 500,
                };
                r.session.recreate_swapchain(extent).unwrap();
                n
            }),
        ),
        // The scripted path jumps ahead 40 frames: the renderer notices the cut itself.
        ("camera cut", Box::new(|_, n| n + 40)),
    ];
    let mut n = 7;
    for (name, cause) in causes {
        for _ in 0..3 {
            r.frame(n, false).unwrap();
            n += 1;
        }
        let at = cause(&mut r, n);
        let first = capture(&mut r, at);
        assert!(r.session.renderer.last_frame_reset(), "{name}: no reset");
        let second = capture(&mut r, at + 1);
        assert!(!r.session.renderer.last_frame_reset(), "{name}");
        let fresh = fresh_start(at);
        assert_eq!(max_diff(&first, &fresh[0]), 0, "{name}: first frame");
        assert_eq!(max_diff(&second, &fresh[1]), 0, "{name}: second frame");
        n = at + 2;
    }
    assert_eq!(r.session.gpu.validation_errors(), 0, "see the log");
}

/// A still camera (scripted frame 30, the clock held): taau's PSNR-Y against the native render
/// (the same pass at output size, no jitter) rises over the first 16 frames as the jittered
/// samples accumulate, and ends above the spatial model (quality_x2 through in-stream).
#[test]
fn a_still_camera_converges_toward_native_and_passes_the_spatial_model() {
    const FRAME: u64 = 30;
    let config = config();
    let native = {
        let mut source = FrameSource::new(&config, 1).unwrap();
        let (cam, time) = camera::scripted(FRAME);
        let native = source.render_view(cam, time).unwrap().finish().hr;
        assert_eq!(source.gpu.validation_errors(), 0);
        native
    };
    let mut r = Runner::new(&config, Pattern::Taau).unwrap();
    let psnr: Vec<f64> = (0..16)
        .map(|_| metrics::psnr_y(&capture(&mut r, FRAME), &native))
        .collect();
    assert_eq!(r.session.gpu.validation_errors(), 0, "see the log");
    drop(r);
    let spatial = {
        let mut r = Runner::new(&config, Pattern::InStream).unwrap();
        assert_eq!(r.session.renderer.pattern(), Pattern::InStream);
        let out = capture(&mut r, FRAME);
        assert_eq!(r.session.gpu.validation_errors(), 0, "see the log");
        metrics::psnr_y(&out, &native)
    };
    let bilinear = {
        let mut r = Runner::new(&config, Pattern::Bilinear).unwrap();
        metrics::psnr_y(&capture(&mut r, FRAME), &native)
    };
    let list: Vec<String> = psnr.iter().map(|p| format!("{p:.2}")).collect();
    println!(
        "taau PSNR-Y per frame: {}; in-stream quality_x2 {spatial:.2}, bilinear {bilinear:.2}",
        list.join(" ")
    );
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    assert!(
        mean(&psnr[12..]) > mean(&psnr[..4]) + 1.0 && psnr[15] > psnr[0] + 1.0,
        "no convergence: {list:?}"
    );
    assert!(
        psnr[15] > spatial,
        "frame 16 {:.2} dB is not above the spatial model's {spatial:.2} dB",
        psnr[15]
    );
}

/// 2,000 frames at 64x36 -> 128x72 switching between taau and bilinear every 30 frames: each
/// switch resets the history, the frames are jittered exactly while taau runs, and validation
/// (with synchronization validation) reports nothing.
#[test]
fn two_thousand_frames_switching_taau_and_a_spatial_pattern() {
    let text = "[render]\noutput_width = 128\noutput_height = 72\nscale = 2\n";
    let config = Config::parse(text, Path::new("tests/taau_switch.toml")).unwrap();
    let mut r = Runner::new(&config, Pattern::Taau).unwrap();
    let started = std::time::Instant::now();
    for n in 0..2000u64 {
        let switch = n > 0 && n % 30 == 0;
        if switch {
            let next = match r.session.renderer.pattern() {
                Pattern::Taau => Pattern::Bilinear,
                _ => Pattern::Taau,
            };
            r.session.switch(next);
            assert_eq!(r.session.renderer.pattern(), next, "frame {n}");
        }
        r.frame(n, false).unwrap();
        assert_eq!(r.session.renderer.last_frame_reset(), switch || n == 0);
        // render.jitter = auto: jittered exactly while taau runs.
        let jittered = r.session.renderer.scene_targets().jitter() != Vec2::ZERO;
        assert_eq!(
            jittered,
            r.session.renderer.pattern() == Pattern::Taau,
            "{n}"
        );
    }
    println!("2000 frames in {:.1} s", started.elapsed().as_secs_f64());
    assert_eq!(r.session.switches.patterns, 66);
    assert_eq!(r.session.gpu.validation_errors(), 0, "see the log");
    if common::expect_validation() {
        assert!(r.session.gpu.instance.validation_enabled);
    }
}
