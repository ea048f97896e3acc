//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use upscale_demo::app::config::Config;

/// Validation messages (target `vulkan`, errors; or what RUST_LOG asks) into the test's
/// output, so that a test failing on "validation errors: see the log" shows them.
pub fn log_validation() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("vulkan=error"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// A small configuration for GPU tests: 320x180 output, x2 scale (fast on lavapipe).
pub fn small_config() -> Config {
    log_validation();
    let text = "[render]\noutput_width = 320\noutput_height = 180\nscale = 2\n";
    Config::parse(text, Path::new("tests/small.toml")).unwrap()
}

/// A fresh, empty directory under the target dir for one test's outputs.
pub fn out_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The game's executable: `UPSCALE_DEMO_EXE` where a test binary runs away from its build tree
/// (the GPU machine runs the carried test binaries beside the carried release binary), else the
/// one Cargo built with the tests.
pub fn demo_exe() -> PathBuf {
    let Some(exe) = std::env::var_os("UPSCALE_DEMO_EXE").map(PathBuf::from) else {
        return PathBuf::from(env!("CARGO_BIN_EXE_upscale-demo"));
    };
    assert!(
        exe.is_file(),
        "UPSCALE_DEMO_EXE={}: no such file (it names the game's executable)",
        exe.display()
    );
    exe
}

/// Validation must be on unless the run explicitly turned it off (UPSCALE_VALIDATION=0): a
/// missing layer must not pass as "0 errors".
pub fn expect_validation() -> bool {
    std::env::var("UPSCALE_VALIDATION").as_deref() != Ok("0")
}

/// Luma standard deviation of an RGB image, 0..255: near 0 for a blank frame.
pub fn luma_std(img: &image::RgbImage) -> f64 {
    let luma: Vec<f64> = img
        .pixels()
        .map(|p| 0.299 * p[0] as f64 + 0.587 * p[1] as f64 + 0.114 * p[2] as f64)
        .collect();
    let mean = luma.iter().sum::<f64>() / luma.len() as f64;
    (luma.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / luma.len() as f64).sqrt()
}

/// (mean absolute difference per channel, fraction of channels differing by more than `far`).
pub fn image_diff(a: &image::RgbImage, b: &image::RgbImage, far: u8) -> (f64, f64) {
    assert_eq!(a.dimensions(), b.dimensions(), "image sizes differ");
    let mut sum = 0u64;
    let mut far_count = 0u64;
    for (x, y) in a.as_raw().iter().zip(b.as_raw()) {
        let d = x.abs_diff(*y);
        sum += d as u64;
        far_count += (d > far) as u64;
    }
    let n = a.as_raw().len() as f64;
    (sum as f64 / n, far_count as f64 / n)
}

/// The run's teardown (after the device was destroyed) left nothing: no leaked allocation, no
/// validation error (`vkDestroyDevice` with live objects, ...). Read from the summary rewritten
/// after teardown.
pub fn assert_clean_teardown(summary: &upscale_demo::app::summary::Summary) {
    let t = summary
        .teardown
        .expect("the summary is rewritten after teardown");
    assert_eq!(
        (t.leaked_allocations, t.validation_errors),
        (0, 0),
        "teardown left leaked allocations / validation errors: see the log above"
    );
}

/// Renders scripted frame `n` through the runner's session and returns the composited output
/// (overlay excluded).
pub fn capture(r: &mut upscale_demo::app::headless::Runner, n: u64) -> image::RgbaImage {
    r.frame(n, true).unwrap();
    r.captured().unwrap()
}

/// The largest per-channel difference of two images of one size.
pub fn max_channel_diff(a: &image::RgbaImage, b: &image::RgbaImage) -> u8 {
    assert_eq!(a.dimensions(), b.dimensions());
    a.as_raw()
        .iter()
        .zip(b.as_raw())
        .map(|(x, y)| x.abs_diff(*y))
        .max()
        .unwrap_or(0)
}
