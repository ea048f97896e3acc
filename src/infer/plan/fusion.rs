//! Fusion across ops (the fast path): a stride-1 Conv becomes one FusedConv with its
//! activation, the residual Add that follows it, and, when the graph's input and output are
//! the frame's images, the pre-process (the conv reads the scene image) and the tail
//! (DepthToSpace, + the bilinear Resize of the input, written as the upscaled image). A
//! residual Add whose only reader is a conv that fuses goes to that reader instead: it adds
//! the two tensors as it stages its input tile (see `input_add_reader`). What a chain cannot
//! fuse stays one dispatch per op, with the reason in the plan's notes.

use std::collections::{HashMap, HashSet};

use onnx_protobuf::NodeProto;

use super::{Builder, TileOverride};
use crate::infer::error::Result;
use crate::infer::graph::Graph;
use crate::infer::ops::conv::{Geometry, Parts};
use crate::infer::ops::fused_conv::{self, Base, FusedConv, Fusion, Head, Kernel, Tail, Tiling};
use crate::infer::ops::resize::Resize;
use crate::infer::ops::unary::Activation;
use crate::infer::ops::{self, depth_to_space, Arg, Built, TensorId};
use crate::infer::precision::Precision;

/// A fused conv just placed whose output only the conv `reader` reads: that conv may run it
/// as its chain head, in its own dispatch (`Head`), instead of reading the stored tensor.
pub(super) struct ChainCandidate {
    /// Its index in the plan's ops (the last one placed when the reader is built).
    op: usize,
    output: TensorId,
    input: TensorId,
    image_in: bool,
    reader: usize,
    label: String,
    head: Head,
}

fn is(node: &NodeProto, op_type: &str) -> bool {
    node.op_type == op_type && node.domain.is_empty()
}

/// Resize nodes that a tail may absorb as its bilinear base: linear, reading a graph input,
/// read by one Add. They are built on their own only if no tail takes them.
pub(super) fn deferred_bases(
    graph: &Graph,
    consumers: &HashMap<&str, Vec<usize>>,
) -> HashSet<usize> {
    let linear = |n: &NodeProto| {
        n.attribute
            .iter()
            .any(|a| a.name == "mode" && a.s.as_slice() == b"linear")
    };
    graph
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| is(n, "Resize") && linear(n) && n.output.len() == 1)
        .filter(|(_, n)| {
            n.input
                .first()
                .is_some_and(|i| graph.inputs.iter().any(|g| &g.name == i))
        })
        .filter(
            |(_, n)| match consumers.get(n.output[0].as_str()).map(Vec::as_slice) {
                Some([only]) => is(&graph.nodes[*only], "Add"),
                _ => false,
            },
        )
        .map(|(i, _)| i)
        .collect()
}

impl<'g> Builder<'g> {
    /// Builds the deferred nodes that produce an input of node `i`, right before it.
    pub(super) fn build_deferred_inputs(&mut self, i: usize) -> Result<()> {
        let graph = self.graph;
        let producers: Vec<usize> = graph.nodes[i]
            .input
            .iter()
            .filter_map(|name| {
                self.deferred
                    .iter()
                    .copied()
                    .find(|&d| graph.nodes[d].output.first() == Some(name))
            })
            .collect();
        for d in producers {
            self.build_deferred(d)?;
        }
        Ok(())
    }

    fn build_deferred(&mut self, d: usize) -> Result<()> {
        self.deferred.remove(&d);
        self.done.insert(d);
        let node = &self.graph.nodes[d];
        let outputs = self.new_outputs(node);
        let ctx = self.ctx(node, outputs, None);
        let built = ops::build(&ctx, self.ops.len())?;
        self.place(built)
    }

    /// Deferred nodes no fused op took and nothing read (so far), built at the end.
    pub(super) fn build_remaining_deferred(&mut self) -> Result<()> {
        let mut rest: Vec<usize> = self.deferred.iter().copied().collect();
        rest.sort_unstable();
        for d in rest {
            self.build_deferred(d)?;
        }
        Ok(())
    }

    /// The kernel and tiling for a conv of this geometry: the matrix units in fp16 when the
    /// plan has a shape for them and the conv has more than 8 input channels, or at most 8
    /// with a matrix depth of 16 (two taps of 8 staged channels per product), else the packed
    /// path; None when no tile fits. (Padding 3 channels to a depth of 16 per tap cost more
    /// than the matrix units save: the 3-channel 5x5 conv of quality_x2 at 960x540 took 0.209
    /// ms that way on the H200, 0.089 ms packed in fp32.)
    fn kernel_for(&self, g: &Geometry, tail: bool) -> Option<(Kernel, Tiling)> {
        let o = &self.options;
        let max = o.max_shared_memory;
        let coop = match (o.coopmat, o.precision) {
            (Some(cm), Precision::Fp16) if g.in_c > 8 || cm.k == 16 => fused_conv::tiling(
                g.in_c,
                g.kernel,
                Kernel::CoopMat(cm),
                o.precision,
                max,
                tail,
            )
            .map(|t| {
                // Another tile for a tail, or for a thin input's conv, where it fits
                // (measurements).
                let wanted = match (o.tail_tile, o.thin_tile) {
                    (Some(tile), _) if tail => Some(tile),
                    (_, Some(tile)) if !tail && g.in_c <= 8 => Some(tile),
                    _ => None,
                };
                let Some(TileOverride {
                    rows,
                    subgroups,
                    padded,
                }) = wanted
                else {
                    return t;
                };
                let other = Tiling {
                    tile_h: rows,
                    subgroups,
                    pad: if tail && padded {
                        fused_conv::COOPMAT_PAD
                    } else {
                        t.pad
                    },
                    ..t
                };
                let segs = other.tile_w / cm.m * rows;
                let fits = other.shared_bytes(g.kernel, Kernel::CoopMat(cm), o.precision) <= max;
                if rows > 0 && subgroups > 0 && segs.is_multiple_of(subgroups) && fits {
                    other
                } else {
                    t
                }
            })
            .map(|t| (Kernel::CoopMat(cm), t)),
            _ => None,
        };
        coop.or_else(|| {
            fused_conv::tiling(g.in_c, g.kernel, Kernel::Packed, o.precision, max, tail)
                .map(|t| (Kernel::Packed, t))
        })
    }

    /// Conv node `i` and what follows it as one FusedConv; None leaves it to the per-op path
    /// (a note says why when the conv itself could not fuse).
    pub(super) fn fused_conv(&mut self, i: usize, index: usize) -> Result<Option<Built>> {
        let graph = self.graph;
        let node = &graph.nodes[i];
        // The Add that produced this conv's input, left to it by the conv that wrote one of
        // its operands: the input is then that operand, and the other is added in staging.
        let input_add = self.input_adds.remove(&node.input[0]);
        if let Some((_, mine, _)) = &input_add {
            self.alias.insert(node.input[0].clone(), mine.clone());
        }
        let built = self.fused_conv_with(i, index, input_add.as_ref())?;
        if let (None, Some((add, _, _))) = (&built, input_add) {
            // Not fused after all (fused_conv_with refused it): the Add runs on its own.
            self.alias.remove(&node.input[0]);
            self.build_deferred(add)?;
        }
        Ok(built)
    }

    fn fused_conv_with(
        &mut self,
        i: usize,
        index: usize,
        input_add: Option<&(usize, String, String)>,
    ) -> Result<Option<Built>> {
        let graph = self.graph;
        let node = &graph.nodes[i];
        let act_fusion = self.fusion(node)?;
        let ctx = self.ctx(node, vec![], act_fusion.as_ref().map(|f| f.1.clone()));
        let parts = Parts::of(&ctx)?;
        let name = ctx.label(index);
        let g = parts.geo.clone();
        if !fused_conv::eligible(&g) {
            self.notes.push(format!(
                "{name}: stride {:?}, dilation {:?}, {} group(s): the direct kernel",
                g.stride, g.dilation, g.groups
            ));
            return Ok(None);
        }
        let Some((mut kernel, mut tiling)) = self.kernel_for(&g, false) else {
            self.notes.push(format!(
                "{name}: a {:?} kernel's tile does not fit {} bytes of shared memory: the direct kernel",
                g.kernel, self.options.max_shared_memory
            ));
            return Ok(None);
        };
        let mut fusion = Fusion {
            image_in: self.options.frame_io
                && graph.inputs.iter().any(|input| input.name == node.input[0]),
            ..Fusion::default()
        };
        let mut types = vec![node.op_type.clone()];
        if let Some((_, _, other)) = input_add {
            let Arg::Tensor { id, .. } = self.resolve(other) else {
                return Ok(None);
            };
            fusion.input_add = Some(id);
            types.insert(0, "Add".into());
        }
        // A chain: the conv placed just before computes this one's input, which nothing else
        // reads; it then runs in this dispatch.
        let mut x = parts.x;
        let chain = match self.chain_head.take() {
            Some(c) if c.reader == i && c.output == parts.x && c.op + 1 == self.ops.len() => {
                let why = if fusion.input_add.is_some() {
                    Err("this conv adds a residual to its input as it stages it".to_string())
                } else {
                    // The head runs on the reader's kernel, whichever it had alone.
                    match kernel {
                        Kernel::Packed => fused_conv::chain_tiling(
                            &c.head.geo,
                            &g,
                            self.options.precision,
                            self.options.max_shared_memory,
                        ),
                        // Measured on the H200 (2026-12-07, 960x540, fp16): fast_x2
                        // 0.075 ms unchained, 0.086 / 0.097 as a chain of 2- / 4-row tiles;
                        // quality_x2 0.294 against 0.597 / 0.453
                        // (docs/bench/h200/engine-2026-12-07-chains/).
                        Kernel::CoopMat(_) if !self.options.coopmat_chains => Err(
                            "on the matrix units a chain is slower than two dispatches (the head's products and recomputed halo, serialised in one work group, cost more than the stored tensor)".to_string(),
                        ),
                        // Padded staging; a tail (found below) re-tiles unpadded.
                        Kernel::CoopMat(cm) => fused_conv::coopmat_chain_tiling(
                            &c.head.geo,
                            &g,
                            cm,
                            self.options.max_shared_memory,
                            false,
                        ),
                    }
                };
                match why {
                    Ok(t) => Some((c, t)),
                    Err(why) => {
                        self.notes
                            .push(format!("{} -> {name}: not chained: {why}", c.label));
                        None
                    }
                }
            }
            _ => None,
        };
        if let Some((c, t)) = &chain {
            // The head's op is not run on its own: this one computes its output in shared
            // memory. Its output tensor is then written and read by no op (no buffer).
            self.ops.pop();
            fusion.image_in = c.image_in;
            x = c.input;
            tiling = *t;
        }
        let mut last = node;
        let mut absorbed = Vec::new();
        let act = act_fusion.as_ref().map_or(Activation::NONE, |(n, f)| {
            types.push(f.op_type.clone());
            last = &graph.nodes[*n];
            absorbed.push(*n);
            f.act
        });
        let shape = vec![1, g.out_c, g.out_h, g.out_w];
        let residual = self
            .residual_add(last, &shape)
            .filter(|_| fusion.input_add.is_none());
        if let Some((add, residual, other)) = residual {
            if self.input_add_reader(add, &shape) {
                // The reader adds it while staging. Measured on the H100 (quality_x2 fp16,
                // 960x540): conv7 0.055 -> 0.029 ms, its reader conv8 0.070 -> 0.080, the
                // network 0.320 -> 0.302 (docs/bench/h100/engine-2026-12-06-input-add/).
                let a = &graph.nodes[add];
                self.input_adds
                    .insert(a.output[0].clone(), (add, last.output[0].clone(), other));
                self.done.insert(add);
                self.notes.push(format!(
                    "{name}: the residual Add \"{}\" is added by the conv that reads it, as it stages its input",
                    a.name
                ));
            } else {
                fusion.residual = Some(residual);
                types.push("Add".into());
                last = &graph.nodes[add];
                absorbed.push(add);
            }
        }
        let mut out_shape = shape;
        if self.options.frame_io {
            if let Some((tail, nodes, end)) = self.tail(last, &g)? {
                types.extend(nodes.iter().map(|&n| graph.nodes[n].op_type.clone()));
                fusion.tail = Some(tail);
                absorbed.extend(nodes);
                last = &graph.nodes[end];
                out_shape = vec![1, 3, g.out_h * tail.block, g.out_w * tail.block];
                // The tail's tiling (it needs no more shared memory than the one that fit);
                // a chain on the matrix units re-tiles for the tail (unpadded: never more
                // bytes), a packed chain keeps the tiling chosen for both tiles.
                match (&chain, kernel) {
                    (None, _) => {
                        if let Some(t) = self.kernel_for(&g, true) {
                            (kernel, tiling) = t;
                        }
                    }
                    (Some((c, _)), Kernel::CoopMat(cm)) => {
                        if let Ok(t) = fused_conv::coopmat_chain_tiling(
                            &c.head.geo,
                            &g,
                            cm,
                            self.options.max_shared_memory,
                            true,
                        ) {
                            tiling = t;
                        }
                    }
                    (Some(_), Kernel::Packed) => {}
                }
            }
        }
        for &n in &absorbed {
            self.done.insert(n);
            self.deferred.remove(&n);
        }
        fusion.nodes = types.clone();
        let outputs = self.new_outputs(last);
        let short = name.split_once(':').map_or("", |s| s.1);
        let label = match &chain {
            Some((c, _)) => {
                let (head_types, head_name) = c.label.split_once(':').unwrap_or((&c.label, ""));
                format!("{head_types}+{}:{head_name}+{short}", types.join("+"))
            }
            None => format!("{}:{short}", types.join("+")),
        };
        // This conv as a chain head for its reader: a plain conv (+ activation) whose output
        // one conv reads, as its input, and nothing else.
        let candidate = (fusion.residual.is_none()
            && fusion.input_add.is_none()
            && fusion.tail.is_none()
            && chain.is_none())
        .then(|| self.sole_consumer(last))
        .flatten()
        .filter(|&r| {
            let reader = &graph.nodes[r];
            is(reader, "Conv")
                && reader.input.first() == Some(&last.output[0])
                && !reader.input[1..].contains(&last.output[0])
                && !graph.outputs.contains(&last.output[0])
        });
        let head = candidate.map(|_| {
            Head::new(
                g.clone(),
                act,
                parts.weights,
                parts.bias.clone(),
                types.clone(),
            )
        });
        let image_in = fusion.image_in;
        let mut op = FusedConv::new(
            label.clone(),
            x,
            outputs.clone(),
            g,
            act,
            parts.weights,
            parts.bias,
            fusion,
            kernel,
            tiling,
        );
        if let Some((c, t)) = chain {
            self.notes.push(format!(
                "{label}: one dispatch for two convs (a chain): the first's {}-channel output stays in shared memory, {}x{} tiles, halo recomputed",
                c.head.geo.out_c, t.tile_w, t.tile_h
            ));
            op = op.with_head(c.head);
        }
        if let (Some(reader), Some(head)) = (candidate, head) {
            self.chain_head = Some(ChainCandidate {
                op: index,
                output: outputs[0],
                input: x,
                image_in,
                reader,
                label,
                head,
            });
        }
        Ok(Some(Built {
            op: Box::new(op),
            shapes: vec![out_shape],
        }))
    }

    /// The Add that is `last`'s only reader, with a computed tensor of the conv output's
    /// `shape` as its other operand: (the Add node, that tensor, its name).
    fn residual_add(&self, last: &NodeProto, shape: &[usize]) -> Option<(usize, TensorId, String)> {
        let add = self.sole_consumer(last)?;
        let node = &self.graph.nodes[add];
        if !is(node, "Add") || !node.attribute.is_empty() || node.input.len() != 2 {
            return None;
        }
        let mine = &last.output[0];
        let other = match (&node.input[0], &node.input[1]) {
            (a, b) if a == mine && b != mine => b,
            (a, b) if b == mine && a != mine => a,
            _ => return None,
        };
        match self.resolve(other) {
            Arg::Tensor { id, shape: s } if s == shape => Some((add, id, other.clone())),
            _ => None,
        }
    }

    /// Whether Add node `add` (of tensors of `shape`) has one reader, a conv taking it as its
    /// input that will fuse (stride 1, a tile that fits), so that the conv can add the two
    /// operands as it stages its input tile. The conv that writes one operand then stores
    /// its plain output, and the Add's result is never stored.
    fn input_add_reader(&self, add: usize, shape: &[usize]) -> bool {
        let node = &self.graph.nodes[add];
        let Some(c) = self.sole_consumer(node) else {
            return false;
        };
        let conv = &self.graph.nodes[c];
        let out = &node.output[0];
        if !is(conv, "Conv") || conv.input.first() != Some(out) || conv.input[1..].contains(out) {
            return false;
        }
        let ctx = self.ctx(conv, vec![], None);
        let Ok(Some(w)) = ctx.constant(1) else {
            return false;
        };
        match Geometry::resolve(&ctx.attrs, shape, &w.shape) {
            Ok(g) => fused_conv::eligible(&g) && self.kernel_for(&g, false).is_some(),
            Err(_) => false,
        }
    }

    /// The tail after `last` (the conv's activated output): DepthToSpace to the graph output,
    /// or DepthToSpace + the deferred bilinear Resize of the input, added into the graph
    /// output. (tail, absorbed nodes, the node computing the graph output).
    fn tail(&self, last: &NodeProto, g: &Geometry) -> Result<Option<(Tail, Vec<usize>, usize)>> {
        let graph = self.graph;
        let Some(d) = self.sole_consumer(last) else {
            return Ok(None);
        };
        let d2s = &graph.nodes[d];
        if !is(d2s, "DepthToSpace") {
            return Ok(None);
        }
        let (block, mode) = depth_to_space::attributes(&self.ctx(d2s, vec![], None))?;
        let channels = block.checked_mul(block).and_then(|b| b.checked_mul(3));
        if channels != Some(g.out_c) || g.out_c > fused_conv::OC_TILE {
            return Ok(None);
        }
        let tail = Tail {
            block,
            crd: mode == depth_to_space::Mode::Crd,
            base: None,
        };
        let is_output = |name: &String| graph.outputs.contains(name);
        if is_output(&d2s.output[0]) {
            return Ok(Some((tail, vec![d], d)));
        }
        let Some(a) = self.sole_consumer(d2s) else {
            return Ok(None);
        };
        let add = &graph.nodes[a];
        if !is(add, "Add") || !add.attribute.is_empty() || add.input.len() != 2 {
            return Ok(None);
        }
        if !is_output(&add.output[0]) || self.consumers.contains_key(add.output[0].as_str()) {
            return Ok(None);
        }
        let other = if add.input[0] == d2s.output[0] {
            &add.input[1]
        } else {
            &add.input[0]
        };
        let Some(r) = self
            .deferred
            .iter()
            .copied()
            .find(|&r| graph.nodes[r].output.first() == Some(other))
        else {
            return Ok(None);
        };
        let params = Resize::params(&self.ctx(&graph.nodes[r], vec![], None))?;
        if params.spec[0] != 1 || params.out != [g.out_h * block, g.out_w * block] {
            return Ok(None);
        }
        let base = Base {
            coord: params.spec[1],
            scale: params.scale,
        };
        let tail = Tail {
            base: Some(base),
            ..tail
        };
        Ok(Some((tail, vec![d, a, r], a)))
    }
}
