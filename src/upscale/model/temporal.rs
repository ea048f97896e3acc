//! A temporal model's five inputs built on the host from one frame and the previous output:
//! the definition `shaders/upscale/temporal_pre.comp` computes on the GPU and
//! `tools/train/temporal.py` trains with, written out plainly so tests can hold the shader to
//! it (and a host-side pattern could feed the model with it).
//!
//! For output pixel o (centre o + 0.5), ratio = render size / output size (1/2):
//! p = (o + 0.5) · ratio; k = clamp(floor(p + jitter)); q = (o + 0.5) − motion\[k\] / ratio;
//! history\[o\] = bilinear(previous output, q), clamped to the edge, where the previous output
//! is the model's output clamped to 0..1 and rounded to fp16 ([`keep_history`]; a float history
//! carries no 8-bit rounding from frame to frame); on a reset the bilinear ×2
//! of the colour (ONNX Resize linear, half_pixel) and zero motion (a sequence's first frame has
//! none, whatever ended the history). Space-to-depth: channel c·4 + i·2 + j
//! holds output pixel (2y + i, 2x + j) of colour c.
//!
//! A model whose metadata says `upscale.history_clamp = color_3x3` ([`History::Clamped`]) takes
//! the warped history clamped, per colour channel, to the box (min, max) of this frame's colour
//! over the 3×3 render pixels around render pixel (x, y) that holds it (clamped to the edge):
//! what the previous output brings into a frame is never further from the frame's own samples
//! than that box, so a correction the model makes again and again cannot pile up while the
//! camera stands still. A reset's bilinear colour lies in the box already.

use half::f16;

use super::info::TEMPORAL_INPUTS;
use super::NamedTensor;

/// Which history a temporal model takes (its `upscale.history_clamp` metadata,
/// [`super::history_clamp`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum History {
    /// The previous output warped to this frame.
    Warped,
    /// That, clamped to the 3×3 box of this frame's colour.
    Clamped,
}

impl History {
    pub fn from_clamp(clamp: bool) -> Self {
        if clamp {
            History::Clamped
        } else {
            History::Warped
        }
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
/// output as [`keep_history`] keeps it (RGBA fp16 at twice the render size), None on a reset.
pub fn inputs(frame: &HostFrame, previous: Option<&[f16]>, kind: History) -> Vec<NamedTensor> {
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

/// [`inputs`] written into `tensors` (from [`empty_inputs`] of the frame's size).
pub fn fill_inputs(
    frame: &HostFrame,
    previous: Option<&[f16]>,
    kind: History,
    tensors: &mut [NamedTensor],
) {
    let (w, h) = (frame.width, frame.height);
    let n = w * h;
    let [color, depth, motion, history, jitter] = tensors else {
        panic!("{} input tensors, a temporal model has 5", tensors.len());
    };
    for i in 0..n {
        for c in 0..3 {
            color.data[c * n + i] = f32::from(frame.color[4 * i + c]) / 255.0;
        }
        depth.data[i] = frame.depth[i];
        // A frame without history is a sequence's first: no motion.
        let moving = previous.is_some();
        motion.data[i] = if moving {
            frame.motion[2 * i].to_f32()
        } else {
            0.0
        };
        motion.data[n + i] = if moving {
            frame.motion[2 * i + 1].to_f32()
        } else {
            0.0
        };
        jitter.data[i] = frame.jitter[0];
        jitter.data[n + i] = frame.jitter[1];
    }
    let (ow, oh) = (2 * w, 2 * h);
    for y in 0..h {
        for x in 0..w {
            // The box clamps a warped history only: a reset's history is the frame itself.
            let clamped = kind == History::Clamped && previous.is_some();
            let bounds = clamped.then(|| color_box(&color.data, (w, h), (x, y)));
            for sub in 0..4 {
                let (i, j) = (sub / 2, sub % 2);
                let (ox, oy) = (2 * x + j, 2 * y + i);
                let rgb = match previous {
                    Some(prev) => {
                        let rgb = warped(frame, prev, (ox, oy), (ow, oh));
                        match bounds {
                            Some((lo, hi)) => [0, 1, 2].map(|c| rgb[c].max(lo[c]).min(hi[c])),
                            None => rgb,
                        }
                    }
                    None => bilinear_color(frame, (ox, oy)),
                };
                for (c, v) in rgb.into_iter().enumerate() {
                    history.data[(c * 4 + sub) * n + y * w + x] = v;
                }
            }
        }
    }
}

/// The history the next frame warps, from the model's `output` (NCHW, 3 planes): clamped to
/// 0..1 and rounded to fp16 (nearest even), RGBA per pixel (alpha 1) as `temporal_post.comp`
/// writes its history buffer.
pub fn keep_history(output: &[f32], history: &mut [f16]) {
    let plane = output.len() / 3;
    assert_eq!(
        history.len(),
        4 * plane,
        "history holds RGBA of every output pixel"
    );
    let (r, rest) = output.split_at(plane);
    let (g, b) = rest.split_at(plane);
    for (((px, r), g), b) in history.chunks_exact_mut(4).zip(r).zip(g).zip(b) {
        let keep = |v: f32| f16::from_f32(v.clamp(0.0, 1.0));
        px.copy_from_slice(&[keep(*r), keep(*g), keep(*b), f16::ONE]);
    }
}

/// The min and max per colour channel of the colour planes (`[3][h][w]`, as the model takes
/// them) over the 3×3 pixels around `p`, clamped to the edge.
fn color_box(color: &[f32], size: (usize, usize), p: (usize, usize)) -> ([f32; 3], [f32; 3]) {
    let (w, h) = size;
    let (mut lo, mut hi) = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3]);
    for y in p.1.saturating_sub(1)..=(p.1 + 1).min(h - 1) {
        for x in p.0.saturating_sub(1)..=(p.0 + 1).min(w - 1) {
            for c in 0..3 {
                let v = color[c * w * h + y * w + x];
                lo[c] = lo[c].min(v);
                hi[c] = hi[c].max(v);
            }
        }
    }
    (lo, hi)
}

/// The previous output warped to output pixel `o` of this frame.
fn warped(frame: &HostFrame, prev: &[f16], o: (usize, usize), size: (usize, usize)) -> [f32; 3] {
    const RATIO: f32 = 0.5;
    let (w, h) = (frame.width as i64, frame.height as i64);
    let centre = (o.0 as f32 + 0.5, o.1 as f32 + 0.5);
    let kx = ((centre.0 * RATIO + frame.jitter[0]).floor() as i64).clamp(0, w - 1);
    let ky = ((centre.1 * RATIO + frame.jitter[1]).floor() as i64).clamp(0, h - 1);
    let k = (ky * w + kx) as usize;
    let m = (
        frame.motion[2 * k].to_f32(),
        frame.motion[2 * k + 1].to_f32(),
    );
    let q = (centre.0 - m.0 / RATIO, centre.1 - m.1 / RATIO);
    let fetch = |x: i64, y: i64| {
        let x = x.clamp(0, size.0 as i64 - 1) as usize;
        let y = y.clamp(0, size.1 as i64 - 1) as usize;
        let p = 4 * (y * size.0 + x);
        [0, 1, 2].map(|c| prev[p + c].to_f32())
    };
    bilinear(fetch, (q.0 - 0.5, q.1 - 0.5))
}

/// ONNX Resize linear (half_pixel) ×2 of the frame's colour at output pixel `o`.
fn bilinear_color(frame: &HostFrame, o: (usize, usize)) -> [f32; 3] {
    let (w, h) = (frame.width as i64, frame.height as i64);
    let fetch = |x: i64, y: i64| {
        let p = 4 * (y.clamp(0, h - 1) * w + x.clamp(0, w - 1)) as usize;
        [0, 1, 2].map(|c| f32::from(frame.color[p + c]) / 255.0)
    };
    let s = |v: usize| ((v as f32 + 0.5) * 0.5 - 0.5).max(0.0);
    bilinear(fetch, (s(o.0), s(o.1)))
}

/// Bilinear interpolation at `s` (texel-centre coordinates) of `fetch`, which clamps.
fn bilinear(fetch: impl Fn(i64, i64) -> [f32; 3], s: (f32, f32)) -> [f32; 3] {
    let (fx, fy) = (s.0.floor(), s.1.floor());
    let (wx, wy) = (s.0 - fx, s.1 - fy);
    let (x0, y0) = (fx as i64, fy as i64);
    let lerp = |a: [f32; 3], b: [f32; 3], t: f32| [0, 1, 2].map(|c| a[c] + (b[c] - a[c]) * t);
    let top = lerp(fetch(x0, y0), fetch(x0 + 1, y0), wx);
    let bottom = lerp(fetch(x0, y0 + 1), fetch(x0 + 1, y0 + 1), wx);
    lerp(top, bottom, wy)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let prev: Vec<f16> = (0..8 * 4 * 4)
            .map(|i| f16::from_f32((i * 7 % 256) as f32 / 255.0))
            .collect();
        let t = inputs(
            &frame(&color, &depth, &motion),
            Some(&prev),
            History::Warped,
        );
        let history = &t[3].data;
        // Output pixel (2x + j, 2y + i) of channel c sits at channel c*4 + i*2 + j.
        for (ox, oy, c) in [(0, 0, 0), (5, 3, 2), (7, 1, 1)] {
            let (x, y, i, j) = (ox / 2, oy / 2, oy % 2, ox % 2);
            let got = history[(c * 4 + i * 2 + j) * 8 + y * 4 + x];
            let want = prev[4 * (oy * 8 + ox) + c].to_f32();
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
        let prev: Vec<f16> = (0..8 * 4)
            .flat_map(|i| {
                [
                    f16::from_f32(i as f32 / 255.0),
                    f16::ZERO,
                    f16::ZERO,
                    f16::ONE,
                ]
            })
            .collect();
        let t = inputs(
            &frame(&color, &depth, &motion),
            Some(&prev),
            History::Warped,
        );
        // Output pixel (3, 0) (x 1, j 1: channel 1, pixel 1) shows what the previous output
        // had at (2, 0).
        let sub1 = 8;
        assert_eq!(t[3].data[sub1 + 1], f16::from_f32(2.0 / 255.0).to_f32());
        let reset = inputs(&frame(&color, &depth, &motion), None, History::Warped);
        // Output pixel (1, 0): source x 0.25 between colours 0 and 30.
        let want = (0.75 * 0.0 + 0.25 * 30.0) / 255.0;
        assert!((reset[3].data[sub1] - want).abs() < 1e-6);
    }

    #[test]
    fn a_clamped_history_stays_in_the_box_of_the_colour_around_its_render_pixel() {
        // Red ramps 0, 30, .. 210 over the 4 x 2 frame; green 100 everywhere; blue 0.
        let color: Vec<u8> = (0..8).flat_map(|i| [i as u8 * 30, 100, 0, 255]).collect();
        let depth = vec![0.5; 8];
        let motion = vec![f16::ZERO; 16];
        // A previous output far outside every box in red and blue, inside it in green.
        let prev: Vec<f16> = (0..8 * 4)
            .flat_map(|_| [1.0, 100.0 / 255.0, 1.0, 1.0].map(f16::from_f32))
            .collect();
        let f = frame(&color, &depth, &motion);
        let plain = inputs(&f, Some(&prev), History::Warped);
        let clamped = inputs(&f, Some(&prev), History::Clamped);
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
        let reset = inputs(&f, None, History::Clamped);
        assert_eq!(reset[3].data, inputs(&f, None, History::Warped)[3].data);
    }

    #[test]
    fn the_kept_history_is_the_clamped_output_in_fp16() {
        // Two output pixels, planes R, G, B.
        let output = [1.5, 0.1, -0.2, 0.333_333_34, 0.5, 1.0];
        let mut history = vec![f16::ZERO; 8];
        keep_history(&output, &mut history);
        let got: Vec<f32> = history.iter().map(|v| v.to_f32()).collect();
        let third = f16::from_f32(0.333_333_34).to_f32();
        assert_eq!(
            got,
            [1.0, 0.0, 0.5, 1.0, 0.1f32, third, 1.0, 1.0].map(|v| { f16::from_f32(v).to_f32() })
        );
        // fp16 keeps far finer steps than the 8-bit image: 1/2048 near 1.
        assert!((third - 1.0 / 3.0).abs() < 1.0 / 2048.0);
    }
}
