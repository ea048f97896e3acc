//! Concat of computed tensors along any axis (the channel axis in upscalers' skip connections):
//! one `concat.comp` dispatch per input.

use super::{Built, Io, NodeCtx, Op, Recorder};
use crate::gpu::Gpu;
use crate::infer::error::Result;
use crate::infer::pipelines::{PipeId, Pipelines, Shader};
use crate::infer::tensor::element_count_u32;
use crate::op_shader;

const SHADER: Shader = Shader {
    name: "ops/concat",
    spirv: op_shader!("ops/concat.comp"),
    buffers: 2,
    push_size: std::mem::size_of::<Push>() as u32,
};

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct Push {
    axis_in: u32,
    axis_out: u32,
    offset: u32,
    inner: u32,
    count: u32,
}

pub struct Concat {
    label: String,
    io: Io,
    /// One per input, in order.
    pushes: Vec<Push>,
    pipe: Option<PipeId>,
}

/// The output shape and one copy description per input, for `axis` (negative counts from the end).
fn plan(shapes: &[Vec<usize>], axis: i64) -> std::result::Result<(Vec<usize>, Vec<Push>), String> {
    let rank = shapes[0].len() as i64;
    let a = if axis < 0 { axis + rank } else { axis };
    if !(0..rank).contains(&a) {
        return Err(format!("axis {axis} is out of range for rank {rank}"));
    }
    let a = a as usize;
    let mut out = shapes[0].clone();
    out[a] = 0;
    for s in shapes {
        let same = s.len() == out.len() && (0..s.len()).all(|d| d == a || s[d] == out[d]);
        if !same {
            return Err(format!("input shapes {shapes:?} differ outside axis {a}"));
        }
        out[a] += s[a];
    }
    let inner = element_count_u32(&out[a + 1..])?;
    let axis_out = element_count_u32(&out[a..=a])?;
    let mut offset = 0;
    let mut pushes = Vec::with_capacity(shapes.len());
    for s in shapes {
        pushes.push(Push {
            axis_in: s[a] as u32,
            axis_out,
            offset,
            inner,
            count: element_count_u32(s)?,
        });
        offset += s[a] as u32;
    }
    Ok((out, pushes))
}

impl Concat {
    pub fn build(ctx: &NodeCtx, index: usize) -> Result<Built> {
        ctx.attrs.only(&["axis"])?;
        let axis = ctx.attrs.int("axis", i64::MIN)?;
        if axis == i64::MIN {
            return Err(ctx.err("the axis attribute is required"));
        }
        let mut inputs = Vec::new();
        let mut shapes = Vec::new();
        for i in 0..ctx.args.len() {
            let (id, shape) = ctx.tensor(i)?;
            inputs.push(id);
            shapes.push(shape.to_vec());
        }
        if inputs.is_empty() {
            return Err(ctx.err("Concat needs at least one input"));
        }
        let (out, pushes) = plan(&shapes, axis).map_err(|e| ctx.err(e))?;
        let op = Concat {
            label: ctx.label(index),
            io: Io {
                inputs,
                outputs: ctx.outputs.clone(),
            },
            pushes,
            pipe: None,
        };
        Ok(Built {
            op: Box::new(op),
            shapes: vec![out],
        })
    }
}

impl Op for Concat {
    fn label(&self) -> &str {
        &self.label
    }

    fn io(&self) -> &Io {
        &self.io
    }

    fn prepare(&mut self, gpu: &Gpu, pipes: &mut Pipelines) -> Result<()> {
        self.pipe = Some(pipes.get(gpu, SHADER, &[])?);
        Ok(())
    }

    unsafe fn record(&self, rec: &Recorder) {
        let out = rec.tensor(self.io.outputs[0]);
        for (i, (push, &input)) in self.pushes.iter().zip(&self.io.inputs).enumerate() {
            if i > 0 {
                // Each dispatch binds the whole output buffer, so order the writes.
                rec.barrier();
            }
            let groups = super::groups_1d(push.count as usize, 256);
            rec.dispatch(
                self.pipe.expect("prepared"),
                &[rec.tensor(input), out],
                push,
                groups,
            );
        }
    }

    fn destroy(self: Box<Self>, _gpu: &Gpu) {}
}

#[cfg(test)]
mod tests {
    use super::plan;

    #[test]
    fn channel_concat_offsets_follow_the_inputs() {
        let (out, pushes) = plan(&[vec![1, 3, 7, 5], vec![1, 10, 7, 5]], 1).unwrap();
        assert_eq!(out, vec![1, 13, 7, 5]);
        assert_eq!(
            (pushes[1].offset, pushes[1].axis_out, pushes[1].inner),
            (3, 13, 35)
        );
        assert_eq!(plan(&[vec![1, 3, 7, 5]], -3).unwrap().0, vec![1, 3, 7, 5]);
        assert!(plan(&[vec![1, 3, 7, 5], vec![1, 3, 7, 4]], 1).is_err());
        assert!(plan(&[vec![1, 3]], 2).is_err());
    }
}
