//! One op = one shader (`shaders/ops/<name>.comp`) + one struct of the same name here. Each op is
//! built from its ONNX node (attributes validated, errors name the node), computes its output
//! shapes, makes its GPU objects at load time ([`Op::prepare`]) and records its dispatches.

pub mod binary;
pub mod concat;
pub mod conv;
pub mod depth_to_space;
pub mod fused_conv;
pub mod resize;
pub mod unary;

use ash::vk;

use super::error::{InferError, Result};
use super::graph::Attrs;
use super::pipelines::{PipeId, Pipelines};
use super::precision::Precision;
use super::tensor::Const;
use crate::gpu::barrier;
use crate::gpu::pipeline::{self, Binding};
use crate::gpu::{Destroy as _, Gpu};

/// Index of a runtime tensor in the plan.
pub type TensorId = usize;

/// The op types the engine runs (the pixel-shuffle pattern is lowered to DepthToSpace).
pub const SUPPORTED: &[&str] = &[
    "Add",
    "Clip",
    "Concat",
    "Conv",
    "DepthToSpace",
    "Div",
    "Identity",
    "LeakyRelu",
    "Mul",
    "PRelu",
    "Relu",
    "Resize",
    "Sigmoid",
    "Sub",
    "Tanh",
    "Reshape+Transpose+Reshape (pixel shuffle)",
];

/// The runtime tensors an op reads and writes.
#[derive(Clone, Debug, Default)]
pub struct Io {
    pub inputs: Vec<TensorId>,
    pub outputs: Vec<TensorId>,
}

/// One input of a node as the planner resolved it.
pub enum Arg<'a> {
    Tensor { id: TensorId, shape: Vec<usize> },
    Const(&'a Const),
    Missing,
}

/// What an op builder gets: the node's attributes, its resolved inputs, the ids its outputs
/// will have, and an activation node fused into it (only Conv accepts one).
pub struct NodeCtx<'a> {
    pub attrs: Attrs<'a>,
    pub args: Vec<Arg<'a>>,
    pub outputs: Vec<TensorId>,
    pub fused: Option<Fused>,
}

/// An activation node folded into the node before it.
#[derive(Clone, Debug)]
pub struct Fused {
    pub op_type: String,
    pub act: unary::Activation,
}

impl<'a> NodeCtx<'a> {
    pub fn err(&self, reason: impl Into<String>) -> InferError {
        self.attrs.err(reason)
    }

    /// Span label: `OpType:node name` (`Conv+Relu:conv1` when fused; the node index when the
    /// node has no name).
    pub fn label(&self, index: usize) -> String {
        let node = self.attrs.node;
        let mut op = node.op_type.clone();
        if let Some(f) = &self.fused {
            op = format!("{op}+{}", f.op_type);
        }
        let name = if node.name.is_empty() {
            format!("#{index}")
        } else {
            node.name.clone()
        };
        format!("{op}:{name}")
    }

    pub fn arg(&self, i: usize) -> &Arg<'a> {
        self.args.get(i).unwrap_or(&Arg::Missing)
    }

    /// Input `i`, which must be a tensor computed at run time.
    pub fn tensor(&self, i: usize) -> Result<(TensorId, &[usize])> {
        match self.arg(i) {
            Arg::Tensor { id, shape } => Ok((*id, shape)),
            Arg::Const(_) => Err(self.err(format!(
                "input {i} is a constant; the engine needs a computed tensor there"
            ))),
            Arg::Missing => Err(self.err(format!("input {i} is missing"))),
        }
    }

    /// Input `i` when it is a constant (None when absent); a computed tensor there is an error.
    pub fn constant(&self, i: usize) -> Result<Option<&'a Const>> {
        match self.arg(i) {
            Arg::Const(c) => Ok(Some(*c)),
            Arg::Missing => Ok(None),
            Arg::Tensor { .. } => Err(self.err(format!(
                "input {i} is computed at run time; the engine needs a constant (initialiser) there"
            ))),
        }
    }
}

/// An op ready for planning: its output shapes are known.
pub struct Built {
    pub op: Box<dyn Op>,
    pub shapes: Vec<Vec<usize>>,
}

/// Arithmetic and memory traffic of one run of an op, for the roofline table: FLOPs (a
/// multiply-add counts 2) and the bytes it must read and write at least (each tensor, image
/// and weight once; what caches save or re-reads cost is not in it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Cost {
    pub flops: u64,
    pub bytes: u64,
}

pub trait Op {
    /// The timestamp span label (see [`NodeCtx::label`]).
    fn label(&self) -> &str;
    fn io(&self) -> &Io;
    /// How many graph nodes this op runs (2 for a Conv with its activation folded in).
    fn nodes(&self) -> usize {
        1
    }
    /// The convolution kernel it runs ("direct", "packed", "coopmat"), for convolutions.
    fn conv_kernel(&self) -> Option<&'static str> {
        None
    }
    /// Whether it writes the graph output into the frame's upscaled image instead of a tensor.
    fn writes_frame(&self) -> bool {
        false
    }
    /// Whether it writes its output and reads its inputs in channel blocks as well as NCHW
    /// (`plan::Layout`); the planner blocks a tensor only where its writer and all its readers
    /// say so, and then calls [`Op::set_layouts`].
    fn channel_blocks(&self) -> bool {
        false
    }
    /// Which of its tensors are in channel blocks (only called when `channel_blocks`).
    fn set_layouts(&mut self, _blocked: &dyn Fn(TensorId) -> bool) {}
    /// One run's [`Cost`]; `bytes_of` gives a tensor's size in the plan's precision. By
    /// default: reads its inputs, writes its outputs, one FLOP per output element.
    fn cost(&self, bytes_of: &dyn Fn(TensorId) -> u64, elem: u64) -> Cost {
        let io = self.io();
        let out: u64 = io.outputs.iter().map(|&t| bytes_of(t)).sum();
        Cost {
            flops: out / elem,
            bytes: io.inputs.iter().map(|&t| bytes_of(t)).sum::<u64>() + out,
        }
    }
    /// Makes pipelines and weight buffers; load time only.
    fn prepare(&mut self, gpu: &Gpu, pipes: &mut Pipelines) -> Result<()>;
    /// Records the op's dispatches (with barriers between its own dependent dispatches).
    ///
    /// # Safety
    /// `rec.cmd` is recording outside a render pass; [`Op::prepare`] ran; every buffer stays
    /// alive until the command buffer completes.
    unsafe fn record(&self, rec: &Recorder);
    fn destroy(self: Box<Self>, gpu: &Gpu);
}

/// Builds the op of a node, or says it is not supported.
pub fn build(ctx: &NodeCtx, index: usize) -> Result<Built> {
    let node = ctx.attrs.node;
    if !(node.domain.is_empty() || node.domain == "ai.onnx") {
        return Err(unsupported(ctx));
    }
    match node.op_type.as_str() {
        "Conv" => conv::Conv::build(ctx, index),
        "Relu" | "LeakyRelu" | "Clip" | "Sigmoid" | "Tanh" => unary::Unary::build(ctx, index),
        "Add" | "Sub" | "Mul" | "Div" | "PRelu" => binary::Binary::build(ctx, index),
        "Concat" => concat::Concat::build(ctx, index),
        "DepthToSpace" => depth_to_space::DepthToSpace::build(ctx, index),
        "Resize" => resize::Resize::build(ctx, index),
        _ => Err(unsupported(ctx)),
    }
}

pub fn unsupported(ctx: &NodeCtx) -> InferError {
    let node = ctx.attrs.node;
    let op_type = if node.domain.is_empty() {
        node.op_type.clone()
    } else {
        format!("{}::{}", node.domain, node.op_type)
    };
    InferError::Unsupported {
        file: ctx.attrs.file.into(),
        node: node.name.clone(),
        op_type,
        supported: SUPPORTED.join(", "),
    }
}

/// The frame's images, for ops that read the graph input from the scene image or write the
/// graph output into the upscaled image (the pre- and post-process fused away).
#[derive(Clone, Copy, Debug)]
pub struct FrameImages {
    /// The scene at render resolution (in SAMPLED), with a nearest sampler.
    pub input: vk::ImageView,
    pub sampler: vk::Sampler,
    /// The upscaled image (in GENERAL, written as a storage image).
    pub output: vk::ImageView,
}

/// What ops record against.
pub struct Recorder<'a> {
    pub gpu: &'a Gpu,
    pub cmd: vk::CommandBuffer,
    pub pipes: &'a Pipelines,
    /// The buffer holding each runtime tensor (indexed by [`TensorId`]).
    pub tensors: &'a [vk::Buffer],
    /// The frame's images, when the plan reads or writes them.
    pub frame: Option<FrameImages>,
}

impl Recorder<'_> {
    pub fn tensor(&self, id: TensorId) -> vk::Buffer {
        self.tensors[id]
    }

    /// The frame images; planning made sure the engine records with them.
    pub fn frame(&self) -> FrameImages {
        self.frame
            .expect("a frame-I/O plan is recorded with the frame's images")
    }

    /// Binds `pipe`, pushes `bindings` as bindings 0.. and `push`, and dispatches `groups`.
    ///
    /// # Safety
    /// As for [`Op::record`].
    pub unsafe fn dispatch_with<P: bytemuck::Pod>(
        &self,
        pipe: PipeId,
        bindings: &[Binding],
        push: &P,
        groups: [u32; 3],
    ) {
        let p = self.pipes.at(pipe);
        pipeline::dispatch(self.gpu, self.cmd, p, bindings, push, groups);
    }

    /// Binds `pipe`, pushes `buffers` as bindings 0.. and `push`, and dispatches `groups`.
    ///
    /// # Safety
    /// As for [`Op::record`].
    pub unsafe fn dispatch<P: bytemuck::Pod>(
        &self,
        pipe: PipeId,
        buffers: &[vk::Buffer],
        push: &P,
        groups: [u32; 3],
    ) {
        let mut bindings = [Binding::StorageBuffer(vk::Buffer::null()); 8];
        for (b, &buffer) in bindings.iter_mut().zip(buffers) {
            *b = Binding::StorageBuffer(buffer);
        }
        self.dispatch_with(pipe, &bindings[..buffers.len()], push, groups);
    }

    /// Orders every earlier compute write before every later compute read or write (one
    /// global barrier: tensors share buffers, so a later op may also overwrite what an earlier
    /// one read).
    ///
    /// # Safety
    /// `self.cmd` is recording.
    pub unsafe fn barrier(&self) {
        compute_barrier(&self.gpu.device, self.cmd);
    }
}

/// See [`Recorder::barrier`].
///
/// # Safety
/// `cmd` is recording.
pub unsafe fn compute_barrier(device: &ash::Device, cmd: vk::CommandBuffer) {
    let stage = vk::PipelineStageFlags2::COMPUTE_SHADER;
    barrier::memory(
        device,
        cmd,
        (stage, vk::AccessFlags2::SHADER_STORAGE_WRITE),
        (
            stage,
            vk::AccessFlags2::SHADER_STORAGE_READ | vk::AccessFlags2::SHADER_STORAGE_WRITE,
        ),
    );
}

/// Work groups of `local` invocations covering `count` elements; y takes what exceeds the
/// 65535-group limit of x (shaders index `x + y * num_groups_x * local`).
pub fn groups_1d(count: usize, local: u32) -> [u32; 3] {
    let groups = count.div_ceil(local as usize).max(1);
    let x = groups.min(65535);
    [x as u32, groups.div_ceil(x) as u32, 1]
}

/// A device-local buffer filled with `data` in `precision` at load time (weights, constant
/// operands).
pub fn upload(
    gpu: &Gpu,
    name: &str,
    data: &[f32],
    precision: Precision,
) -> Result<crate::gpu::Buffer> {
    use gpu_allocator::MemoryLocation;
    // Padded to whole words (at least one): an fp16 scalar is 2 bytes, an empty tensor none.
    let mut bytes = precision.encode(data);
    bytes.resize(bytes.len().next_multiple_of(4).max(4), 0);
    let size = bytes.len() as u64;
    let usage = vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_DST;
    // Guarded: a failure below (the staging buffer, its flush, the copy) releases both; the
    // staging buffer goes in any case once the copy has completed.
    let buffer =
        crate::gpu::Buffer::new(gpu, name, size, usage, MemoryLocation::GpuOnly)?.guard(gpu);
    let staging = crate::gpu::Buffer::with_data(
        gpu,
        &format!("{name} staging"),
        vk::BufferUsageFlags::TRANSFER_SRC,
        &bytes,
    )?
    .guard(gpu);
    staging.flush_for_device(gpu)?;
    let result = gpu.one_shot(|cmd| unsafe {
        let region = vk::BufferCopy::default().size(size);
        gpu.device
            .cmd_copy_buffer(cmd, staging.raw, buffer.raw, &[region]);
        // A barrier's second scope reaches commands submitted later: the frames' reads.
        barrier::memory(
            &gpu.device,
            cmd,
            (
                vk::PipelineStageFlags2::COPY,
                vk::AccessFlags2::TRANSFER_WRITE,
            ),
            (
                vk::PipelineStageFlags2::COMPUTE_SHADER,
                vk::AccessFlags2::SHADER_STORAGE_READ,
            ),
        );
    });
    drop(staging);
    result?;
    Ok(buffer.keep())
}

#[cfg(test)]
mod tests {
    use super::groups_1d;

    #[test]
    fn one_dimensional_groups_split_past_the_x_limit() {
        assert_eq!(groups_1d(0, 256), [1, 1, 1]);
        assert_eq!(groups_1d(257, 256), [2, 1, 1]);
        let [x, y, _] = groups_1d(960 * 540 * 64, 256);
        assert!(x <= 65535 && (x as usize * y as usize * 256) >= 960 * 540 * 64);
    }
}
