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

/// Plans a temporal model at render size `width` × `height`: its inputs must be
/// [`model::TEMPORAL_INPUTS`] (names, order, channels), its one output [1, 3, 2h, 2w]. The
/// inputs and the output are tensors (no frame I/O: the in-stream pattern's own pre- and
/// post-process shaders fill and read them).
pub fn plan_temporal(
    graph: &Graph,
    width: u32,
    height: u32,
    options: &PlanOptions,
) -> Result<Plan> {
    let err = |reason: String| InferError::Graph {
        file: graph.file.clone(),
        reason,
    };
    let names: Vec<&str> = graph.inputs.iter().map(|i| i.name.as_str()).collect();
    let want: Vec<&str> = model::TEMPORAL_INPUTS.iter().map(|(n, _)| *n).collect();
    if names != want {
        return Err(err(format!(
            "a temporal model takes the inputs {want:?} in this order, this graph has {names:?}"
        )));
    }
    let (h, w) = (height as usize, width as usize);
    let shapes: Vec<Vec<usize>> = model::TEMPORAL_INPUTS
        .iter()
        .map(|&(_, c)| vec![1, c, h, w])
        .collect();
    let options = PlanOptions {
        frame_io: false,
        ..options.clone()
    };
    let plan = Plan::with_options(graph, &shapes, &options)?;
    let out = plan.outputs.first().map(|&o| plan.tensors[o].shape.clone());
    if plan.outputs.len() != 1 || out.as_deref() != Some(&[1, 3, 2 * h, 2 * w][..]) {
        return Err(err(format!(
            "a temporal model has one output [1, 3, {}, {}] (x2), this graph gives {out:?} ({} output(s))",
            2 * h,
            2 * w,
            plan.outputs.len()
        )));
    }
    Ok(plan)
}

fn plan_graph(graph: &Graph, width: u32, height: u32, options: &PlanOptions) -> Result<Plan> {
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
