//! The scene pass's render-size targets: the single-sample colour image the upscalers read, the
//! motion-vector image and the depth buffer (kept for a temporal upscaler), with MSAA the
//! multisampled attachments that resolve into them, and the buffer of per-draw matrices the
//! motion vectors are computed from; and how the pass attaches them (attachment infos, the
//! barriers into and out of the pass). Made with the pass's sample count when a pass needs them
//! (start-up, the compare view turned on), never per frame.

use std::cell::Cell;

use ash::vk;
use glam::Vec2;
use gpu_allocator::MemoryLocation;

use super::scene::{COLOR_FORMAT, DEPTH_FORMAT, MOTION_FORMAT, MSAA_COLOR_FORMAT};
use crate::game::motion::History;
use crate::gpu::barrier;
use crate::gpu::{self, Buffer, Destroy, Gpu, Image, ImageDesc};
use crate::upscale::FrameInputs;

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
    /// Whether the pass keeps motion vectors and depth for a reader this frame (a temporal
    /// upscaler, the debug view). Off, the pass discards its motion writes and drops its depth
    /// (no store, no resolve): on the H200 at 960x540 with 4x MSAA keeping them costs the scene
    /// pass about 0.35 ms, which a spatial pattern would pay for nothing.
    pub(super) keep_temporal: bool,
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
            keep_temporal: true,
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

    /// What the upscalers get of the last frame drawn: colour, depth, motion vectors and the
    /// jitter, with `reset` when their history no longer applies.
    pub fn frame_inputs(&self, reset: bool) -> FrameInputs<'_> {
        let keep = self.keep_temporal;
        FrameInputs {
            color: &self.color,
            depth: keep.then(|| self.depth()),
            motion: keep.then(|| self.motion()),
            jitter: self.jitter.into(),
            reset,
        }
    }

    /// Draw the next frame with this sub-pixel offset (render pixels, `game::jitter`).
    pub fn set_jitter(&mut self, jitter: Vec2) {
        self.jitter = jitter;
    }

    /// Keep (the default) or drop the next frames' motion vectors and depth (the renderer keeps
    /// them while a temporal upscaler or the debug view reads them). Dropped, the pass stores
    /// neither, `frame_inputs` has neither, and the images hold stale contents.
    pub fn set_keep_temporal(&mut self, keep: bool) {
        self.keep_temporal = keep;
    }

    pub fn keeps_temporal(&self) -> bool {
        self.keep_temporal
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

/// Every attachment to its write state: contents not needed, earlier readers done.
///
/// # Safety
/// `cmd` is recording outside a rendering scope.
pub(super) unsafe fn begin_transitions(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    targets: &SceneTargets,
) {
    let write = |image: &Image| image.transition(barrier::REUSE, barrier::COLOR_WRITE);
    let color_write = write(&targets.color);
    // A fixed array, no per-frame allocation.
    let mut transitions = [color_write; 6];
    transitions[1] = write(&targets.motion);
    let count = match &targets.multisampled {
        None => {
            transitions[2] = targets
                .depth
                .transition(barrier::REUSE, barrier::DEPTH_WRITE);
            3
        }
        Some(ms) => {
            let attachment =
                |image: &Image| image.transition(barrier::ATTACHMENT_REUSE, barrier::COLOR_WRITE);
            transitions[2] = targets
                .depth
                .transition(barrier::DEPTH_REUSE, barrier::DEPTH_WRITE);
            transitions[3] = attachment(&ms.color);
            transitions[4] = attachment(&ms.motion);
            transitions[5] = ms
                .depth_resolve
                .transition(barrier::REUSE, barrier::DEPTH_RESOLVE_WRITE);
            6
        }
    };
    barrier::transition(device, cmd, &transitions[..count]);
}

/// The images the pass keeps (colour, motion, single-sample depth) to SAMPLED.
///
/// # Safety
/// `cmd` is recording outside a rendering scope, after the pass.
pub(super) unsafe fn end_transitions(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    targets: &SceneTargets,
) {
    let depth_state = match targets.multisampled {
        None => barrier::DEPTH_WRITE,
        Some(_) => barrier::DEPTH_RESOLVE_WRITE,
    };
    barrier::transition(
        device,
        cmd,
        &[
            targets
                .color
                .transition(barrier::COLOR_WRITE, barrier::SAMPLED),
            targets
                .motion
                .transition(barrier::COLOR_WRITE, barrier::SAMPLED),
            targets.depth().transition(depth_state, barrier::SAMPLED),
        ],
    );
}

/// The depth attachment, cleared to the far plane. Single-sample, it is kept; multisampled, its
/// samples are dropped after a SAMPLE_ZERO resolve into the single-sample depth. Without a
/// reader (`keep_temporal` off) it is neither stored nor resolved.
pub(super) fn depth_attachment(targets: &SceneTargets) -> vk::RenderingAttachmentInfo<'static> {
    let info = vk::RenderingAttachmentInfo::default()
        .image_view(targets.depth.view)
        .image_layout(vk::ImageLayout::DEPTH_ATTACHMENT_OPTIMAL)
        .load_op(vk::AttachmentLoadOp::CLEAR)
        .clear_value(vk::ClearValue {
            depth_stencil: vk::ClearDepthStencilValue {
                depth: 1.0,
                stencil: 0,
            },
        });
    if !targets.keep_temporal {
        // No reader: the depth is dropped after the pass, multisampled or not.
        return info.store_op(vk::AttachmentStoreOp::DONT_CARE);
    }
    match &targets.multisampled {
        None => info.store_op(vk::AttachmentStoreOp::STORE),
        Some(ms) => info
            .store_op(vk::AttachmentStoreOp::DONT_CARE)
            .resolve_mode(vk::ResolveModeFlags::SAMPLE_ZERO)
            .resolve_image_view(ms.depth_resolve.view)
            .resolve_image_layout(vk::ImageLayout::DEPTH_ATTACHMENT_OPTIMAL),
    }
}

/// The colour attachment: the scene image itself, or the multisampled image resolving into it.
/// Its old contents are never loaded: the sky covers every sample.
pub(super) fn color_attachment(targets: &SceneTargets) -> vk::RenderingAttachmentInfo<'static> {
    let ms = targets.multisampled.as_ref();
    resolving_attachment(
        targets.color.view,
        ms.map(|ms| (ms.color.view, ms.resolve_view)),
    )
}

/// The motion attachment, like the colour one: the sky writes every sample. Multisampled, it
/// resolves by averaging (the only resolve float colour formats have). Without a reader
/// (`keep_temporal` off) it has no view: the fragment shader's motion output goes nowhere.
pub(super) fn motion_attachment(targets: &SceneTargets) -> vk::RenderingAttachmentInfo<'static> {
    if !targets.keep_temporal {
        // A null view: the pipeline keeps its two colour outputs and the writes are discarded.
        return vk::RenderingAttachmentInfo::default();
    }
    let ms = targets.multisampled.as_ref();
    resolving_attachment(
        targets.motion.view,
        ms.map(|ms| (ms.motion.view, targets.motion.view)),
    )
}

/// A colour attachment never loaded: `single` itself, or with MSAA the multisampled view
/// averaged into the resolve view. Only the resolved pixels are kept: the samples need not be
/// written back to memory.
fn resolving_attachment(
    single: vk::ImageView,
    multisampled: Option<(vk::ImageView, vk::ImageView)>,
) -> vk::RenderingAttachmentInfo<'static> {
    let info = vk::RenderingAttachmentInfo::default()
        .image_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
        .load_op(vk::AttachmentLoadOp::DONT_CARE);
    match multisampled {
        None => info
            .image_view(single)
            .store_op(vk::AttachmentStoreOp::STORE),
        Some((samples, resolve)) => info
            .image_view(samples)
            .store_op(vk::AttachmentStoreOp::DONT_CARE)
            .resolve_mode(vk::ResolveModeFlags::AVERAGE)
            .resolve_image_view(resolve)
            .resolve_image_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL),
    }
}

impl Destroy for SceneTargets {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
    }
}
