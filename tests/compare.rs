//! The compare view: the split picture is exactly the two sources on either side of the
//! divider, the live GPU PSNR equals the CPU's PSNR of the same two images, and a second
//! upscaler on the right side agrees with the current pattern running the same model, and the
//! error heatmap is black where the output equals the native frame and bright where it does
//! not.

mod common;

use upscale_demo::app::headless::{self, HeadlessArgs};
use upscale_demo::app::quality::metrics;
use upscale_demo::app::summary::Summary;
use upscale_demo::render::compare::CompareSide;
use upscale_demo::upscale::Pattern;

fn run(
    name: &str,
    pattern: Pattern,
    side: CompareSide,
    divider: f32,
) -> (Summary, image::RgbaImage) {
    run_with(name, pattern, side, divider, false)
}

fn run_with(
    name: &str,
    pattern: Pattern,
    side: CompareSide,
    divider: f32,
    heatmap: bool,
) -> (Summary, image::RgbaImage) {
    let mut config = common::small_config();
    config.upscale.model = "models/test/tiny_x2.onnx".into();
    let out = common::out_dir(name);
    let args = HeadlessArgs {
        frames: 3,
        out: out.clone(),
        pattern: Some(pattern),
        compare: Some(side),
        divider: Some(divider),
        heatmap,
        ..Default::default()
    };
    let summary = headless::run(&config, &args).unwrap();
    common::assert_clean_teardown(&summary);
    assert_eq!(summary.pattern, pattern.name());
    assert_eq!(summary.validation_enabled, common::expect_validation());
    assert_eq!(summary.validation_errors, 0);
    assert!(
        summary.stages.contains_key("compare"),
        "no compare stage timed"
    );
    let img = image::open(out.join("last.png")).unwrap().to_rgba8();
    (summary, img)
}

fn psnr(s: &Summary) -> (f64, Option<f64>) {
    let c = s.compare.as_ref().expect("summary has the compare view");
    // The figures belong to the last frame: the run waits for every frame in flight.
    assert_eq!(c.frame, Some(s.frames - 1));
    (c.psnr_y.expect("live PSNR was read"), c.psnr_y_right)
}

#[test]
fn split_shows_both_sources_and_live_psnr_matches_the_cpu() {
    // Divider at the right edge: the whole picture is the current output; at the left edge:
    // the whole picture is the native frame. Same scripted frame in all three runs.
    let (all_left, current) = run("compare_left", Pattern::Bilinear, CompareSide::Native, 1.0);
    let (_, native) = run("compare_right", Pattern::Bilinear, CompareSide::Native, 0.0);
    let (half, split) = run("compare_half", Pattern::Bilinear, CompareSide::Native, 0.5);
    let w = split.width();
    let mut left_same = true;
    let mut right_same = true;
    for y in 0..split.height() {
        for x in 0..w {
            let p = split.get_pixel(x, y);
            if x < w / 2 {
                left_same &= p == current.get_pixel(x, y);
            } else {
                right_same &= p == native.get_pixel(x, y);
            }
        }
    }
    assert!(left_same, "left of the divider is not the current output");
    assert!(right_same, "right of the divider is not the native frame");
    assert_ne!(current, native, "bilinear and native frames should differ");

    let cpu = metrics::psnr_y(&current, &native);
    for s in [&all_left, &half] {
        let (gpu, right) = psnr(s);
        assert!(right.is_none(), "native right side has no PSNR of its own");
        // Tolerance: the GPU sums f32 per 16x16 tile; the CPU sums f64.
        assert!(
            (gpu - cpu).abs() < 0.01,
            "live PSNR {gpu:.4} dB vs CPU {cpu:.4} dB on the same frame"
        );
    }
    assert!(cpu > 15.0 && cpu < 60.0, "implausible PSNR {cpu}");
}

#[test]
fn right_side_in_stream_matches_the_cpu_roundtrip_on_the_same_model() {
    let (s, _) = run(
        "compare_patterns",
        Pattern::CpuRoundtrip,
        CompareSide::Pattern(Pattern::InStream),
        0.5,
    );
    let (current, right) = psnr(&s);
    let right = right.expect("an upscaler on the right side has its own PSNR");
    // Both run models/test/tiny_x2.onnx on the same frame; outputs agree within 1/255 per
    // channel (pattern tests), so their PSNRs against native agree to a few hundredths of a dB.
    assert!(
        (current - right).abs() < 0.05,
        "cpu-roundtrip {current:.4} dB vs in-stream {right:.4} dB"
    );
}

#[test]
fn a_host_step_pattern_cannot_be_the_right_side() {
    let config = common::small_config();
    let args = HeadlessArgs {
        frames: 1,
        out: common::out_dir("compare_refused"),
        pattern: Some(Pattern::Bilinear),
        compare: Some(CompareSide::Pattern(Pattern::CpuRoundtrip)),
        ..Default::default()
    };
    let err = format!(
        "{:#}",
        headless::run(&config, &args).err().expect("refused")
    );
    assert!(
        err.contains("compare view") && err.contains("runs on the host"),
        "{err}"
    );
}

#[test]
fn heatmap_is_black_where_output_equals_native_and_bright_where_it_differs() {
    // Same scripted frame in all three runs: the output alone, the native frame alone, and the
    // heatmap over the whole picture (divider at the left edge).
    let (_, current) = run("heatmap_left", Pattern::Bilinear, CompareSide::Native, 1.0);
    let (_, native) = run(
        "heatmap_native",
        Pattern::Bilinear,
        CompareSide::Native,
        0.0,
    );
    let (_, heat) = run_with(
        "heatmap_heat",
        Pattern::Bilinear,
        CompareSide::Native,
        0.0,
        true,
    );
    let luma =
        |p: &image::Rgba<u8>| 0.299 * p[0] as f64 + 0.587 * p[1] as f64 + 0.114 * p[2] as f64;
    let (mut equal, mut full, mut small) = (0u32, 0u32, Vec::new());
    let mut full_heat = Vec::new();
    for (x, y, h) in heat.enumerate_pixels() {
        let d = (luma(current.get_pixel(x, y)) - luma(native.get_pixel(x, y))).abs();
        if d == 0.0 {
            equal += 1;
            assert_eq!(
                h.0[..3],
                [0, 0, 0],
                "({x}, {y}): output equals native, heat {h:?}"
            );
        } else if d >= 255.0 / 8.0 {
            full += 1;
            full_heat.push(luma(h));
        } else if d < 8.0 {
            small.push(luma(h));
        }
    }
    let n = heat.width() * heat.height();
    assert!(
        equal > n / 100,
        "only {equal} of {n} pixels equal native: nothing tested black"
    );
    assert!(
        full > 0,
        "no pixel differs by 32 levels: nothing tested bright"
    );
    // Full scale is the ramp's pale-yellow end; small errors stay dark.
    let min_full = full_heat.iter().copied().fold(f64::MAX, f64::min);
    assert!(min_full > 200.0, "a large error shows with luma {min_full}");
    let mean_small = small.iter().sum::<f64>() / small.len().max(1) as f64;
    assert!(mean_small < 80.0, "small errors average luma {mean_small}");
}
