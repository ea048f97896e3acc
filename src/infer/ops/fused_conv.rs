//! FusedConv: a stride-1, dilation-1, ungrouped Conv and what the planner folded into it (its
//! activation, a residual Add, the frame's pre-process, the tail of DepthToSpace, bilinear
//! base, Add and post-process), on the packed path (`fused_conv.comp`) or the matrix units
//! (`fused_conv_coopmat.comp`). `shaders/ops/fused_conv.glsl` explains the tiling; the tile and
//! chunk choice, the weight layout and the push constants are pure functions here, with tests.

use ash::vk;

use super::conv::{ConvGpu, Geometry};
use super::unary::Activation;
use super::{Cost, Io, Op, Recorder, TensorId};
use crate::gpu::pipeline::Binding;
use crate::gpu::Gpu;
use crate::infer::error::Result;
use crate::infer::pipelines::{PipelineDesc, Pipelines};
use crate::infer::precision::Precision;
use crate::shader;

/// Output channels per work group (the shaders' OC_TILE).
pub const OC_TILE: usize = 16;
/// Channels of padding per staged pixel in the matrix kernel (its S_PAD) where it stores
/// directly: a 48-byte pixel stride puts the 16 rows of a matrix load in different
/// shared-memory banks.
pub const COOPMAT_PAD: usize = 8;
/// Subgroups per work group of the matrix kernel. Measured on the H200 (quality_x2 fp16 at
/// 960x540, the shipped tiles): 4 subgroups 0.400 ms, 8 0.494, 2 0.505.
const COOPMAT_SUBGROUPS: usize = 4;
/// Output columns of the packed path's tile (16 invocations × 4 pixels) and its rows.
const PACKED_TILE: [usize; 2] = [64, 8];

/// A cooperative-matrix shape the device runs (fp16 A/B, fp32 accumulator), and the device's
/// subgroup size, which the shader's work group of four subgroups is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoopMat {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub subgroup: usize,
}

/// The kernel a FusedConv runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    Packed,
    CoopMat(CoopMat),
}

impl Kernel {
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Packed => "packed",
            Kernel::CoopMat(_) => "coopmat",
        }
    }
}

/// The tile a work group computes and the input channels it stages per pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiling {
    pub tile_w: usize,
    pub tile_h: usize,
    pub chunk: usize,
    /// Input channels rounded up to whole chunks: the weights' channel stride.
    pub icp: usize,
    /// Channels of padding per staged pixel in shared memory (the matrix kernel's S_PAD).
    pub pad: usize,
    /// Subgroups per work group (the matrix kernel; each owns whole segments).
    pub subgroups: usize,
    /// Kernel columns per matrix product (the matrix kernel on a thin input: 2 when its depth
    /// K holds two taps of `chunk` channels; else 1). The kernel's width is rounded up to it.
    pub tap_group: usize,
}

impl Tiling {
    /// The kernel's width rounded up to whole tap groups (the weights' and the tile's).
    pub fn kw_stage(&self, kw: usize) -> usize {
        kw.div_ceil(self.tap_group) * self.tap_group
    }
}

impl Tiling {
    /// Shared memory of the input tile (plus the coopmat path's per-subgroup scratch).
    pub fn shared_bytes(&self, kernel: [usize; 2], kind: Kernel, precision: Precision) -> usize {
        let rows = self.tile_h + kernel[0] - 1;
        let cols = self.tile_w + self.kw_stage(kernel[1]) - 1;
        let input = rows * cols * (self.chunk + self.pad) * precision.size() as usize;
        match kind {
            Kernel::Packed => input,
            // Four subgroups' scratch, and the bias tile.
            Kernel::CoopMat(cm) => input + (self.subgroups + 1) * cm.m * OC_TILE * 4,
        }
    }
}

/// The tiling for a conv of `ic` input channels and this kernel on `kind`, within
/// `max_shared` bytes of shared memory; None when not even the smallest fits (huge kernels).
/// The packed path takes the largest power-of-two chunk that fits (at most `ic` rounded up to
/// a power of two); the coopmat path stages 16 channels (its K) and takes the shortest tile
/// whose halo rows do not outnumber its own (else the tallest that fits).
pub fn tiling(
    ic: usize,
    kernel: [usize; 2],
    kind: Kernel,
    precision: Precision,
    max_shared: usize,
    tail: bool,
) -> Option<Tiling> {
    let fits = |t: &Tiling| t.shared_bytes(kernel, kind, precision) <= max_shared;
    let icp = |chunk: usize| ic.div_ceil(chunk) * chunk;
    match kind {
        Kernel::Packed => {
            let most = ic.next_power_of_two().min(16);
            [16, 8, 4, 2, 1]
                .into_iter()
                .filter(|&c| c <= most)
                .map(|chunk| Tiling {
                    tile_w: PACKED_TILE[0],
                    tile_h: PACKED_TILE[1],
                    chunk,
                    icp: icp(chunk),
                    pad: 0,
                    subgroups: 0,
                    tap_group: 1,
                })
                .find(fits)
        }
        Kernel::CoopMat(cm) => {
            // A thin input (at most 8 channels, e.g. RGB) is staged as 8 channels, and one
            // product's depth of 16 spans two taps (unpadded: the rows run across pixels).
            let thin = ic <= 8 && cm.k == 16;
            let chunk = if thin { 8 } else { 16 };
            let fitting: Vec<Tiling> = [8, 4, 2, 1]
                .into_iter()
                .map(|tile_h| Tiling {
                    tile_w: 64,
                    tile_h,
                    chunk,
                    icp: icp(chunk),
                    pad: if tail || thin { 0 } else { COOPMAT_PAD },
                    subgroups: COOPMAT_SUBGROUPS,
                    tap_group: if thin { 2 } else { 1 },
                })
                // Every subgroup owns at least one whole segment.
                .filter(|t| (t.tile_w / cm.m * t.tile_h) % t.subgroups == 0)
                .filter(fits)
                .collect();
            // Measured on the H200 at 960x540 (quality_x2, fp16): short tiles make many work
            // groups, which hide the staging's latency, and taller ones stage less halo. A
            // conv that stores its accumulators directly (no tail) is fastest with 4 rows and
            // padded staging (3x3 16->16: 0.036 ms; 2 rows 0.050, 8 rows 0.046; unpadded 0.040
            // with 4 rows); a tail, whose scalar epilogue dominates, with the smaller footprint:
            // unpadded and 2 rows for 3x3, 4 for 5x5 (the 5x5 tail: 0.104 ms; 0.153 padded,
            // 0.122 with 2 rows, 0.139 with 8). The rule: the shortest tile whose staged rows
            // are at most 1.5 times its own (direct store) or twice (tail).
            let halo_share = |t: &&Tiling| {
                let staged = t.tile_h + kernel[0] - 1;
                if tail {
                    staged <= 2 * t.tile_h
                } else {
                    2 * staged <= 3 * t.tile_h
                }
            };
            // A thin input's conv: 4 rows measured best for 5x5 3->16 (0.038 ms; 2 rows 0.044,
            // 8 rows 0.039) and 3x3 3->12 (0.025; 0.027 with 2 or 8).
            if let Some(t) = fitting.iter().find(|t| thin && t.tile_h == 4) {
                return Some(*t);
            }
            fitting
                .iter()
                .rev()
                .find(halo_share)
                .or(fitting.first())
                .copied()
        }
    }
}

/// The first conv of a conv → conv chain, run inside its reader's dispatch (the CHAIN variants:
/// `shaders/ops/fused_chain.glsl` on the packed kernel, `fused_chain_coopmat.glsl` on the
/// matrix units): its output tile is computed into the shared memory its reader stages from
/// (halo recomputed), and never stored.
pub struct Head {
    pub geo: Geometry,
    pub act: Activation,
    /// Its input channels as staged: the weights' channel stride (packed: rounded up to a
    /// multiple of 4; matrix units: 8 for a thin input, else 16).
    pub chunk: usize,
    /// Kernel columns per matrix product (matrix units, thin input: 2; else 1).
    pub tap_group: usize,
    /// Graph nodes it runs, for the plan's report.
    pub nodes: Vec<String>,
    /// ONNX-layout weights, packed for the kernel in `weights`.
    onnx_weights: Vec<f32>,
    weights: Vec<f32>,
    bias: Vec<f32>,
    gpu: Option<ConvGpu>,
}

impl Head {
    /// The head conv of this geometry, activation and ONNX-layout weights, packed for the
    /// packed kernel (`for_kernel` repacks it for the matrix units).
    pub fn new(
        geo: Geometry,
        act: Activation,
        weights: &[f32],
        bias: Vec<f32>,
        nodes: Vec<String>,
    ) -> Self {
        let chunk = chain_chunk(geo.in_c);
        Head {
            weights: pack_weights(&geo, chunk, geo.kernel[1], weights),
            onnx_weights: weights.to_vec(),
            geo,
            act,
            chunk,
            tap_group: 1,
            nodes,
            bias,
            gpu: None,
        }
    }

    /// This head with its weights laid out for `kernel`: on the matrix units, staged as
    /// [`coopmat_head_staging`] says.
    pub fn for_kernel(mut self, kernel: Kernel) -> Self {
        let (chunk, tap_group) = match kernel {
            Kernel::Packed => (chain_chunk(self.geo.in_c), 1),
            Kernel::CoopMat(cm) => coopmat_head_staging(self.geo.in_c, cm),
        };
        let kw_stage = self.geo.kernel[1].div_ceil(tap_group) * tap_group;
        self.weights = pack_weights(&self.geo, chunk, kw_stage, &self.onnx_weights);
        self.chunk = chunk;
        self.tap_group = tap_group;
        self
    }
}

/// How a chain head on the matrix units stages its input per pixel: (channels, taps per
/// product). A thin input (at most 8 channels) as 8 channels: two taps per product where K is
/// 16, as the unfused thin conv runs, one where K divides 8; else 16 channels, one tap.
pub fn coopmat_head_staging(in_c: usize, cm: CoopMat) -> (usize, usize) {
    match (in_c <= 8, cm.k) {
        (true, 16) => (8, 2),
        (true, k) if 8usize.is_multiple_of(k) => (8, 1),
        _ => (16, 1),
    }
}

/// Channels as a chain stages them (the head's input, its output): rounded up to a multiple of
/// 4, the vec4 loads' width.
fn chain_chunk(channels: usize) -> usize {
    channels.div_ceil(4) * 4
}

/// The fewest tile rows a chain takes. The head's output is computed by 16 invocations per
/// tile row, so shorter tiles leave most of the work group idle through the head's pass and
/// recompute a larger share of halo: measured on an H100 (2026-12-07, fp32, 48 KB of shared
/// memory), `quality_x2`'s three 16 → 16 chains at 2-row tiles took the upscale from 2.05 to
/// 7.53 ms, while `fast_x2`'s chain at 4 rows took it from 0.257 to 0.148 ms.
pub const CHAIN_MIN_ROWS: usize = 4;

/// Why a head and its reader cannot chain on either kernel: the head's input and output must
/// fit one chunk of 16 channels, and the reader must read the head's output.
fn chain_pair(head: &Geometry, reader: &Geometry) -> std::result::Result<(), String> {
    if head.in_c > 16 || head.out_c > OC_TILE {
        return Err(format!(
            "the head has {} input and {} output channels (a chain takes at most 16 of each)",
            head.in_c, head.out_c
        ));
    }
    if reader.in_c != head.out_c {
        return Err("the reader's input is not the head's output".into());
    }
    Ok(())
}

/// Why a conv → conv pair cannot run as one chain dispatch (the plan's note), or its tiling:
/// the reader's tile with the head's output staged whole (one chunk of `head.out_c` rounded
/// up to a multiple of 4), the tallest of 8 and [`CHAIN_MIN_ROWS`] rows whose two shared
/// tiles (the reader's and the head's input region) fit `max_shared` bytes.
pub fn chain_tiling(
    head: &Geometry,
    reader: &Geometry,
    precision: Precision,
    max_shared: usize,
) -> std::result::Result<Tiling, String> {
    chain_pair(head, reader)?;
    let chunk = chain_chunk(head.out_c);
    let tilings = [8, CHAIN_MIN_ROWS].map(|tile_h| Tiling {
        tile_w: PACKED_TILE[0],
        tile_h,
        chunk,
        icp: chunk,
        pad: 0,
        subgroups: 0,
        tap_group: 1,
    });
    let bytes = |t: &Tiling| chain_shared_bytes(t, head, reader, precision);
    tilings
        .iter()
        .find(|t| bytes(t) <= max_shared)
        .copied()
        .ok_or_else(|| {
            format!(
                "its two tiles need {} bytes of shared memory at {CHAIN_MIN_ROWS}-row tiles (the device \
                 has {max_shared}; shorter tiles are slower than two dispatches)",
                bytes(&tilings[1])
            )
        })
}

/// Shared memory of a chain's dispatch: the reader's staged tile and the head's input region.
pub fn chain_shared_bytes(
    t: &Tiling,
    head: &Geometry,
    reader: &Geometry,
    precision: Precision,
) -> usize {
    let rows = t.tile_h + reader.kernel[0] - 1;
    let cols = t.tile_w + reader.kernel[1] - 1;
    let size = precision.size() as usize;
    let head_rows = rows + head.kernel[0] - 1;
    let head_cols = cols + head.kernel[1] - 1;
    (rows * cols * t.chunk + head_rows * head_cols * chain_chunk(head.in_c)) * size
}

/// The tallest of 4 and 2 rows a chain on the matrix units takes (fewer recomputed halo rows
/// first). Measured on the H200 (960x540, fp16): quality_x2 0.453 ms with 4-row chains, 0.597
/// with 2-row ones; fast_x2 0.097 and 0.086 (both slower than unchained: `PlanOptions`).
const COOPMAT_CHAIN_ROWS: [usize; 2] = [4, 2];

/// Why a conv → conv pair cannot run as one chain dispatch on the matrix units (the plan's
/// note), or the reader's tiling: it stages the head's output (at most 16 channels, one chunk)
/// in rows widened to whole segments of `cm.m` pixels, the head's input region beside it
/// (`coopmat_chain_shared_bytes`). The first that fits of: 4 rows padded, 4 unpadded, 2
/// padded, 2 unpadded; never padded where the reader has a `tail` (its scalar epilogue, as
/// the unfused tail).
pub fn coopmat_chain_tiling(
    head: &Geometry,
    reader: &Geometry,
    cm: CoopMat,
    max_shared: usize,
    tail: bool,
) -> std::result::Result<Tiling, String> {
    chain_pair(head, reader)?;
    if !16usize.is_multiple_of(cm.k) || !OC_TILE.is_multiple_of(cm.n) || !cm.n.is_multiple_of(4) {
        return Err(format!(
            "the matrix shape {}x{}x{} does not divide a 16-channel block",
            cm.m, cm.n, cm.k
        ));
    }
    let pads: &[usize] = if tail { &[0] } else { &[COOPMAT_PAD, 0] };
    let tilings: Vec<Tiling> = COOPMAT_CHAIN_ROWS
        .into_iter()
        .flat_map(|tile_h| {
            pads.iter().map(move |&pad| Tiling {
                tile_w: 64,
                tile_h,
                chunk: 16,
                icp: 16,
                pad,
                subgroups: COOPMAT_SUBGROUPS,
                tap_group: 1,
            })
        })
        .filter(|t| (t.tile_w / cm.m * t.tile_h).is_multiple_of(t.subgroups))
        .collect();
    let bytes = |t: &Tiling| coopmat_chain_shared_bytes(t, head, reader, cm);
    tilings
        .iter()
        .find(|t| bytes(t) <= max_shared)
        .copied()
        .ok_or_else(|| match tilings.last() {
            Some(t) => format!(
                "its tiles need {} bytes of shared memory at {} rows (the device has {max_shared})",
                bytes(t),
                t.tile_h
            ),
            None => format!("no tile of {}-pixel segments fits four subgroups", cm.m),
        })
}

/// Shared memory of a chain's dispatch on the matrix units: the reader's staged tile (rows
/// widened to whole segments), the head's input region, the per-subgroup scratch and the two
/// bias tiles.
pub fn coopmat_chain_shared_bytes(
    t: &Tiling,
    head: &Geometry,
    reader: &Geometry,
    cm: CoopMat,
) -> usize {
    let rows = t.tile_h + reader.kernel[0] - 1;
    let cols = (t.tile_w + reader.kernel[1] - 1).div_ceil(cm.m) * cm.m;
    let (a_chunk, a_tap) = coopmat_head_staging(head.in_c, cm);
    let a_kw = head.kernel[1].div_ceil(a_tap) * a_tap;
    let head_rows = rows + head.kernel[0] - 1;
    let head_cols = cols + a_kw - 1;
    (rows * cols * (t.chunk + t.pad) + head_rows * head_cols * a_chunk) * 2
        + (t.subgroups + 2) * cm.m * OC_TILE * 4
}

/// ONNX weights `[M][C][kH][kW]` → `[oc block][tap][input channel padded to icp][16]`, the taps
/// over kH × `kw_stage` (the width rounded up to the tiling's tap group), zeros in the padding: for a tap and a run of channels, a row-major K × 16 matrix (the coopmat
/// path's B) and, per channel, four vec4s of 16 output channels (the packed path's loads).
pub fn pack_weights(g: &Geometry, icp: usize, kw_stage: usize, w: &[f32]) -> Vec<f32> {
    let [kh, kw] = g.kernel;
    let taps = kh * kw_stage;
    let blocks = g.out_c.div_ceil(OC_TILE);
    let mut out = vec![0.0; blocks * taps * icp * OC_TILE];
    for oc in 0..g.out_c {
        let (b, j) = (oc / OC_TILE, oc % OC_TILE);
        for ic in 0..g.in_c {
            for ky in 0..kh {
                for kx in 0..kw {
                    let t = ky * kw_stage + kx;
                    out[((b * taps + t) * icp + ic) * OC_TILE + j] =
                        w[(oc * g.in_c + ic) * kh * kw + ky * kw + kx];
                }
            }
        }
    }
    out
}

/// The output written into the frame's upscaled image: DepthToSpace of the conv's output,
/// plus the frame's bilinear Resize when `base` is given, clamped and quantised.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tail {
    pub block: usize,
    pub crd: bool,
    pub base: Option<Base>,
}

/// A linear Resize of the graph input: its coordinate mode (resize.rs's numbering) and scales.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Base {
    pub coord: u32,
    pub scale: [f32; 2],
}

/// What the planner fused around the conv.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fusion {
    /// The conv reads the frame's scene image (its input is the graph input).
    pub image_in: bool,
    /// A tensor added to the conv's activated output.
    pub residual: Option<TensorId>,
    /// A tensor added to the conv's input as the tile is staged: the Add that produced the
    /// input, fused into its reader instead of its writer (never with `residual`: both use
    /// the same binding).
    pub input_add: Option<TensorId>,
    pub tail: Option<Tail>,
    /// Graph nodes this op runs, for the plan's report.
    pub nodes: Vec<String>,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct Push {
    in_h: u32,
    in_w: u32,
    out_h: u32,
    out_w: u32,
    pad_top: i32,
    pad_left: i32,
    ic: u32,
    icp: u32,
    oc: u32,
    alpha: f32,
    beta: f32,
    base_scale_h: f32,
    base_scale_w: f32,
}

/// The chain variant's push constants: `Push` and the head's (fused_conv.glsl, `CHAIN`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct ChainPush {
    base: Push,
    a_in_h: u32,
    a_in_w: u32,
    a_pad_top: i32,
    a_pad_left: i32,
    a_ic: u32,
    a_oc: u32,
    a_alpha: f32,
    a_beta: f32,
}

pub struct FusedConv {
    label: String,
    io: Io,
    geo: Geometry,
    act: Activation,
    fusion: Fusion,
    kernel: Kernel,
    tiling: Tiling,
    weights: Vec<f32>,
    bias: Vec<f32>,
    /// Which of its input, residual and output tensors are in channel blocks (the plan's
    /// `Layout::Blocked`).
    blocked: [bool; 3],
    /// The conv before this one, run in this dispatch (a chain); the op's input is then the
    /// head's (`fusion.image_in`: the head reads the scene image).
    head: Option<Head>,
    gpu: Option<ConvGpu>,
}

/// Whether a conv of this geometry can run as a FusedConv (stride 1, no dilation, one group).
pub fn eligible(g: &Geometry) -> bool {
    g.stride == [1, 1] && g.dilation == [1, 1] && g.groups == 1
}

impl FusedConv {
    /// `x`: the input tensor (unused with `fusion.image_in`); `outputs`: the conv's output
    /// tensor (the graph output with a tail, never written then).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        label: String,
        x: TensorId,
        outputs: Vec<TensorId>,
        geo: Geometry,
        act: Activation,
        weights: &[f32],
        bias: Vec<f32>,
        fusion: Fusion,
        kernel: Kernel,
        tiling: Tiling,
    ) -> Self {
        let mut inputs = Vec::new();
        if !fusion.image_in {
            inputs.push(x);
        }
        assert!(
            fusion.residual.is_none() || fusion.input_add.is_none(),
            "a fused conv takes a residual or an input Add, not both"
        );
        inputs.extend(fusion.residual);
        inputs.extend(fusion.input_add);
        FusedConv {
            label,
            io: Io { inputs, outputs },
            weights: pack_weights(&geo, tiling.icp, tiling.kw_stage(geo.kernel[1]), weights),
            geo,
            act,
            fusion,
            kernel,
            tiling,
            bias,
            blocked: [false; 3],
            head: None,
            gpu: None,
        }
    }

    /// This conv with `head` run before it in the same dispatch (a chain): the op's `x` (see
    /// `new`) must then be the head's input, and the tiling a `chain_tiling`.
    pub fn with_head(mut self, head: Head) -> Self {
        assert!(
            self.fusion.input_add.is_none(),
            "a chain runs without an input Add"
        );
        assert!(
            self.geo.in_c <= self.tiling.chunk,
            "a chain's reader stages the head's output in one chunk"
        );
        self.head = Some(head.for_kernel(self.kernel));
        self
    }

    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    pub fn fusion(&self) -> &Fusion {
        &self.fusion
    }

    fn push(&self) -> Push {
        let g = &self.geo;
        let base = self.fusion.tail.and_then(|t| t.base);
        Push {
            in_h: g.in_h as u32,
            in_w: g.in_w as u32,
            out_h: g.out_h as u32,
            out_w: g.out_w as u32,
            pad_top: g.pad[0] as i32,
            pad_left: g.pad[1] as i32,
            ic: g.in_c as u32,
            icp: self.tiling.icp as u32,
            oc: g.out_c as u32,
            alpha: self.act.alpha,
            beta: self.act.beta,
            base_scale_h: base.map_or(1.0, |b| b.scale[0]),
            base_scale_w: base.map_or(1.0, |b| b.scale[1]),
        }
    }

    /// Specialization constants 0..=13 (fused_conv.glsl), then the coopmat shader's 14..=19.
    fn spec(&self) -> Vec<u32> {
        let t = &self.tiling;
        let tail = self.fusion.tail;
        let base = tail.and_then(|t| t.base);
        let mut spec = vec![
            self.act.kind,
            self.geo.kernel[0] as u32,
            self.geo.kernel[1] as u32,
            t.chunk as u32,
            t.tile_w as u32,
            t.tile_h as u32,
            self.fusion.residual.is_some() as u32,
            tail.map_or(1, |t| t.block as u32),
            tail.is_some_and(|t| t.crd) as u32,
            base.is_some() as u32,
            base.map_or(0, |b| b.coord),
            self.blocked[0] as u32,
            self.blocked[1] as u32,
            self.blocked[2] as u32,
        ];
        if let Kernel::CoopMat(cm) = self.kernel {
            let segs = t.tile_w / cm.m * t.tile_h / t.subgroups;
            spec.extend(
                [
                    cm.m,
                    cm.n,
                    cm.k,
                    cm.subgroup,
                    segs,
                    t.pad,
                    t.subgroups * cm.subgroup,
                    t.subgroups,
                    t.tap_group,
                ]
                .map(|v| v as u32),
            );
        }
        if spec.len() < 23 {
            // The packed kernel: none of the matrix kernel's 14..21, and TAP_GROUP (22),
            // which fused_conv.glsl declares for both, is 1 there.
            spec.resize(22, 0);
            spec.push(t.tap_group as u32);
        }
        // IN_ADD is constant 23 in both kernels.
        spec.push(self.fusion.input_add.is_some() as u32);
        if let Some(h) = &self.head {
            // fused_chain.glsl's 24..=27 (fused_chain_coopmat.glsl's 24..=28).
            spec.extend(
                [
                    h.geo.kernel[0],
                    h.geo.kernel[1],
                    h.act.kind as usize,
                    h.chunk,
                    h.tap_group,
                ]
                .map(|v| v as u32),
            );
        }
        spec
    }

    fn chain_push(&self, h: &Head) -> ChainPush {
        ChainPush {
            base: self.push(),
            a_in_h: h.geo.in_h as u32,
            a_in_w: h.geo.in_w as u32,
            a_pad_top: h.geo.pad[0] as i32,
            a_pad_left: h.geo.pad[1] as i32,
            a_ic: h.geo.in_c as u32,
            a_oc: h.geo.out_c as u32,
            a_alpha: h.act.alpha,
            a_beta: h.act.beta,
        }
    }

    fn desc(&self, precision: Precision) -> PipelineDesc {
        let image_in = self.fusion.image_in;
        let image_out = self.fusion.tail.is_some();
        let spirv: &'static [u8] = match (self.kernel, precision, image_in, image_out) {
            _ if self.head.is_some() => chain_spirv(self.kernel, precision, image_in, image_out),
            (Kernel::CoopMat(_), _, false, false) => shader!("ops/fused_conv_coopmat.comp"),
            (Kernel::CoopMat(_), _, true, false) => {
                shader!("ops/fused_conv_coopmat.comp", "image_in")
            }
            (Kernel::CoopMat(_), _, false, true) => {
                shader!("ops/fused_conv_coopmat.comp", "image_out")
            }
            (Kernel::CoopMat(_), _, true, true) => {
                shader!("ops/fused_conv_coopmat.comp", "image_in.image_out")
            }
            (Kernel::Packed, Precision::Fp32, false, false) => shader!("ops/fused_conv.comp"),
            (Kernel::Packed, Precision::Fp32, true, false) => {
                shader!("ops/fused_conv.comp", "image_in")
            }
            (Kernel::Packed, Precision::Fp32, false, true) => {
                shader!("ops/fused_conv.comp", "image_out")
            }
            (Kernel::Packed, Precision::Fp32, true, true) => {
                shader!("ops/fused_conv.comp", "image_in.image_out")
            }
            (Kernel::Packed, Precision::Fp16, false, false) => {
                shader!("ops/fused_conv.comp", "fp16")
            }
            (Kernel::Packed, Precision::Fp16, true, false) => {
                shader!("ops/fused_conv.comp", "fp16.image_in")
            }
            (Kernel::Packed, Precision::Fp16, false, true) => {
                shader!("ops/fused_conv.comp", "fp16.image_out")
            }
            (Kernel::Packed, Precision::Fp16, true, true) => {
                shader!("ops/fused_conv.comp", "fp16.image_in.image_out")
            }
        };
        let sampler = vk::DescriptorType::COMBINED_IMAGE_SAMPLER;
        let storage = vk::DescriptorType::STORAGE_BUFFER;
        let mut bindings = vec![
            if image_in { sampler } else { storage },
            storage,
            storage,
            storage,
        ];
        if image_out {
            bindings.extend([vk::DescriptorType::STORAGE_IMAGE, sampler]);
        } else {
            bindings.push(storage);
        }
        if self.head.is_some() {
            if !image_out {
                // Binding 5 (the base image with a tail) is unused: a stand-in buffer.
                bindings.push(storage);
            }
            // The head's weights and bias.
            bindings.extend([storage, storage]);
        }
        let push_size = if self.head.is_some() {
            std::mem::size_of::<ChainPush>()
        } else {
            std::mem::size_of::<Push>()
        } as u32;
        PipelineDesc {
            name: format!(
                "ops/fused_conv{} {} {precision} in:{} out:{}",
                if self.head.is_some() { " chain" } else { "" },
                self.kernel.name(),
                if image_in { "image" } else { "tensor" },
                if image_out { "image" } else { "tensor" },
            ),
            spirv,
            bindings,
            push_size,
            spec: self.spec(),
            full_subgroups: match self.kernel {
                Kernel::CoopMat(cm) => Some(cm.subgroup as u32),
                Kernel::Packed => None,
            },
        }
    }
}

impl Op for FusedConv {
    fn label(&self) -> &str {
        &self.label
    }

    fn io(&self) -> &Io {
        &self.io
    }

    fn nodes(&self) -> usize {
        self.fusion.nodes.len() + self.head.as_ref().map_or(0, |h| h.nodes.len())
    }

    fn conv_kernel(&self) -> Option<&'static str> {
        Some(self.kernel.name())
    }

    fn writes_frame(&self) -> bool {
        self.fusion.tail.is_some()
    }

    fn channel_blocks(&self) -> bool {
        true
    }

    fn set_layouts(&mut self, blocked: &dyn Fn(TensorId) -> bool) {
        let input = !self.fusion.image_in && blocked(self.io.inputs[0]);
        let residual = self
            .fusion
            .residual
            .or(self.fusion.input_add)
            .is_some_and(blocked);
        let output = self.fusion.tail.is_none() && blocked(self.io.outputs[0]);
        self.blocked = [input, residual, output];
    }

    /// The conv's FLOPs (the fused element-wise steps are noise beside them); bytes: the
    /// input (tensor, or RGBA8 texels), residual, weights, and the output tensor or, with the
    /// tail, the RGBA8 output image and the base's texels.
    fn cost(&self, bytes_of: &dyn Fn(TensorId) -> u64, elem: u64) -> Cost {
        let g = &self.geo;
        let texels = (g.in_h * g.in_w) as u64 * 4;
        let input = if self.fusion.image_in {
            texels
        } else {
            bytes_of(self.io.inputs[0])
        };
        let residual = self
            .fusion
            .residual
            .or(self.fusion.input_add)
            .map_or(0, bytes_of);
        let params = (self.weights.len() + self.bias.len()) as u64 * elem;
        let output = match self.fusion.tail {
            Some(t) => {
                let out = (g.out_h * g.out_w * t.block * t.block) as u64 * 4;
                out + if t.base.is_some() { texels } else { 0 }
            }
            None => bytes_of(self.io.outputs[0]),
        };
        // A chain: its head's FLOPs too (not the recomputed halo), its input in place of
        // the intermediate tensor (counted above as the op's input), and its weights.
        let (head_flops, head_params) = self.head.as_ref().map_or((0, 0), |h| {
            (
                h.geo.flops(),
                (h.weights.len() + h.bias.len()) as u64 * elem,
            )
        });
        let input = match &self.head {
            Some(h) if self.fusion.image_in => (h.geo.in_h * h.geo.in_w) as u64 * 4,
            _ => input,
        };
        Cost {
            flops: g.flops() + head_flops,
            bytes: input + residual + params + head_params + output,
        }
    }

    fn prepare(&mut self, gpu: &Gpu, pipes: &mut Pipelines) -> Result<()> {
        let precision = pipes.precision();
        let pipe = pipes.get_desc(gpu, self.desc(precision))?;
        self.gpu = Some(ConvGpu::upload(
            gpu,
            pipe,
            &self.label,
            &self.weights,
            &self.bias,
            precision,
        )?);
        if let Some(h) = &mut self.head {
            let label = format!("{} head", self.label);
            h.gpu = Some(ConvGpu::upload(
                gpu, pipe, &label, &h.weights, &h.bias, precision,
            )?);
        }
        Ok(())
    }

    unsafe fn record(&self, rec: &Recorder) {
        let gpu = self.gpu.as_ref().expect("prepared");
        let f = &self.fusion;
        let input = if f.image_in {
            let frame = rec.frame();
            Binding::SampledImage(frame.input, frame.sampler)
        } else {
            Binding::StorageBuffer(rec.tensor(self.io.inputs[0]))
        };
        // Unused bindings still need a valid buffer: the weights stand in (read-only).
        let residual = f
            .residual
            .or(f.input_add)
            .map_or(gpu.weights.raw, |r| rec.tensor(r));
        let weights = Binding::StorageBuffer(gpu.weights.raw);
        // Bindings 4 and 5: the output image and the base (a tail), or the output tensor and,
        // where a chain needs binding 5 to exist, a stand-in.
        let (out, base) = match f.tail {
            Some(_) => {
                let frame = rec.frame();
                (
                    Binding::StorageImage(frame.output),
                    Binding::SampledImage(frame.input, frame.sampler),
                )
            }
            None => (
                Binding::StorageBuffer(rec.tensor(self.io.outputs[0])),
                weights,
            ),
        };
        // Bindings 6 and 7: a chain head's weights and bias.
        let head = self
            .head
            .as_ref()
            .map(|h| h.gpu.as_ref().expect("prepared"));
        let (head_w, head_b) = head.map_or((weights, weights), |hg| {
            (
                Binding::StorageBuffer(hg.weights.raw),
                Binding::StorageBuffer(hg.bias.raw),
            )
        });
        // A fixed-size list (nothing allocated per frame), cut to what the pipeline declares.
        let all = [
            input,
            weights,
            Binding::StorageBuffer(gpu.bias.raw),
            Binding::StorageBuffer(residual),
            out,
            base,
            head_w,
            head_b,
        ];
        let count = match (&self.head, f.tail) {
            (Some(_), _) => 8,
            (None, Some(_)) => 6,
            (None, None) => 5,
        };
        let bindings = &all[..count];
        let g = &self.geo;
        let groups = [
            g.out_w.div_ceil(self.tiling.tile_w) as u32,
            g.out_h.div_ceil(self.tiling.tile_h) as u32,
            g.out_c.div_ceil(OC_TILE) as u32,
        ];
        match &self.head {
            Some(h) => rec.dispatch_with(gpu.pipe, bindings, &self.chain_push(h), groups),
            None => rec.dispatch_with(gpu.pipe, bindings, &self.push(), groups),
        }
    }

    fn destroy(self: Box<Self>, gpu: &Gpu) {
        if let Some(g) = self.gpu {
            g.destroy(gpu);
        }
        if let Some(g) = self.head.and_then(|h| h.gpu) {
            g.destroy(gpu);
        }
    }
}

/// The chain variant (built with CHAIN) of the matrix kernel or the packed one.
fn chain_spirv(
    kernel: Kernel,
    precision: Precision,
    image_in: bool,
    image_out: bool,
) -> &'static [u8] {
    if let Kernel::CoopMat(_) = kernel {
        return match (image_in, image_out) {
            (false, false) => shader!("ops/fused_conv_coopmat.comp", "chain"),
            (true, false) => shader!("ops/fused_conv_coopmat.comp", "image_in.chain"),
            (false, true) => shader!("ops/fused_conv_coopmat.comp", "image_out.chain"),
            (true, true) => shader!("ops/fused_conv_coopmat.comp", "image_in.image_out.chain"),
        };
    }
    match (precision, image_in, image_out) {
        (Precision::Fp32, false, false) => shader!("ops/fused_conv.comp", "chain"),
        (Precision::Fp32, true, false) => shader!("ops/fused_conv.comp", "image_in.chain"),
        (Precision::Fp32, false, true) => shader!("ops/fused_conv.comp", "image_out.chain"),
        (Precision::Fp32, true, true) => {
            shader!("ops/fused_conv.comp", "image_in.image_out.chain")
        }
        (Precision::Fp16, false, false) => shader!("ops/fused_conv.comp", "fp16.chain"),
        (Precision::Fp16, true, false) => shader!("ops/fused_conv.comp", "fp16.image_in.chain"),
        (Precision::Fp16, false, true) => shader!("ops/fused_conv.comp", "fp16.image_out.chain"),
        (Precision::Fp16, true, true) => {
            shader!("ops/fused_conv.comp", "fp16.image_in.image_out.chain")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CM: CoopMat = CoopMat {
        m: 16,
        n: 16,
        k: 16,
        subgroup: 32,
    };

    #[test]
    fn packed_tiling_takes_the_largest_chunk_that_fits() {
        // 3x3 over 16 channels in fp16: 10 x 66 x 16 halves = 21 KB.
        let t = tiling(16, [3, 3], Kernel::Packed, Precision::Fp16, 32768, false).unwrap();
        assert_eq!((t.chunk, t.icp, t.tile_w, t.tile_h), (16, 16, 64, 8));
        // fp32 5x5 over 16 channels: 16 channels would need 52 KB; 8 fit in 26 KB.
        let t = tiling(16, [5, 5], Kernel::Packed, Precision::Fp32, 32768, false).unwrap();
        assert_eq!((t.chunk, t.icp), (8, 16));
        // Three channels (RGB): a chunk of 4, padded once.
        let t = tiling(3, [5, 5], Kernel::Packed, Precision::Fp32, 32768, false).unwrap();
        assert_eq!((t.chunk, t.icp), (4, 4));
        // 13 channels in chunks of 8: the weights are padded to 16.
        let t = tiling(13, [3, 3], Kernel::Packed, Precision::Fp32, 24000, false).unwrap();
        assert_eq!((t.chunk, t.icp), (8, 16));
        assert!(tiling(3, [65, 65], Kernel::Packed, Precision::Fp32, 32768, false).is_none());
    }

    #[test]
    fn coopmat_tiling_stages_sixteen_channels_and_shortens_the_tile() {
        let cm = Kernel::CoopMat(CM);
        // Direct store: padded staging, 4 rows for 3x3 (6 staged), 8 for 5x5 (12 staged).
        let t = tiling(16, [3, 3], cm, Precision::Fp16, 49152, false).unwrap();
        assert_eq!((t.chunk, t.tile_w, t.tile_h, t.pad), (16, 64, 4, 8));
        let t = tiling(16, [5, 5], cm, Precision::Fp16, 49152, false).unwrap();
        assert_eq!(t.tile_h, 8);
        assert!(t.shared_bytes([5, 5], cm, Precision::Fp16) <= 49152);
        // A tail: unpadded, 2 rows for 3x3 (4 staged), 4 for 5x5 (8 staged).
        let t = tiling(16, [3, 3], cm, Precision::Fp16, 49152, true).unwrap();
        assert_eq!((t.tile_h, t.pad), (2, 0));
        let t = tiling(12, [5, 5], cm, Precision::Fp16, 49152, true).unwrap();
        assert_eq!((t.icp, t.tile_h, t.pad), (16, 4, 0));
        // A 9x9 kernel wants 16 rows, which do not fit here: the tallest that does.
        let t = tiling(16, [9, 9], cm, Precision::Fp16, 40000, false).unwrap();
        assert_eq!(t.tile_h, 2);
        // Three channels: staged as 8, two taps per product, the width rounded up to 6, and
        // unpadded (the product's rows run across pixels), 4 rows: (4 + 4) rows x (64 + 5)
        // columns x 8 halves + 5 KB = 13952 bytes.
        let t = tiling(3, [5, 5], cm, Precision::Fp16, 26000, false).unwrap();
        assert_eq!((t.chunk, t.icp, t.pad, t.tap_group), (8, 8, 0, 2));
        assert_eq!((t.kw_stage(5), t.tile_h), (6, 4));
        assert_eq!(t.shared_bytes([5, 5], cm, Precision::Fp16), 13952);
        // 32-pixel rows: two segments per row, so a tile needs at least two rows.
        let wide = CoopMat { m: 32, ..CM };
        let t = tiling(
            16,
            [3, 3],
            Kernel::CoopMat(wide),
            Precision::Fp16,
            24000,
            false,
        );
        assert_eq!(t.unwrap().tile_h, 2);
    }

    /// An 8x8 "same" conv of a k x k kernel.
    fn geo(in_c: usize, out_c: usize, k: usize) -> Geometry {
        Geometry {
            in_c,
            in_h: 8,
            in_w: 8,
            out_c,
            out_h: 8,
            out_w: 8,
            kernel: [k, k],
            stride: [1, 1],
            dilation: [1, 1],
            pad: [k / 2, k / 2],
            groups: 1,
        }
    }

    #[test]
    fn chain_tiling_takes_the_tallest_tile_whose_two_tiles_fit_and_never_under_four_rows() {
        let (head, reader) = (geo(3, 12, 3), geo(12, 12, 3));
        // fast_x2 in fp32 within 32 KB: 4 rows, (6 x 66 x 12 + 8 x 68 x 4) x 4 bytes.
        let t = chain_tiling(&head, &reader, Precision::Fp32, 32768).unwrap();
        assert_eq!((t.tile_w, t.tile_h, t.chunk, t.icp), (64, 4, 12, 12));
        assert_eq!(
            chain_shared_bytes(&t, &head, &reader, Precision::Fp32),
            27712
        );
        // In fp16 8 rows fit: (10 x 66 x 12 + 12 x 68 x 4) x 2 bytes.
        let t = chain_tiling(&head, &reader, Precision::Fp16, 32768).unwrap();
        assert_eq!(t.tile_h, 8);
        assert_eq!(
            chain_shared_bytes(&t, &head, &reader, Precision::Fp16),
            22368
        );
        // Two 16-channel 3x3 convs in fp32: 4 rows need 60,160 bytes, so none in 48 KB (2 rows
        // would fit, 43,008, but are slower than two dispatches: CHAIN_MIN_ROWS); 4 rows
        // in 64 KB.
        let (a, b) = (geo(16, 16, 3), geo(16, 16, 3));
        let why = chain_tiling(&a, &b, Precision::Fp32, 49152).unwrap_err();
        assert!(
            why.contains("60160 bytes") && why.contains("4-row"),
            "{why}"
        );
        let t = chain_tiling(&a, &b, Precision::Fp32, 65536).unwrap();
        assert_eq!(t.tile_h, 4);
        // In fp16 the same pair takes 4 rows in 32 KB (30,080 bytes) and 8 in 48 KB (47,232).
        assert_eq!(
            chain_tiling(&a, &b, Precision::Fp16, 32768).unwrap().tile_h,
            4
        );
        assert_eq!(
            chain_tiling(&a, &b, Precision::Fp16, 49152).unwrap().tile_h,
            8
        );
        // A head over more than 16 channels, or a reader of something else: refused.
        assert!(chain_tiling(&geo(20, 16, 3), &b, Precision::Fp16, 49152).is_err());
        assert!(chain_tiling(&a, &geo(12, 16, 3), Precision::Fp16, 49152).is_err());
    }

    #[test]
    fn coopmat_chain_tiling_widens_rows_to_segments_and_fits_both_tiles() {
        // fast_x2: a thin head (3 -> 12, staged as 8 channels, two taps per product, width
        // rounded to 4) and a tail reader, unpadded, 4 rows: 6 rows x 80 columns (66 rounded
        // to segments) x 16 halves, 8 x 83 x 8 halves for the head, six 16 x 16 f32 tiles.
        let (head, reader) = (geo(3, 12, 3), geo(12, 12, 3));
        assert_eq!(coopmat_head_staging(3, CM), (8, 2));
        // K = 8 (lavapipe's 8 x 8 x 8): one tap of 8 channels per product.
        assert_eq!(coopmat_head_staging(3, CoopMat { k: 8, ..CM }), (8, 1));
        let t = coopmat_chain_tiling(&head, &reader, CM, 49152, true).unwrap();
        assert_eq!(
            (t.tile_w, t.tile_h, t.chunk, t.icp, t.pad),
            (64, 4, 16, 16, 0)
        );
        let bytes = coopmat_chain_shared_bytes(&t, &head, &reader, CM);
        assert_eq!(bytes, (6 * 80 * 16 + 8 * 83 * 8) * 2 + 6 * 16 * 16 * 4);
        // Not a tail: padded staging where it fits.
        let t = coopmat_chain_tiling(&head, &reader, CM, 49152, false).unwrap();
        assert_eq!((t.tile_h, t.pad), (4, 8));
        // Two 16-channel 3x3 convs (quality_x2's pairs): padded, 4 rows need 50,176 bytes,
        // over 48 KB; unpadded 4 rows fit (42,496).
        let (a, b) = (geo(16, 16, 3), geo(16, 16, 3));
        assert_eq!(coopmat_head_staging(16, CM), (16, 1));
        let t = coopmat_chain_tiling(&a, &b, CM, 49152, false).unwrap();
        assert_eq!((t.tile_h, t.pad), (4, 0));
        assert_eq!(coopmat_chain_shared_bytes(&t, &a, &b, CM), 42496);
        // Within 32 KB only 2 rows fit.
        let t = coopmat_chain_tiling(&a, &b, CM, 32768, false).unwrap();
        assert_eq!(t.tile_h, 2);
        // Refused, with the reason: too little shared memory, too many channels, a reader of
        // something else.
        let why = coopmat_chain_tiling(&a, &b, CM, 16384, false).unwrap_err();
        assert!(why.contains("bytes of shared memory at 2 rows"), "{why}");
        assert!(coopmat_chain_tiling(&geo(20, 16, 3), &b, CM, 49152, false).is_err());
        assert!(coopmat_chain_tiling(&a, &geo(12, 16, 3), CM, 49152, false).is_err());
    }

    #[test]
    fn weights_are_packed_per_tap_with_padded_channels() {
        let g = Geometry {
            in_c: 3,
            in_h: 4,
            in_w: 4,
            out_c: 18,
            out_h: 4,
            out_w: 4,
            kernel: [1, 2],
            stride: [1, 1],
            dilation: [1, 1],
            pad: [0, 0],
            groups: 1,
        };
        let w: Vec<f32> = (0..18 * 3 * 2).map(|i| i as f32).collect();
        let packed = pack_weights(&g, 4, 2, &w);
        assert_eq!(packed.len(), 2 * 2 * 4 * OC_TILE);
        // oc 1, ic 2, tap 1: ONNX index (1 * 3 + 2) * 2 + 1 = 11.
        // Block 0, tap 1, channel 2: row (1 * 4 + 2).
        assert_eq!(packed[(4 + 2) * OC_TILE + 1], 11.0);
        // oc 17 is channel 1 of block 1.
        // Block 1, tap 0, channel 0: row (1 * 2 + 0) * 4.
        assert_eq!(packed[8 * OC_TILE + 1], w[17 * 6]);
        // The padded channel 3 is zero everywhere.
        assert!((0..OC_TILE).all(|j| packed[3 * OC_TILE + j] == 0.0));
        // The width rounded up to 4 taps: taps 2 and 3 are zero, tap 1 is where it was.
        let wide = pack_weights(&g, 4, 4, &w);
        assert_eq!(wide.len(), 2 * 4 * 4 * OC_TILE);
        assert_eq!(wide[(4 + 2) * OC_TILE + 1], 11.0);
        assert!(wide[(2 * 4) * OC_TILE..(4 * 4) * OC_TILE]
            .iter()
            .all(|&v| v == 0.0));
    }
}
