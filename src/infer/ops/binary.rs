//! Add, Sub, Mul, Div and PRelu (`binary.comp`): two tensors, or a tensor and a constant, with
//! numpy broadcasting up to rank 4. Constant operands are uploaded once at load time.

use super::{Arg, Built, Io, NodeCtx, Op, Recorder};
use crate::gpu::{Buffer, Gpu};
use crate::infer::error::Result;
use crate::infer::pipelines::{PipeId, Pipelines, Shader};
use crate::infer::tensor::element_count_u32;
use crate::op_shader;

const SHADER: Shader = Shader {
    name: "ops/binary",
    spirv: op_shader!("ops/binary.comp"),
    buffers: 3,
    push_size: std::mem::size_of::<Push>() as u32,
};

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct Push {
    dims: [u32; 4],
    a_strides: [u32; 4],
    b_strides: [u32; 4],
    count: u32,
    _pad: [u32; 3],
}

/// The broadcast output shape of `a` and `b` (numpy rules), or None when they do not fit.
pub fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let at = |s: &[usize], i: usize| (i + s.len()).checked_sub(rank).map_or(1, |j| s[j]);
    (0..rank)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// Strides (in elements) of `shape`, padded on the left to rank 4: 0 where broadcast.
pub fn broadcast_strides(shape: &[usize]) -> [u32; 4] {
    let mut padded = [1usize; 4];
    padded[4 - shape.len()..].copy_from_slice(shape);
    let mut strides = [0u32; 4];
    let mut stride = 1usize;
    for d in (0..4).rev() {
        // A size-1 dimension always reads coordinate 0, broadcast or not.
        strides[d] = if padded[d] == 1 { 0 } else { stride as u32 };
        stride *= padded[d];
    }
    strides
}

/// One operand: a runtime tensor, or a constant uploaded at `prepare`.
enum Operand {
    Tensor(usize),
    Const(Vec<f32>, Option<Buffer>),
}

pub struct Binary {
    label: String,
    io: Io,
    kind: u32,
    operands: [Operand; 2],
    push: Push,
    pipe: Option<PipeId>,
}

impl Binary {
    pub fn build(ctx: &NodeCtx, index: usize) -> Result<Built> {
        ctx.attrs.only(&[])?;
        let kind = match ctx.attrs.node.op_type.as_str() {
            "Add" => 0,
            "Sub" => 1,
            "Mul" => 2,
            "Div" => 3,
            _ => 4,
        };
        let mut shapes = Vec::new();
        let mut inputs = Vec::new();
        let mut operand = |i: usize| -> Result<Operand> {
            match ctx.arg(i) {
                Arg::Tensor { id, shape } => {
                    shapes.push(shape.clone());
                    inputs.push(*id);
                    Ok(Operand::Tensor(*id))
                }
                Arg::Const(c) => {
                    shapes.push(c.shape.clone());
                    Ok(Operand::Const(c.data.clone(), None))
                }
                Arg::Missing => Err(ctx.err(format!("input {i} is missing"))),
            }
        };
        let operands = [operand(0)?, operand(1)?];
        if inputs.is_empty() {
            return Err(ctx.err("both inputs are constants; fold them in the export"));
        }
        let out = broadcast(&shapes[0], &shapes[1]).ok_or_else(|| {
            ctx.err(format!(
                "shapes {:?} and {:?} do not broadcast",
                shapes[0], shapes[1]
            ))
        })?;
        if out.len() > 4 {
            return Err(ctx.err(format!("rank {} is not supported (4 at most)", out.len())));
        }
        let mut dims = [1usize; 4];
        dims[4 - out.len()..].copy_from_slice(&out);
        let count = element_count_u32(&out).map_err(|e| ctx.err(e))?;
        let push = Push {
            dims: dims.map(|d| d as u32),
            a_strides: broadcast_strides(&shapes[0]),
            b_strides: broadcast_strides(&shapes[1]),
            count,
            _pad: [0; 3],
        };
        let op = Binary {
            label: ctx.label(index),
            io: Io {
                inputs,
                outputs: ctx.outputs.clone(),
            },
            kind,
            operands,
            push,
            pipe: None,
        };
        Ok(Built {
            op: Box::new(op),
            shapes: vec![out],
        })
    }
}

impl Op for Binary {
    fn label(&self) -> &str {
        &self.label
    }

    fn io(&self) -> &Io {
        &self.io
    }

    fn prepare(&mut self, gpu: &Gpu, pipes: &mut Pipelines) -> Result<()> {
        self.pipe = Some(pipes.get(gpu, SHADER, &[self.kind])?);
        for (i, operand) in self.operands.iter_mut().enumerate() {
            if let Operand::Const(data, buffer @ None) = operand {
                *buffer = Some(super::upload(
                    gpu,
                    &format!("{} operand {i}", self.label),
                    data,
                    pipes.precision(),
                )?);
            }
        }
        Ok(())
    }

    unsafe fn record(&self, rec: &Recorder) {
        let buffer = |o: &Operand| match o {
            Operand::Tensor(id) => rec.tensor(*id),
            Operand::Const(_, b) => b.as_ref().expect("prepared").raw,
        };
        let buffers = [
            buffer(&self.operands[0]),
            buffer(&self.operands[1]),
            rec.tensor(self.io.outputs[0]),
        ];
        let groups = super::groups_1d(self.push.count as usize, 256);
        rec.dispatch(self.pipe.expect("prepared"), &buffers, &self.push, groups);
    }

    fn destroy(self: Box<Self>, gpu: &Gpu) {
        let [a, b] = self.operands;
        for o in [a, b] {
            if let Operand::Const(_, Some(buffer)) = o {
                buffer.destroy(gpu);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_follows_numpy() {
        assert_eq!(
            broadcast(&[1, 13, 7, 5], &[13, 1, 1]),
            Some(vec![1, 13, 7, 5])
        );
        assert_eq!(broadcast(&[1, 3, 7, 5], &[]), Some(vec![1, 3, 7, 5]));
        assert_eq!(broadcast(&[1, 3, 7, 5], &[1, 4, 1, 1]), None);
    }

    #[test]
    fn broadcast_dimensions_get_stride_zero() {
        assert_eq!(broadcast_strides(&[1, 13, 7, 5]), [0, 35, 5, 1]);
        assert_eq!(broadcast_strides(&[13, 1, 1]), [0, 1, 0, 0]);
        assert_eq!(broadcast_strides(&[]), [0, 0, 0, 0]);
    }
}
