//! Sub-pixel camera jitter for temporal upscalers (`render.jitter`): each frame the projection is
//! shifted by a Halton(2,3) offset in [-0.5, 0.5) render pixels, so successive frames sample
//! different points inside each pixel and the upscaler's history can gather them.
//!
//! Offsets are in render pixels, +x to the right and +y down the image (the direction pixel rows
//! are stored in). The sequence length follows the shipped upscalers' guidance: at least
//! 8 × scale² frames (32 at x2, 72 at x3), so every output pixel sees several samples.

use glam::{Mat4, Vec2, Vec3};

/// `render.jitter`: when the scene pass jitters its projection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JitterMode {
    /// On exactly while the active upscaler accumulates over frames (a temporal pattern).
    Auto,
    Off,
    /// Always on (tests, the motion-vector debug view).
    Halton,
}

impl JitterMode {
    /// The names `render.jitter` accepts, in [`JitterMode::parse`]'s order.
    pub const NAMES: [&'static str; 3] = ["auto", "off", "halton"];

    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(Self::Auto),
            "off" => Some(Self::Off),
            "halton" => Some(Self::Halton),
            _ => None,
        }
    }

    /// Whether frames are jittered while an upscaler that is (`temporal`) or is not temporal runs.
    pub fn active(self, temporal: bool) -> bool {
        match self {
            Self::Auto => temporal,
            Self::Off => false,
            Self::Halton => true,
        }
    }
}

/// The radical inverse of `index` in `base`: element `index` of the Halton sequence, in [0, 1).
/// Index 0 gives 0; 1, 2, 3 … give 1/2, 1/4, 3/4 … in base 2 and 1/3, 2/3, 1/9 … in base 3.
pub fn halton(mut index: u32, base: u32) -> f32 {
    let mut f = 1.0f64;
    let mut r = 0.0f64;
    while index > 0 {
        f /= base as f64;
        r += f * (index % base) as f64;
        index /= base;
    }
    r as f32
}

/// Frames in one jitter period for an upscale factor of `scale` (output / render width):
/// 8 × scale², rounded up, at least 8.
pub fn sequence_len(scale: f32) -> u32 {
    ((8.0 * scale * scale).ceil() as u32).max(8)
}

/// The offset of frame `frame_index` in a period of `len` frames, in [-0.5, 0.5) render pixels.
/// The Halton index starts at 1: index 0 would be the pixel corner (-0.5, -0.5) for every base.
pub fn jitter(frame_index: u64, len: u32) -> Vec2 {
    let i = (frame_index % len.max(1) as u64) as u32 + 1;
    Vec2::new(halton(i, 2) - 0.5, halton(i, 3) - 0.5)
}

/// `proj` shifted by `offset` render pixels on an image of `size` pixels: clip space moves by
/// 2 × offset / size (times w, so the shift is the same at every depth).
pub fn jittered(proj: Mat4, offset: Vec2, size: (u32, u32)) -> Mat4 {
    let ndc = 2.0 * offset / Vec2::new(size.0 as f32, size.1 as f32);
    Mat4::from_translation(Vec3::new(ndc.x, ndc.y, 0.0)) * proj
}

/// The running sequence: one step per rendered frame, restarted on a reset (camera cut,
/// restart, a new upscaler) so a fresh history starts from the sequence's first sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Jitter {
    index: u64,
    len: u32,
}

impl Jitter {
    pub fn new(len: u32) -> Self {
        Self {
            index: 0,
            len: len.max(1),
        }
    }

    /// Frames in one period.
    pub fn period(&self) -> u32 {
        self.len
    }

    /// The frame index within the period the next [`Jitter::next`] uses.
    pub fn index(&self) -> u32 {
        (self.index % self.len as u64) as u32
    }

    /// This frame's offset; advances the sequence.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Vec2 {
        let j = jitter(self.index, self.len);
        self.index += 1;
        j
    }

    pub fn reset(&mut self) {
        self.index = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glam::Vec4;

    #[test]
    fn halton_first_values() {
        let b2: Vec<f32> = (1..=7).map(|i| halton(i, 2)).collect();
        assert_eq!(b2, [0.5, 0.25, 0.75, 0.125, 0.625, 0.375, 0.875]);
        let b3: Vec<f32> = (1..=6).map(|i| halton(i, 3)).collect();
        let want = [
            1.0 / 3.0,
            2.0 / 3.0,
            1.0 / 9.0,
            4.0 / 9.0,
            7.0 / 9.0,
            2.0 / 9.0,
        ];
        for (got, want) in b3.iter().zip(want) {
            assert!((got - want).abs() < 1e-6, "{b3:?}");
        }
        assert_eq!(halton(0, 2), 0.0);
    }

    #[test]
    fn sequence_length_follows_the_scale() {
        assert_eq!(sequence_len(2.0), 32);
        assert_eq!(sequence_len(3.0), 72);
        assert_eq!(sequence_len(1.5), 18);
        assert_eq!(sequence_len(1.0), 8);
        assert_eq!(sequence_len(0.5), 8);
    }

    #[test]
    fn offsets_stay_inside_the_pixel_and_average_to_its_centre() {
        for len in [8, 32, 72] {
            let all: Vec<Vec2> = (0..len as u64).map(|i| jitter(i, len)).collect();
            for j in &all {
                assert!(j.x >= -0.5 && j.x < 0.5 && j.y >= -0.5 && j.y < 0.5, "{j}");
            }
            let mean = all.iter().copied().sum::<Vec2>() / len as f32;
            // A low-discrepancy set: the mean is within about 1/len of the centre.
            assert!(
                mean.abs().max_element() < 1.5 / len as f32,
                "len {len}: {mean}"
            );
        }
    }

    #[test]
    fn the_sequence_repeats_after_its_period_and_restarts_on_reset() {
        let mut j = Jitter::new(32);
        let first: Vec<Vec2> = (0..32).map(|_| j.next()).collect();
        assert_eq!(j.index(), 0, "one period done");
        let second: Vec<Vec2> = (0..32).map(|_| j.next()).collect();
        assert_eq!(first, second);
        for (i, a) in first.iter().enumerate() {
            assert!(
                !first[i + 1..].contains(a),
                "offset {i} repeats within a period"
            );
        }
        j.next();
        j.next();
        assert_eq!(j.index(), 2);
        j.reset();
        assert_eq!(j.index(), 0);
        assert_eq!(j.next(), first[0]);
        assert_eq!(first[0], Vec2::new(0.0, 1.0 / 3.0 - 0.5));
    }

    #[test]
    fn jittered_projection_moves_every_depth_by_the_offset() {
        let proj = crate::game::camera::Camera {
            pos: Vec3::ZERO,
            yaw: 0.0,
            pitch: 0.0,
            fov_y: 1.0,
        }
        .proj(16.0 / 9.0);
        let size = (160, 90);
        let offset = Vec2::new(0.25, -0.375);
        let moved = jittered(proj, offset, size);
        for p in [
            Vec4::new(0.3, -0.2, -1.0, 1.0),
            Vec4::new(-4.0, 2.0, -50.0, 1.0),
        ] {
            let pixel = |m: Mat4| {
                let c = m * p;
                let ndc = Vec2::new(c.x, c.y) / c.w;
                (ndc * 0.5 + 0.5) * Vec2::new(size.0 as f32, size.1 as f32)
            };
            let d = pixel(moved) - pixel(proj);
            assert!((d - offset).abs().max_element() < 1e-3, "{d}");
            assert_eq!((moved * p).z, (proj * p).z, "depth is not jittered");
        }
        assert_eq!(jittered(proj, Vec2::ZERO, size), proj);
    }

    #[test]
    fn modes() {
        for name in JitterMode::NAMES {
            assert!(JitterMode::parse(name).is_some());
        }
        assert_eq!(JitterMode::parse("on"), None);
        assert!(!JitterMode::Auto.active(false));
        assert!(JitterMode::Auto.active(true));
        assert!(!JitterMode::Off.active(true));
        assert!(JitterMode::Halton.active(false));
    }
}
