//! The frame's side of a temporal model (`upscale.kind = temporal`, `models/README.md`): the
//! passes around the model and the history it reads back, recorded in the frame's command
//! buffer, ordered by compute barriers; the buffers and pipelines are made at load time, never
//! per frame.
//!
//! `temporal_pre.comp` writes the model's concatenated inputs (NCHW) from the frame (colour,
//! depth, motion vectors, jitter) and the previous output warped to this frame. Then, by
//! [`Mode`]:
//! - [`Mode::Engine`] (in-stream): the engine runs the graph between the concatenation and the
//!   correction it adds to the history (`infer::plan_temporal`); `temporal_post.comp` adds the
//!   warped history (which the pre-process also writes on its own) to the correction.
//! - [`Mode::Runtime`] (shared-memory): ONNX Runtime runs the whole graph on the concatenation,
//!   whose five channel ranges are its five inputs; `temporal_output.comp` reads its output.
//!
//! Either post-process writes the upscaled image (8-bit) and keeps the output, clamped to 0..1
//! in fp16, in the history buffer for the next frame.

use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::gpu::guard::Destroy;
use crate::gpu::pipeline::Binding;
use crate::gpu::{self, Buffer, Gpu};
use crate::infer::ops::Recorder;
use crate::infer::pipelines::{PipeId, PipelineDesc, Pipelines};
use crate::infer::{Engine, Precision};
use crate::upscale::model::temporal::{History, HistoryFilter};
use crate::upscale::FrameIo;
use crate::upscale::Timestamps;

/// Who runs the model between the pre- and the post-process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The in-stream engine, on the graph `infer::plan_temporal` cut out.
    Engine,
    /// ONNX Runtime, on the whole graph (its tensors NCHW float32).
    Runtime,
}

/// The pre- and post-process pipelines and the history the model reads back.
pub struct TemporalIo {
    mode: Mode,
    pipelines: Pipelines,
    pre: PipeId,
    post: PipeId,
    /// The previous frame's output clamped to 0..1, RGBA fp16 per output pixel.
    history: Buffer,
    /// This frame's warped history (12 channels at render size, the engine's precision), from
    /// the pre- to the post-process ([`Mode::Engine`]; unused by [`Mode::Runtime`]).
    warped: Buffer,
    /// No frame has written `history` since it was made: the next frame starts over.
    empty: bool,
    render: (u32, u32),
    output: (u32, u32),
}

/// One history texel: RGBA fp16 (`model::temporal`'s history definition: fp16 values, which
/// the host keeps as RGB f32).
const HISTORY_TEXEL_BYTES: u64 = 4 * 2;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct PrePush {
    jitter: [f32; 2],
    reset: u32,
    has_motion: u32,
}

impl TemporalIo {
    /// `precision` is the tensors' ([`Mode::Runtime`]: fp32); `history` the one the model
    /// takes (`model::temporal`).
    pub fn new(
        gpu: &Gpu,
        mode: Mode,
        precision: Precision,
        history: History,
        render: (u32, u32),
        output: (u32, u32),
    ) -> gpu::Result<Self> {
        assert!(
            mode == Mode::Engine || precision == Precision::Fp32,
            "ONNX Runtime's tensors are float32"
        );
        let mut pipelines = Pipelines::new(precision).guard(gpu);
        let [pre, post] = match (mode, precision) {
            (Mode::Runtime, _) => [
                crate::shader!("upscale/temporal_pre.comp"),
                crate::shader!("upscale/temporal_output.comp"),
            ],
            (Mode::Engine, Precision::Fp32) => [
                crate::shader!("upscale/temporal_pre.comp"),
                crate::shader!("upscale/temporal_post.comp"),
            ],
            (Mode::Engine, Precision::Fp16) => [
                crate::shader!("upscale/temporal_pre.comp", "fp16"),
                crate::shader!("upscale/temporal_post.comp", "fp16"),
            ],
        };
        let sampled = vk::DescriptorType::COMBINED_IMAGE_SAMPLER;
        let storage = vk::DescriptorType::STORAGE_BUFFER;
        let desc = |name: &str, spirv, bindings, push_size, spec| PipelineDesc {
            name: format!("{name} {precision}"),
            spirv,
            bindings,
            push_size,
            spec,
            full_subgroups: None,
        };
        let mut pre_bindings = vec![sampled; 3];
        pre_bindings.extend([storage; 3]);
        let pre = pipelines.get_desc(
            gpu,
            desc(
                "temporal pre",
                pre,
                pre_bindings,
                std::mem::size_of::<PrePush>() as u32,
                // WRITE_WARPED, CLAMP_HISTORY, CATMULL_ROM
                vec![
                    u32::from(mode == Mode::Engine),
                    u32::from(history.clamp),
                    u32::from(history.filter == HistoryFilter::CatmullRom),
                ],
            ),
        )?;
        let image = vk::DescriptorType::STORAGE_IMAGE;
        let post = match mode {
            Mode::Engine => desc(
                "temporal post",
                post,
                vec![storage, storage, image, storage],
                0,
                Vec::new(),
            ),
            Mode::Runtime => desc(
                "temporal output",
                post,
                vec![storage, image, storage],
                0,
                Vec::new(),
            ),
        };
        let post = pipelines.get_desc(gpu, post)?;
        let history = Buffer::new(
            gpu,
            "temporal history",
            u64::from(output.0) * u64::from(output.1) * HISTORY_TEXEL_BYTES,
            vk::BufferUsageFlags::STORAGE_BUFFER,
            MemoryLocation::GpuOnly,
        )?
        .guard(gpu);
        // Runtime mode binds it but never writes it: one element is enough.
        let warped_len = match mode {
            Mode::Engine => 12 * u64::from(render.0) * u64::from(render.1),
            Mode::Runtime => 1,
        };
        let warped = Buffer::new(
            gpu,
            "temporal warped history",
            warped_len * precision.size(),
            vk::BufferUsageFlags::STORAGE_BUFFER,
            MemoryLocation::GpuOnly,
        )?;
        Ok(Self {
            mode,
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
    /// op, `from_tensor`): [`Mode::Engine`].
    ///
    /// # Safety
    /// As for `Upscaler::record`; `engine` was planned by `infer::plan_temporal` for these
    /// sizes and outlives the command buffer's execution.
    pub unsafe fn record(&mut self, io: &mut FrameIo, engine: &Engine, sampler: vk::Sampler) {
        debug_assert_eq!(self.mode, Mode::Engine);
        self.record_pre(io, sampler, engine.input(0).0);
        recorder(io.gpu, io.cmd, &self.pipelines).barrier();
        engine.record(io.gpu, io.cmd, Some(&mut *io.timestamps));
        recorder(io.gpu, io.cmd, &self.pipelines).barrier();
        self.record_post(io, engine.output(0).0);
    }

    /// Records a barrier after the previous frame's passes and the pre-process (span
    /// `to_tensor`), which writes the concatenated inputs into `inputs` (NCHW, 20 channels at
    /// render size, this object's precision).
    ///
    /// # Safety
    /// As for `Upscaler::record`; `inputs` outlives the command buffer's execution.
    pub unsafe fn record_pre(
        &mut self,
        io: &mut FrameIo,
        sampler: vk::Sampler,
        inputs: vk::Buffer,
    ) {
        let gpu = io.gpu;
        let rec = recorder(gpu, io.cmd, &self.pipelines);
        // The previous frame's post-process wrote the history (and, in-stream, its engine the
        // tensors).
        rec.barrier();
        let frame = io.inputs;
        let (depth, motion) = match (frame.depth, frame.motion) {
            (Some(d), Some(m)) => (Some(d), Some(m)),
            _ => (None, None),
        };
        // Without depth and motion the colour stands in for them (the shader reads neither).
        let color = frame.color.view;
        let bindings = [
            Binding::SampledImage(color, sampler),
            Binding::SampledImage(depth.map_or(color, |d| d.view), sampler),
            Binding::SampledImage(motion.map_or(color, |m| m.view), sampler),
            Binding::StorageBuffer(self.history.raw),
            Binding::StorageBuffer(inputs),
            Binding::StorageBuffer(self.warped.raw),
        ];
        let push = PrePush {
            jitter: frame.jitter,
            reset: u32::from(frame.reset || self.empty),
            has_motion: u32::from(motion.is_some()),
        };
        let (rw, rh) = self.render;
        timed(gpu, io.cmd, io.timestamps, "to_tensor", || {
            rec.dispatch_with(self.pre, &bindings, &push, groups(rw, rh));
        });
    }

    /// Records the post-process (span `from_tensor`) from `source`: the engine's correction
    /// ([`Mode::Engine`]) or the runtime's output tensor ([`Mode::Runtime`]), made visible to
    /// compute shaders by the caller.
    ///
    /// # Safety
    /// As for `Upscaler::record`; `source` outlives the command buffer's execution.
    pub unsafe fn record_post(&mut self, io: &mut FrameIo, source: vk::Buffer) {
        let gpu = io.gpu;
        let rec = recorder(gpu, io.cmd, &self.pipelines);
        let source = Binding::StorageBuffer(source);
        let image = Binding::StorageImage(io.output.view);
        let history = Binding::StorageBuffer(self.history.raw);
        // Fixed-size lists: nothing is allocated per frame.
        let engine = [
            source,
            Binding::StorageBuffer(self.warped.raw),
            image,
            history,
        ];
        let runtime = [source, image, history];
        let bindings: &[Binding] = match self.mode {
            Mode::Engine => &engine,
            Mode::Runtime => &runtime,
        };
        let (ow, oh) = self.output;
        timed(gpu, io.cmd, io.timestamps, "from_tensor", || {
            rec.dispatch_with(self.post, bindings, &(), groups(ow, oh));
        });
        self.empty = false;
    }

    pub fn destroy(self, gpu: &Gpu) {
        self.history.destroy(gpu);
        self.warped.destroy(gpu);
        self.pipelines.destroy(gpu);
    }
}

/// A recorder for this module's own dispatches and barriers (no engine tensors).
fn recorder<'a>(gpu: &'a Gpu, cmd: vk::CommandBuffer, pipes: &'a Pipelines) -> Recorder<'a> {
    Recorder {
        gpu,
        cmd,
        pipes,
        tensors: &[],
        frame: None,
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
