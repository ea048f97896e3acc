//! Resize of H and W of an NCHW tensor (skip connections), nearest or linear, with ONNX's
//! coordinate transformation and nearest rounding modes.

use super::{Built, Io, NodeCtx, Op, Recorder};
use crate::gpu::Gpu;
use crate::infer::error::Result;
use crate::infer::pipelines::{PipeId, Pipelines, Shader};
use crate::infer::tensor::{element_count_u32, Const, MAX_ELEMENTS};
use crate::op_shader;

const SHADER: Shader = Shader {
    name: "ops/resize",
    spirv: op_shader!("ops/resize.comp"),
    buffers: 2,
    push_size: std::mem::size_of::<Push>() as u32,
};

/// coordinate_transformation_mode values, numbered as in resize.comp.
pub const COORD_MODES: [&str; 5] = [
    "half_pixel",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_half_pixel_for_nearest",
];
/// nearest_mode values, numbered as in resize.comp.
pub const ROUND_MODES: [&str; 4] = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"];

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Push {
    pub in_h: u32,
    pub in_w: u32,
    pub out_h: u32,
    pub out_w: u32,
    pub scale_h: f32,
    pub scale_w: f32,
    pub count: u32,
}

pub struct Resize {
    label: String,
    io: Io,
    spec: [u32; 3],
    push: Push,
    pipe: Option<PipeId>,
}

/// Output size and the scales the coordinate transform uses, from `scales` or `sizes` (one of
/// them, 4 values, N and C unchanged).
pub fn geometry(
    x: &[usize],
    scales: Option<&[f32]>,
    sizes: Option<&[i64]>,
) -> std::result::Result<([usize; 2], [f32; 2]), String> {
    if x.len() != 4 {
        return Err(format!("input {x:?} is not 4D (NCHW)"));
    }
    let (out, scale) = match (scales, sizes) {
        (Some(s), None) if s.len() == 4 => {
            if s[0] != 1.0 || s[1] != 1.0 {
                return Err(format!(
                    "scales {s:?} resize N or C; only H and W can change"
                ));
            }
            // f32 -> usize saturates (NaN to 0): range-check the float first.
            let size = |a: usize| (x[2 + a] as f64 * s[2 + a] as f64).floor();
            if ![0, 1]
                .iter()
                .all(|&a| (1.0..=MAX_ELEMENTS as f64).contains(&size(a)))
            {
                return Err(format!(
                    "scales {s:?} give no usable output size for input {x:?}"
                ));
            }
            let out = [0, 1].map(|a| size(a) as usize);
            (out, [s[2], s[3]])
        }
        (None, Some(s)) if s.len() == 4 => {
            let same = |v: i64, d: usize| usize::try_from(v) == Ok(d);
            if !same(s[0], x[0]) || !same(s[1], x[1]) {
                return Err(format!("sizes {s:?} resize N or C (input {x:?})"));
            }
            let range = 1..=MAX_ELEMENTS as i64;
            if !range.contains(&s[2]) || !range.contains(&s[3]) {
                return Err(format!("sizes {s:?} are not usable output sizes"));
            }
            let out = [s[2] as usize, s[3] as usize];
            (out, [0, 1].map(|a| out[a] as f32 / x[2 + a] as f32))
        }
        _ => return Err("exactly one of scales and sizes must be given, with 4 values".into()),
    };
    if out.contains(&0) {
        return Err(format!("the output size {out:?} is empty"));
    }
    Ok((out, scale))
}

/// A constant input that is there and not empty (exporters pass empty tensors for "absent").
fn present<'a>(ctx: &NodeCtx<'a>, i: usize) -> Result<Option<&'a Const>> {
    Ok(ctx.constant(i)?.filter(|c| !c.data.is_empty()))
}

/// The specialization constants [linear, coordinate mode, nearest mode] from the attributes.
fn modes(ctx: &NodeCtx) -> Result<[u32; 3]> {
    let a = &ctx.attrs;
    let linear = match a.string("mode", "nearest")?.as_str() {
        "nearest" => false,
        "linear" => true,
        other => return Err(ctx.err(format!("mode {other} is not supported (nearest, linear)"))),
    };
    let coord = a.string("coordinate_transformation_mode", "half_pixel")?;
    let coord = COORD_MODES
        .iter()
        .position(|m| *m == coord)
        .ok_or_else(|| {
            ctx.err(format!(
                "coordinate_transformation_mode {coord} is not one of {}",
                COORD_MODES.join(", ")
            ))
        })?;
    let round = a.string("nearest_mode", "round_prefer_floor")?;
    let round = ROUND_MODES
        .iter()
        .position(|m| *m == round)
        .ok_or_else(|| {
            ctx.err(format!(
                "nearest_mode {round} is not one of {}",
                ROUND_MODES.join(", ")
            ))
        })?;
    if a.int("antialias", 0)? != 0 {
        return Err(ctx.err("antialias is not supported"));
    }
    if a.string("keep_aspect_ratio_policy", "stretch")? != "stretch" {
        return Err(ctx.err("keep_aspect_ratio_policy other than stretch is not supported"));
    }
    Ok([linear as u32, coord as u32, round as u32])
}

/// What a Resize node computes, validated: [linear, coordinate mode, nearest mode], the
/// output size (H, W) and the scales the coordinate transform uses.
pub struct Params {
    pub spec: [u32; 3],
    pub out: [usize; 2],
    pub scale: [f32; 2],
}

impl Resize {
    pub fn build(ctx: &NodeCtx, index: usize) -> Result<Built> {
        let Params { spec, out, scale } = Self::params(ctx)?;
        let (x, shape) = ctx.tensor(0)?;
        let out_shape = vec![shape[0], shape[1], out[0], out[1]];
        let push = Push {
            in_h: shape[2] as u32,
            in_w: shape[3] as u32,
            out_h: out[0] as u32,
            out_w: out[1] as u32,
            scale_h: scale[0],
            scale_w: scale[1],
            count: element_count_u32(&out_shape).map_err(|e| ctx.err(e))?,
        };
        let op = Resize {
            label: ctx.label(index),
            io: Io {
                inputs: vec![x],
                outputs: ctx.outputs.clone(),
            },
            spec,
            push,
            pipe: None,
        };
        Ok(Built {
            op: Box::new(op),
            shapes: vec![out_shape],
        })
    }

    /// The node's attributes and geometry, as [`Resize::build`] uses them.
    pub fn params(ctx: &NodeCtx) -> Result<Params> {
        let a = &ctx.attrs;
        a.only(&[
            "mode",
            "coordinate_transformation_mode",
            "nearest_mode",
            "cubic_coeff_a",
            "exclude_outside",
            "extrapolation_value",
            "antialias",
            "keep_aspect_ratio_policy",
        ])?;
        let spec = modes(ctx)?;
        let (_, shape) = ctx.tensor(0)?;
        // Opset 10: (X, scales); 11+: (X, roi, scales, sizes). Empty tensors mean absent.
        let (scales, sizes) = if ctx.args.len() == 2 {
            (present(ctx, 1)?, None)
        } else {
            (present(ctx, 2)?, present(ctx, 3)?)
        };
        let sizes = sizes.map(|c| c.as_ints());
        let scales = scales.map(|c| c.data.clone());
        let (out, scale) =
            geometry(shape, scales.as_deref(), sizes.as_deref()).map_err(|e| ctx.err(e))?;
        Ok(Params { spec, out, scale })
    }
}

impl Op for Resize {
    fn label(&self) -> &str {
        &self.label
    }

    fn io(&self) -> &Io {
        &self.io
    }

    fn prepare(&mut self, gpu: &Gpu, pipes: &mut Pipelines) -> Result<()> {
        self.pipe = Some(pipes.get(gpu, SHADER, &self.spec)?);
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

#[cfg(test)]
mod tests {
    use super::geometry;

    #[test]
    fn scales_and_sizes_give_the_same_geometry() {
        let x = [1, 13, 7, 5];
        assert_eq!(
            geometry(&x, Some(&[1.0, 1.0, 2.0, 2.0]), None).unwrap(),
            ([14, 10], [2.0, 2.0])
        );
        assert_eq!(
            geometry(&x, None, Some(&[1, 13, 14, 10])).unwrap(),
            ([14, 10], [2.0, 2.0])
        );
        assert_eq!(
            geometry(&x, Some(&[1.0, 1.0, 0.5, 0.5]), None).unwrap().0,
            [3, 2]
        );
        assert!(geometry(&x, Some(&[1.0, 2.0, 2.0, 2.0]), None).is_err());
        assert!(geometry(&x, None, None).is_err());
    }
}
