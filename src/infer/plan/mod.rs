//! From a graph and concrete input shapes to a plan: ops in topological order with their output
//! shapes, Identity removed, Conv+activation fused, the pixel-shuffle pattern lowered to
//! DepthToSpace, and one buffer per group of tensors whose lifetimes do not overlap. The fast
//! path (`PlanOptions::fuse`) folds more into each conv: `fusion.rs`.

use std::collections::{HashMap, HashSet};

use onnx_protobuf::NodeProto;

use super::error::{InferError, Result};
use super::graph::{node_error, Attrs, Dim, Graph};
use super::ops::fused_conv::CoopMat;
use super::ops::{self, Arg, Built, Fused, NodeCtx, Op, TensorId};
use super::pixel_shuffle;
use super::precision::Precision;
use crate::gpu::device::CoopMatShape;
use crate::gpu::DeviceInfo;
use crate::upscale::model;
use crate::upscale::model::temporal::History;

mod fusion;
use super::tensor;

#[derive(Clone, Debug)]
pub struct TensorInfo {
    pub name: String,
    pub shape: Vec<usize>,
    /// The element type the tensor is stored in.
    pub dtype: Precision,
    pub layout: Layout,
}

/// How a 4-D (N, C, H, W) tensor's elements are laid out in its buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// ONNX's own order: channel planes.
    #[default]
    Nchw,
    /// Channel blocks of [`CHANNEL_BLOCK`], the channels innermost (`[C/16][H][W][16]`, the
    /// last block padded): a pixel's channels are one vector load or store and a run of
    /// pixels' channels one strided matrix. Chosen for tensors that only FusedConvs write and
    /// read (`Op::channel_blocks`); graph inputs and outputs stay NCHW.
    Blocked,
}

/// Channels per block in [`Layout::Blocked`] (the FusedConv kernels' output-channel tile).
pub const CHANNEL_BLOCK: usize = 16;

impl TensorInfo {
    /// The tensor's element count (its shape's product).
    pub fn elements(&self) -> u64 {
        self.shape.iter().product::<usize>() as u64
    }

    /// What its buffer holds: the elements, and the last channel block's padding.
    pub fn bytes(&self) -> u64 {
        let stored = match (self.layout, self.shape.as_slice()) {
            (Layout::Blocked, [n, c, h, w]) => {
                (n * c.div_ceil(CHANNEL_BLOCK) * CHANNEL_BLOCK * h * w) as u64
            }
            _ => self.elements(),
        };
        stored * self.dtype.size()
    }
}

/// How a graph is planned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanOptions {
    /// The storage type of every tensor and weight.
    pub precision: Precision,
    /// Fuse across ops (stride-1 convs as FusedConv with what follows them); false keeps the
    /// reference: one dispatch per op (a Conv with its activation), the `direct` conv kernel.
    pub fuse: bool,
    /// The graph's one input is read from the frame's scene image and its one output written
    /// into the upscaled image (the in-stream pattern); ops may then fuse the pre- and
    /// post-process away.
    pub frame_io: bool,
    /// The cooperative-matrix shape to run fp16 convolutions on (None: the packed path).
    pub coopmat: Option<CoopMat>,
    /// Shared memory a work group may use, in bytes (tiles are sized to it).
    pub max_shared_memory: usize,
    /// Conv → conv chains on the matrix units too (the packed kernel takes them always). Off:
    /// measured on the H200 they are slower than two dispatches (`docs/engine.md`); the
    /// `UPSCALE_COOPMAT_CHAINS=all` environment variable turns them on in `fast`, for
    /// measurements, and the engine's tests run both where the device has matrix units.
    pub coopmat_chains: bool,
    /// Rows of a tail's tile on the matrix units, subgroups per work group and padded staging,
    /// where they fit (None: the tiling's rule). For measurements:
    /// `UPSCALE_TAIL_TILE=ROWS[xSUBGROUPS][p]` sets it in `fast`.
    pub tail_tile: Option<TileOverride>,
    /// The same for a conv of at most 8 input channels (`UPSCALE_THIN_TILE`).
    pub thin_tile: Option<TileOverride>,
}

impl PlanOptions {
    /// The reference plan: fp32, one dispatch per op, tensors in and out.
    pub fn reference() -> Self {
        Self {
            precision: Precision::Fp32,
            fuse: false,
            frame_io: false,
            coopmat: None,
            max_shared_memory: 16384,
            coopmat_chains: false,
            tail_tile: None,
            thin_tile: None,
        }
    }

    /// The fast path on `device` in `precision`: fused, on its matrix units where it has a
    /// shape the engine uses (fp16 only) — see [`choose_coopmat`].
    pub fn fast(device: &DeviceInfo, precision: Precision, frame_io: bool) -> Self {
        Self {
            precision,
            fuse: true,
            frame_io,
            coopmat: match precision {
                Precision::Fp16 => choose_coopmat(device).ok(),
                Precision::Fp32 => None,
            },
            max_shared_memory: device.max_compute_shared_memory as usize,
            coopmat_chains: std::env::var("UPSCALE_COOPMAT_CHAINS").as_deref() == Ok("all"),
            tail_tile: tile_from_env("UPSCALE_TAIL_TILE"),
            thin_tile: tile_from_env("UPSCALE_THIN_TILE"),
        }
    }
}

/// A tile for the matrix kernel that overrides the tiling's rule, for measurements
/// ([`PlanOptions::tail_tile`], [`PlanOptions::thin_tile`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileOverride {
    pub rows: usize,
    pub subgroups: usize,
    /// Padded staging (a tail only: a thin input's staged rows run across pixels).
    pub padded: bool,
}

/// A tile override from the environment: `ROWS[xSUBGROUPS][p]`.
fn tile_from_env(name: &str) -> Option<TileOverride> {
    let v = std::env::var(name).ok()?;
    let tile = parse_tile(&v);
    if tile.is_none() {
        tracing::warn!("{name}={v:?} is not ROWS[xSUBGROUPS][p] (e.g. 4x8, 2p): ignored");
    }
    tile
}

/// `ROWS[xSUBGROUPS][p]`: 4 subgroups if not given, `p` for padded staging.
fn parse_tile(v: &str) -> Option<TileOverride> {
    let (v, padded) = v.strip_suffix('p').map_or((v, false), |v| (v, true));
    let (rows, subgroups) = v.split_once('x').unwrap_or((v, "4"));
    Some(TileOverride {
        rows: rows.parse().ok()?,
        subgroups: subgroups.parse().ok()?,
        padded,
    })
}

/// The cooperative-matrix shape the engine uses on `device`: fp16 A and B with an fp32
/// accumulator, M ∈ {8, 16, 32} (a segment of pixels), N and K dividing 16 (the output-channel
/// tile and the staged channel chunk), the largest M·N·K first. Err says why there is none.
pub fn choose_coopmat(device: &DeviceInfo) -> std::result::Result<CoopMat, String> {
    if device.cooperative_matrix.is_empty() {
        return Err(format!(
            "{} has no VK_KHR_cooperative_matrix shape with fp16 inputs",
            device.name
        ));
    }
    let usable = |s: &&CoopMatShape| {
        s.fp32_accumulator
            && [8, 16, 32].contains(&s.m)
            && [8, 16].contains(&s.n)
            && [8, 16].contains(&s.k)
    };
    let shape = device
        .cooperative_matrix
        .iter()
        .filter(usable)
        .max_by_key(|s| (s.m * s.n * s.k, s.m))
        .ok_or_else(|| {
            format!(
                "{}'s cooperative-matrix shapes {:?} have no fp32 accumulator with M in 8/16/32 and N, K in 8/16",
                device.name, device.cooperative_matrix
            )
        })?;
    if device.subgroup_size == 0 || !device.subgroup_size_control {
        return Err(format!(
            "{} cannot require full subgroups (subgroupSizeControl), which the matrix kernel's work group split needs",
            device.name
        ));
    }
    Ok(CoopMat {
        m: shape.m as usize,
        n: shape.n as usize,
        k: shape.k as usize,
        subgroup: device.subgroup_size as usize,
    })
}

pub struct Plan {
    pub file: String,
    pub options: PlanOptions,
    pub tensors: Vec<TensorInfo>,
    pub ops: Vec<Box<dyn Op>>,
    pub inputs: Vec<TensorId>,
    pub outputs: Vec<TensorId>,
    /// The buffer (slot) of each tensor, and each slot's size in bytes.
    pub slot_of: Vec<usize>,
    pub slot_bytes: Vec<u64>,
    /// Whether op k needs a barrier before it: it reads a buffer an op since the last barrier
    /// wrote, or writes one such an op read or wrote (never before op 0; the caller orders
    /// the inputs' writes).
    pub barriers: Vec<bool>,
    /// With `frame_io`: whether some op reads the graph input as a tensor (so the frame must
    /// be converted into it first), and whether the graph output is already in the frame's
    /// image (no conversion after).
    pub input_tensor_needed: bool,
    pub output_in_frame: bool,
    /// What fusion did not do, and why (for the plan's report).
    pub notes: Vec<String>,
    /// A temporal model's (`crate::plan_temporal`): the history its pattern must feed it.
    pub history: Option<History>,
}

const ACTIVATIONS: [&str; 5] = ["Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh"];

impl Plan {
    /// Plans `graph` for inputs of `shapes` (one per graph input, in order): the reference
    /// plan ([`PlanOptions::reference`]).
    pub fn new(graph: &Graph, shapes: &[Vec<usize>]) -> Result<Plan> {
        Self::with_options(graph, shapes, &PlanOptions::reference())
    }

    /// [`Plan::new`] with these options.
    pub fn with_options(
        graph: &Graph,
        shapes: &[Vec<usize>],
        options: &PlanOptions,
    ) -> Result<Plan> {
        let mut b = Builder::new(graph, options.clone());
        b.bind_inputs(shapes)?;
        let order = topological_order(graph)?;
        b.build_ops(&order)?;
        b.finish()
    }
}

impl Plan {
    /// What the plan chose, a line each: the options, every dispatch (its kernel and whether a
    /// barrier precedes it), what fusion left alone and why.
    pub fn report(&self) -> Vec<String> {
        let o = &self.options;
        let mut lines = vec![format!(
            "{}: {}, {}, {} ops",
            self.file,
            o.precision,
            if o.fuse {
                "fused"
            } else {
                "one dispatch per op"
            },
            self.ops.len()
        )];
        if o.frame_io {
            lines.push(format!(
                "scene image -> input: {}; output -> upscaled image: {}",
                if self.input_tensor_needed {
                    "converted (to_tensor)"
                } else {
                    "read by the first conv"
                },
                if self.output_in_frame {
                    "written by the last conv"
                } else {
                    "converted (from_tensor)"
                },
            ));
        }
        for (k, op) in self.ops.iter().enumerate() {
            let kernel = op
                .conv_kernel()
                .map_or(String::new(), |k| format!(" [{k}]"));
            let barrier = if k > 0 && !self.barriers[k] {
                " (no barrier before)"
            } else {
                ""
            };
            lines.push(format!("{k}: {}{kernel}{barrier}", op.label()));
        }
        lines.extend(self.notes.iter().cloned());
        lines
    }
}

/// The graph's single input bound to an image of `height`×`width` (NCHW, batch 1, 3 channels);
/// symbolic dims take the sizes, fixed ones must match.
pub fn image_input_shape(graph: &Graph, height: usize, width: usize) -> Result<Vec<usize>> {
    let err = |reason: String| InferError::Graph {
        file: graph.file.clone(),
        reason,
    };
    if graph.inputs.len() != 1 {
        let names: Vec<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
        let temporal =
            graph.metadata.get(model::KIND_KEY).map(String::as_str) == Some(model::TEMPORAL_KIND);
        return Err(err(format!(
            "an upscaler has one input, this graph has {} ({}){}",
            names.len(),
            names.join(", "),
            if temporal {
                format!(": {}", model::TEMPORAL_REFUSAL)
            } else {
                String::new()
            }
        )));
    }
    let input = &graph.inputs[0];
    let want = [1, 3, height, width];
    if input.dims.len() != 4 {
        return Err(err(format!("input \"{}\" is not 4D (NCHW)", input.name)));
    }
    for (d, (dim, &w)) in input.dims.iter().zip(&want).enumerate() {
        if let Dim::Fixed(v) = dim {
            if *v != w {
                return Err(err(format!(
                    "input \"{}\" has dimension {d} fixed to {v}, the render size needs {w} (input {want:?})",
                    input.name
                )));
            }
        }
    }
    Ok(want.to_vec())
}

/// Nodes in an order where every input is computed before it is read (Kahn, keeping file order
/// among ready nodes).
pub fn topological_order(graph: &Graph) -> Result<Vec<usize>> {
    let mut known: HashSet<&str> = graph.consts.keys().map(String::as_str).collect();
    known.extend(graph.inputs.iter().map(|i| i.name.as_str()));
    known.insert("");
    let mut done = vec![false; graph.nodes.len()];
    let mut order = Vec::with_capacity(graph.nodes.len());
    while order.len() < graph.nodes.len() {
        let before = order.len();
        for (i, node) in graph.nodes.iter().enumerate() {
            if !done[i] && node.input.iter().all(|n| known.contains(n.as_str())) {
                done[i] = true;
                order.push(i);
                known.extend(node.output.iter().map(String::as_str));
            }
        }
        if order.len() == before {
            let node = graph.nodes.iter().zip(&done).find(|(_, d)| !**d).unwrap().0;
            let missing = node
                .input
                .iter()
                .find(|n| !known.contains(n.as_str()))
                .unwrap();
            return Err(node_error(
                &graph.file,
                node,
                format!("input \"{missing}\" is neither a graph input, an initialiser nor any node's output (or the graph has a cycle)"),
            ));
        }
    }
    Ok(order)
}

struct Builder<'g> {
    graph: &'g Graph,
    options: PlanOptions,
    /// Nodes a fused op may absorb, built on their own only if none does (see fusion.rs).
    deferred: HashSet<usize>,
    /// Nodes already built or absorbed.
    done: HashSet<usize>,
    /// Adds left to the conv that reads them (fusion.rs): the Add's output name → (the Add
    /// node, its operand the writer conv computes, its other operand).
    input_adds: HashMap<String, (usize, String, String)>,
    /// The fused conv just placed, when its output's only reader is a conv: that reader may
    /// run it as its chain head (fusion.rs).
    chain_head: Option<fusion::ChainCandidate>,
    notes: Vec<String>,
    tensors: Vec<TensorInfo>,
    ids: HashMap<String, TensorId>,
    /// Identity outputs → their input's name.
    alias: HashMap<String, String>,
    ops: Vec<Box<dyn Op>>,
    inputs: Vec<TensorId>,
    consumers: HashMap<&'g str, Vec<usize>>,
}

impl<'g> Builder<'g> {
    fn new(graph: &'g Graph, options: PlanOptions) -> Self {
        let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, node) in graph.nodes.iter().enumerate() {
            for input in &node.input {
                consumers.entry(input.as_str()).or_default().push(i);
            }
        }
        let deferred = if options.fuse && options.frame_io {
            fusion::deferred_bases(graph, &consumers)
        } else {
            HashSet::new()
        };
        Self {
            graph,
            options,
            deferred,
            done: HashSet::new(),
            input_adds: HashMap::new(),
            chain_head: None,
            notes: Vec::new(),
            tensors: Vec::new(),
            ids: HashMap::new(),
            alias: HashMap::new(),
            ops: Vec::new(),
            inputs: Vec::new(),
            consumers,
        }
    }

    fn graph_err(&self, reason: String) -> InferError {
        InferError::Graph {
            file: self.graph.file.clone(),
            reason,
        }
    }

    fn add_tensor(&mut self, name: &str, shape: Vec<usize>) -> TensorId {
        self.tensors.push(TensorInfo {
            name: name.into(),
            shape,
            dtype: self.options.precision,
            layout: Layout::Nchw,
        });
        self.ids.insert(name.into(), self.tensors.len() - 1);
        self.tensors.len() - 1
    }

    fn bind_inputs(&mut self, shapes: &[Vec<usize>]) -> Result<()> {
        let inputs = &self.graph.inputs;
        if shapes.len() != inputs.len() {
            return Err(self.graph_err(format!(
                "the graph has {} input(s), {} given",
                inputs.len(),
                shapes.len()
            )));
        }
        let mut symbols: HashMap<&str, usize> = HashMap::new();
        for (input, shape) in inputs.iter().zip(shapes) {
            let fits = input.dims.is_empty()
                || (input.dims.len() == shape.len()
                    && input.dims.iter().zip(shape).all(|(d, &s)| match d {
                        Dim::Fixed(v) => *v == s,
                        Dim::Symbolic(name) => *symbols.entry(name).or_insert(s) == s,
                    }));
            let size = tensor::element_count(shape).and_then(|n| match n {
                0 => Err(format!("shape {shape:?} is empty")),
                n => Ok(n),
            });
            if let Err(why) = size {
                return Err(self.graph_err(format!("input \"{}\": {why}", input.name)));
            }
            if !fits {
                return Err(self.graph_err(format!(
                    "input \"{}\" declared as {:?} cannot take shape {shape:?}",
                    input.name, input.dims
                )));
            }
            let id = self.add_tensor(&input.name, shape.clone());
            self.inputs.push(id);
        }
        Ok(())
    }

    fn resolve(&self, name: &str) -> Arg<'g> {
        let mut name = name;
        while let Some(a) = self.alias.get(name) {
            name = a;
        }
        if name.is_empty() {
            return Arg::Missing;
        }
        if let Some(c) = self.graph.consts.get(name) {
            return Arg::Const(c);
        }
        match self.ids.get(name) {
            Some(&id) => Arg::Tensor {
                id,
                shape: self.tensors[id].shape.clone(),
            },
            None => Arg::Missing,
        }
    }

    fn ctx(
        &self,
        node: &'g NodeProto,
        outputs: Vec<TensorId>,
        fused: Option<Fused>,
    ) -> NodeCtx<'g> {
        NodeCtx {
            attrs: Attrs {
                node,
                file: &self.graph.file,
            },
            args: node.input.iter().map(|n| self.resolve(n)).collect(),
            outputs,
            fused,
        }
    }

    /// The single consumer of `node`'s only output, when there is exactly one and the output
    /// is not a graph output (so the intermediate tensor can disappear).
    fn sole_consumer(&self, node: &NodeProto) -> Option<usize> {
        let out = node.output.first()?;
        if node.output.len() != 1 || self.graph.outputs.contains(out) {
            return None;
        }
        match self.consumers.get(out.as_str()).map(Vec::as_slice) {
            Some([only]) => Some(*only),
            _ => None,
        }
    }

    fn fusion(&self, node: &'g NodeProto) -> Result<Option<(usize, Fused)>> {
        if node.op_type != "Conv" {
            return Ok(None);
        }
        let Some(next) = self.sole_consumer(node) else {
            return Ok(None);
        };
        let act_node = &self.graph.nodes[next];
        if !ACTIVATIONS.contains(&act_node.op_type.as_str()) || !act_node.domain.is_empty() {
            return Ok(None);
        }
        let ctx = self.ctx(act_node, vec![], None);
        // Clip bounds computed at run time cannot be folded into the conv.
        let Ok(bounds) = ops::unary::clip_bounds(&ctx) else {
            return Ok(None);
        };
        let act = ops::unary::Activation::from_node(&ctx.attrs, bounds)?;
        let fused = Fused {
            op_type: act_node.op_type.clone(),
            act,
        };
        Ok(Some((next, fused)))
    }

    fn build_ops(&mut self, order: &[usize]) -> Result<()> {
        let graph = self.graph;
        let mut skip = HashSet::new();
        for &i in order {
            if skip.contains(&i) || self.done.contains(&i) || self.deferred.contains(&i) {
                continue;
            }
            self.build_deferred_inputs(i)?;
            let node = &graph.nodes[i];
            if node.op_type == "Identity" && node.domain.is_empty() {
                let (Some(input), Some(output)) = (node.input.first(), node.output.first()) else {
                    return Err(node_error(
                        &graph.file,
                        node,
                        "Identity needs one input and one output",
                    ));
                };
                self.alias.insert(output.clone(), input.clone());
                continue;
            }
            let index = self.ops.len();
            if self.options.fuse && node.op_type == "Conv" && node.domain.is_empty() {
                if let Some(built) = self.fused_conv(i, index)? {
                    self.place(built)?;
                    continue;
                }
            }
            let built = if node.op_type == "Reshape" {
                self.pixel_shuffle(i, index, &mut skip)?
            } else {
                let fusion = self.fusion(node)?;
                let last = fusion.as_ref().map_or(node, |(n, _)| &graph.nodes[*n]);
                let outputs = self.new_outputs(last);
                if let Some((n, _)) = &fusion {
                    skip.insert(*n);
                }
                let ctx = self.ctx(node, outputs, fusion.map(|f| f.1));
                ops::build(&ctx, index)?
            };
            self.place(built)?;
        }
        Ok(())
    }

    fn new_outputs(&mut self, node: &NodeProto) -> Vec<TensorId> {
        node.output
            .iter()
            .map(|name| self.add_tensor(name, vec![]))
            .collect()
    }

    /// Records the op and its output shapes, which must be non-empty and within
    /// [`tensor::MAX_ELEMENTS`]: the ops after it do shape arithmetic on them.
    fn place(&mut self, built: Built) -> Result<()> {
        for (&id, shape) in built.op.io().outputs.iter().zip(&built.shapes) {
            let count = tensor::element_count(shape);
            if count.as_ref().map_or(true, |&n| n == 0) {
                let why = count
                    .err()
                    .unwrap_or_else(|| format!("shape {shape:?} is empty"));
                return Err(self.graph_err(format!(
                    "{}: output \"{}\": {why}",
                    built.op.label(),
                    self.tensors[id].name
                )));
            }
        }
        for (&id, shape) in built.op.io().outputs.iter().zip(built.shapes) {
            self.tensors[id].shape = shape;
        }
        self.ops.push(built.op);
        Ok(())
    }

    /// Reshape → Transpose → Reshape that is a pixel shuffle becomes one DepthToSpace; any
    /// other Reshape is unsupported.
    fn pixel_shuffle(
        &mut self,
        i: usize,
        index: usize,
        skip: &mut HashSet<usize>,
    ) -> Result<Built> {
        let graph = self.graph;
        let nodes = &graph.nodes;
        let r1 = &nodes[i];
        let chain = self
            .sole_consumer(r1)
            .and_then(|t| Some((t, self.sole_consumer(&nodes[t])?)));
        let unsupported = || ops::unsupported(&self.ctx(r1, vec![], None));
        let Some((t, r2)) = chain else {
            return Err(unsupported());
        };
        let (transpose, reshape2) = (&nodes[t], &nodes[r2]);
        if transpose.op_type != "Transpose" || reshape2.op_type != "Reshape" {
            return Err(unsupported());
        }
        let ctx1 = self.ctx(r1, vec![], None);
        let (Arg::Tensor { id: x, shape }, Arg::Const(s1)) = (ctx1.arg(0), ctx1.arg(1)) else {
            return Err(unsupported());
        };
        let ctx2 = self.ctx(reshape2, vec![], None);
        let Arg::Const(s2) = ctx2.arg(1) else {
            return Err(unsupported());
        };
        let perm = Attrs {
            node: transpose,
            file: &self.graph.file,
        }
        .ints("perm")?
        .unwrap_or_default();
        let Some((block, mode)) =
            pixel_shuffle::recognise(shape, &s1.as_ints(), &perm, &s2.as_ints())
        else {
            return Err(unsupported());
        };
        let (x, shape) = (*x, shape.clone());
        skip.insert(t);
        skip.insert(r2);
        let outputs = self.new_outputs(reshape2);
        let name = if r1.name.is_empty() {
            format!("#{index}")
        } else {
            r1.name.clone()
        };
        ops::depth_to_space::DepthToSpace::lowered(
            format!("DepthToSpace:{name}"),
            x,
            &shape,
            block,
            mode,
            outputs,
        )
        .map_err(|e| node_error(&self.graph.file, r1, e))
    }

    fn finish(mut self) -> Result<Plan> {
        self.build_remaining_deferred()?;
        self.choose_layouts();
        let mut outputs = Vec::new();
        for name in &self.graph.outputs {
            match self.resolve(name) {
                Arg::Tensor { id, .. } => outputs.push(id),
                _ => {
                    return Err(self.graph_err(format!(
                        "graph output \"{name}\" is not computed by any supported node"
                    )))
                }
            }
        }
        let n = self.ops.len();
        let mut def = vec![0; self.tensors.len()];
        let mut last = vec![0; self.tensors.len()];
        for (k, op) in self.ops.iter().enumerate() {
            for &t in &op.io().inputs {
                last[t] = k + 1;
            }
            for &t in &op.io().outputs {
                def[t] = k + 1;
                last[t] = last[t].max(k + 1);
            }
        }
        for &t in &outputs {
            last[t] = n + 1;
        }
        let frame_io = self.options.frame_io;
        let input_tensor_needed = !frame_io
            || self
                .ops
                .iter()
                .any(|op| self.inputs.iter().any(|i| op.io().inputs.contains(i)));
        let output_in_frame = frame_io
            && self
                .ops
                .iter()
                .any(|op| op.writes_frame() && outputs.iter().any(|o| op.io().outputs.contains(o)));
        // Tensors that live in the frame's images need no buffer.
        let mut sizes: Vec<u64> = self.tensors.iter().map(TensorInfo::bytes).collect();
        if !input_tensor_needed {
            self.inputs.iter().for_each(|&i| sizes[i] = 0);
        }
        if output_in_frame {
            outputs.iter().for_each(|&o| sizes[o] = 0);
        }
        // Tensors no op reads or writes (a chain's intermediate, which stays in shared
        // memory) need no buffer either.
        for (t, size) in sizes.iter_mut().enumerate() {
            if def[t] == 0 && last[t] == 0 && !self.inputs.contains(&t) {
                *size = 0;
            }
        }
        let (slot_of, slot_bytes) = assign_buffers(&sizes, &def, &last);
        let io = |ids: &[TensorId]| -> Vec<usize> {
            ids.iter()
                .filter(|&&t| sizes[t] > 0)
                .map(|&t| slot_of[t])
                .collect()
        };
        let accesses: Vec<_> = self
            .ops
            .iter()
            .map(|op| (io(&op.io().inputs), io(&op.io().outputs)))
            .collect();
        Ok(Plan {
            file: self.graph.file.clone(),
            options: self.options,
            tensors: self.tensors,
            ops: self.ops,
            inputs: self.inputs,
            outputs,
            slot_of,
            slot_bytes,
            barriers: barriers(&accesses),
            input_tensor_needed,
            output_in_frame,
            notes: self.notes,
            history: None,
        })
    }
}

impl Builder<'_> {
    /// Puts in channel blocks ([`Layout::Blocked`]) every 4-D tensor whose writer and readers
    /// all take that layout (fused plans only; graph inputs and outputs stay NCHW), and tells
    /// the ops.
    fn choose_layouts(&mut self) {
        if !self.options.fuse {
            return;
        }
        let outputs: HashSet<TensorId> = self
            .graph
            .outputs
            .iter()
            .filter_map(|name| match self.resolve(name) {
                Arg::Tensor { id, .. } => Some(id),
                _ => None,
            })
            .collect();
        let mut blocked = vec![false; self.tensors.len()];
        for (t, info) in self.tensors.iter().enumerate() {
            if info.shape.len() != 4 || self.inputs.contains(&t) || outputs.contains(&t) {
                continue;
            }
            let writer = self.ops.iter().find(|op| op.io().outputs.contains(&t));
            let mut readers = self
                .ops
                .iter()
                .filter(|op| op.io().inputs.contains(&t))
                .peekable();
            let has_readers = readers.peek().is_some();
            blocked[t] = has_readers
                && writer.is_some_and(|op| op.channel_blocks())
                && readers.all(|op| op.channel_blocks());
        }
        let count = blocked.iter().filter(|&&b| b).count();
        for (t, &b) in blocked.iter().enumerate() {
            if b {
                self.tensors[t].layout = Layout::Blocked;
            }
        }
        for op in &mut self.ops {
            op.set_layouts(&|t| blocked[t]);
        }
        if count > 0 {
            self.notes.push(format!(
                "{count} intermediate tensors in channel blocks of {CHANNEL_BLOCK} (NCHW16c): \
                 only fused convs write and read them"
            ));
        }
    }
}

/// Where barriers go between ops that read and write these buffers ((reads, writes) per op):
/// before an op that reads a buffer written since the last barrier, or writes one read or
/// written since then.
pub fn barriers(accesses: &[(Vec<usize>, Vec<usize>)]) -> Vec<bool> {
    let mut read = HashSet::new();
    let mut written = HashSet::new();
    accesses
        .iter()
        .map(|(ins, outs)| {
            let hazard = ins.iter().any(|s| written.contains(s))
                || outs.iter().any(|s| written.contains(s) || read.contains(s));
            if hazard {
                read.clear();
                written.clear();
            }
            read.extend(ins.iter().copied());
            written.extend(outs.iter().copied());
            hazard
        })
        .collect()
}

/// Gives every tensor a buffer slot. A tensor lives from its defining step to its last reader;
/// at each step the new tensors take free slots (the smallest that fits, else the largest free
/// one grown, else a new one) before the tensors read for the last time free theirs, so an op
/// never writes a buffer it reads.
pub fn assign_buffers(sizes: &[u64], def: &[usize], last: &[usize]) -> (Vec<usize>, Vec<u64>) {
    let steps = last.iter().chain(def).copied().max().unwrap_or(0);
    let mut slot_of = vec![usize::MAX; sizes.len()];
    let mut slot_bytes: Vec<u64> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    for step in 0..=steps {
        for t in (0..sizes.len()).filter(|&t| def[t] == step) {
            let fits = free
                .iter()
                .enumerate()
                .filter(|(_, &s)| slot_bytes[s] >= sizes[t])
                .min_by_key(|(_, &s)| slot_bytes[s]);
            let pick = fits.or_else(|| free.iter().enumerate().max_by_key(|(_, &s)| slot_bytes[s]));
            let slot = match pick.map(|(i, _)| i) {
                Some(i) => free.swap_remove(i),
                None => {
                    slot_bytes.push(0);
                    slot_bytes.len() - 1
                }
            };
            slot_bytes[slot] = slot_bytes[slot].max(sizes[t]);
            slot_of[t] = slot;
        }
        for t in (0..sizes.len()).filter(|&t| last[t] == step) {
            free.push(slot_of[t]);
        }
    }
    (slot_of, slot_bytes)
}

#[cfg(test)]
mod tests {
    use super::{assign_buffers, parse_tile, TileOverride};

    #[test]
    fn a_tile_override_reads_rows_subgroups_and_padding() {
        let tile = |rows, subgroups, padded| {
            Some(TileOverride {
                rows,
                subgroups,
                padded,
            })
        };
        assert_eq!(parse_tile("4x8"), tile(4, 8, false));
        assert_eq!(parse_tile("2"), tile(2, 4, false));
        assert_eq!(parse_tile("2x4p"), tile(2, 4, true));
        assert_eq!(parse_tile("4p"), tile(4, 4, true));
        assert_eq!(parse_tile("4x"), None);
        assert_eq!(parse_tile("four"), None);
    }

    #[test]
    fn a_chain_ping_pongs_between_two_buffers() {
        // input -> a -> b -> c -> out: each tensor is read by the next step only.
        let sizes = [12, 32, 32, 48, 12];
        let def = [0, 1, 2, 3, 4];
        let last = [1, 2, 3, 4, 5];
        let (slot_of, bytes) = assign_buffers(&sizes, &def, &last);
        assert_eq!(bytes.len(), 2, "{slot_of:?}");
        for t in 0..4 {
            assert_ne!(
                slot_of[t],
                slot_of[t + 1],
                "an op never writes what it reads"
            );
        }
        for (t, &s) in slot_of.iter().enumerate() {
            assert!(bytes[s] >= sizes[t]);
        }
    }

    #[test]
    fn barriers_go_only_where_a_buffer_is_reused() {
        use super::barriers;
        // op0 writes 1; op1 reads 0 writes 2 (independent of op0); op2 reads 1 and 2.
        let acc = [
            (vec![0], vec![1]),
            (vec![0], vec![2]),
            (vec![1, 2], vec![3]),
            (vec![3], vec![0]),
        ];
        assert_eq!(barriers(&acc), [false, false, true, true]);
        // Writing a buffer an op since the barrier reads (write after read) needs one too.
        let war = [(vec![0], vec![1]), (vec![2], vec![0])];
        assert_eq!(barriers(&war), [false, true]);
    }

    #[test]
    fn a_skip_connection_keeps_its_buffer_alive() {
        // x (read at steps 1 and 3) -> a -> b; c = a + x at step 3.
        let sizes = [10, 10, 10, 10];
        let def = [0, 1, 2, 3];
        let last = [3, 2, 3, 4];
        let (slot_of, bytes) = assign_buffers(&sizes, &def, &last);
        assert_ne!(slot_of[0], slot_of[1]);
        assert_ne!(slot_of[0], slot_of[2]);
        assert_ne!(slot_of[2], slot_of[3]);
        assert_eq!(slot_of[3], slot_of[1], "a's buffer is free again at step 3");
        assert_eq!(bytes.len(), 3);
    }
}
