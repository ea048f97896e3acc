//! Conv (2D, batch 1) with an optional fused activation. The attribute → geometry mapping, the
//! shared-memory chunking and the weight packing are pure functions with unit tests; the shader
//! (`conv.comp`) explains the tiling.

use super::unary::Activation;
use super::{Built, Cost, Io, NodeCtx, Op, Recorder, TensorId};
use crate::gpu::guard::Destroy;
use crate::gpu::{Buffer, Gpu};
use crate::infer::error::Result;
use crate::infer::graph::Attrs;
use crate::infer::pipelines::{PipeId, Pipelines, Shader};
use crate::infer::precision::Precision;
use crate::infer::tensor::MAX_ELEMENTS;
use crate::op_shader;

const TILE_W: usize = 16;
const TILE_H: usize = 8;
/// Output channels per invocation (two vec4 accumulators).
pub const OC_BLOCK: usize = 8;
/// Shared-memory floats for the input tile, and vec4s for the weights (conv.comp).
const SMEM_INPUT: usize = 2048;
const SMEM_WEIGHT_VEC4: usize = 512;

const SHADER: Shader = Shader {
    name: "ops/conv",
    spirv: op_shader!("ops/conv.comp"),
    buffers: 4,
    push_size: std::mem::size_of::<Push>() as u32,
};

/// Conv geometry resolved from the attributes and the input/weight shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub in_c: usize,
    pub in_h: usize,
    pub in_w: usize,
    pub out_c: usize,
    pub out_h: usize,
    pub out_w: usize,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    /// Top, left (the bottom/right pads only change the output size).
    pub pad: [usize; 2],
    pub groups: usize,
}

/// A 2D convolution of one image whose weight fits the input's channels and `groups`, and
/// matches `kernel_shape` when that is given.
fn check_shapes(attrs: &Attrs, x: &[usize], w: &[usize], groups: usize) -> Result<()> {
    if x.len() != 4 || w.len() != 4 {
        return Err(attrs.err(format!(
            "only 2D convolutions (4D input and weight) are supported; input {x:?}, weight {w:?}"
        )));
    }
    if x[0] != 1 {
        return Err(attrs.err(format!("batch size {} is not supported (1 only)", x[0])));
    }
    let kernel = [w[2], w[3]];
    if kernel.contains(&0) || w[0] == 0 {
        return Err(attrs.err(format!("weight {w:?} is empty")));
    }
    if let Some(k) = attrs.ints("kernel_shape")? {
        if k != [w[2] as i64, w[3] as i64] {
            return Err(attrs.err(format!(
                "kernel_shape {k:?} differs from the weight's {kernel:?}"
            )));
        }
    }
    if x[1] != w[1] * groups || !w[0].is_multiple_of(groups) {
        return Err(attrs.err(format!(
            "input has {} channels, weight {w:?} with group={groups} expects {}",
            x[1],
            w[1] * groups
        )));
    }
    Ok(())
}

/// A two-value positive attribute (strides, dilations), `default` for both when absent.
fn pair(attrs: &Attrs, name: &str, default: usize) -> Result<[usize; 2]> {
    match attrs.ints(name)? {
        None => Ok([default; 2]),
        Some(v) if v.len() == 2 => Ok([positive(attrs, name, v[0])?, positive(attrs, name, v[1])?]),
        Some(v) => Err(attrs.err(format!("{name} {v:?} needs 2 values"))),
    }
}

/// `pads` (top, left, bottom, right), zeros when absent.
fn explicit_pads(attrs: &Attrs) -> Result<[usize; 4]> {
    match attrs.ints("pads")? {
        None => Ok([0; 4]),
        Some(p) if p.len() == 4 && p.iter().all(|&v| (0..=MAX_ELEMENTS as i64).contains(&v)) => {
            Ok([p[0] as usize, p[1] as usize, p[2] as usize, p[3] as usize])
        }
        Some(p) => Err(attrs.err(format!("pads {p:?} needs 4 values in 0..=2^28"))),
    }
}

impl Geometry {
    /// `x`: [1, C, H, W]; `w`: [M, C/groups, kH, kW].
    pub fn resolve(attrs: &Attrs, x: &[usize], w: &[usize]) -> Result<Geometry> {
        attrs.only(&[
            "auto_pad",
            "dilations",
            "group",
            "kernel_shape",
            "pads",
            "strides",
        ])?;
        let groups = positive(attrs, "group", attrs.int("group", 1)?)?;
        check_shapes(attrs, x, w, groups)?;
        let kernel = [w[2], w[3]];
        let (stride, dilation) = (pair(attrs, "strides", 1)?, pair(attrs, "dilations", 1)?);
        let auto_pad = attrs.string("auto_pad", "NOTSET")?;
        let pads = explicit_pads(attrs)?;
        let mut out = [0; 2];
        let mut pad = [0; 2];
        for a in 0..2 {
            let span = (kernel[a] - 1) * dilation[a] + 1;
            let explicit = (pads[a], pads[a + 2]);
            (pad[a], out[a]) =
                axis(x[2 + a], span, stride[a], &auto_pad, explicit).map_err(|e| attrs.err(e))?;
        }
        Ok(Geometry {
            in_c: x[1],
            in_h: x[2],
            in_w: x[3],
            out_c: w[0],
            out_h: out[0],
            out_w: out[1],
            kernel,
            stride,
            dilation,
            pad,
            groups,
        })
    }

    pub fn ic_per_group(&self) -> usize {
        self.in_c / self.groups
    }

    pub fn oc_per_group(&self) -> usize {
        self.out_c / self.groups
    }

    pub fn oc_blocks(&self) -> usize {
        self.oc_per_group().div_ceil(OC_BLOCK)
    }

    /// (input tile height, width, input channels per shared-memory pass); 0 channels means the
    /// tile does not fit and the shader reads global memory directly.
    pub fn chunking(&self) -> (usize, usize, usize) {
        let span = |a: usize| (self.kernel[a] - 1) * self.dilation[a] + 1;
        let tile_h = (TILE_H - 1) * self.stride[0] + span(0);
        let tile_w = (TILE_W - 1) * self.stride[1] + span(1);
        let taps = self.kernel[0] * self.kernel[1];
        let chunk = (SMEM_INPUT / (tile_h * tile_w))
            .min(SMEM_WEIGHT_VEC4 / (taps * 2))
            .min(self.ic_per_group());
        (tile_h, tile_w, chunk)
    }
}

/// (leading pad, output length) of one spatial axis: ONNX's auto_pad rules, or the explicit
/// (begin, end) pads for NOTSET.
fn axis(
    input: usize,
    span: usize,
    stride: usize,
    auto_pad: &str,
    explicit: (usize, usize),
) -> std::result::Result<(usize, usize), String> {
    let (begin, end) = match auto_pad {
        "NOTSET" => explicit,
        "VALID" => (0, 0),
        "SAME_UPPER" | "SAME_LOWER" => {
            let o = input.div_ceil(stride);
            let total = ((o - 1) * stride + span).saturating_sub(input);
            let small = total / 2;
            if auto_pad == "SAME_UPPER" {
                (small, total - small)
            } else {
                (total - small, small)
            }
        }
        other => {
            return Err(format!(
                "auto_pad {other} is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"
            ))
        }
    };
    let padded = input + begin + end;
    if padded < span {
        return Err(format!(
            "kernel span {span} exceeds the padded input {padded}"
        ));
    }
    Ok((begin, (padded - span) / stride + 1))
}

/// An attribute that counts something (group, stride, dilation): 1..=MAX_ELEMENTS, which keeps
/// the geometry's products of two sizes inside usize.
fn positive(attrs: &Attrs, name: &str, v: i64) -> Result<usize> {
    if !(1..=MAX_ELEMENTS as i64).contains(&v) {
        return Err(attrs.err(format!("{name} must be positive (at most 2^28), got {v}")));
    }
    Ok(v as usize)
}

/// ONNX weights `[M][C/g][kH][kW]` → `[g][oc block][ic][ky][kx][OC_BLOCK]`, zero-padding each
/// group's output channels up to whole blocks.
pub fn pack_weights(g: &Geometry, w: &[f32]) -> Vec<f32> {
    let (icg, ocg, blocks) = (g.ic_per_group(), g.oc_per_group(), g.oc_blocks());
    let taps = g.kernel[0] * g.kernel[1];
    let mut out = vec![0.0; g.groups * blocks * icg * taps * OC_BLOCK];
    for grp in 0..g.groups {
        for ocl in 0..ocg {
            let (b, j) = (ocl / OC_BLOCK, ocl % OC_BLOCK);
            let oc = grp * ocg + ocl;
            for ic in 0..icg {
                for t in 0..taps {
                    let dst = (((grp * blocks + b) * icg + ic) * taps + t) * OC_BLOCK + j;
                    out[dst] = w[(oc * icg + ic) * taps + t];
                }
            }
        }
    }
    out
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Push {
    in_h: u32,
    in_w: u32,
    out_c: u32,
    out_h: u32,
    out_w: u32,
    kh: u32,
    kw: u32,
    stride_y: i32,
    stride_x: i32,
    dil_y: i32,
    dil_x: i32,
    pad_top: i32,
    pad_left: i32,
    ic_per_group: u32,
    oc_per_group: u32,
    oc_blocks: u32,
    ic_chunk: u32,
    tile_in_h: u32,
    tile_in_w: u32,
    alpha: f32,
    beta: f32,
}

pub struct Conv {
    label: String,
    io: Io,
    geo: Geometry,
    act: Activation,
    weights: Vec<f32>,
    bias: Vec<f32>,
    gpu: Option<ConvGpu>,
}

/// A convolution's pipeline and its weight and bias buffers on the device (Conv, FusedConv).
pub(super) struct ConvGpu {
    pub pipe: PipeId,
    pub weights: Buffer,
    pub bias: Buffer,
}

impl ConvGpu {
    /// Uploads `weights` and `bias` (ONNX or repacked order) in the plan's precision; load time.
    pub fn upload(
        gpu: &Gpu,
        pipe: PipeId,
        label: &str,
        weights: &[f32],
        bias: &[f32],
        precision: Precision,
    ) -> Result<Self> {
        let weights =
            super::upload(gpu, &format!("{label} weights"), weights, precision)?.guard(gpu);
        let bias = super::upload(gpu, &format!("{label} bias"), bias, precision)?;
        Ok(ConvGpu {
            pipe,
            weights: weights.keep(),
            bias,
        })
    }

    pub fn destroy(self, gpu: &Gpu) {
        self.weights.destroy(gpu);
        self.bias.destroy(gpu);
    }
}

/// A Conv node's operands, validated: input tensor, geometry, ONNX-layout weights, bias.
pub struct Parts<'a> {
    pub x: TensorId,
    pub geo: Geometry,
    pub weights: &'a [f32],
    pub bias: Vec<f32>,
}

impl<'a> Parts<'a> {
    pub fn of(ctx: &NodeCtx<'a>) -> Result<Self> {
        let (x, x_shape) = ctx.tensor(0)?;
        let w = ctx
            .constant(1)?
            .ok_or_else(|| ctx.err("the weight (input 1) is missing"))?;
        let geo = Geometry::resolve(&ctx.attrs, x_shape, &w.shape)?;
        let bias = match ctx.constant(2)? {
            Some(b) if b.data.len() == geo.out_c => b.data.clone(),
            Some(b) => {
                return Err(ctx.err(format!(
                    "bias has {} values for {} output channels",
                    b.data.len(),
                    geo.out_c
                )))
            }
            None => vec![0.0; geo.out_c],
        };
        Ok(Parts {
            x,
            geo,
            weights: &w.data,
            bias,
        })
    }
}

impl Conv {
    pub fn build(ctx: &NodeCtx, index: usize) -> Result<Built> {
        let Parts {
            x,
            geo,
            weights,
            bias,
        } = Parts::of(ctx)?;
        let act = ctx.fused.as_ref().map_or(Activation::NONE, |f| f.act);
        let shape = vec![1, geo.out_c, geo.out_h, geo.out_w];
        let op = Conv {
            label: ctx.label(index),
            io: Io {
                inputs: vec![x],
                outputs: ctx.outputs.clone(),
            },
            weights: pack_weights(&geo, weights),
            geo,
            act,
            bias,
            gpu: None,
        };
        Ok(Built {
            op: Box::new(op),
            shapes: vec![shape],
        })
    }

    fn push(&self) -> Push {
        let g = &self.geo;
        let (tile_in_h, tile_in_w, chunk) = g.chunking();
        Push {
            in_h: g.in_h as u32,
            in_w: g.in_w as u32,
            out_c: g.out_c as u32,
            out_h: g.out_h as u32,
            out_w: g.out_w as u32,
            kh: g.kernel[0] as u32,
            kw: g.kernel[1] as u32,
            stride_y: g.stride[0] as i32,
            stride_x: g.stride[1] as i32,
            dil_y: g.dilation[0] as i32,
            dil_x: g.dilation[1] as i32,
            pad_top: g.pad[0] as i32,
            pad_left: g.pad[1] as i32,
            ic_per_group: g.ic_per_group() as u32,
            oc_per_group: g.oc_per_group() as u32,
            oc_blocks: g.oc_blocks() as u32,
            ic_chunk: chunk as u32,
            tile_in_h: tile_in_h as u32,
            tile_in_w: tile_in_w as u32,
            alpha: self.act.alpha,
            beta: self.act.beta,
        }
    }
}

impl Geometry {
    /// Multiply-adds × 2 of the whole convolution.
    pub fn flops(&self) -> u64 {
        let per_output = (self.in_c / self.groups) * self.kernel[0] * self.kernel[1];
        2 * (self.out_c * self.out_h * self.out_w * per_output) as u64
    }
}

impl Op for Conv {
    fn label(&self) -> &str {
        &self.label
    }

    fn cost(&self, bytes_of: &dyn Fn(TensorId) -> u64, elem: u64) -> Cost {
        let params = (self.weights.len() + self.bias.len()) as u64 * elem;
        Cost {
            flops: self.geo.flops(),
            bytes: bytes_of(self.io.inputs[0]) + bytes_of(self.io.outputs[0]) + params,
        }
    }

    fn io(&self) -> &Io {
        &self.io
    }

    fn nodes(&self) -> usize {
        1 + (self.act.kind != Activation::NONE.kind) as usize
    }

    fn conv_kernel(&self) -> Option<&'static str> {
        Some("direct")
    }

    fn prepare(&mut self, gpu: &Gpu, pipes: &mut Pipelines) -> Result<()> {
        let direct = self.geo.chunking().2 == 0;
        let pipe = pipes.get(gpu, SHADER, &[self.act.kind, direct as u32])?;
        let precision = pipes.precision();
        self.gpu = Some(ConvGpu::upload(
            gpu,
            pipe,
            &self.label,
            &self.weights,
            &self.bias,
            precision,
        )?);
        Ok(())
    }

    unsafe fn record(&self, rec: &Recorder) {
        let gpu = self.gpu.as_ref().expect("prepared");
        let g = &self.geo;
        let buffers = [
            rec.tensor(self.io.inputs[0]),
            gpu.weights.raw,
            gpu.bias.raw,
            rec.tensor(self.io.outputs[0]),
        ];
        let groups = [
            g.out_w.div_ceil(TILE_W) as u32,
            g.out_h.div_ceil(TILE_H) as u32,
            (g.groups * g.oc_blocks()) as u32,
        ];
        rec.dispatch(gpu.pipe, &buffers, &self.push(), groups);
    }

    fn destroy(self: Box<Self>, gpu: &Gpu) {
        if let Some(g) = self.gpu {
            g.destroy(gpu);
        }
    }
}

#[cfg(test)]
mod tests {
    use onnx_protobuf::attribute_proto::AttributeType;
    use onnx_protobuf::{AttributeProto, NodeProto};

    use super::*;

    fn node(attrs: &[(&str, &[i64])], auto_pad: Option<&str>) -> NodeProto {
        let mut n = NodeProto::new();
        n.op_type = "Conv".into();
        n.name = "c".into();
        for (name, v) in attrs {
            let mut a = AttributeProto::new();
            a.name = name.to_string();
            a.ints = v.to_vec();
            a.type_ = AttributeType::INTS.into();
            n.attribute.push(a);
        }
        if let Some(p) = auto_pad {
            let mut a = AttributeProto::new();
            a.name = "auto_pad".into();
            a.s = p.as_bytes().to_vec();
            a.type_ = AttributeType::STRING.into();
            n.attribute.push(a);
        }
        n
    }

    fn geo(n: &NodeProto, x: &[usize], w: &[usize]) -> Result<Geometry> {
        Geometry::resolve(
            &Attrs {
                node: n,
                file: "t.onnx",
            },
            x,
            w,
        )
    }

    #[test]
    fn output_sizes_follow_pads_strides_and_dilations() {
        let n = node(
            &[
                ("pads", &[2, 1, 0, 3]),
                ("strides", &[2, 2]),
                ("dilations", &[2, 2]),
            ],
            None,
        );
        let g = geo(&n, &[1, 5, 13, 11], &[9, 5, 3, 5]).unwrap();
        // H: (13 + 2 + 0 - 5) / 2 + 1 = 6; W: (11 + 1 + 3 - 9) / 2 + 1 = 4.
        assert_eq!((g.out_h, g.out_w, g.pad), (6, 4, [2, 1]));
    }

    #[test]
    fn same_padding_puts_the_odd_pixel_where_the_mode_says() {
        for (mode, pad) in [
            ("SAME_UPPER", [1, 1]),
            ("SAME_LOWER", [2, 2]),
            ("VALID", [0, 0]),
        ] {
            let n = node(&[("strides", &[2, 2])], Some(mode));
            let g = geo(&n, &[1, 3, 7, 7], &[4, 3, 4, 4]).unwrap();
            assert_eq!(g.pad, pad, "{mode}");
            let want = if mode == "VALID" { 2 } else { 4 };
            assert_eq!((g.out_h, g.out_w), (want, want), "{mode}");
        }
    }

    #[test]
    fn bad_attributes_name_the_node() {
        let n = node(&[("pads", &[1, 1, 1])], None);
        let e = geo(&n, &[1, 3, 7, 5], &[4, 3, 3, 3])
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"c\" (Conv)") && e.contains("pads"), "{e}");
        let n = node(&[], None);
        assert!(
            geo(&n, &[1, 4, 7, 5], &[4, 3, 3, 3]).is_err(),
            "channel mismatch"
        );
        assert!(geo(&n, &[2, 3, 7, 5], &[4, 3, 3, 3]).is_err(), "batch 2");
    }

    #[test]
    fn chunking_fits_shared_memory_or_falls_back_to_direct() {
        let n = node(&[("pads", &[2, 2, 2, 2])], None);
        // ESPCN's first layer: 20x12 input tile, 3 channels in one pass.
        let g = geo(&n, &[1, 3, 540, 960], &[32, 3, 5, 5]).unwrap();
        assert_eq!(g.chunking(), (12, 20, 3));
        let n = node(&[("pads", &[1, 1, 1, 1])], None);
        let g = geo(&n, &[1, 32, 540, 960], &[16, 32, 3, 3]).unwrap();
        let (h, w, c) = g.chunking();
        assert!(c > 0 && c * h * w <= SMEM_INPUT && c * 9 * 2 <= SMEM_WEIGHT_VEC4);
        let n = node(&[("pads", &[8, 8, 8, 8])], None);
        let g = geo(&n, &[1, 2, 20, 18], &[3, 2, 17, 17]).unwrap();
        assert_eq!(g.chunking().2, 0, "17x17 does not fit: direct");
    }

    #[test]
    fn packing_pads_each_group_to_whole_blocks() {
        let n = node(&[], None);
        // 2 groups of 3 output channels, 1 input channel each, 1x1 kernel.
        let mut n2 = n.clone();
        let mut a = AttributeProto::new();
        a.name = "group".into();
        a.i = 2;
        a.type_ = AttributeType::INT.into();
        n2.attribute.push(a);
        let g = geo(&n2, &[1, 2, 4, 4], &[6, 1, 1, 1]).unwrap();
        let packed = pack_weights(&g, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(packed.len(), 2 * OC_BLOCK);
        assert_eq!(&packed[..4], &[1.0, 2.0, 3.0, 0.0]);
        assert_eq!(&packed[OC_BLOCK..OC_BLOCK + 4], &[4.0, 5.0, 6.0, 0.0]);
    }

    #[test]
    fn flops_count_a_multiply_add_as_two() {
        let g = Geometry {
            in_c: 16,
            in_h: 540,
            in_w: 960,
            out_c: 16,
            out_h: 540,
            out_w: 960,
            kernel: [3, 3],
            stride: [1, 1],
            dilation: [1, 1],
            pad: [1, 1],
            groups: 1,
        };
        assert_eq!(g.flops(), 2 * 16 * 540 * 960 * 16 * 9);
        let depthwise = Geometry { groups: 16, ..g };
        assert_eq!(depthwise.flops(), 2 * 16 * 540 * 960 * 9);
    }
}
