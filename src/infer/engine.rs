//! The plan on the GPU: one storage buffer per slot, every op's pipelines and weights, all made
//! at load time; [`Engine::record`] puts the whole network into a command buffer.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use ash::vk;
use gpu_allocator::MemoryLocation;

use super::error::{InferError, Result};
use super::ops::{Cost, FrameImages, Recorder};
use super::pipelines::Pipelines;
use super::pipelines::{PipeId, PipelineDesc};
use super::plan::{Plan, TensorInfo};
use super::precision::Precision;
use crate::gpu::barrier;
use crate::gpu::guard::Destroy;
use crate::gpu::pipeline::Binding;
use crate::gpu::timestamps::Timestamps;
use crate::gpu::{Buffer, Gpu};
use crate::shader;

/// What the engine chose for a model, as the overlay and `summary.json` show it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct EngineSummary {
    pub precision: Precision,
    /// The convolution kernels: "coopmat" (matrix units), "packed" (several pixels and
    /// channels per invocation) or "direct" (one pixel, eight channels per invocation).
    pub conv_path: &'static str,
    /// Compute dispatches per inference.
    pub dispatches: usize,
    /// Dispatches that run more than one graph node.
    pub fused_groups: usize,
    /// Each op's cost per run, by span label in execution order (the bench's roofline).
    pub layers: Vec<LayerCost>,
}

/// One op's [`Cost`] under its timestamp span's label.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LayerCost {
    pub name: &'static str,
    #[serde(flatten)]
    pub cost: Cost,
}

impl EngineSummary {
    /// One line for the overlay.
    pub fn line(&self) -> String {
        format!(
            "engine: {}, {} conv, {} dispatches ({} fused)",
            self.precision, self.conv_path, self.dispatches, self.fused_groups
        )
    }
}

pub struct Engine {
    plan: Plan,
    pipelines: Pipelines,
    slots: Vec<Buffer>,
    /// The buffer of each tensor (its slot's).
    tensor_buffers: Vec<vk::Buffer>,
    /// Span label per op, interned (timestamp labels are `&'static str`).
    labels: Vec<&'static str>,
    /// With frame I/O: the frame → input tensor and output tensor → frame conversions, where
    /// no op fused them away.
    convert: [Option<PipeId>; 2],
}

/// One `&'static str` per distinct label for the whole process: reloading a model (a pattern
/// switch) does not leak its names again.
fn intern(label: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES.get_or_init(Default::default).lock().unwrap();
    if let Some(&s) = names.get(label) {
        return s;
    }
    let s: &'static str = Box::leak(label.to_string().into_boxed_str());
    names.insert(s);
    s
}

impl Engine {
    pub fn new(gpu: &Gpu, plan: Plan) -> Result<Self> {
        let labels = plan.ops.iter().map(|op| intern(op.label())).collect();
        if let Some(why) = plan.options.precision.unsupported_on(&gpu.info) {
            return Err(InferError::Input(why));
        }
        let precision = plan.options.precision;
        // Built in place: the ops keep what they prepare, so the engine's own destroy releases
        // whatever a failing step left made.
        let mut engine = Engine {
            plan,
            pipelines: Pipelines::new(precision),
            slots: Vec::new(),
            tensor_buffers: Vec::new(),
            labels,
            convert: [None; 2],
        }
        .guard(gpu);
        engine.create(gpu)?;
        Ok(engine.keep())
    }

    fn create(&mut self, gpu: &Gpu) -> Result<()> {
        for op in &mut self.plan.ops {
            op.prepare(gpu, &mut self.pipelines)?;
        }
        if self.plan.options.frame_io {
            let needed = [self.plan.input_tensor_needed, !self.plan.output_in_frame];
            for (i, desc) in frame_conversions(self.plan.options.precision)
                .into_iter()
                .enumerate()
            {
                if needed[i] {
                    self.convert[i] = Some(self.pipelines.get_desc(gpu, desc)?);
                }
            }
        }
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        for (i, &bytes) in self.plan.slot_bytes.iter().enumerate() {
            let name = format!("in-stream tensor buffer {i}");
            let size = bytes.max(4);
            self.slots.push(Buffer::new(
                gpu,
                &name,
                size,
                usage,
                MemoryLocation::GpuOnly,
            )?);
        }
        self.tensor_buffers = self
            .plan
            .slot_of
            .iter()
            .map(|&s| self.slots[s].raw)
            .collect();
        Ok(())
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn summary(&self) -> EngineSummary {
        let kernels: Vec<&str> = self
            .plan
            .ops
            .iter()
            .filter_map(|op| op.conv_kernel())
            .collect();
        let conv_path = ["coopmat", "packed", "direct"]
            .into_iter()
            .find(|k| kernels.contains(k))
            .unwrap_or("direct");
        EngineSummary {
            precision: self.plan.options.precision,
            conv_path,
            dispatches: self.plan.ops.len() + self.convert.iter().flatten().count(),
            fused_groups: self.plan.ops.iter().filter(|op| op.nodes() > 1).count(),
            layers: self.costs(),
        }
    }

    /// Every op's cost per run, in execution order.
    pub fn costs(&self) -> Vec<LayerCost> {
        let elem = self.plan.options.precision.size();
        let bytes_of =
            |t: usize| self.plan.tensors[t].shape.iter().product::<usize>() as u64 * elem;
        self.plan
            .ops
            .iter()
            .zip(&self.labels)
            .map(|(op, &name)| LayerCost {
                name,
                cost: op.cost(&bytes_of, elem),
            })
            .collect()
    }

    /// The span label of every op, in execution order.
    pub fn labels(&self) -> &[&'static str] {
        &self.labels
    }

    /// Graph input `i`: its buffer (NCHW f32) and shape.
    pub fn input(&self, i: usize) -> (vk::Buffer, &TensorInfo) {
        let id = self.plan.inputs[i];
        (self.tensor_buffers[id], &self.plan.tensors[id])
    }

    /// Graph output `i`: its buffer and shape.
    pub fn output(&self, i: usize) -> (vk::Buffer, &TensorInfo) {
        let id = self.plan.outputs[i];
        (self.tensor_buffers[id], &self.plan.tensors[id])
    }

    /// Records every op, a span around each and one barrier between consecutive ops. The
    /// caller orders the writes of the inputs before and the reads of the outputs after (a
    /// compute barrier on each side).
    ///
    /// # Safety
    /// `cmd` is recording outside a render pass; the engine outlives the command buffer's
    /// execution; `timestamps` belongs to the frame that `cmd` records.
    pub unsafe fn record(
        &self,
        gpu: &Gpu,
        cmd: vk::CommandBuffer,
        timestamps: Option<&mut Timestamps>,
    ) {
        self.record_ops(gpu, cmd, None, timestamps);
    }

    /// Records the network between the frame's images (a frame-I/O plan): the conversion of
    /// the scene image into the input tensor where an op reads it, the ops, and the conversion
    /// of the output tensor into the upscaled image where no op wrote it there (spans
    /// `to_tensor`, one per op, `from_tensor`). The caller orders the scene's writes before
    /// and the upscaled image's reads after.
    ///
    /// # Safety
    /// As [`Engine::record`]; the images are in the states [`FrameImages`] gives and outlive
    /// the command buffer's execution.
    pub unsafe fn record_frame(
        &self,
        gpu: &Gpu,
        cmd: vk::CommandBuffer,
        frame: FrameImages,
        mut timestamps: Option<&mut Timestamps>,
    ) {
        let rec = self.recorder(gpu, cmd, Some(frame));
        if let Some(pre) = self.convert[0] {
            let input = self.tensor_buffers[self.plan.inputs[0]];
            let bindings = [
                Binding::SampledImage(frame.input, frame.sampler),
                Binding::StorageBuffer(input),
            ];
            let extent = &self.plan.tensors[self.plan.inputs[0]].shape;
            timed(gpu, cmd, timestamps.as_deref_mut(), "to_tensor", || {
                rec.dispatch_with(pre, &bindings, &(), image_groups(extent[3], extent[2]));
            });
            rec.barrier();
        }
        self.record_ops(gpu, cmd, Some(frame), timestamps.as_deref_mut());
        if let Some(post) = self.convert[1] {
            rec.barrier();
            let output = self.tensor_buffers[self.plan.outputs[0]];
            let bindings = [
                Binding::StorageBuffer(output),
                Binding::StorageImage(frame.output),
            ];
            let extent = &self.plan.tensors[self.plan.outputs[0]].shape;
            timed(gpu, cmd, timestamps, "from_tensor", || {
                rec.dispatch_with(post, &bindings, &(), image_groups(extent[3], extent[2]));
            });
        }
    }

    fn recorder<'a>(
        &'a self,
        gpu: &'a Gpu,
        cmd: vk::CommandBuffer,
        frame: Option<FrameImages>,
    ) -> Recorder<'a> {
        Recorder {
            gpu,
            cmd,
            pipes: &self.pipelines,
            tensors: &self.tensor_buffers,
            frame,
        }
    }

    /// Every op, a span around each, barriers where the plan puts them.
    unsafe fn record_ops(
        &self,
        gpu: &Gpu,
        cmd: vk::CommandBuffer,
        frame: Option<FrameImages>,
        mut timestamps: Option<&mut Timestamps>,
    ) {
        let rec = self.recorder(gpu, cmd, frame);
        for (k, op) in self.plan.ops.iter().enumerate() {
            if k > 0 && self.plan.barriers[k] {
                rec.barrier();
            }
            let span = timestamps
                .as_deref_mut()
                .map(|t| t.begin(gpu, cmd, self.labels[k]));
            op.record(&rec);
            if let (Some(t), Some(span)) = (timestamps.as_deref_mut(), span) {
                t.end(gpu, cmd, span);
            }
        }
    }

    /// One inference with host data (tests, `run-model`): uploads `inputs`, runs, reads the
    /// outputs back. Staging buffers are made for this call; not for the frame loop.
    pub fn run(&self, gpu: &Gpu, inputs: &[&[f32]]) -> Result<Vec<Vec<f32>>> {
        if self.plan.options.frame_io {
            return Err(InferError::Input(
                "this plan reads and writes the frame's images: run it with run_frame".into(),
            ));
        }
        if inputs.len() != self.plan.inputs.len() {
            return Err(InferError::Input(format!(
                "{} input(s) given, the model has {}",
                inputs.len(),
                self.plan.inputs.len()
            )));
        }
        // The staging buffers live for this call only: never kept, their guards destroy them
        // on every return (one_shot has waited for the copies by then).
        let mut staged_in = Vec::new().guard(gpu);
        let mut staged_out = Vec::new().guard(gpu);
        for (i, data) in inputs.iter().enumerate() {
            let info = self.input(i).1;
            if data.len() as u64 != info.elements() {
                return Err(InferError::Input(format!(
                    "input \"{}\" needs {} values (shape {:?}), {} given",
                    info.name,
                    info.elements(),
                    info.shape,
                    data.len()
                )));
            }
            let usage = vk::BufferUsageFlags::TRANSFER_SRC;
            let encoded = info.dtype.encode(data);
            let bytes = if encoded.is_empty() {
                &[0u8; 4][..]
            } else {
                &encoded[..]
            };
            let b = Buffer::with_data(gpu, "run input staging", usage, bytes)?.guard(gpu);
            b.flush_for_device(gpu)?;
            staged_in.push(b.keep());
        }
        for i in 0..self.plan.outputs.len() {
            let bytes = self.output(i).1.bytes().max(4);
            let usage = vk::BufferUsageFlags::TRANSFER_DST;
            staged_out.push(Buffer::new(
                gpu,
                "run output staging",
                bytes,
                usage,
                MemoryLocation::GpuToCpu,
            )?);
        }
        gpu.one_shot(|cmd| unsafe { self.record_run(gpu, cmd, &staged_in, &staged_out) })?;
        let mut outputs = Vec::new();
        for (i, b) in staged_out.iter().enumerate() {
            b.invalidate_for_host(gpu)?;
            let info = self.output(i).1;
            let n = info.bytes() as usize;
            outputs.push(info.dtype.decode(&b.mapped()[..n]));
        }
        Ok(outputs)
    }

    /// # Safety
    /// `cmd` is recording; the staging buffers outlive its execution.
    unsafe fn record_run(
        &self,
        gpu: &Gpu,
        cmd: vk::CommandBuffer,
        staged_in: &[Buffer],
        staged_out: &[Buffer],
    ) {
        let device = &gpu.device;
        let copy = |src, dst, size| {
            let region = vk::BufferCopy::default().size(size);
            device.cmd_copy_buffer(cmd, src, dst, &[region]);
        };
        let stage = |s: vk::PipelineStageFlags2, a: vk::AccessFlags2| (s, a);
        let copy_stage = vk::PipelineStageFlags2::COPY;
        let compute = vk::PipelineStageFlags2::COMPUTE_SHADER;
        for (i, b) in staged_in.iter().enumerate() {
            let (dst, info) = self.input(i);
            copy(b.raw, dst, info.bytes().max(4).min(b.size));
        }
        barrier::memory(
            device,
            cmd,
            stage(copy_stage, vk::AccessFlags2::TRANSFER_WRITE),
            stage(
                compute,
                vk::AccessFlags2::SHADER_STORAGE_READ | vk::AccessFlags2::SHADER_STORAGE_WRITE,
            ),
        );
        self.record(gpu, cmd, None);
        barrier::memory(
            device,
            cmd,
            stage(compute, vk::AccessFlags2::SHADER_STORAGE_WRITE),
            stage(copy_stage, vk::AccessFlags2::TRANSFER_READ),
        );
        for (i, b) in staged_out.iter().enumerate() {
            let (src, info) = self.output(i);
            copy(src, b.raw, info.bytes().max(4));
        }
        barrier::memory(
            device,
            cmd,
            stage(copy_stage, vk::AccessFlags2::TRANSFER_WRITE),
            stage(vk::PipelineStageFlags2::HOST, vk::AccessFlags2::HOST_READ),
        );
    }

    pub fn destroy(self, gpu: &Gpu) {
        // The conversions' pipelines are in `pipelines`.
        for b in self.slots {
            b.destroy(gpu);
        }
        for op in self.plan.ops {
            op.destroy(gpu);
        }
        self.pipelines.destroy(gpu);
    }
}

/// Work groups of the 16 × 8 conversion shaders over a `width` × `height` image.
fn image_groups(width: usize, height: usize) -> [u32; 3] {
    [width.div_ceil(16) as u32, height.div_ceil(8) as u32, 1]
}

/// The frame → input tensor and output tensor → frame conversions in `precision`.
fn frame_conversions(precision: Precision) -> [PipelineDesc; 2] {
    let [pre, post] = match precision {
        Precision::Fp32 => [
            shader!("upscale/instream_pre.comp"),
            shader!("upscale/instream_post.comp"),
        ],
        Precision::Fp16 => [
            shader!("upscale/instream_pre.comp", "fp16"),
            shader!("upscale/instream_post.comp", "fp16"),
        ],
    };
    let desc = |name: &str, spirv, bindings| PipelineDesc {
        name: format!("{name} {precision}"),
        spirv,
        bindings,
        push_size: 0,
        spec: Vec::new(),
        full_subgroups: None,
    };
    [
        desc(
            "in-stream pre",
            pre,
            vec![
                vk::DescriptorType::COMBINED_IMAGE_SAMPLER,
                vk::DescriptorType::STORAGE_BUFFER,
            ],
        ),
        desc(
            "in-stream post",
            post,
            vec![
                vk::DescriptorType::STORAGE_BUFFER,
                vk::DescriptorType::STORAGE_IMAGE,
            ],
        ),
    ]
}

/// Runs `f` (which records commands into `cmd`) inside a timestamp span named `label`, when
/// timestamps are on.
///
/// # Safety
/// `cmd` is recording.
unsafe fn timed(
    gpu: &Gpu,
    cmd: vk::CommandBuffer,
    timestamps: Option<&mut Timestamps>,
    label: &'static str,
    f: impl FnOnce(),
) {
    match timestamps {
        Some(t) => {
            let span = t.begin(gpu, cmd, label);
            f();
            t.end(gpu, cmd, span);
        }
        None => f(),
    }
}

impl Destroy for Engine {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
    }
}
