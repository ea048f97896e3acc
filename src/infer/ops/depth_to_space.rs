//! DepthToSpace (DCR and CRD), also what the planner lowers the Reshape→Transpose→Reshape
//! pixel-shuffle pattern to.

use super::{Built, Io, NodeCtx, Op, Recorder, TensorId};
use crate::gpu::Gpu;
use crate::infer::error::Result;
use crate::infer::pipelines::{PipeId, Pipelines, Shader};
use crate::infer::tensor::{element_count_u32, MAX_ELEMENTS};
use crate::op_shader;

const SHADER: Shader = Shader {
    name: "ops/depth_to_space",
    spirv: op_shader!("ops/depth_to_space.comp"),
    buffers: 2,
    push_size: std::mem::size_of::<Push>() as u32,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// depth-column-row: ONNX's default.
    Dcr,
    /// column-row-depth: PyTorch's PixelShuffle.
    Crd,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct Push {
    out_c: u32,
    in_h: u32,
    in_w: u32,
    block: u32,
    count: u32,
}

pub struct DepthToSpace {
    label: String,
    io: Io,
    mode: Mode,
    push: Push,
    pipe: Option<PipeId>,
}

/// The output shape of DepthToSpace on a 4D `x`, or why it does not apply.
pub fn output_shape(x: &[usize], block: usize) -> std::result::Result<Vec<usize>, String> {
    if x.len() != 4 {
        return Err(format!("input {x:?} is not 4D"));
    }
    // block <= MAX_ELEMENTS keeps block² inside usize.
    if block == 0 || block > MAX_ELEMENTS || !x[1].is_multiple_of(block * block) {
        return Err(format!(
            "{} channels are not a multiple of blocksize² ({block}²)",
            x[1]
        ));
    }
    Ok(vec![
        x[0],
        x[1] / (block * block),
        x[2] * block,
        x[3] * block,
    ])
}

/// (blocksize, mode) of a DepthToSpace node, validated.
pub fn attributes(ctx: &NodeCtx) -> Result<(usize, Mode)> {
    ctx.attrs.only(&["blocksize", "mode"])?;
    let block = ctx.attrs.int("blocksize", 0)?;
    if block < 1 {
        return Err(ctx.err("blocksize must be a positive integer"));
    }
    let mode = match ctx.attrs.string("mode", "DCR")?.as_str() {
        "DCR" => Mode::Dcr,
        "CRD" => Mode::Crd,
        other => return Err(ctx.err(format!("mode {other} is not DCR or CRD"))),
    };
    Ok((block as usize, mode))
}

impl DepthToSpace {
    pub fn build(ctx: &NodeCtx, index: usize) -> Result<Built> {
        let (block, mode) = attributes(ctx)?;
        let (x, shape) = ctx.tensor(0)?;
        Self::lowered(ctx.label(index), x, shape, block, mode, ctx.outputs.clone())
            .map_err(|e| ctx.err(e))
    }

    /// Also used for the lowered pixel-shuffle pattern.
    pub fn lowered(
        label: String,
        x: TensorId,
        shape: &[usize],
        block: usize,
        mode: Mode,
        outputs: Vec<TensorId>,
    ) -> std::result::Result<Built, String> {
        let out = output_shape(shape, block)?;
        let push = Push {
            out_c: out[1] as u32,
            in_h: shape[2] as u32,
            in_w: shape[3] as u32,
            block: block as u32,
            count: element_count_u32(&out)?,
        };
        let op = DepthToSpace {
            label,
            io: Io {
                inputs: vec![x],
                outputs,
            },
            mode,
            push,
            pipe: None,
        };
        Ok(Built {
            op: Box::new(op),
            shapes: vec![out],
        })
    }
}

impl Op for DepthToSpace {
    fn label(&self) -> &str {
        &self.label
    }

    fn io(&self) -> &Io {
        &self.io
    }

    fn prepare(&mut self, gpu: &Gpu, pipes: &mut Pipelines) -> Result<()> {
        self.pipe = Some(pipes.get(gpu, SHADER, &[(self.mode == Mode::Crd) as u32])?);
        Ok(())
    }

    unsafe fn record(&self, rec: &Recorder) {
        let buffers = [
            rec.tensor(self.io.inputs[0]),
            rec.tensor(self.io.outputs[0]),
        ];
        let groups = super::groups_1d(self.push.count as usize, 256);
        rec.dispatch(self.pipe.expect("prepared"), &buffers, &self.push, groups);
    }

    fn destroy(self: Box<Self>, _gpu: &Gpu) {}
}
