//! A temporal model's five inputs built on the host from one frame and the previous output:
//! the definition `shaders/upscale/temporal_pre.comp` computes on the GPU and
//! `tools/train/temporal.py` trains with, written out plainly so tests can hold the shader to
//! it; cpu-roundtrip feeds the model with it (a large frame in bands of rows on rayon's pool).
//!
//! For output pixel o (centre o + 0.5), ratio = render size / output size (1/2):
//! p = (o + 0.5) · ratio; k = clamp(floor(p + jitter)); q = (o + 0.5) − motion\[k\] / ratio;
//! history\[o\] = resample(previous output, q), clamped to the edge ([`HistoryFilter`]:
//! bilinear, or Catmull-Rom where the model's `upscale.history_filter` says `catmull_rom`),
//! where the previous output is the model's output clamped to 0..1 and rounded to fp16
//! ([`keep_history`]; a float history carries no 8-bit rounding from frame to frame); on a
//! reset the bilinear ×2 of the colour (ONNX Resize linear, half_pixel) and zero motion (a
//! sequence's first frame has none, whatever ended the history). Space-to-depth: channel
//! c·4 + i·2 + j holds output pixel (2y + i, 2x + j) of colour c.
//!
//! A model whose metadata says `upscale.history_clamp = color_3x3` ([`History::clamp`]) takes
//! the warped history clamped, per colour channel, to the box (min, max) of this frame's colour
//! over the 3×3 render pixels around render pixel (x, y) that holds it (clamped to the edge):
//! what the previous output brings into a frame is never further from the frame's own samples
//! than that box, so a correction the model makes again and again cannot pile up while the
//! camera stands still. A reset's bilinear colour lies in the box already.

use std::ops::Range;

use half::f16;
use half::slice::HalfFloatSliceExt as _;
use rayon::prelude::*;

use super::info::TEMPORAL_INPUTS;
use super::NamedTensor;

/// Which history a temporal model takes: its `upscale.history_clamp` and
/// `upscale.history_filter` metadata ([`History::from_metadata`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct History {
    /// The warped history clamped to the 3×3 box of this frame's colour.
    pub clamp: bool,
    /// How the warp resamples the previous output.
    pub filter: HistoryFilter,
}

/// How the warp resamples the previous output at q (texel centres, clamped to the edge).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistoryFilter {
    /// Four texels (the first `temporal_x2`'s).
    Bilinear,
    /// The separable Catmull-Rom spline over 4 × 4 texels, each row summed in x first, then
    /// the rows in y: sharper than bilinear, whose blur a history resampled every frame would
    /// compound.
    CatmullRom,
}

impl History {
    /// The history warped only, bilinear: a model without either key.
    pub const WARPED: History = History {
        clamp: false,
        filter: HistoryFilter::Bilinear,
    };
    /// Bilinear, clamped to the box.
    pub const CLAMPED: History = History {
        clamp: true,
        filter: HistoryFilter::Bilinear,
    };

    /// From the values of a model's [`super::HISTORY_CLAMP_KEY`] and
    /// [`super::HISTORY_FILTER_KEY`] (None: no key); a value this build does not know is an
    /// error that names the key and what it knows.
    pub fn from_metadata(clamp: Option<&str>, filter: Option<&str>) -> Result<Self, String> {
        Ok(History {
            clamp: super::history_clamp(clamp)?,
            filter: super::history_filter(filter)?,
        })
    }
}

/// One frame as the renderer gives it, at render size `width` × `height`, row-major.
pub struct HostFrame<'a> {
    pub width: usize,
    pub height: usize,
    /// RGBA8, display-encoded.
    pub color: &'a [u8],
    /// The depth-buffer value per pixel.
    pub depth: &'a [f32],
    /// (x, y) per pixel in render pixels, current − previous position.
    pub motion: &'a [f16],
    pub jitter: [f32; 2],
}

/// The model's inputs for `frame`, in [`TEMPORAL_INPUTS`] order; `previous` is the previous
/// output as [`keep_history`] keeps it (RGB, fp16 values, at twice the render size), None on a reset.
pub fn inputs(frame: &HostFrame, previous: Option<&[f32]>, kind: History) -> Vec<NamedTensor> {
    let mut tensors = empty_inputs(frame.width, frame.height);
    fill_inputs(frame, previous, kind, &mut tensors);
    tensors
}

/// Zeroed input tensors for render size `width` × `height` (allocated once by a pattern).
pub fn empty_inputs(width: usize, height: usize) -> Vec<NamedTensor> {
    TEMPORAL_INPUTS
        .iter()
        .map(|&(name, c)| NamedTensor {
            name: name.to_string(),
            shape: vec![1, c, height, width],
            data: vec![0.0; c * width * height],
        })
        .collect()
}

/// Render pixels per parallel band, in whole rows (as the roundtrip's conversions: at 960x540
/// a band is 17 rows and a frame 32 bands, enough to keep 16 workers busy).
const BAND_PIXELS: usize = 16 * 1024;

/// Below this many pixels (256x256) the caller's thread does the work alone: waking and joining
/// rayon's pool would cost more. The tests' frames (up to 320x180) stay here.
const PARALLEL_MIN_PIXELS: usize = 64 * 1024;

/// [`inputs`] written into `tensors` (from [`empty_inputs`] of the frame's size). A large
/// frame is filled in bands of rows on rayon's global pool; every value is computed as on one
/// thread, so the result is the same bits either way.
pub fn fill_inputs(
    frame: &HostFrame,
    previous: Option<&[f32]>,
    kind: History,
    tensors: &mut [NamedTensor],
) {
    let (w, h) = (frame.width, frame.height);
    let band = if w * h < PARALLEL_MIN_PIXELS {
        h
    } else {
        (BAND_PIXELS / w).max(1)
    };
    fill_inputs_in_bands(frame, previous, kind, tensors, band);
}

/// [`fill_inputs`] with bands of `band` rows.
fn fill_inputs_in_bands(
    frame: &HostFrame,
    previous: Option<&[f32]>,
    kind: History,
    tensors: &mut [NamedTensor],
    band: usize,
) {
    // A frame without history is a sequence's first: no motion.
    fill_planes(frame, previous.is_some(), tensors, band);
    fill_history(frame, previous, kind, tensors, band);
}

/// The colour, depth, motion (zero unless `moving`) and jitter planes of [`fill_inputs`].
fn fill_planes(frame: &HostFrame, moving: bool, tensors: &mut [NamedTensor], band: usize) {
    let (w, h) = (frame.width, frame.height);
    let n = w * h;
    let [color, depth, motion, _, jitter] = tensors else {
        panic!("{} input tensors, a temporal model has 5", tensors.len());
    };
    let [r, g, b] = planes(&mut color.data, n);
    let [mx, my] = planes(&mut motion.data, n);
    let [jx, jy] = planes(&mut jitter.data, n);
    let [d] = planes(&mut depth.data, n);
    let unorm = unorm_table();
    in_bands([r, g, b, d, mx, my, jx, jy], w, 0..h, band, &|rows, p| {
        let [r, g, b, d, mx, my, jx, jy] = p;
        let pixels = rows.start * w..rows.end * w;
        let color = &frame.color[4 * pixels.start..4 * pixels.end];
        for (o, px) in color.chunks_exact(4).enumerate() {
            (r[o], g[o], b[o]) = (
                unorm[px[0] as usize],
                unorm[px[1] as usize],
                unorm[px[2] as usize],
            );
        }
        d.copy_from_slice(&frame.depth[pixels.clone()]);
        if moving {
            // By runs through a slice conversion (vector instructions where the CPU has them).
            const RUN: usize = 256;
            let mut xy = [0.0; 2 * RUN];
            let motion = &frame.motion[2 * pixels.start..2 * pixels.end];
            for (k, run) in motion.chunks(2 * RUN).enumerate() {
                let xy = &mut xy[..run.len()];
                run.convert_to_f32_slice(xy);
                for (o, m) in (k * RUN..).zip(xy.chunks_exact(2)) {
                    (mx[o], my[o]) = (m[0], m[1]);
                }
            }
        } else {
            mx.fill(0.0);
            my.fill(0.0);
        }
        jx.fill(frame.jitter[0]);
        jy.fill(frame.jitter[1]);
    });
}

/// The history plane of [`fill_inputs`], from the colour and motion planes [`fill_planes`]
/// wrote (the warp, the clamp box and a reset's bilinear colour read them). The box clamps a
/// warped history only; a reset's history is the frame itself.
fn fill_history(
    frame: &HostFrame,
    previous: Option<&[f32]>,
    kind: History,
    tensors: &mut [NamedTensor],
    band: usize,
) {
    let (w, h) = (frame.width, frame.height);
    let n = w * h;
    let [_, _, motion, history, _] = tensors else {
        panic!("{} input tensors, a temporal model has 5", tensors.len());
    };
    let moving = previous.is_some();
    let planes_in = Planes {
        size: (w, h),
        rgba: frame.color,
        unorm: &unorm_table(),
        motion: &motion.data,
        jitter: frame.jitter,
        filter: kind.filter,
    };
    let clamped = kind.clamp && moving;
    let out: [&mut [f32]; 12] = planes(&mut history.data, n);
    in_bands(out, w, 0..h, band, &|rows, p| {
        // One output row at a time, RGB per pixel, then spread over the six planes that hold
        // it (each written in order); the clamp boxes of its render row beside it.
        let mut line = vec![[0.0; 3]; 2 * w];
        let mut boxes = vec![([0.0; 3], [0.0; 3]); if clamped { w } else { 0 }];
        let mut scratch = vec![0u8; if clamped { 8 * w } else { 0 }];
        let kx: Vec<usize> = (0..2 * w).map(|ox| planes_in.render_pixel(ox, 0)).collect();
        for y in rows.clone() {
            if clamped {
                planes_in.row_boxes(y, &mut scratch, &mut boxes);
            }
            for i in 0..2 {
                let oy = 2 * y + i;
                let ky = planes_in.render_pixel(oy, 1);
                for (ox, rgb) in line.iter_mut().enumerate() {
                    *rgb = match previous {
                        Some(prev) => {
                            let v = planes_in.warped(prev, (ox, oy), ky * w + kx[ox]);
                            match boxes.get(ox / 2) {
                                Some((lo, hi)) => [0, 1, 2].map(|c| v[c].max(lo[c]).min(hi[c])),
                                None => v,
                            }
                        }
                        None => planes_in.bilinear_color((ox, oy)),
                    };
                }
                let at = (y - rows.start) * w;
                for j in 0..2 {
                    for c in 0..3 {
                        let plane = &mut p[c * 4 + i * 2 + j][at..at + w];
                        for (v, rgb) in plane.iter_mut().zip(line[j..].iter().step_by(2)) {
                            *v = rgb[c];
                        }
                    }
                }
            }
        }
    });
}

/// The first `N` planes of `n` values of `data`.
fn planes<const N: usize>(data: &mut [f32], n: usize) -> [&mut [f32]; N] {
    let mut rest = &mut data[..N * n];
    std::array::from_fn(|_| {
        let (plane, tail) = std::mem::take(&mut rest).split_at_mut(n);
        rest = tail;
        plane
    })
}

/// `fill(rows, planes)` for bands of at most `band` rows of `rows`, each call given the planes'
/// values of those rows (`w` per row, from the band's first row): halves split at a band's
/// edge and run through `rayon::join` until a half is one band. Nothing is allocated.
fn in_bands<const N: usize, F>(
    planes: [&mut [f32]; N],
    w: usize,
    rows: Range<usize>,
    band: usize,
    fill: &F,
) where
    F: Fn(Range<usize>, &mut [&mut [f32]; N]) + Sync,
{
    if rows.len() <= band {
        let mut planes = planes;
        fill(rows, &mut planes);
        return;
    }
    let mid = rows.start + rows.len().div_ceil(band) / 2 * band;
    let mut top: [&mut [f32]; N] = std::array::from_fn(|_| Default::default());
    let mut bottom: [&mut [f32]; N] = std::array::from_fn(|_| Default::default());
    for (k, plane) in planes.into_iter().enumerate() {
        (top[k], bottom[k]) = plane.split_at_mut((mid - rows.start) * w);
    }
    rayon::join(
        || in_bands(top, w, rows.start..mid, band, fill),
        || in_bands(bottom, w, mid..rows.end, band, fill),
    );
}

/// The history the next frame warps, from the model's `output` (NCHW, 3 planes): clamped to
/// 0..1 and rounded to fp16 (nearest even), as `temporal_post.comp` keeps it; here RGB per
/// pixel in f32 (the fp16 values exactly, read by the warp without a conversion), so `history`
/// is as long as `output`. Large outputs are converted in bands on rayon's pool.
pub fn keep_history(output: &[f32], history: &mut [f32]) {
    let band = if output.len() / 3 < PARALLEL_MIN_PIXELS {
        output.len() / 3
    } else {
        BAND_PIXELS
    };
    keep_history_in_bands(output, history, band);
}

/// [`keep_history`] with bands of `band` pixels.
fn keep_history_in_bands(output: &[f32], history: &mut [f32], band: usize) {
    assert_eq!(
        history.len(),
        output.len(),
        "the history holds RGB of every output pixel"
    );
    let plane = output.len() / 3;
    // Runs of RUN pixels through fp16 by slices: `half` converts those with the CPU's vector
    // instructions where it has them, one value at a time it calls a function per value. The
    // rounding is the same (to nearest even).
    const RUN: usize = 256;
    let convert = |first: usize, pixels: &mut [f32]| {
        let (mut clamped, mut half, mut kept) = ([0.0; RUN], [f16::ZERO; RUN], [[0.0; RUN]; 3]);
        for (k, run) in pixels.chunks_mut(3 * RUN).enumerate() {
            let (len, start) = (run.len() / 3, first + k * RUN);
            for (c, kept) in kept.iter_mut().enumerate() {
                let values = &output[c * plane + start..][..len];
                for (to, v) in clamped.iter_mut().zip(values) {
                    *to = v.clamp(0.0, 1.0);
                }
                half[..len].convert_from_f32_slice(&clamped[..len]);
                half[..len].convert_to_f32_slice(&mut kept[..len]);
            }
            for (i, px) in run.chunks_exact_mut(3).enumerate() {
                px.copy_from_slice(&[kept[0][i], kept[1][i], kept[2][i]]);
            }
        }
    };
    if band >= plane {
        convert(0, history);
    } else {
        history
            .par_chunks_mut(3 * band)
            .enumerate()
            .for_each(|(k, pixels)| convert(k * band, pixels));
    }
}

/// Render size / output size.
const RATIO: f32 = 0.5;

/// v / 255 for every byte v: the same bits as dividing each pixel's value, without a division.
fn unorm_table() -> [f32; 256] {
    std::array::from_fn(|v| v as f32 / 255.0)
}

/// What the history is computed from: this frame's colour (RGBA8 as the renderer gives it,
/// read through `unorm`: the model's colour input exactly, at a third of the bytes), its
/// motion plane as [`fill_inputs`] writes it, and its jitter; at render size.
struct Planes<'a> {
    size: (usize, usize),
    rgba: &'a [u8],
    unorm: &'a [f32; 256],
    motion: &'a [f32],
    jitter: [f32; 2],
    filter: HistoryFilter,
}

impl Planes<'_> {
    /// The colour boxes of render row `y`: per pixel the min and max per colour channel over
    /// the 3×3 pixels around it, clamped to the edge (an edge pixel counted twice changes
    /// neither). On the bytes, as v / 255 keeps their order: each column's min and max over
    /// rows y − 1 ..= y + 1 (in `scratch`, 8 bytes per pixel), then over columns x − 1 ..= x + 1.
    fn row_boxes(&self, y: usize, scratch: &mut [u8], boxes: &mut [([f32; 3], [f32; 3])]) {
        let (w, h) = self.size;
        let row = |yy: usize| &self.rgba[4 * yy * w..4 * (yy + 1) * w];
        let (above, here, below) = (row(y.saturating_sub(1)), row(y), row((y + 1).min(h - 1)));
        let (lo, hi) = scratch.split_at_mut(4 * w);
        for (i, (l, u)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
            (*l, *u) = (
                above[i].min(here[i]).min(below[i]),
                above[i].max(here[i]).max(below[i]),
            );
        }
        for (x, b) in boxes.iter_mut().enumerate() {
            let (l, m, r) = (4 * x.saturating_sub(1), 4 * x, 4 * (x + 1).min(w - 1));
            let min = [0, 1, 2].map(|c| lo[l + c].min(lo[m + c]).min(lo[r + c]));
            let max = [0, 1, 2].map(|c| hi[l + c].max(hi[m + c]).max(hi[r + c]));
            let unorm = |v: [u8; 3]| v.map(|v| self.unorm[v as usize]);
            *b = (unorm(min), unorm(max));
        }
    }

    /// The render pixel (one coordinate, `axis` 0 for x) whose motion output coordinate `o`
    /// takes: floor((o + 0.5) · ratio + jitter), clamped to the frame.
    fn render_pixel(&self, o: usize, axis: usize) -> usize {
        let size = [self.size.0, self.size.1][axis] as i64;
        (floor((o as f32 + 0.5) * RATIO + self.jitter[axis]) as i64).clamp(0, size - 1) as usize
    }

    /// The previous output (RGB per pixel at twice the render size, [`keep_history`]) warped
    /// to output pixel `o` of this frame, whose motion is render pixel `k`'s
    /// ([`Self::render_pixel`] of each coordinate).
    #[inline(always)]
    fn warped(&self, prev: &[f32], o: (usize, usize), k: usize) -> [f32; 3] {
        let (w, h) = (self.size.0 as i64, self.size.1 as i64);
        let centre = (o.0 as f32 + 0.5, o.1 as f32 + 0.5);
        let n = self.size.0 * self.size.1;
        let m = (self.motion[k], self.motion[n + k]);
        let q = (centre.0 - m.0 / RATIO, centre.1 - m.1 / RATIO);
        let (ow, oh) = (2 * w, 2 * h);
        let fetch = |x: i64, y: i64| {
            let p = 3 * (y.clamp(0, oh - 1) * ow + x.clamp(0, ow - 1)) as usize;
            [prev[p], prev[p + 1], prev[p + 2]]
        };
        let s = (q.0 - 0.5, q.1 - 0.5);
        match self.filter {
            HistoryFilter::Bilinear => bilinear(fetch, s),
            HistoryFilter::CatmullRom => catmull_rom(fetch, s),
        }
    }

    /// ONNX Resize linear (half_pixel) ×2 of the frame's colour at output pixel `o`.
    #[inline(always)]
    fn bilinear_color(&self, o: (usize, usize)) -> [f32; 3] {
        let (w, h) = (self.size.0 as i64, self.size.1 as i64);
        let fetch = |x: i64, y: i64| {
            let p = 4 * (y.clamp(0, h - 1) * w + x.clamp(0, w - 1)) as usize;
            let px = &self.rgba[p..p + 3];
            [0, 1, 2].map(|c| self.unorm[px[c] as usize])
        };
        let s = |v: usize| ((v as f32 + 0.5) * 0.5 - 0.5).max(0.0);
        bilinear(fetch, (s(o.0), s(o.1)))
    }
}

/// `x.floor()` without a call into libm (the baseline x86-64 target has no instruction for
/// it, and the warp takes four per output pixel): exact for finite `x` within ±2^63 (from
/// 2^23 on an f32 is an integer and goes through i64 unchanged; below, truncation is exact),
/// except that −0 gives +0.
#[inline(always)]
fn floor(x: f32) -> f32 {
    let t = x as i64 as f32;
    if t > x {
        t - 1.0
    } else {
        t
    }
}

/// Bilinear interpolation at `s` (texel-centre coordinates) of `fetch`, which clamps.
#[inline(always)]
fn bilinear(fetch: impl Fn(i64, i64) -> [f32; 3], s: (f32, f32)) -> [f32; 3] {
    let (fx, fy) = (floor(s.0), floor(s.1));
    let (wx, wy) = (s.0 - fx, s.1 - fy);
    let (x0, y0) = (fx as i64, fy as i64);
    let lerp = |a: [f32; 3], b: [f32; 3], t: f32| [0, 1, 2].map(|c| a[c] + (b[c] - a[c]) * t);
    let top = lerp(fetch(x0, y0), fetch(x0 + 1, y0), wx);
    let bottom = lerp(fetch(x0, y0 + 1), fetch(x0 + 1, y0 + 1), wx);
    lerp(top, bottom, wy)
}

/// The four Catmull-Rom weights of the taps at −1, 0, 1, 2 from the texel at or left of the
/// position, for its fraction `t` in [0, 1) (written as `temporal_pre.comp` and
/// `tools/train/temporal.py` write them).
#[inline(always)]
fn catmull_rom_weights(t: f32) -> [f32; 4] {
    [
        t * (-0.5 + t * (1.0 - 0.5 * t)),
        1.0 + t * t * (-2.5 + 1.5 * t),
        t * (0.5 + t * (2.0 - 1.5 * t)),
        t * t * (-0.5 + 0.5 * t),
    ]
}

/// The separable Catmull-Rom spline at `s` (texel-centre coordinates) of `fetch`, which
/// clamps: each row's four taps summed in x first, then the four rows in y.
#[inline(always)]
fn catmull_rom(fetch: impl Fn(i64, i64) -> [f32; 3], s: (f32, f32)) -> [f32; 3] {
    let (fx, fy) = (floor(s.0), floor(s.1));
    let (wx, wy) = (catmull_rom_weights(s.0 - fx), catmull_rom_weights(s.1 - fy));
    let (x0, y0) = (fx as i64 - 1, fy as i64 - 1);
    let mut sum = [0.0f32; 3];
    for (j, wy) in wy.into_iter().enumerate() {
        let mut row = [0.0f32; 3];
        for (i, wx) in wx.into_iter().enumerate() {
            let v = fetch(x0 + i as i64, y0 + j as i64);
            for c in 0..3 {
                row[c] += wx * v[c];
            }
        }
        for c in 0..3 {
            sum[c] += wy * row[c];
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_is_the_floor() {
        let values = [
            -3.5,
            -1.0,
            -0.75,
            -1e-30,
            0.0,
            1e-30,
            0.5,
            1.0,
            2.999_999_8,
            8388607.5,
        ];
        let more = [
            8388609.0,
            -8388609.0,
            1.5e10,
            -1.5e10,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
        ];
        for x in values.into_iter().chain(more) {
            assert_eq!(floor(x), x.floor(), "{x}");
        }
    }

    /// A frame of `w` x `h` with every input varied (a pseudo-random colour, depth and motion
    /// up to ±3 render pixels) and a previous output of its size.
    fn varied(w: usize, h: usize) -> (Vec<u8>, Vec<f32>, Vec<f16>, Vec<f32>) {
        let mut state = 0x2545_f491_u32;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state
        };
        let n = w * h;
        let color = (0..4 * n).map(|_| next() as u8).collect();
        let depth = (0..n).map(|_| (next() % 1000) as f32 / 1000.0).collect();
        let motion = (0..2 * n)
            .map(|_| f16::from_f32((next() % 600) as f32 / 100.0 - 3.0))
            .collect();
        let prev = (0..12 * n)
            .map(|_| f16::from_f32((next() % 256) as f32 / 255.0).to_f32())
            .collect();
        (color, depth, motion, prev)
    }

    /// Bands of any height (here uneven: the last band is shorter) give the same bits as one
    /// pass over the frame, with and without a history, clamped or not; so do the history's
    /// bands.
    #[test]
    fn the_inputs_and_the_history_filled_in_bands_equal_one_pass() {
        let (w, h) = (37, 23);
        let (color, depth, motion, prev) = varied(w, h);
        let frame = HostFrame {
            width: w,
            height: h,
            color: &color,
            depth: &depth,
            motion: &motion,
            jitter: [-0.3, 0.2],
        };
        for previous in [None, Some(prev.as_slice())] {
            for kind in [
                History::WARPED,
                History::CLAMPED,
                History {
                    clamp: true,
                    filter: HistoryFilter::CatmullRom,
                },
            ] {
                let mut whole = empty_inputs(w, h);
                fill_inputs_in_bands(&frame, previous, kind, &mut whole, h);
                for band in [1, 4, 7, 22] {
                    let mut banded = empty_inputs(w, h);
                    fill_inputs_in_bands(&frame, previous, kind, &mut banded, band);
                    for (a, b) in whole.iter().zip(&banded) {
                        let same = a
                            .data
                            .iter()
                            .zip(&b.data)
                            .all(|(x, y)| x.to_bits() == y.to_bits());
                        assert!(
                            same,
                            "{} differs in bands of {band} rows ({kind:?})",
                            a.name
                        );
                    }
                }
            }
        }
        // Outputs in and out of 0..1, with values between fp16's steps (ties included).
        let output: Vec<f32> = (0..12 * w * h)
            .map(|i| (i % 4099) as f32 / 3000.0 - 0.2 + (i % 3) as f32 * 2f32.powi(-13))
            .collect();
        let plane = 4 * w * h;
        let mut whole = vec![0.0; 12 * w * h];
        keep_history_in_bands(&output, &mut whole, plane);
        for (i, px) in whole.chunks_exact(3).enumerate() {
            for (c, v) in px.iter().enumerate() {
                let one_at_a_time = f16::from_f32(output[c * plane + i].clamp(0.0, 1.0)).to_f32();
                assert_eq!(
                    v.to_bits(),
                    one_at_a_time.to_bits(),
                    "pixel {i} channel {c}"
                );
            }
        }
        for band in [1, 100, 1000] {
            let mut banded = vec![0.0; 12 * w * h];
            keep_history_in_bands(&output, &mut banded, band);
            assert!(
                whole
                    .iter()
                    .zip(&banded)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{band}"
            );
        }
    }

    fn frame<'a>(color: &'a [u8], depth: &'a [f32], motion: &'a [f16]) -> HostFrame<'a> {
        HostFrame {
            width: 4,
            height: 2,
            color,
            depth,
            motion,
            jitter: [0.25, -0.25],
        }
    }

    #[test]
    fn a_still_frame_warps_the_previous_output_onto_itself() {
        let color = vec![128u8; 4 * 8];
        let depth = vec![0.5; 8];
        let motion = vec![f16::ZERO; 16];
        let prev: Vec<f32> = (0..8 * 4 * 3)
            .map(|i| f16::from_f32((i * 7 % 256) as f32 / 255.0).to_f32())
            .collect();
        let t = inputs(
            &frame(&color, &depth, &motion),
            Some(&prev),
            History::WARPED,
        );
        let history = &t[3].data;
        // Output pixel (2x + j, 2y + i) of channel c sits at channel c*4 + i*2 + j.
        for (ox, oy, c) in [(0, 0, 0), (5, 3, 2), (7, 1, 1)] {
            let (x, y, i, j) = (ox / 2, oy / 2, oy % 2, ox % 2);
            let got = history[(c * 4 + i * 2 + j) * 8 + y * 4 + x];
            let want = prev[3 * (oy * 8 + ox) + c];
            assert_eq!(got, want, "output pixel ({ox}, {oy}) channel {c}");
        }
        assert_eq!(t[4].data[0], 0.25);
        assert_eq!(t[4].data[8], -0.25);
    }

    #[test]
    fn motion_moves_the_history_and_a_reset_takes_the_bilinear_colour() {
        let color: Vec<u8> = (0..8).flat_map(|i| [i as u8 * 30, 0, 0, 255]).collect();
        let depth = vec![0.5; 8];
        // Everything moved right by half a render pixel = one output pixel.
        let motion: Vec<f16> = (0..16)
            .map(|i| f16::from_f32(if i % 2 == 0 { 0.5 } else { 0.0 }))
            .collect();
        let prev: Vec<f32> = (0..8 * 4)
            .flat_map(|i| [f16::from_f32(i as f32 / 255.0).to_f32(), 0.0, 0.0])
            .collect();
        let t = inputs(
            &frame(&color, &depth, &motion),
            Some(&prev),
            History::WARPED,
        );
        // Output pixel (3, 0) (x 1, j 1: channel 1, pixel 1) shows what the previous output
        // had at (2, 0).
        let sub1 = 8;
        assert_eq!(t[3].data[sub1 + 1], f16::from_f32(2.0 / 255.0).to_f32());
        let reset = inputs(&frame(&color, &depth, &motion), None, History::WARPED);
        // Output pixel (1, 0): source x 0.25 between colours 0 and 30.
        let want = (0.75 * 0.0 + 0.25 * 30.0) / 255.0;
        assert!((reset[3].data[sub1] - want).abs() < 1e-6);
    }

    /// Keys' cubic convolution kernel with a = −0.5 (the Catmull-Rom spline), written from its
    /// piecewise definition: a second writing of [`catmull_rom_weights`].
    fn keys(x: f64) -> f64 {
        let x = x.abs();
        if x <= 1.0 {
            1.5 * x * x * x - 2.5 * x * x + 1.0
        } else if x < 2.0 {
            -0.5 * x * x * x + 2.5 * x * x - 4.0 * x + 2.0
        } else {
            0.0
        }
    }

    #[test]
    fn the_catmull_rom_history_is_keys_cubic_and_keeps_texels_and_ramps() {
        // An 8 x 6 image with a different value in every texel and channel.
        let (w, h) = (8i64, 6i64);
        let value = |x: i64, y: i64, c: usize| ((x * 7 + y * 13 + c as i64 * 5) % 17) as f32 / 16.0;
        let fetch = |x: i64, y: i64| {
            let (x, y) = (x.clamp(0, w - 1), y.clamp(0, h - 1));
            [0, 1, 2].map(|c| value(x, y, c))
        };
        // At texel centres it is the texel (the weights are 0, 1, 0, 0).
        for (x, y) in [(0, 0), (3, 2), (7, 5)] {
            assert_eq!(catmull_rom(fetch, (x as f32, y as f32)), fetch(x, y));
        }
        // Between them it is the separable cubic convolution, edge texels repeated.
        for s in [
            (2.25f32, 1.5f32),
            (0.1, 4.9),
            (6.75, 0.3),
            (-0.4, 5.6),
            (3.999, 2.001),
        ] {
            let got = catmull_rom(fetch, s);
            for (c, got) in got.into_iter().enumerate() {
                let mut want = 0.0;
                for y in s.1.floor() as i64 - 1..=s.1.floor() as i64 + 2 {
                    for x in s.0.floor() as i64 - 1..=s.0.floor() as i64 + 2 {
                        let k = keys(f64::from(s.0) - x as f64) * keys(f64::from(s.1) - y as f64);
                        want += k * f64::from(fetch(x, y)[c]);
                    }
                }
                assert!(
                    (f64::from(got) - want).abs() < 1e-6,
                    "{s:?} {c}: {got} vs {want}"
                );
            }
        }
        // A ramp away from the edges comes back exactly (the spline reproduces lines).
        let ramp = |x: i64, _y: i64| [x as f32 * 0.125, 0.5, 1.0 - x as f32 * 0.0625];
        for x in [1.0f32, 1.3, 2.5, 4.875] {
            let got = catmull_rom(ramp, (x, 3.7));
            let want = [x * 0.125, 0.5, 1.0 - x * 0.0625];
            for c in 0..3 {
                assert!((got[c] - want[c]).abs() < 1e-6, "{x} {c}: {got:?}");
            }
        }
    }

    #[test]
    fn a_catmull_rom_model_is_fed_the_sharper_warp_and_a_bilinear_one_the_first() {
        // One bright output column in a dark previous output, moved half an output pixel:
        // bilinear spreads it over two columns, Catmull-Rom keeps more of it and rings beside it.
        let (w, h) = (4, 2);
        let color = vec![128u8; 4 * w * h];
        let depth = vec![0.5; w * h];
        let motion: Vec<f16> = [0.25f32, 0.0]
            .iter()
            .flat_map(|&m| vec![f16::from_f32(m); w * h])
            .collect();
        let prev: Vec<f32> = (0..2 * w * 2 * h)
            .flat_map(|i| [if i % (2 * w) == 3 { 1.0 } else { 0.0 }; 3])
            .collect();
        let f = frame(&color, &depth, &motion);
        let bilinear = inputs(&f, Some(&prev), History::WARPED);
        let sharp = History {
            clamp: false,
            filter: HistoryFilter::CatmullRom,
        };
        let cr = inputs(&f, Some(&prev), sharp);
        // Output column 3 of row 0 reads q = 3.5 − 0.5 = 3.0: between columns 2 and 3.
        // Output pixel (3, 0) is render pixel (1, 0), sub-pixel (0, 1): red is channel 1.
        let at = |x: usize| w * h + x;
        assert_eq!(bilinear[3].data[at(1)], 0.5);
        assert_eq!(cr[3].data[at(1)], 0.5625);
        // Output column 5 reads q = 5.0, between columns 4 and 5, two texels from the bright
        // one: Catmull-Rom's negative lobe.
        assert_eq!(bilinear[3].data[at(2)], 0.0);
        assert_eq!(cr[3].data[at(2)], -0.0625);
        // A reset's history is the bilinear colour whatever the filter.
        assert_eq!(
            inputs(&f, None, sharp)[3].data,
            inputs(&f, None, History::WARPED)[3].data
        );
    }

    #[test]
    fn a_clamped_history_stays_in_the_box_of_the_colour_around_its_render_pixel() {
        // Red ramps 0, 30, .. 210 over the 4 x 2 frame; green 100 everywhere; blue 0.
        let color: Vec<u8> = (0..8).flat_map(|i| [i as u8 * 30, 100, 0, 255]).collect();
        let depth = vec![0.5; 8];
        let motion = vec![f16::ZERO; 16];
        // A previous output far outside every box in red and blue, inside it in green.
        let prev: Vec<f32> = (0..8 * 4)
            .flat_map(|_| [1.0, 100.0 / 255.0, 1.0].map(|v| f16::from_f32(v).to_f32()))
            .collect();
        let f = frame(&color, &depth, &motion);
        let plain = inputs(&f, Some(&prev), History::WARPED);
        let clamped = inputs(&f, Some(&prev), History::CLAMPED);
        let n = 8;
        for (x, y) in [(0, 0), (1, 0), (3, 1), (2, 1)] {
            // The 3x3 box around (x, y), clamped to the edge: rows 0..=1 always, columns x-1..=x+1.
            let cols = x.max(1) - 1..=(x + 1).min(3);
            let red: Vec<f32> = (0..2)
                .flat_map(|yy| {
                    cols.clone()
                        .map(move |xx| (yy * 4 + xx) as f32 * 30.0 / 255.0)
                })
                .collect();
            let hi = red.iter().cloned().fold(f32::MIN, f32::max);
            for sub in 0..4 {
                let at = |c: usize| (c * 4 + sub) * n + y * 4 + x;
                assert_eq!(plain[3].data[at(0)], 1.0);
                assert_eq!(clamped[3].data[at(0)], hi, "red at ({x}, {y}) sub {sub}");
                // Green's box is one value: the fp16 history's own rounding is clamped away.
                assert_eq!(clamped[3].data[at(1)], 100.0 / 255.0, "green");
                assert_eq!(clamped[3].data[at(2)], 0.0, "blue");
            }
        }
        // A reset's history is the bilinear colour either way.
        let reset = inputs(&f, None, History::CLAMPED);
        assert_eq!(reset[3].data, inputs(&f, None, History::WARPED)[3].data);
    }

    #[test]
    fn the_kept_history_is_the_clamped_output_in_fp16() {
        // Two output pixels, planes R, G, B.
        let output = [1.5, 0.1, -0.2, 0.333_333_34, 0.5, 1.0];
        let mut history = vec![0.0; 6];
        keep_history(&output, &mut history);
        let third = f16::from_f32(0.333_333_34).to_f32();
        assert_eq!(
            history,
            [1.0, 0.0, 0.5, 0.1f32, third, 1.0].map(|v| f16::from_f32(v).to_f32())
        );
        // fp16 keeps far finer steps than the 8-bit image: 1/2048 near 1.
        assert!((third - 1.0 / 3.0).abs() < 1.0 / 2048.0);
    }

    /// Milliseconds per call at 960x540 render (1920x1080 output), in bands on rayon's pool
    /// beside one pass on the caller's thread. The test profile builds this crate at opt-level
    /// 1, so time it in release:
    /// `cargo test --release --lib temporal::tests::timing -- --ignored --nocapture`.
    #[test]
    #[ignore = "timing: run in release with --ignored --nocapture"]
    fn timing_960x540() {
        const ITERS: u32 = 20;
        let (w, h) = (960, 540);
        let (color, depth, motion, prev) = varied(w, h);
        let frame = HostFrame {
            width: w,
            height: h,
            color: &color,
            depth: &depth,
            motion: &motion,
            jitter: [-0.3, 0.2],
        };
        let mut tensors = empty_inputs(w, h);
        let mut output = vec![0.0; 12 * w * h];
        let mut history = vec![0.0; 12 * w * h];
        // Median and fastest of the calls: this machine's other tenants slow some calls down
        // by 2x and more.
        let time = |name: &str, f: &mut dyn FnMut()| {
            f(); // first touch and thread start-up are not per-frame costs
            let mut ms: Vec<f64> = (0..ITERS)
                .map(|_| {
                    let t = std::time::Instant::now();
                    f();
                    t.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            ms.sort_by(f64::total_cmp);
            let (median, fastest) = (ms[ms.len() / 2], ms[0]);
            println!("{name:<44} {median:8.3} ms median, {fastest:8.3} fastest ({w}x{h} render)");
        };
        let threads = rayon::current_num_threads();
        for (label, previous) in [("reset", None), ("warped + clamped", Some(prev.as_slice()))] {
            time(&format!("fill_inputs {label}, one thread"), &mut || {
                fill_inputs_in_bands(&frame, previous, History::CLAMPED, &mut tensors, h)
            });
            time(
                &format!("fill_inputs {label}, {threads} threads"),
                &mut || fill_inputs(&frame, previous, History::CLAMPED, &mut tensors),
            );
        }
        time("  of which the planes (moving), one thread", &mut || {
            fill_planes(&frame, true, &mut tensors, h)
        });
        time("  of which the history (warped), one thread", &mut || {
            fill_history(&frame, Some(&prev), History::WARPED, &mut tensors, h)
        });
        time("  of which the history (clamped), one thread", &mut || {
            fill_history(&frame, Some(&prev), History::CLAMPED, &mut tensors, h)
        });
        time("  of which the history (reset), one thread", &mut || {
            fill_history(&frame, None, History::CLAMPED, &mut tensors, h)
        });
        for (i, v) in output.iter_mut().enumerate() {
            *v = (i % 300) as f32 / 250.0 - 0.1;
        }
        time("keep_history, one thread", &mut || {
            keep_history_in_bands(&output, &mut history, 4 * w * h)
        });
        time(&format!("keep_history, {threads} threads"), &mut || {
            keep_history(&output, &mut history)
        });
    }
}
