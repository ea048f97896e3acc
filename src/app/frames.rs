//! Low-resolution / supersampled frame pairs of arbitrary camera poses, for the dataset and
//! quality tools.
//!
//! The low-resolution frame is the game's own scene image at the configured render size and
//! `render.msaa`. The reference is the same view rendered by the same pass (so with the same
//! MSAA) at `supersample ×` the output size and box-filtered down on the CPU, averaging in linear
//! light: the scene image is display-encoded (sRGB-like), and averaging encoded values would
//! darken thin bright features (orbs, fence wires against the sky) compared with what a camera
//! with a real pixel footprint would see.
//!
//! A *temporal* source ([`FrameSource::temporal`], the sequence dataset) draws the
//! low-resolution frame as the game draws it for a temporal upscaler (`taau`): with the
//! renderer's Halton jitter, restarted by [`FrameSource::start_sequence`], textures sampled with
//! the upscaler-input mip bias, and the motion vectors and depth read back beside it. The
//! reference stays unjittered.

use std::mem::ManuallyDrop;

use anyhow::Context as _;
use ash::vk;
use glam::Vec2;

use super::config::Config;
use super::paths;
use super::session::check_msaa;
use crate::game::camera::Camera;
use crate::game::jitter::{self, Jitter};
use crate::game::poses::Pose;
use crate::game::{textures, world::World};
use crate::gpu::{Gpu, Validation};
use crate::render::offscreen::Offscreen;

/// One rendered view: RGBA8 at render size and at output size.
pub struct FramePair {
    pub lr: image::RgbaImage,
    pub hr: image::RgbaImage,
    /// The view rendered at output size by the same pass (with `render.msaa`), not
    /// supersampled: what the game draws at full resolution without an upscaler
    /// ([`FrameSource::with_native`] only).
    pub native: Option<image::RgbaImage>,
}

pub struct FrameSource {
    offscreen: ManuallyDrop<Offscreen>,
    world: World,
    fov_y: f32,
    supersample: u32,
    /// Offscreen has a third target at output size (see [`FramePair::native`]).
    native: bool,
    /// The jitter sequence of a temporal source ([`FrameSource::temporal`]).
    jitter: Option<Jitter>,
    pub render: (u32, u32),
    pub output: (u32, u32),
    /// Samples per pixel of the scene pass, at both sizes (`render.msaa`).
    pub msaa: u32,
    /// Declared last: dropped after the offscreen resources were destroyed in `Drop`.
    pub gpu: Gpu,
}

impl FrameSource {
    /// Sizes from `config` (`render.*`); the reference is rendered at `supersample ×` output.
    pub fn new(config: &Config, supersample: u32) -> anyhow::Result<Self> {
        Self::create(config, supersample, false, false)
    }

    /// As [`FrameSource::new`], and each view is also rendered at output size without
    /// supersampling ([`FramePair::native`]) when `supersample` > 1 (at 1 that is the reference).
    pub fn with_native(config: &Config, supersample: u32) -> anyhow::Result<Self> {
        Self::create(config, supersample, supersample > 1, false)
    }

    /// As [`FrameSource::new`], but the low-resolution frame is a temporal upscaler's input
    /// (see the module doc): render with [`FrameSource::render_temporal`].
    pub fn temporal(config: &Config, supersample: u32) -> anyhow::Result<Self> {
        let mut source = Self::create(config, supersample, false, true)?;
        let (render, output) = (source.render, source.output);
        // The renderer's period for this scale (`render::temporal`): 8 x scale^2 frames.
        let scale = output.0 as f32 / render.0 as f32;
        source.jitter = Some(Jitter::new(jitter::sequence_len(scale)));
        source.offscreen.read_back_temporal(&source.gpu)?;
        Ok(source)
    }

    fn create(
        config: &Config,
        supersample: u32,
        native: bool,
        temporal: bool,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(
            (1..=4).contains(&supersample),
            "--supersample {supersample}: allowed 1 to 4 (4 already renders 16 samples per pixel)"
        );
        let (render, output) = config.sizes();
        let (gpu, _) = Gpu::new(Validation::from_env(), &[], &config.gpu.device, None)?;
        let big = (output.0 * supersample, output.1 * supersample);
        let limit = gpu.info.max_image_dimension_2d;
        if big.0.max(big.1) > limit {
            anyhow::bail!(
                "the supersampled reference would be {}x{}, more than {} allows ({limit} per side); \
                 lower --supersample or render.output_width/output_height",
                big.0,
                big.1,
                gpu.info.name
            );
        }
        let msaa = config.render.msaa;
        check_msaa(msaa, &gpu.info.msaa_sample_counts, &gpu.info.name)?;
        let layers = textures::load_all(&paths::root().join("assets"))?;
        let world = World::new(config.game.seed);
        let extent = |(width, height)| vk::Extent2D { width, height };
        let mut sizes = vec![extent(render), extent(big)];
        if native {
            sizes.push(extent(output));
        }
        // The game samples a jittered frame's textures with the bias whatever
        // `render.upscale_mip_bias` says (`render::temporal`).
        let mip_bias = if config.render.upscale_mip_bias || temporal {
            crate::render::upscale_mip_bias(render.0, output.0)
        } else {
            0.0
        };
        let offscreen = Offscreen::new(&gpu, &world, &layers, &sizes, msaa, mip_bias)
            .context("creating the offscreen scene targets")?;
        Ok(Self {
            offscreen: ManuallyDrop::new(offscreen),
            fov_y: world.camera.fov_y,
            world,
            supersample,
            native,
            jitter: None,
            render,
            output,
            msaa,
            gpu,
        })
    }

    /// The world the poses are drawn in (for obstacle-aware pose sampling).
    pub fn world(&self) -> &World {
        &self.world
    }

    /// Renders `pose` with the player's field of view.
    pub fn render(&mut self, pose: &Pose) -> anyhow::Result<FramePair> {
        Ok(self.render_raw(pose)?.finish())
    }

    /// Renders `pose` but leaves the reference's box filter to [`RawPair::finish`], so a caller
    /// can run that on another thread while the next view renders.
    pub fn render_raw(&mut self, pose: &Pose) -> anyhow::Result<RawPair> {
        self.render_view(pose.camera(self.fov_y), pose.time)
    }

    /// Renders any camera at animation time `time` (tests compare with the scripted path).
    pub fn render_view(&mut self, camera: Camera, time: f32) -> anyhow::Result<RawPair> {
        self.world.set_view(camera, time);
        self.offscreen.render(&self.gpu, &self.world)?;
        let (rw, rh) = self.render;
        let lr = image::RgbaImage::from_raw(rw, rh, self.offscreen.pixels(0).to_vec())
            .context("low-resolution readback has the wrong size")?;
        let big = self.offscreen.size(1);
        let native = if self.native {
            let (ow, oh) = self.output;
            let native = image::RgbaImage::from_raw(ow, oh, self.offscreen.pixels(2).to_vec())
                .context("output-size readback has the wrong size")?;
            Some(native)
        } else {
            None
        };
        Ok(RawPair {
            lr,
            big: self.offscreen.pixels(1).to_vec(),
            big_size: (big.width, big.height),
            factor: self.supersample,
            native,
        })
    }
}

/// One frame of a sequence from a temporal source: the jittered low-resolution colour and the
/// unjittered reference (in `raw`), and the low-resolution frame's motion vectors and depth.
pub struct TemporalFrame {
    pub raw: RawPair,
    /// Per render pixel, row-major: (x, y) in render pixels, `game::motion`'s convention
    /// (current − previous position, +y down, unjittered); zero on a sequence's first frame.
    pub motion: Vec<half::f16>,
    /// Per render pixel, row-major: the depth-buffer value (0 near plane .. 1 far plane / sky);
    /// with MSAA the first sample's.
    pub depth: Vec<f32>,
    /// The sub-pixel offset the low-resolution frame was drawn with, in render pixels.
    pub jitter: Vec2,
}

impl FrameSource {
    /// A new sequence: the jitter sequence restarts and the next frame has zero motion, as in
    /// the game after a history reset.
    pub fn start_sequence(&mut self) {
        if let Some(j) = &mut self.jitter {
            j.reset();
        }
        self.offscreen.reset_history();
    }

    /// Renders the next frame of the sequence: `camera` at animation time `time`, jittered by
    /// the sequence's next offset. Only for a source made by [`FrameSource::temporal`].
    pub fn render_temporal(&mut self, camera: Camera, time: f32) -> anyhow::Result<TemporalFrame> {
        let jitter = self
            .jitter
            .as_mut()
            .context("render_temporal needs a source made by FrameSource::temporal")?
            .next();
        self.offscreen.set_jitter(0, jitter);
        let raw = self.render_view(camera, time)?;
        let halves = self.offscreen.motion().context("no motion readback")?;
        let depth = self.offscreen.depth().context("no depth readback")?;
        Ok(TemporalFrame {
            raw,
            // Mapped readbacks start at the allocation's (at least 4-byte) alignment.
            motion: bytemuck::cast_slice(halves).to_vec(),
            depth: bytemuck::cast_slice(depth).to_vec(),
            jitter,
        })
    }
}

/// A rendered view before the reference is box-filtered down to the output size.
pub struct RawPair {
    lr: image::RgbaImage,
    big: Vec<u8>,
    big_size: (u32, u32),
    factor: u32,
    native: Option<image::RgbaImage>,
}

impl RawPair {
    pub fn finish(self) -> FramePair {
        let (w, h) = self.big_size;
        FramePair {
            lr: self.lr,
            hr: downsample_box_linear(&self.big, w, h, self.factor),
            native: self.native,
        }
    }
}

impl Drop for FrameSource {
    fn drop(&mut self) {
        // SAFETY: taken once, here; one_shot waited for every submission that used it.
        let offscreen = unsafe { ManuallyDrop::take(&mut self.offscreen) };
        offscreen.destroy(&self.gpu);
    }
}

/// sRGB transfer function, encoded 0..1 → linear 0..1.
fn srgb_to_linear(v: f32) -> f32 {
    if v <= 0.04045 {
        v / 12.92
    } else {
        ((v + 0.055) / 1.055).powf(2.4)
    }
}

fn linear_to_srgb(v: f32) -> f32 {
    if v <= 0.003_130_8 {
        v * 12.92
    } else {
        1.055 * v.powf(1.0 / 2.4) - 0.055
    }
}

/// Averages `factor × factor` blocks of an RGBA8 image in linear light; alpha is set opaque.
/// `width` and `height` must be multiples of `factor`.
pub fn downsample_box_linear(
    rgba: &[u8],
    width: u32,
    height: u32,
    factor: u32,
) -> image::RgbaImage {
    let decode: Vec<f32> = (0..256).map(|v| srgb_to_linear(v as f32 / 255.0)).collect();
    let (w, h, f) = (width / factor, height / factor, factor as usize);
    let scale = 1.0 / (f * f) as f32;
    let mut out = image::RgbaImage::new(w, h);
    for (y, row) in out.rows_mut().enumerate() {
        for (x, px) in row.enumerate() {
            let mut sum = [0.0f32; 3];
            for dy in 0..f {
                let line = (y * f + dy) * width as usize;
                for dx in 0..f {
                    let i = (line + x * f + dx) * 4;
                    for (c, s) in sum.iter_mut().enumerate() {
                        *s += decode[rgba[i + c] as usize];
                    }
                }
            }
            let q = |s: f32| (linear_to_srgb(s * scale).clamp(0.0, 1.0) * 255.0 + 0.5) as u8;
            px.0 = [q(sum[0]), q(sum[1]), q(sum[2]), 255];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_functions_round_trip_every_level() {
        for v in 0..=255u8 {
            let back = linear_to_srgb(srgb_to_linear(v as f32 / 255.0)) * 255.0;
            assert!((back - v as f32).abs() < 0.01, "{v} -> {back}");
        }
    }

    #[test]
    fn box_of_a_flat_image_is_the_same_colour() {
        let rgba: Vec<u8> = [10u8, 128, 250, 7].repeat(6 * 4);
        let out = downsample_box_linear(&rgba, 6, 4, 2);
        assert_eq!(out.dimensions(), (3, 2));
        assert!(out.pixels().all(|p| p.0 == [10, 128, 250, 255]));
    }

    #[test]
    fn black_and_white_average_in_linear_light() {
        // Half white, half black: linear 0.5 encodes to 188, not the naive 128.
        let rgba: Vec<u8> = [[255u8; 4], [0, 0, 0, 255]].concat().repeat(2);
        let out = downsample_box_linear(&rgba, 2, 2, 2);
        assert_eq!(out.get_pixel(0, 0).0, [188, 188, 188, 255]);
    }
}
