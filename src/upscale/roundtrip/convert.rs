//! The CPU roundtrip's host conversions between the RGBA8 frame (readback and upload buffers)
//! and the model's planar NCHW f32 tensor. They run twice per frame on the critical path, so
//! they are pure functions of their slices with unit tests against a per-pixel reference.
//!
//! Large frames are split into bands of pixels converted on rayon's global pool (one worker
//! per core, started once on first use, never per frame); small ones stay on the caller's
//! thread. Nothing here allocates.

use rayon::prelude::*;

/// Multiplied by, not divided by 255: dividing would change the last bit of some values.
const SCALE: f32 = 1.0 / 255.0;

/// Pixels per parallel work item: 64 KiB of RGBA, about 8.5 rows at 1920 wide (a per-pixel
/// map needs no row boundaries). A 1080p frame makes 127 of them, enough that 16 workers
/// stay busy when some finish early; at 960x540, 32.
const BAND_PIXELS: usize = 16 * 1024;

/// Below this (256x256) the caller's thread converts the frame in well under 0.1 ms, less
/// than waking and joining the pool costs; the tests' frames (up to 320x180) stay here.
const PARALLEL_MIN_PIXELS: usize = 64 * 1024;

/// RGBA8 (display-encoded) → planar RGB f32 in 0..1: the model's input layout. Converts the
/// pixels both slices hold (`tensor.len() / 3` per plane); the rest of either is left as it is.
pub fn rgba8_to_nchw(rgba: &[u8], tensor: &mut [f32]) {
    let plane = tensor.len() / 3;
    let n = plane.min(rgba.len() / 4);
    let (r, rest) = tensor.split_at_mut(plane);
    let (g, b) = rest.split_at_mut(plane);
    let (r, g, b) = (&mut r[..n], &mut g[..n], &mut b[..n]);
    let rgba = &rgba[..n * 4];
    // Whole pixels as u32 let the compiler load four at a time and split the channels with
    // masks and shifts. Mapped Vulkan memory is aligned (minMemoryMapAlignment >= 64), and so
    // is a Vec<u8> from the system allocator in practice; a sub-slice may not be, and takes
    // the per-pixel loop.
    match bytemuck::try_cast_slice::<u8, u32>(rgba) {
        Ok(pixels) if n < PARALLEL_MIN_PIXELS => unpack(pixels, r, g, b),
        Ok(pixels) => pixels
            .par_chunks(BAND_PIXELS)
            .zip(r.par_chunks_mut(BAND_PIXELS))
            .zip(g.par_chunks_mut(BAND_PIXELS))
            .zip(b.par_chunks_mut(BAND_PIXELS))
            .for_each(|(((pixels, r), g), b)| unpack(pixels, r, g, b)),
        Err(_) => {
            for (((px, r), g), b) in rgba.chunks_exact(4).zip(r).zip(g).zip(b) {
                *r = px[0] as f32 * SCALE;
                *g = px[1] as f32 * SCALE;
                *b = px[2] as f32 * SCALE;
            }
        }
    }
}

/// Planar RGB f32 → RGBA8 (alpha 255), clamped to 0..1 and rounded half up: exactly
/// `(v.clamp(0.0, 1.0) * 255.0 + 0.5) as u8`, with NaN → 0. Converts the pixels both slices
/// hold; the rest of either is left as it is.
pub fn nchw_to_rgba8(tensor: &[f32], rgba: &mut [u8]) {
    let plane = tensor.len() / 3;
    let n = plane.min(rgba.len() / 4);
    let (r, rest) = tensor.split_at(plane);
    let (g, b) = rest.split_at(plane);
    let (r, g, b) = (&r[..n], &g[..n], &b[..n]);
    let rgba = &mut rgba[..n * 4];
    // Whole-pixel stores also keep the writes into a write-combined upload buffer full-width.
    match bytemuck::try_cast_slice_mut::<u8, u32>(rgba) {
        Ok(pixels) if n < PARALLEL_MIN_PIXELS => pack(r, g, b, pixels),
        Ok(pixels) => pixels
            .par_chunks_mut(BAND_PIXELS)
            .zip(r.par_chunks(BAND_PIXELS))
            .zip(g.par_chunks(BAND_PIXELS))
            .zip(b.par_chunks(BAND_PIXELS))
            .for_each(|(((pixels, r), g), b)| pack(r, g, b, pixels)),
        Err(_) => {
            for (((px, r), g), b) in rgba.chunks_exact_mut(4).zip(r).zip(g).zip(b) {
                px.copy_from_slice(&pack_pixel(*r, *g, *b).to_le_bytes());
            }
        }
    }
}

/// Equal-length slices: one loop without bounds checks that the compiler vectorises.
fn unpack(pixels: &[u32], r: &mut [f32], g: &mut [f32], b: &mut [f32]) {
    for (((&p, r), g), b) in pixels.iter().zip(r).zip(g).zip(b) {
        let p = u32::from_le(p);
        // Masked to 0..=255 the conversion is exact, the same as `byte as f32`.
        *r = (p & 0xff) as f32 * SCALE;
        *g = ((p >> 8) & 0xff) as f32 * SCALE;
        *b = ((p >> 16) & 0xff) as f32 * SCALE;
    }
}

fn pack(r: &[f32], g: &[f32], b: &[f32], pixels: &mut [u32]) {
    for (((p, &r), &g), &b) in pixels.iter_mut().zip(r).zip(g).zip(b) {
        *p = pack_pixel(r, g, b).to_le();
    }
}

fn pack_pixel(r: f32, g: f32, b: f32) -> u32 {
    quantise(r) | quantise(g) << 8 | quantise(b) << 16 | 0xff00_0000
}

/// `(v.clamp(0.0, 1.0) * 255.0 + 0.5) as u8` in operations that vectorise: `as u8` (a
/// saturating conversion) and `floor` (a libm call without SSE4.1) keep the loop scalar.
#[inline(always)]
fn quantise(v: f32) -> u32 {
    // 2^23: adding it to x in 0..2^22 leaves x rounded to an integer (ties to even) in the
    // low mantissa bits.
    const ROUND: f32 = 8_388_608.0;
    // Comparisons, not `clamp`: NaN fails both and becomes 0, what `as u8` made of it.
    let c = if v > 0.0 { v } else { 0.0 };
    let c = if c < 1.0 { c } else { 1.0 };
    let x = c * 255.0 + 0.5; // the reference's value, in 0.5..=255.5
    let nearest = (x + ROUND) - ROUND;
    // `as u8` truncates; for x > 0 that is floor: one less where rounding went up.
    let floor = if nearest > x { nearest - 1.0 } else { nearest };
    (floor + ROUND).to_bits() & 0xff
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// The conversions as first written, one pixel at a time: the fast versions must match
    /// them bit for bit, including for NaN (→ 0: `clamp` keeps NaN and `as u8` saturates it
    /// to 0) and for slices of unequal length (only the common pixels are written).
    fn reference_to_tensor(rgba: &[u8], tensor: &mut [f32]) {
        let plane = tensor.len() / 3;
        let (r, rest) = tensor.split_at_mut(plane);
        let (g, b) = rest.split_at_mut(plane);
        for (i, px) in rgba.chunks_exact(4).take(plane).enumerate() {
            r[i] = px[0] as f32 * (1.0 / 255.0);
            g[i] = px[1] as f32 * (1.0 / 255.0);
            b[i] = px[2] as f32 * (1.0 / 255.0);
        }
    }

    fn reference_from_tensor(tensor: &[f32], rgba: &mut [u8]) {
        let plane = tensor.len() / 3;
        let (r, rest) = tensor.split_at(plane);
        let (g, b) = rest.split_at(plane);
        let q = |v: f32| (v.clamp(0.0, 1.0) * 255.0 + 0.5) as u8;
        for (i, px) in rgba.chunks_exact_mut(4).take(plane).enumerate() {
            px[0] = q(r[i]);
            px[1] = q(g[i]);
            px[2] = q(b[i]);
            px[3] = 255;
        }
    }

    /// (RGBA pixels, tensor plane): equal sizes from one pixel to more than a 1080p quarter
    /// (so the parallel threshold and bands are crossed, with a remainder), then each side
    /// longer.
    const SIZES: [(usize, usize); 10] = [
        (1, 1),
        (7, 7),
        (64 * 36, 64 * 36),
        (160 * 90 + 3, 160 * 90 + 3),
        (PARALLEL_MIN_PIXELS, PARALLEL_MIN_PIXELS),
        (1920 * 1080 / 4 + 13, 1920 * 1080 / 4 + 13),
        (300_007, 300_007),
        (100, 37),
        (37, 100),
        (300_007, 250_001),
    ];

    /// Pixel `i` is (i, 7i + 3, 13i + 5, 3i) mod 256: every 256 pixels each channel takes
    /// every byte value (odd multipliers permute 0..=255).
    fn test_pixels(n: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|i| [i, i * 7 + 3, i * 13 + 5, i * 3].map(|v| v as u8))
            .collect()
    }

    /// Every special and boundary float the quantiser can meet: NaNs (quiet, signalling,
    /// negative, with payloads), infinities, signed zeros, subnormals, extremes, each rounding
    /// boundary (k + 0.5) / 255 with 8 ulps either side, and every 4099th bit pattern.
    fn test_floats() -> Vec<f32> {
        let mut v: Vec<f32> = [
            0x7fc0_0000u32,
            0xffc0_0000,
            0x7fc0_0001,
            0x7f80_0001,
            0xffff_ffff,
            0x0000_0001,
            0x8000_0001,
        ]
        .map(f32::from_bits)
        .to_vec();
        v.extend([
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            f32::MIN_POSITIVE,
            f32::MAX,
            f32::MIN,
            1.0,
            -0.5,
            0.5,
            1.7,
        ]);
        for k in 0..=256 {
            let edge = (k as f32 + 0.5) / 255.0;
            v.extend((-8..=8).map(|d: i32| f32::from_bits(edge.to_bits().wrapping_add_signed(d))));
            v.push(k as f32 / 255.0);
        }
        v.extend((0..=u32::MAX).step_by(4099).map(f32::from_bits));
        v
    }

    #[test]
    fn to_tensor_matches_the_reference_for_every_byte_value() {
        for (pixels, plane) in SIZES {
            let rgba = test_pixels(pixels);
            let mut expected = vec![-1.0; plane * 3 + 1];
            let mut got = expected.clone();
            reference_to_tensor(&rgba, &mut expected);
            rgba8_to_nchw(&rgba, &mut got);
            let same = expected
                .iter()
                .zip(&got)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{pixels} pixels into a {plane}-pixel plane differ");
        }
    }

    #[test]
    fn conversions_take_unaligned_slices() {
        let rgba = test_pixels(1000);
        let mut bytes = vec![0u8; 1];
        bytes.extend(&rgba);
        let (mut expected, mut got) = (vec![0.0; 3000], vec![0.0; 3000]);
        reference_to_tensor(&rgba, &mut expected);
        rgba8_to_nchw(&bytes[1..], &mut got);
        assert_eq!(expected, got);

        let tensor: Vec<f32> = test_floats().into_iter().take(3000).collect();
        let mut expected = vec![0u8; 4000];
        reference_from_tensor(&tensor, &mut expected);
        nchw_to_rgba8(&tensor, &mut bytes[1..]);
        assert_eq!(expected, bytes[1..]);
    }

    #[test]
    fn from_tensor_matches_the_reference_for_special_and_boundary_floats() {
        let values = test_floats();
        let n = values.len();
        // Each plane sees every value, in a different order, so every channel is checked.
        let tensor: Vec<f32> = values
            .iter()
            .chain(values.iter().rev())
            .chain(values[n / 2..].iter().chain(&values[..n / 2]))
            .copied()
            .collect();
        let mut expected = vec![7u8; n * 4];
        let mut got = expected.clone();
        reference_from_tensor(&tensor, &mut expected);
        nchw_to_rgba8(&tensor, &mut got);
        if let Some(i) = (0..n * 4).find(|&i| expected[i] != got[i]) {
            let v = tensor[(i % 4) * n + i / 4];
            panic!(
                "{v:?} ({:#010x}) → {} not {}",
                v.to_bits(),
                got[i],
                expected[i]
            );
        }
    }

    #[test]
    fn from_tensor_matches_the_reference_on_every_size() {
        let values = test_floats();
        for (pixels, plane) in SIZES {
            let tensor: Vec<f32> = values.iter().cycle().take(plane * 3 + 2).copied().collect();
            let mut expected = vec![7u8; pixels * 4 + 3];
            let mut got = expected.clone();
            reference_from_tensor(&tensor, &mut expected);
            nchw_to_rgba8(&tensor, &mut got);
            assert!(
                expected == got,
                "{plane}-pixel plane into {pixels} pixels differs"
            );
        }
    }

    #[test]
    fn nan_becomes_zero_and_infinities_clamp() {
        let mut px = [0u8; 8];
        let nan = f32::NAN;
        nchw_to_rgba8(
            &[nan, -nan, f32::INFINITY, f32::NEG_INFINITY, -0.0, 1.0],
            &mut px,
        );
        // Planes: r = [NaN, -NaN], g = [inf, -inf], b = [-0, 1].
        assert_eq!(px, [0, 255, 0, 255, 0, 0, 255, 255]);
    }

    #[test]
    fn conversions_round_trip_every_byte_value() {
        let rgba: Vec<u8> = (0..=255u8).flat_map(|v| [v, 255 - v, v / 2, 7]).collect();
        let mut tensor = vec![0.0; 256 * 3];
        rgba8_to_nchw(&rgba, &mut tensor);
        assert_eq!(tensor[255], 1.0);
        assert_eq!(tensor[256], 1.0, "green plane starts with 255 - 0");
        let mut back = vec![0u8; 256 * 4];
        nchw_to_rgba8(&tensor, &mut back);
        for (a, b) in rgba.chunks(4).zip(back.chunks(4)) {
            assert_eq!(&a[..3], &b[..3]);
            assert_eq!(b[3], 255);
        }
    }

    #[test]
    fn out_of_range_outputs_clamp() {
        let mut px = [0u8; 4];
        nchw_to_rgba8(&[-0.5, 1.7, 0.5], &mut px);
        assert_eq!(px, [0, 255, 128, 255]);
    }

    /// Milliseconds per call at 1920x1080, the reference beside the shipped functions. The
    /// test profile builds this crate at opt-level 1, so time it in release:
    /// `cargo test --release --lib convert::tests::timing -- --ignored --nocapture`.
    #[test]
    #[ignore = "timing: run in release with --ignored --nocapture"]
    fn timing_1080p() {
        const ITERS: u32 = 200;
        let n = 1920 * 1080;
        let rgba = test_pixels(n);
        let mut tensor = vec![0.0; n * 3];
        let mut out = vec![0u8; n * 4];
        let time = |name: &str, f: &mut dyn FnMut()| {
            f(); // first touch and thread start-up are not per-frame costs
            let t = Instant::now();
            for _ in 0..ITERS {
                f();
            }
            let ms = t.elapsed().as_secs_f64() * 1e3 / f64::from(ITERS);
            println!("{name:<24} {ms:.3} ms/call (1920x1080, {ITERS} calls)");
        };
        time("reference to_tensor", &mut || {
            reference_to_tensor(&rgba, &mut tensor)
        });
        time("rgba8_to_nchw", &mut || rgba8_to_nchw(&rgba, &mut tensor));
        // Model-like output: mostly in range, some under and over.
        for (i, v) in tensor.iter_mut().enumerate() {
            *v = *v * 1.2 - 0.1 + (i % 5) as f32 * 1e-3;
        }
        time("reference from_tensor", &mut || {
            reference_from_tensor(&tensor, &mut out)
        });
        time("nchw_to_rgba8", &mut || nchw_to_rgba8(&tensor, &mut out));
    }
}
