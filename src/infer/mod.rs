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
