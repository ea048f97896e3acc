//! The composite pass: puts the upscaled image on the target (swapchain image or headless
//! image), letterboxed to keep its aspect ratio; the UI is drawn after it. A compute pass
//! where the target takes storage writes (headless, bench), else a full-screen draw: on a GPU
//! with few raster units (the H200 machine's) the draw runs on a small part of the chip.

use ash::vk;

use crate::game::camera::{FAR, NEAR};
use crate::gpu::pipeline::{self, Binding, GraphicsDesc};
use crate::gpu::{self, Destroy, Gpu, Image, Pipeline};
use crate::shader;

/// What the composite shows: the upscaled picture, or a debug view of the scene pass's
/// temporal inputs (`shaders/render/debug_view.glsl` colours them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DebugView {
    #[default]
    Off,
    /// The motion vectors: hue = direction, brightness = length.
    Motion,
    /// The kept depth: near white, far black.
    Depth,
}

impl DebugView {
    pub const ALL: [DebugView; 3] = [DebugView::Off, DebugView::Motion, DebugView::Depth];

    pub fn name(self) -> &'static str {
        match self {
            DebugView::Off => "off",
            DebugView::Motion => "motion vectors",
            DebugView::Depth => "depth",
        }
    }

    /// The shaders' mode number (DEBUG_OFF, DEBUG_MOTION, DEBUG_DEPTH).
    fn mode(self) -> u32 {
        self as u32
    }
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct CompositePush {
    srgb_target: u32,
    /// Left of this fraction of the image shows the source, right of it the compare side.
    divider: f32,
    mode: u32,
    near: f32,
    far: f32,
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ComputePush {
    offset: [i32; 2],
    extent: [u32; 2],
    target_size: [u32; 2],
    divider: f32,
    mode: u32,
    near: f32,
    far: f32,
}

pub struct CompositePass {
    pipeline: Pipeline,
    /// composite.comp, for targets that take storage writes.
    compute: Pipeline,
    pub format: vk::Format,
    linear: vk::Sampler,
    nearest: vk::Sampler,
}

impl CompositePass {
    pub fn new(gpu: &Gpu, format: vk::Format) -> gpu::Result<Self> {
        let pipeline = pipeline::graphics(
            gpu,
            &GraphicsDesc {
                name: "composite",
                vertex: shader!("render/fullscreen.vert"),
                fragment: shader!("render/composite.frag"),
                bindings: &[
                    vk::DescriptorType::COMBINED_IMAGE_SAMPLER,
                    vk::DescriptorType::COMBINED_IMAGE_SAMPLER,
                ],
                push_size: std::mem::size_of::<CompositePush>() as u32,
                vertex_stride: 0,
                attributes: &[],
                color_formats: &[format],
                depth: None,
                cull: vk::CullModeFlags::NONE,
                samples: vk::SampleCountFlags::TYPE_1,
                fragment_spec: &[],
            },
        )?;
        let pipeline = pipeline.guard(gpu);
        let compute = pipeline::compute(
            gpu,
            "composite (compute)",
            shader!("render/composite.comp"),
            &[
                vk::DescriptorType::COMBINED_IMAGE_SAMPLER,
                vk::DescriptorType::COMBINED_IMAGE_SAMPLER,
                vk::DescriptorType::STORAGE_IMAGE,
            ],
            std::mem::size_of::<ComputePush>() as u32,
        )?
        .guard(gpu);
        let linear = gpu::image::create_sampler(gpu, "composite linear", true, false, 0.0)?;
        let linear = linear.guard(gpu);
        let nearest = gpu::image::create_sampler(gpu, "composite nearest", false, false, 0.0)?;
        Ok(Self {
            pipeline: pipeline.keep(),
            compute: compute.keep(),
            format,
            linear: linear.keep(),
            nearest,
        })
    }

    /// Draws `source` (in `barrier::SAMPLED`) into `target_view` (in `barrier::COLOR_WRITE`),
    /// clearing the letterbox bars. With `split` = (image, divider), the part of the picture
    /// right of `divider` (0..1 across it) shows that image instead (same size as `source`, also
    /// in `barrier::SAMPLED`): the compare view. With a `debug` view, `source` is the motion or
    /// depth image and is shown false-coloured.
    ///
    /// # Safety
    /// `cmd` is recording outside a rendering scope.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn record(
        &self,
        gpu: &Gpu,
        cmd: vk::CommandBuffer,
        source: &Image,
        split: Option<(&Image, f32)>,
        debug: DebugView,
        target_view: vk::ImageView,
        target: vk::Extent2D,
    ) {
        self.record_draw(gpu, cmd, source, split, debug, target_view, target);
    }

    /// [`CompositePass::record`] as a compute pass: `target_view` is a storage view of an
    /// RGBA8 UNORM image in [`crate::gpu::barrier::STORAGE_WRITE`] (GENERAL); every pixel is written.
    ///
    /// # Safety
    /// `cmd` is recording outside a rendering scope.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn record_compute(
        &self,
        gpu: &Gpu,
        cmd: vk::CommandBuffer,
        source: &Image,
        split: Option<(&Image, f32)>,
        debug: DebugView,
        target_view: vk::ImageView,
        target: vk::Extent2D,
    ) {
        let rect = letterbox(source.extent(), target);
        let sampler = self.sampler_for(source, rect, debug);
        let push = ComputePush {
            offset: [rect.offset.x, rect.offset.y],
            extent: [rect.extent.width, rect.extent.height],
            target_size: [target.width, target.height],
            divider: split.map_or(2.0, |(_, divider)| divider),
            mode: debug.mode(),
            near: NEAR,
            far: FAR,
        };
        pipeline::dispatch(
            gpu,
            cmd,
            &self.compute,
            &[
                Binding::SampledImage(source.view, sampler),
                Binding::SampledImage(split.map_or(source.view, |(right, _)| right.view), sampler),
                Binding::StorageImage(target_view),
            ],
            &push,
            [target.width.div_ceil(16), target.height.div_ceil(8), 1],
        );
    }

    /// Pixel-exact when sizes match, so the headless image is exactly the upscaler's output.
    /// The debug views sample nearest: depth formats need not filter, and a mean of motion
    /// vectors across an edge is no object's motion.
    fn sampler_for(&self, source: &Image, rect: vk::Rect2D, debug: DebugView) -> vk::Sampler {
        if rect.extent == source.extent() || debug != DebugView::Off {
            self.nearest
        } else {
            self.linear
        }
    }

    /// # Safety
    /// As [`CompositePass::record`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn record_draw(
        &self,
        gpu: &Gpu,
        cmd: vk::CommandBuffer,
        source: &Image,
        split: Option<(&Image, f32)>,
        debug: DebugView,
        target_view: vk::ImageView,
        target: vk::Extent2D,
    ) {
        let device = &gpu.device;
        let color = [vk::RenderingAttachmentInfo::default()
            .image_view(target_view)
            .image_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
            .load_op(vk::AttachmentLoadOp::CLEAR)
            .store_op(vk::AttachmentStoreOp::STORE)
            .clear_value(vk::ClearValue {
                color: vk::ClearColorValue {
                    float32: [0.0, 0.0, 0.0, 1.0],
                },
            })];
        let info = vk::RenderingInfo::default()
            .render_area(vk::Rect2D {
                offset: vk::Offset2D::default(),
                extent: target,
            })
            .layer_count(1)
            .color_attachments(&color);
        device.cmd_begin_rendering(cmd, &info);
        let rect = letterbox(source.extent(), target);
        super::scene::set_viewport_rect(device, cmd, rect);
        device.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::GRAPHICS, self.pipeline.raw);
        let sampler = self.sampler_for(source, rect, debug);
        pipeline::push_descriptors(
            gpu,
            cmd,
            vk::PipelineBindPoint::GRAPHICS,
            &self.pipeline,
            &[
                Binding::SampledImage(source.view, sampler),
                Binding::SampledImage(split.map_or(source.view, |(right, _)| right.view), sampler),
            ],
        );
        let push = CompositePush {
            srgb_target: gpu::swapchain::is_srgb(self.format) as u32,
            divider: split.map_or(2.0, |(_, divider)| divider),
            mode: debug.mode(),
            near: NEAR,
            far: FAR,
        };
        pipeline::push_constants(
            gpu,
            cmd,
            &self.pipeline,
            vk::ShaderStageFlags::VERTEX | vk::ShaderStageFlags::FRAGMENT,
            &push,
        );
        device.cmd_draw(cmd, 3, 1, 0, 0);
        device.cmd_end_rendering(cmd);
    }

    pub fn destroy(self, gpu: &Gpu) {
        self.pipeline.destroy(gpu);
        self.compute.destroy(gpu);
        unsafe {
            gpu.device.destroy_sampler(self.linear, None);
            gpu.device.destroy_sampler(self.nearest, None);
        }
    }
}

impl Destroy for CompositePass {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
    }
}

/// The largest rectangle of `source`'s aspect ratio centred in `target`.
pub fn letterbox(source: vk::Extent2D, target: vk::Extent2D) -> vk::Rect2D {
    let sw = source.width as u64;
    let sh = source.height as u64;
    let tw = target.width as u64;
    let th = target.height as u64;
    let (w, h) = if tw * sh <= th * sw {
        (tw, (tw * sh / sw).max(1))
    } else {
        ((th * sw / sh).max(1), th)
    };
    vk::Rect2D {
        offset: vk::Offset2D {
            x: ((tw - w) / 2) as i32,
            y: ((th - h) / 2) as i32,
        },
        extent: vk::Extent2D {
            width: w as u32,
            height: h as u32,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::letterbox;
    use ash::vk::Extent2D;

    fn e(width: u32, height: u32) -> Extent2D {
        Extent2D { width, height }
    }

    #[test]
    fn letterbox_keeps_aspect_and_centres() {
        let same = letterbox(e(1280, 720), e(1280, 720));
        assert_eq!(
            (same.offset.x, same.offset.y, same.extent),
            (0, 0, e(1280, 720))
        );
        let tall = letterbox(e(1280, 720), e(800, 800));
        assert_eq!(tall.extent, e(800, 450));
        assert_eq!((tall.offset.x, tall.offset.y), (0, 175));
        let wide = letterbox(e(1280, 720), e(2000, 720));
        assert_eq!(wide.extent, e(1280, 720));
        assert_eq!(wide.offset.x, 360);
        assert_eq!(letterbox(e(1280, 720), e(1, 1)).extent, e(1, 1));
    }
}
