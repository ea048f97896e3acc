//! The plan on the GPU: one storage buffer per slot, every op's pipelines and weights, all made
//! at load time; [`Engine::record`] puts the whole network into a command buffer.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use ash::vk;
use gpu_allocator::MemoryLocation;

use super::error::{InferError, Result};
use super::ops::Recorder;
use super::pipelines::Pipelines;
use super::plan::{Plan, TensorInfo};
use crate::gpu::barrier;
use crate::gpu::timestamps::Timestamps;
use crate::gpu::{Buffer, Gpu};

pub struct Engine {
    plan: Plan,
    pipelines: Pipelines,
    slots: Vec<Buffer>,
    /// The buffer of each tensor (its slot's).
    tensor_buffers: Vec<vk::Buffer>,
    /// Span label per op, interned (timestamp labels are `&'static str`).
    labels: Vec<&'static str>,
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
        let mut engine = Engine {
            plan,
            pipelines: Pipelines::default(),
            slots: Vec::new(),
            tensor_buffers: Vec::new(),
            labels,
        };
        match engine.create(gpu) {
            Ok(()) => Ok(engine),
            Err(e) => {
                engine.destroy(gpu);
                Err(e)
            }
        }
    }

    fn create(&mut self, gpu: &Gpu) -> Result<()> {
        for op in &mut self.plan.ops {
            op.prepare(gpu, &mut self.pipelines)?;
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
        mut timestamps: Option<&mut Timestamps>,
    ) {
        let rec = Recorder {
            gpu,
            cmd,
            pipes: &self.pipelines,
            tensors: &self.tensor_buffers,
        };
        for (k, op) in self.plan.ops.iter().enumerate() {
            if k > 0 {
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
        if inputs.len() != self.plan.inputs.len() {
            return Err(InferError::Input(format!(
                "{} input(s) given, the model has {}",
                inputs.len(),
                self.plan.inputs.len()
            )));
        }
        let mut staged_in = Vec::new();
        let mut staged_out = Vec::new();
        let result = self.run_staged(gpu, inputs, &mut staged_in, &mut staged_out);
        for b in staged_in.into_iter().chain(staged_out) {
            b.destroy(gpu);
        }
        result
    }

    fn run_staged(
        &self,
        gpu: &Gpu,
        inputs: &[&[f32]],
        staged_in: &mut Vec<Buffer>,
        staged_out: &mut Vec<Buffer>,
    ) -> Result<Vec<Vec<f32>>> {
        for (i, data) in inputs.iter().enumerate() {
            let info = self.input(i).1;
            if data.len() as u64 * 4 != info.bytes() {
                return Err(InferError::Input(format!(
                    "input \"{}\" needs {} values (shape {:?}), {} given",
                    info.name,
                    info.bytes() / 4,
                    info.shape,
                    data.len()
                )));
            }
            let usage = vk::BufferUsageFlags::TRANSFER_SRC;
            let bytes: &[u8] = bytemuck::cast_slice(data);
            let bytes = if bytes.is_empty() {
                &[0u8; 4][..]
            } else {
                bytes
            };
            let b = Buffer::with_data(gpu, "run input staging", usage, bytes)?;
            b.flush_for_device(gpu)?;
            staged_in.push(b);
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
        gpu.one_shot(|cmd| unsafe { self.record_run(gpu, cmd, staged_in, staged_out) })?;
        let mut outputs = Vec::new();
        for (i, b) in staged_out.iter().enumerate() {
            b.invalidate_for_host(gpu)?;
            let n = self.output(i).1.bytes() as usize;
            outputs.push(bytemuck::pod_collect_to_vec(&b.mapped()[..n]));
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
        for b in self.slots {
            b.destroy(gpu);
        }
        for op in self.plan.ops {
            op.destroy(gpu);
        }
        self.pipelines.destroy(gpu);
    }
}
