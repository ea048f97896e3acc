//! Relu, LeakyRelu, Clip, Sigmoid, Tanh as one shader (`unary.comp`) whose specialization
//! constant picks the function. A Conv followed by one of these runs it as its epilogue instead
//! ([`Activation`] is shared with `conv.rs`).

use super::{Built, Io, NodeCtx, Op, Recorder};
use crate::gpu::Gpu;
use crate::infer::error::Result;
use crate::infer::graph::Attrs;
use crate::infer::pipelines::{PipeId, Pipelines, Shader};
use crate::op_shader;

/// An activation with its parameters (`alpha`: LeakyRelu slope or Clip min; `beta`: Clip max).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Activation {
    /// The `ACT_*` number of `shaders/ops/activation.glsl`.
    pub kind: u32,
    pub alpha: f32,
    pub beta: f32,
}

impl Activation {
    pub const NONE: Activation = Activation {
        kind: 0,
        alpha: 0.0,
        beta: 0.0,
    };

    /// The activation of a Relu/LeakyRelu/Clip/Sigmoid/Tanh node; `clip_bounds` are Clip's
    /// optional min/max inputs (opset 11+), when constant.
    pub fn from_node(attrs: &Attrs, clip_bounds: [Option<f32>; 2]) -> Result<Activation> {
        let act = |kind, alpha, beta| Activation { kind, alpha, beta };
        match attrs.node.op_type.as_str() {
            "Relu" => {
                attrs.only(&[])?;
                Ok(act(1, 0.0, 0.0))
            }
            "LeakyRelu" => {
                attrs.only(&["alpha"])?;
                Ok(act(2, attrs.float("alpha", 0.01)?, 0.0))
            }
            "Clip" => {
                attrs.only(&["min", "max"])?;
                let min = clip_bounds[0].unwrap_or(attrs.float("min", f32::MIN)?);
                let max = clip_bounds[1].unwrap_or(attrs.float("max", f32::MAX)?);
                Ok(act(3, min, max))
            }
            "Sigmoid" => {
                attrs.only(&[])?;
                Ok(act(4, 0.0, 0.0))
            }
            "Tanh" => {
                attrs.only(&[])?;
                Ok(act(5, 0.0, 0.0))
            }
            other => Err(attrs.err(format!("{other} is not an activation"))),
        }
    }

    /// What the shader computes, for tests and references.
    pub fn apply(&self, x: f32) -> f32 {
        match self.kind {
            1 => x.max(0.0),
            2 if x < 0.0 => self.alpha * x,
            3 => x.max(self.alpha).min(self.beta),
            4 => 1.0 / (1.0 + (-x).exp()),
            5 => x.tanh(),
            _ => x,
        }
    }
}

/// Clip's min/max inputs 1 and 2 (constant scalars), when present.
pub fn clip_bounds(ctx: &NodeCtx) -> Result<[Option<f32>; 2]> {
    if ctx.attrs.node.op_type != "Clip" {
        return Ok([None, None]);
    }
    let scalar = |i: usize| -> Result<Option<f32>> {
        match ctx.constant(i)? {
            Some(c) if c.data.len() == 1 => Ok(Some(c.data[0])),
            Some(_) => Err(ctx.err("Clip min/max must be scalars")),
            None => Ok(None),
        }
    };
    Ok([scalar(1)?, scalar(2)?])
}

const SHADER: Shader = Shader {
    name: "ops/unary",
    spirv: op_shader!("ops/unary.comp"),
    buffers: 2,
    push_size: 12,
};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Push {
    count: u32,
    alpha: f32,
    beta: f32,
}

pub struct Unary {
    label: String,
    io: Io,
    act: Activation,
    count: usize,
    pipe: Option<PipeId>,
}

impl Unary {
    pub fn build(ctx: &NodeCtx, index: usize) -> Result<Built> {
        let (x, shape) = ctx.tensor(0)?;
        let act = Activation::from_node(&ctx.attrs, clip_bounds(ctx)?)?;
        let op = Unary {
            label: ctx.label(index),
            io: Io {
                inputs: vec![x],
                outputs: ctx.outputs.clone(),
            },
            act,
            count: shape.iter().product(),
            pipe: None,
        };
        Ok(Built {
            op: Box::new(op),
            shapes: vec![shape.to_vec()],
        })
    }
}

impl Op for Unary {
    fn label(&self) -> &str {
        &self.label
    }

    fn io(&self) -> &Io {
        &self.io
    }

    fn prepare(&mut self, gpu: &Gpu, pipes: &mut Pipelines) -> Result<()> {
        self.pipe = Some(pipes.get(gpu, SHADER, &[self.act.kind])?);
        Ok(())
    }

    unsafe fn record(&self, rec: &Recorder) {
        let push = Push {
            count: self.count as u32,
            alpha: self.act.alpha,
            beta: self.act.beta,
        };
        let buffers = [
            rec.tensor(self.io.inputs[0]),
            rec.tensor(self.io.outputs[0]),
        ];
        let groups = super::groups_1d(self.count, 256);
        rec.dispatch(self.pipe.expect("prepared"), &buffers, &push, groups);
    }

    fn destroy(self: Box<Self>, _gpu: &Gpu) {}
}
