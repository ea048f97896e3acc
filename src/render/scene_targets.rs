//! The scene pass's render-size targets: the single-sample colour image the upscalers read, the
//! motion-vector image and the depth buffer (kept for a temporal upscaler), with MSAA the
//! multisampled attachments that resolve into them, and the buffer of per-draw matrices the
//! motion vectors are computed from. Made with the pass's sample count when a pass needs them
//! (start-up, the compare view turned on), never per frame.

use std::cell::Cell;

use ash::vk;
use glam::Vec2;
use gpu_allocator::MemoryLocation;

use super::scene::{COLOR_FORMAT, DEPTH_FORMAT, MOTION_FORMAT, MSAA_COLOR_FORMAT};
use crate::game::motion::History;
use crate::gpu::{self, Buffer, Destroy, Gpu, Image, ImageDesc};

/// Draws a frame may have (the arena has 17): the size of the per-draw part of `draw_data`.
pub const MAX_DRAWS: usize = 256;
/// Bytes of `draw_data`'s header: view-projection, previous view-projection, size (std430).
pub(super) const DRAW_DATA_HEADER: u64 = 64 + 64 + 16;
/// Bytes per draw in `draw_data`: this frame's and the previous frame's unjittered MVP.
pub(super) const DRAW_DATA_STRIDE: u64 = 128;

/// The multisampled attachments and where they resolve to.
pub(super) struct Multisampled {
    /// `MSAA_COLOR_FORMAT`, `samples` per pixel; only the scene pass touches it.
    pub color: Image,
    /// An sRGB view of the single-sample scene colour image: the resolve target. Through it the
    /// resolve averages the samples in linear light and stores display-encoded values, which the
    /// upscalers read through the image's own UNORM view as they do without MSAA.
    pub resolve_view: vk::ImageView,
    /// `MOTION_FORMAT`, `samples` per pixel. Float colour attachments can only resolve by
    /// averaging: at an edge the resolved motion is the coverage-weighted mean of the surfaces'.
    pub motion: Image,
    /// The single-sample depth the pass resolves its depth buffer into with SAMPLE_ZERO (the
    /// one resolve mode every device has): the depth of the surface the pixel's first sample
    /// saw, never a mix of two surfaces.
    pub depth_resolve: Image,
}

/// Render-size targets; recreated together when the render size changes.
pub struct SceneTargets {
    /// The low-resolution frame: colour attachment (or resolve target) here, sampled/copied by
    /// the upscalers.
    pub color: Image,
    /// Motion vectors, `MOTION_FORMAT` at render size (`game::motion` says what they mean):
    /// attachment or resolve target; SAMPLED after the pass.
    pub(super) motion: Image,
    /// `samples` per pixel, like the colour attachment. Single-sample, it is also the depth the
    /// pass keeps (SAMPLED after the pass); multisampled, that is `multisampled.depth_resolve`.
    pub(super) depth: Image,
    /// Present when the pass renders more than one sample per pixel.
    pub(super) multisampled: Option<Multisampled>,
    /// This frame's and the previous frame's unjittered MVP per draw, written by the pass with
    /// `vkCmdUpdateBuffer` in its own command buffer (no host-visible ring to keep per frame in
    /// flight), read by the scene shaders.
    pub(super) draw_data: Buffer,
    /// The previous frame drawn into these targets, for the next frame's motion vectors.
    pub(super) history: Cell<History>,
    /// Drawn with the pass's upscaler-input mip bias (`ScenePass::upscale_targets`).
    pub(super) mip_biased: bool,
    /// The sub-pixel offset of the frame drawn into these targets, in render pixels
    /// (`game::jitter`); zero unless the renderer jitters.
    pub(super) jitter: Vec2,
}

impl SceneTargets {
    /// Targets of `size` for a scene pass of `samples` per pixel (TYPE_1: no MSAA, the colour
    /// image is the attachment itself). Use [`super::scene::ScenePass::targets`], which passes
    /// its own sample count.
    pub(super) fn new(
        gpu: &Gpu,
        size: vk::Extent2D,
        samples: vk::SampleCountFlags,
    ) -> gpu::Result<Self> {
        let msaa = samples != vk::SampleCountFlags::TYPE_1;
        let mut color_desc = ImageDesc::new_2d(
            size,
            COLOR_FORMAT,
            vk::ImageUsageFlags::COLOR_ATTACHMENT
                | vk::ImageUsageFlags::SAMPLED
                | vk::ImageUsageFlags::STORAGE
                | vk::ImageUsageFlags::TRANSFER_SRC,
        );
        if msaa {
            color_desc.view_formats = &[MSAA_COLOR_FORMAT];
        }
        let color = Image::new(gpu, "scene colour (render size)", color_desc)?.guard(gpu);
        let motion = Image::new(
            gpu,
            "scene motion vectors",
            ImageDesc::new_2d(
                size,
                MOTION_FORMAT,
                kept_usage() | vk::ImageUsageFlags::COLOR_ATTACHMENT,
            ),
        )?
        .guard(gpu);
        let mut depth_desc = ImageDesc::new_2d(
            size,
            DEPTH_FORMAT,
            vk::ImageUsageFlags::DEPTH_STENCIL_ATTACHMENT,
        );
        if msaa {
            depth_desc.samples = samples;
            depth_desc.usage |= vk::ImageUsageFlags::TRANSIENT_ATTACHMENT;
        } else {
            depth_desc.usage |= kept_usage();
        }
        let depth = Image::new(gpu, "scene depth", depth_desc)?.guard(gpu);
        let draw_data = Buffer::new(
            gpu,
            "scene draw matrices",
            DRAW_DATA_HEADER + MAX_DRAWS as u64 * DRAW_DATA_STRIDE,
            vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_DST,
            MemoryLocation::GpuOnly,
        )?
        .guard(gpu);
        let multisampled = match msaa {
            true => Some(Multisampled::new(gpu, &color, samples)?),
            false => None,
        };
        Ok(Self {
            color: color.keep(),
            motion: motion.keep(),
            depth: depth.keep(),
            multisampled,
            draw_data: draw_data.keep(),
            history: Cell::default(),
            mip_biased: false,
            jitter: Vec2::ZERO,
        })
    }

    /// Samples per pixel of the attachments the pass draws into.
    pub fn samples(&self) -> vk::SampleCountFlags {
        self.depth.desc.samples
    }

    /// The motion vectors of the last frame drawn (render size, RG16F, SAMPLED after the pass).
    pub fn motion(&self) -> &Image {
        &self.motion
    }

    /// The single-sample depth of the last frame drawn (render size, D32, SAMPLED after the
    /// pass): the depth buffer itself, or with MSAA its SAMPLE_ZERO resolve.
    pub fn depth(&self) -> &Image {
        match &self.multisampled {
            Some(ms) => &ms.depth_resolve,
            None => &self.depth,
        }
    }

    /// The sub-pixel offset the last frame was drawn with, in render pixels.
    pub fn jitter(&self) -> Vec2 {
        self.jitter
    }

    /// Draw the next frame with this sub-pixel offset (render pixels, `game::jitter`).
    pub fn set_jitter(&mut self, jitter: Vec2) {
        self.jitter = jitter;
    }

    /// Forget the previous frame: the next one gets zero motion (camera cut, restart).
    pub fn reset_history(&self) {
        let mut h = self.history.get();
        h.reset();
        self.history.set(h);
    }

    pub fn destroy(self, gpu: &Gpu) {
        if let Some(m) = self.multisampled {
            unsafe { gpu.device.destroy_image_view(m.resolve_view, None) };
            m.color.destroy(gpu);
            m.motion.destroy(gpu);
            m.depth_resolve.destroy(gpu);
        }
        self.draw_data.destroy(gpu);
        self.depth.destroy(gpu);
        self.motion.destroy(gpu);
        self.color.destroy(gpu);
    }
}

/// Usage of the single-sample images the pass keeps for later passes (a temporal upscaler, the
/// debug view, tests' readbacks), besides their attachment usage: sampled, copied.
fn kept_usage() -> vk::ImageUsageFlags {
    vk::ImageUsageFlags::SAMPLED | vk::ImageUsageFlags::TRANSFER_SRC
}

impl Multisampled {
    fn new(gpu: &Gpu, resolve: &Image, samples: vk::SampleCountFlags) -> gpu::Result<Self> {
        let transient = |name, format, usage| -> gpu::Result<Image> {
            let mut desc = ImageDesc::new_2d(
                resolve.extent(),
                format,
                usage | vk::ImageUsageFlags::TRANSIENT_ATTACHMENT,
            );
            desc.samples = samples;
            Image::new(gpu, name, desc)
        };
        let color = transient(
            "scene colour (multisampled)",
            MSAA_COLOR_FORMAT,
            vk::ImageUsageFlags::COLOR_ATTACHMENT,
        )?
        .guard(gpu);
        let motion = transient(
            "scene motion vectors (multisampled)",
            MOTION_FORMAT,
            vk::ImageUsageFlags::COLOR_ATTACHMENT,
        )?
        .guard(gpu);
        let depth_resolve = Image::new(
            gpu,
            "scene depth (resolved)",
            ImageDesc::new_2d(
                resolve.extent(),
                DEPTH_FORMAT,
                kept_usage() | vk::ImageUsageFlags::DEPTH_STENCIL_ATTACHMENT,
            ),
        )?
        .guard(gpu);
        let resolve_view = resolve.format_view(
            gpu,
            "scene colour (sRGB resolve view)",
            MSAA_COLOR_FORMAT,
            vk::ImageUsageFlags::COLOR_ATTACHMENT,
        )?;
        Ok(Self {
            color: color.keep(),
            resolve_view,
            motion: motion.keep(),
            depth_resolve: depth_resolve.keep(),
        })
    }
}

impl Destroy for SceneTargets {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
    }
}
