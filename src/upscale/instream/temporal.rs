//! The in-stream pattern with a temporal model (`upscale.kind = temporal`, `models/README.md`):
//! the engine runs the model between its concatenated inputs and the correction it adds to
//! the history (`infer::plan_temporal`); `temporal_pre.comp` writes that concatenation from the
//! frame (colour, depth, motion vectors, jitter) and the previous output warped to this frame,
//! and `temporal_post.comp` adds the warped history to the correction, writes the upscaled
//! image and keeps its 8-bit values in a history buffer for the next frame. All in the frame's
//! command buffer, ordered by compute barriers; the buffers are made at load time, never per
//! frame.

use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::gpu::guard::Destroy;
use crate::gpu::pipeline::Binding;
use crate::gpu::{self, Buffer, Gpu};
use crate::infer::ops::Recorder;
use crate::infer::pipelines::{PipeId, PipelineDesc, Pipelines};
use crate::infer::{Engine, Precision};
use crate::upscale::FrameIo;
use crate::upscale::Timestamps;

/// The pre- and post-process pipelines and the history the model reads back.
pub struct TemporalIo {
    pipelines: Pipelines,
    pre: PipeId,
    post: PipeId,
    /// The previous frame's upscaled image, one packed RGBA8 word per output pixel.
    history: Buffer,
    /// This frame's warped history (12 channels at render size, the engine's precision), from
    /// the pre- to the post-process.
    warped: Buffer,
    /// No frame has written `history` since it was made: the next frame starts over.
    empty: bool,
    render: (u32, u32),
    output: (u32, u32),
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct PrePush {
    jitter: [f32; 2],
    reset: u32,
    has_motion: u32,
}

impl TemporalIo {
    pub fn new(
        gpu: &Gpu,
        precision: Precision,
        render: (u32, u32),
        output: (u32, u32),
    ) -> gpu::Result<Self> {
        let mut pipelines = Pipelines::new(precision).guard(gpu);
        let [pre, post] = match precision {
            Precision::Fp32 => [
                crate::shader!("upscale/temporal_pre.comp"),
                crate::shader!("upscale/temporal_post.comp"),
            ],
            Precision::Fp16 => [
                crate::shader!("upscale/temporal_pre.comp", "fp16"),
                crate::shader!("upscale/temporal_post.comp", "fp16"),
            ],
        };
        let sampled = vk::DescriptorType::COMBINED_IMAGE_SAMPLER;
        let storage = vk::DescriptorType::STORAGE_BUFFER;
        let desc = |name: &str, spirv, bindings, push_size| PipelineDesc {
            name: format!("{name} {precision}"),
            spirv,
            bindings,
            push_size,
            spec: Vec::new(),
            full_subgroups: None,
        };
        let mut pre_bindings = vec![sampled; 3];
        pre_bindings.extend([storage; 3]);
        let pre = pipelines.get_desc(
            gpu,
            desc(
                "in-stream temporal pre",
                pre,
                pre_bindings,
                std::mem::size_of::<PrePush>() as u32,
            ),
        )?;
        let post = pipelines.get_desc(
            gpu,
            desc(
                "in-stream temporal post",
                post,
                vec![storage, storage, vk::DescriptorType::STORAGE_IMAGE, storage],
                0,
            ),
        )?;
        let history = Buffer::new(
            gpu,
            "in-stream temporal history",
            u64::from(output.0) * u64::from(output.1) * 4,
            vk::BufferUsageFlags::STORAGE_BUFFER,
            MemoryLocation::GpuOnly,
        )?
        .guard(gpu);
        let warped = Buffer::new(
            gpu,
            "in-stream temporal warped history",
            12 * u64::from(render.0) * u64::from(render.1) * precision.size(),
            vk::BufferUsageFlags::STORAGE_BUFFER,
            MemoryLocation::GpuOnly,
        )?;
        Ok(Self {
            pipelines: pipelines.keep(),
            pre,
            post,
            history: history.keep(),
            warped,
            empty: true,
            render,
            output,
        })
    }

    /// Records the pre-process, the engine and the post-process (spans `to_tensor`, one per
    /// op, `from_tensor`).
    ///
    /// # Safety
    /// As for `Upscaler::record`; `engine` was planned by `infer::plan_temporal` for these
    /// sizes and outlives the command buffer's execution.
    pub unsafe fn record(&mut self, io: &mut FrameIo, engine: &Engine, sampler: vk::Sampler) {
        let gpu = io.gpu;
        let rec = Recorder {
            gpu,
            cmd: io.cmd,
            pipes: &self.pipelines,
            tensors: &[],
            frame: None,
        };
        // The previous frame's post-process wrote the history and its engine the tensors.
        rec.barrier();
        let inputs = io.inputs;
        let (depth, motion) = match (inputs.depth, inputs.motion) {
            (Some(d), Some(m)) => (Some(d), Some(m)),
            _ => (None, None),
        };
        // Without depth and motion the colour stands in for them (the shader reads neither).
        let color = inputs.color.view;
        let bindings = [
            Binding::SampledImage(color, sampler),
            Binding::SampledImage(depth.map_or(color, |d| d.view), sampler),
            Binding::SampledImage(motion.map_or(color, |m| m.view), sampler),
            Binding::StorageBuffer(self.history.raw),
            Binding::StorageBuffer(engine.input(0).0),
            Binding::StorageBuffer(self.warped.raw),
        ];
        let push = PrePush {
            jitter: inputs.jitter,
            reset: u32::from(inputs.reset || self.empty),
            has_motion: u32::from(motion.is_some()),
        };
        let (rw, rh) = self.render;
        timed(gpu, io.cmd, io.timestamps, "to_tensor", || {
            rec.dispatch_with(self.pre, &bindings, &push, groups(rw, rh));
        });
        rec.barrier();
        engine.record(gpu, io.cmd, Some(&mut *io.timestamps));
        rec.barrier();
        let bindings = [
            Binding::StorageBuffer(engine.output(0).0),
            Binding::StorageBuffer(self.warped.raw),
            Binding::StorageImage(io.output.view),
            Binding::StorageBuffer(self.history.raw),
        ];
        let (ow, oh) = self.output;
        timed(gpu, io.cmd, io.timestamps, "from_tensor", || {
            rec.dispatch_with(self.post, &bindings, &(), groups(ow, oh));
        });
        self.empty = false;
    }

    pub fn destroy(self, gpu: &Gpu) {
        self.history.destroy(gpu);
        self.warped.destroy(gpu);
        self.pipelines.destroy(gpu);
    }
}

/// Work groups of the 16 × 8 shaders over `width` × `height` pixels.
fn groups(width: u32, height: u32) -> [u32; 3] {
    [width.div_ceil(16), height.div_ceil(8), 1]
}

unsafe fn timed(
    gpu: &Gpu,
    cmd: vk::CommandBuffer,
    timestamps: &mut Timestamps,
    label: &'static str,
    f: impl FnOnce(),
) {
    let span = timestamps.begin(gpu, cmd, label);
    f();
    timestamps.end(gpu, cmd, span);
}
