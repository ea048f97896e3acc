//! The in-stream engine: an ONNX model turned into Vulkan compute dispatches recorded in the
//! renderer's own command buffer.
//!
//! Load order: [`Graph::load`] (parse with onnx-protobuf, fold initialisers and Constant nodes)
//! → [`Plan::new`] for concrete input shapes (topological order, shapes, fusion, lowering,
//! buffer lifetimes) → [`Engine::new`] (buffers, weights, pipelines; load time only) →
//! [`Engine::record`] every frame. Nothing is allocated or created per frame.

pub mod engine;
pub mod error;
mod frame_run;
pub mod graph;
pub mod ops;
pub mod pipelines;
pub mod pixel_shuffle;
pub mod plan;
pub mod precision;
pub mod tensor;

use std::path::Path;

use crate::upscale::model;

pub use engine::{Engine, EngineSummary, LayerCost};
pub use error::{InferError, Result};
pub use graph::Graph;
pub use plan::{Plan, PlanOptions};
pub use precision::{Precision, PrecisionChoice};

/// Loads an image upscaler and plans it for a `width`×`height` render size (input
/// [1, 3, height, width]); no GPU work, so it doubles as the pattern's start-up probe.
pub fn plan_upscaler(path: &Path, width: u32, height: u32) -> Result<Plan> {
    plan_upscaler_with(path, width, height, &PlanOptions::reference())
}

/// [`plan_upscaler`] with these plan options.
pub fn plan_upscaler_with(
    path: &Path,
    width: u32,
    height: u32,
    options: &PlanOptions,
) -> Result<Plan> {
    plan_graph(&Graph::load(path)?, width, height, options)
}

/// [`plan_upscaler`] for a model already in memory (`file` names it in messages): everything
/// untrusted model bytes reach before the GPU does, and so what `fuzz/` fuzzes.
pub fn plan_from_bytes(bytes: &[u8], file: &str, width: u32, height: u32) -> Result<Plan> {
    plan_graph(
        &Graph::from_bytes(bytes, file)?,
        width,
        height,
        &PlanOptions::reference(),
    )
}

/// Whether the graph is a temporal model (metadata `upscale.kind` = `temporal`).
pub fn is_temporal(graph: &Graph) -> bool {
    graph.metadata.get(model::KIND_KEY).map(String::as_str) == Some(model::TEMPORAL_KIND)
}

/// Channels of a temporal model's concatenated inputs ([`model::TEMPORAL_INPUTS`]).
pub const TEMPORAL_CHANNELS: usize = 20;

/// Plans a temporal model at render size `width` × `height` for the in-stream pattern, whose
/// shaders do the graph's two ends: the model must start with
/// `Concat(color, depth, motion, history, jitter)` on channels ([`model::TEMPORAL_INPUTS`])
/// and end with `output = DepthToSpace_CRD_2(Add(history, x))`. The pre-process writes the
/// concatenation, the post-process adds the warped history to `x` and rearranges it into the
/// image, so the plan runs from the concatenated tensor [1, 20, h, w] (its one input) to `x`
/// [1, 12, h, w] (its one output): two dispatches fewer and no copy of the inputs.
pub fn plan_temporal(
    mut graph: Graph,
    width: u32,
    height: u32,
    options: &PlanOptions,
) -> Result<Plan> {
    let err = |graph: &Graph, reason: String| InferError::Graph {
        file: graph.file.clone(),
        reason,
    };
    let names: Vec<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
    let want: Vec<&str> = model::TEMPORAL_INPUTS.iter().map(|(n, _)| *n).collect();
    if names != want {
        return Err(err(
            &graph,
            format!("a temporal model takes the inputs {want:?} in this order, this graph has {names:?}"),
        ));
    }
    let (head, tail, x) = temporal_ends(&graph).map_err(|reason| {
        err(
            &graph,
            format!(
                "{reason}; a temporal model starts with Concat({}) on axis 1 and ends with \
                 output = DepthToSpace(Add(history, x), blocksize 2, mode CRD) (tools/train/temporal.py)",
                want.join(", ")
            ),
        )
    })?;
    let key = |k: &str| graph.metadata.get(k).map(String::as_str);
    let history = model::temporal::History::from_metadata(
        key(model::HISTORY_CLAMP_KEY),
        key(model::HISTORY_FILTER_KEY),
    )
    .map_err(|reason| err(&graph, reason))?;
    let concat = graph.nodes[head].output[0].clone();
    let dims = |v: &[usize]| v.iter().map(|&d| graph::Dim::Fixed(d)).collect();
    let (h, w) = (height as usize, width as usize);
    let mut drop: Vec<usize> = vec![head, tail.0, tail.1];
    drop.sort_unstable();
    for k in drop.into_iter().rev() {
        graph.nodes.remove(k);
    }
    graph.inputs = vec![graph::GraphInput {
        name: concat,
        dims: dims(&[1, TEMPORAL_CHANNELS, h, w]),
    }];
    graph.outputs = vec![x];
    let options = PlanOptions {
        frame_io: false,
        ..options.clone()
    };
    let mut plan = Plan::with_options(&graph, &[vec![1, TEMPORAL_CHANNELS, h, w]], &options)?;
    plan.history = Some(history);
    let out = plan.outputs.first().map(|&o| plan.tensors[o].shape.clone());
    if plan.outputs.len() != 1 || out.as_deref() != Some(&[1, 12, h, w][..]) {
        return Err(err(
            &graph,
            format!("the tensor added to the history is {out:?}, the history is [1, 12, {h}, {w}]"),
        ));
    }
    Ok(plan)
}

/// The temporal model's ends: (the Concat node, (the Add node, the DepthToSpace node), the
/// name of the tensor the Add adds to the history); Err: what does not match.
fn temporal_ends(graph: &Graph) -> std::result::Result<(usize, (usize, usize), String), String> {
    let names: Vec<&str> = model::TEMPORAL_INPUTS.iter().map(|(n, _)| *n).collect();
    let int = |n: &onnx_protobuf::NodeProto, key: &str| {
        n.attribute.iter().find(|a| a.name == key).map(|a| a.i)
    };
    let text = |n: &onnx_protobuf::NodeProto, key: &str| {
        n.attribute
            .iter()
            .find(|a| a.name == key)
            .map(|a| String::from_utf8_lossy(&a.s).into_owned())
    };
    let readers = |t: &str| {
        graph
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.input.iter().any(|i| i == t))
            .map(|(k, _)| k)
            .collect::<Vec<_>>()
    };
    let head = graph
        .nodes
        .iter()
        .position(|n| n.op_type == "Concat")
        .ok_or("no Concat")?;
    let concat = &graph.nodes[head];
    if concat
        .input
        .iter()
        .map(String::as_str)
        .ne(names.iter().copied())
        || int(concat, "axis") != Some(1)
    {
        return Err(format!(
            "node \"{}\" concatenates {:?} on axis {:?}",
            concat.name,
            concat.input,
            int(concat, "axis")
        ));
    }
    let [output] = graph.outputs.as_slice() else {
        return Err(format!("{} outputs", graph.outputs.len()));
    };
    let d = graph
        .nodes
        .iter()
        .position(|n| n.output.first() == Some(output))
        .ok_or("no node writes the output")?;
    let d2s = &graph.nodes[d];
    if d2s.op_type != "DepthToSpace"
        || int(d2s, "blocksize") != Some(2)
        || text(d2s, "mode").as_deref() != Some("CRD")
    {
        return Err(format!(
            "the output is written by \"{}\" ({}), not DepthToSpace with blocksize 2, mode CRD",
            d2s.name, d2s.op_type
        ));
    }
    let a = graph
        .nodes
        .iter()
        .position(|n| n.output.first() == d2s.input.first())
        .ok_or("nothing writes DepthToSpace's input")?;
    let add = &graph.nodes[a];
    let x = match add.input.as_slice() {
        [p, q] if add.op_type == "Add" && p == "history" && q != "history" => q,
        [p, q] if add.op_type == "Add" && q == "history" && p != "history" => p,
        _ => {
            return Err(format!(
                "DepthToSpace reads \"{}\" ({}), not Add(history, x)",
                add.name, add.op_type
            ))
        }
    };
    if readers(&add.output[0]) != [d] {
        return Err(format!("\"{}\"'s sum has other readers", add.name));
    }
    for input in ["color", "depth", "motion", "jitter"] {
        if readers(input) != [head] {
            return Err(format!("input \"{input}\" is read by more than the Concat"));
        }
    }
    let mut history = readers("history");
    history.sort_unstable();
    let mut want = vec![head, a];
    want.sort_unstable();
    if history != want {
        return Err("input \"history\" is read by more than the Concat and the Add".into());
    }
    Ok((head, (a, d), x.clone()))
}

/// [`plan_upscaler_with`] for a graph already loaded.
pub fn plan_graph(graph: &Graph, width: u32, height: u32, options: &PlanOptions) -> Result<Plan> {
    let shape = plan::image_input_shape(graph, height as usize, width as usize)?;
    let plan = Plan::with_options(graph, &[shape], options)?;
    if plan.outputs.len() != 1 {
        return Err(InferError::Graph {
            file: plan.file.clone(),
            reason: format!(
                "an upscaler has one output, this graph has {}",
                plan.outputs.len()
            ),
        });
    }
    Ok(plan)
}
