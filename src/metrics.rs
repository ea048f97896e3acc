//! Image quality metrics: PSNR and SSIM on luma and on RGB, for 8-bit images (L = 255).
//!
//! Luma is BT.601 Y' in full range, `0.299 R + 0.587 G + 0.114 B` on the display-encoded values,
//! unrounded (tools/train/train.py computes its validation PSNR the same way, so the figures are
//! comparable). SSIM is Wang et al. 2004 as in their reference code: an 11×11 Gaussian window
//! with σ = 1.5, K1 = 0.01, K2 = 0.03, averaged over the positions where the window fits inside
//! the image (no padding). RGB SSIM is the mean of the three channels' SSIM.
//!
//! **tPSNR-Y** (temporal PSNR) scores a frame against its predecessor: the PSNR of the frame
//! difference `Y(out_t) − Y(out_{t−1})` against the reference's `Y(ref_t) − Y(ref_{t−1})`, with
//! the same peak L = 255 and the same [`PSNR_CAP_DB`] as PSNR-Y. Its error,
//! `(out_t − ref_t) − (out_{t−1} − ref_{t−1})`, is how much the frame's error *changed*: a constant
//! error (a blur that stays put) costs nothing, flicker, shimmer and ghosting (errors that move
//! or come and go) do. An error of e grey levels that toggles every frame counts as 2e.

/// One channel of an image, values in 0..255.
#[derive(Clone, Debug, PartialEq)]
pub struct Plane {
    pub width: usize,
    pub height: usize,
    pub data: Vec<f64>,
}

/// Reported instead of +∞ for identical images (JSON has no infinity).
pub const PSNR_CAP_DB: f64 = 100.0;
const L: f64 = 255.0;
const WINDOW: usize = 11;
const SIGMA: f64 = 1.5;
const K1: f64 = 0.01;
const K2: f64 = 0.03;

impl Plane {
    fn from_fn(img: &image::RgbaImage, f: impl Fn(&[u8; 4]) -> f64) -> Self {
        Self {
            width: img.width() as usize,
            height: img.height() as usize,
            data: img.pixels().map(|p| f(&p.0)).collect(),
        }
    }
}

pub fn luma(img: &image::RgbaImage) -> Plane {
    Plane::from_fn(img, |p| {
        0.299 * p[0] as f64 + 0.587 * p[1] as f64 + 0.114 * p[2] as f64
    })
}

pub fn channels(img: &image::RgbaImage) -> [Plane; 3] {
    [0, 1, 2].map(|c| Plane::from_fn(img, |p| p[c] as f64))
}

fn check_same_size(a: &Plane, b: &Plane) {
    assert_eq!(
        (a.width, a.height),
        (b.width, b.height),
        "metrics need images of one size"
    );
}

pub fn mse(a: &Plane, b: &Plane) -> f64 {
    check_same_size(a, b);
    let sum: f64 = a
        .data
        .iter()
        .zip(&b.data)
        .map(|(x, y)| (x - y).powi(2))
        .sum();
    sum / a.data.len() as f64
}

/// PSNR in dB for a mean squared error on the 0..255 scale, capped at [`PSNR_CAP_DB`].
pub fn psnr_from_mse(mse: f64) -> f64 {
    if mse <= 0.0 {
        return PSNR_CAP_DB;
    }
    (10.0 * (L * L / mse).log10()).min(PSNR_CAP_DB)
}

pub fn psnr_y(a: &image::RgbaImage, b: &image::RgbaImage) -> f64 {
    psnr_from_mse(mse(&luma(a), &luma(b)))
}

/// PSNR over the R, G and B samples together (one MSE over all three channels).
pub fn psnr_rgb(a: &image::RgbaImage, b: &image::RgbaImage) -> f64 {
    let (ca, cb) = (channels(a), channels(b));
    let total: f64 = ca.iter().zip(&cb).map(|(x, y)| mse(x, y)).sum();
    psnr_from_mse(total / 3.0)
}

pub fn ssim_y(a: &image::RgbaImage, b: &image::RgbaImage) -> f64 {
    ssim(&luma(a), &luma(b))
}

pub fn ssim_rgb(a: &image::RgbaImage, b: &image::RgbaImage) -> f64 {
    let (ca, cb) = (channels(a), channels(b));
    ca.iter().zip(&cb).map(|(x, y)| ssim(x, y)).sum::<f64>() / 3.0
}

/// tPSNR-Y of frame t: `out` and `reference` are the luma planes of frames t − 1 and t (see the
/// module documentation).
pub fn tpsnr_y(out: [&Plane; 2], reference: [&Plane; 2]) -> f64 {
    let [op, oc] = out;
    let [rp, rc] = reference;
    for p in [op, oc, rp] {
        check_same_size(p, rc);
    }
    let sum: f64 = (0..rc.data.len())
        .map(|i| ((oc.data[i] - op.data[i]) - (rc.data[i] - rp.data[i])).powi(2))
        .sum();
    psnr_from_mse(sum / rc.data.len() as f64)
}

fn gaussian_kernel() -> [f64; WINDOW] {
    let c = (WINDOW / 2) as f64;
    let mut k = [0.0; WINDOW];
    for (i, v) in k.iter_mut().enumerate() {
        *v = (-((i as f64 - c).powi(2)) / (2.0 * SIGMA * SIGMA)).exp();
    }
    let sum: f64 = k.iter().sum();
    k.map(|v| v / sum)
}

/// Separable Gaussian filter, "valid" region only: (width − 10) × (height − 10) values.
fn blur_valid(p: &Plane, values: impl Fn(usize) -> f64) -> Vec<f64> {
    let k = gaussian_kernel();
    let (w, h) = (p.width, p.height);
    let (ow, oh) = (w + 1 - WINDOW, h + 1 - WINDOW);
    let mut rows = vec![0.0; ow * h];
    for y in 0..h {
        for x in 0..ow {
            rows[y * ow + x] = (0..WINDOW).map(|i| k[i] * values(y * w + x + i)).sum();
        }
    }
    let mut out = vec![0.0; ow * oh];
    for y in 0..oh {
        for x in 0..ow {
            out[y * ow + x] = (0..WINDOW).map(|i| k[i] * rows[(y + i) * ow + x]).sum();
        }
    }
    out
}

/// Mean SSIM of two planes; both sides must be at least 11 pixels.
pub fn ssim(a: &Plane, b: &Plane) -> f64 {
    check_same_size(a, b);
    assert!(
        a.width >= WINDOW && a.height >= WINDOW,
        "SSIM needs at least {WINDOW}x{WINDOW} pixels, got {}x{}",
        a.width,
        a.height
    );
    let (x, y) = (&a.data, &b.data);
    let mu_x = blur_valid(a, |i| x[i]);
    let mu_y = blur_valid(a, |i| y[i]);
    let xx = blur_valid(a, |i| x[i] * x[i]);
    let yy = blur_valid(a, |i| y[i] * y[i]);
    let xy = blur_valid(a, |i| x[i] * y[i]);
    let (c1, c2) = ((K1 * L).powi(2), (K2 * L).powi(2));
    let sum: f64 = (0..mu_x.len())
        .map(|i| {
            let (mx, my) = (mu_x[i], mu_y[i]);
            let (vx, vy, cov) = (xx[i] - mx * mx, yy[i] - my * my, xy[i] - mx * my);
            ((2.0 * mx * my + c1) * (2.0 * cov + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
        })
        .sum();
    sum / mu_x.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    fn gradient(w: u32, h: u32) -> image::RgbaImage {
        image::RgbaImage::from_fn(w, h, |x, y| {
            let v = ((x * 7 + y * 3) % 256) as u8;
            image::Rgba([v, v.wrapping_mul(3), 255 - v, 255])
        })
    }

    fn noisy(img: &image::RgbaImage, amplitude: i32, seed: u64) -> image::RgbaImage {
        let mut rng = rand_pcg::Pcg32::seed_from_u64(seed);
        let mut out = img.clone();
        for p in out.pixels_mut() {
            for c in 0..3 {
                let n = rng.random_range(-amplitude..=amplitude);
                p.0[c] = (p.0[c] as i32 + n).clamp(0, 255) as u8;
            }
        }
        out
    }

    #[test]
    fn identical_images_give_the_cap_and_ssim_one() {
        let a = gradient(40, 30);
        assert_eq!(psnr_y(&a, &a), PSNR_CAP_DB);
        assert_eq!(psnr_rgb(&a, &a), PSNR_CAP_DB);
        assert!((ssim_y(&a, &a) - 1.0).abs() < 1e-12);
        assert!((ssim_rgb(&a, &a) - 1.0).abs() < 1e-12);
        let flat = image::RgbaImage::from_pixel(16, 16, image::Rgba([9, 9, 9, 255]));
        assert!((ssim_y(&flat, &flat) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn known_mse_gives_known_psnr() {
        // Every sample off by 5: MSE 25, PSNR = 10 log10(255² / 25) = 34.151 dB.
        let a = image::RgbaImage::from_pixel(8, 8, image::Rgba([100, 100, 100, 255]));
        let b = image::RgbaImage::from_pixel(8, 8, image::Rgba([105, 105, 105, 255]));
        assert!((psnr_rgb(&a, &b) - 34.1514).abs() < 1e-3);
        assert!((psnr_y(&a, &b) - 34.1514).abs() < 1e-3);
        assert!((psnr_from_mse(255.0 * 255.0)).abs() < 1e-12);
        assert_eq!(psnr_from_mse(1e-30), PSNR_CAP_DB);
    }

    fn grey(v: u8) -> Plane {
        luma(&image::RgbaImage::from_pixel(
            16,
            16,
            image::Rgba([v, v, v, 255]),
        ))
    }

    #[test]
    fn identical_sequences_give_the_capped_tpsnr() {
        let (a, b) = (
            luma(&gradient(20, 12)),
            luma(&noisy(&gradient(20, 12), 30, 3)),
        );
        assert_eq!(tpsnr_y([&a, &b], [&a, &b]), PSNR_CAP_DB);
        // A constant error is not temporal: out = ref + 5 in both frames still caps.
        assert_eq!(
            tpsnr_y([&grey(105), &grey(125)], [&grey(100), &grey(120)]),
            PSNR_CAP_DB
        );
    }

    #[test]
    fn tpsnr_of_a_known_flicker() {
        // The reference is steady at 100; the output flickers 95 → 105: the difference error is
        // 10 everywhere, MSE 100, tPSNR = 10 log10(255² / 100) = 28.1308 dB.
        let (steady, lo, hi) = (grey(100), grey(95), grey(105));
        assert!((tpsnr_y([&lo, &hi], [&steady, &steady]) - 28.1308).abs() < 1e-3);
        // The same sequence in the other direction scores the same.
        assert_eq!(
            tpsnr_y([&lo, &hi], [&steady, &steady]),
            tpsnr_y([&hi, &lo], [&steady, &steady])
        );
    }

    #[test]
    fn a_flickering_sequence_scores_lower_than_a_steady_one() {
        // Both outputs are off the reference by up to 4 grey levels in every frame (equal
        // per-frame PSNR within 1 dB): one keeps its error in place, the other draws it anew each frame.
        let reference = gradient(32, 24);
        let steady = noisy(&reference, 4, 7);
        let flicker = [noisy(&reference, 4, 8), noisy(&reference, 4, 9)];
        let r = luma(&reference);
        let s = luma(&steady);
        let f = [luma(&flicker[0]), luma(&flicker[1])];
        let steady_t = tpsnr_y([&s, &s], [&r, &r]);
        let flicker_t = tpsnr_y([&f[0], &f[1]], [&r, &r]);
        assert_eq!(steady_t, PSNR_CAP_DB);
        assert!(flicker_t < 50.0, "{flicker_t}");
        let per_frame = (psnr_y(&steady, &reference), psnr_y(&flicker[1], &reference));
        assert!((per_frame.0 - per_frame.1).abs() < 1.0, "{per_frame:?}");
    }

    #[test]
    fn ssim_of_identical_images_is_one_and_of_a_known_pair_is_hand_computed() {
        let a = grey(80);
        assert!((ssim(&a, &a) - 1.0).abs() < 1e-12);
        // Flat planes 80 and 120: variances and covariance are 0, so SSIM is the luminance term
        // (2·80·120 + C1) / (80² + 120² + C1), C1 = (0.01·255)² = 6.5025.
        let b = grey(120);
        let c1 = 6.5025;
        let expected = (2.0 * 80.0 * 120.0 + c1) / (80.0f64.powi(2) + 120.0f64.powi(2) + c1);
        assert!((ssim(&a, &b) - expected).abs() < 1e-9, "{}", ssim(&a, &b));
    }

    #[test]
    fn luma_is_bt601_full_range() {
        let img = image::RgbaImage::from_pixel(1, 1, image::Rgba([255, 0, 0, 255]));
        assert!((luma(&img).data[0] - 0.299 * 255.0).abs() < 1e-9);
    }

    #[test]
    fn gaussian_window_is_normalised_and_symmetric() {
        let k = gaussian_kernel();
        assert!((k.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!((k[0] - k[10]).abs() < 1e-15 && k[5] > k[4]);
        assert!((k[5] - 0.266_011).abs() < 1e-5, "centre tap {}", k[5]);
    }

    #[test]
    fn metrics_are_symmetric() {
        let a = gradient(37, 23);
        let b = noisy(&a, 20, 1);
        assert!((ssim_y(&a, &b) - ssim_y(&b, &a)).abs() < 1e-12);
        assert!((ssim_rgb(&a, &b) - ssim_rgb(&b, &a)).abs() < 1e-12);
        assert_eq!(psnr_rgb(&a, &b), psnr_rgb(&b, &a));
    }

    #[test]
    fn more_noise_lowers_both_metrics() {
        let a = gradient(48, 32);
        let little = noisy(&a, 4, 2);
        let much = noisy(&a, 40, 2);
        assert!(ssim_y(&a, &little) < 1.0);
        assert!(ssim_y(&a, &much) < ssim_y(&a, &little));
        assert!(ssim_rgb(&a, &much) < ssim_rgb(&a, &little));
        assert!(psnr_y(&a, &much) < psnr_y(&a, &little));
        assert!(psnr_rgb(&a, &much) < psnr_rgb(&a, &little));
    }

    #[test]
    fn ssim_uses_the_valid_region_only() {
        // A difference in the corner pixel is seen by exactly one window position.
        let a = gradient(11, 11);
        let mut b = a.clone();
        b.get_pixel_mut(0, 0).0 = [255, 255, 255, 255];
        let one = ssim_y(&a, &b);
        assert!(one < 1.0 && one > 0.9, "{one}");
    }
}
