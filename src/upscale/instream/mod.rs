//! Pattern 3, in-stream: the project's own engine (`crate::infer`) runs the model as compute
//! dispatches in the frame's one command buffer, between the scene and the composite. No host
//! step, no copy to or from host memory.
//!
//! The engine is planned with frame I/O: its first convolution reads the scene image and its
//! last one writes the upscaled image where the fast path fused them (else `to_tensor` and
//! `from_tensor` convert), with one span per dispatch (`OpType+...:node`). The tensor buffers
//! are shared by both frame slots: every dispatch is ordered after the previous frame's by the
//! barrier at the start of `record` (a pipeline barrier also orders commands of earlier
//! submissions on the queue).
//!
//! A temporal model (`upscale.kind = temporal`) is planned without frame I/O and without its
//! two ends (`infer::plan_temporal`): `temporal`'s shaders write its concatenated inputs from
//! the frame and the warped history, then add the history to the network's correction and
//! write the image.

use std::path::Path;

use ash::vk;

use super::temporal_io::{Mode, TemporalIo};
use super::{FrameIo, FrameSplit, MlSettings, Pattern, Upscaler};
use crate::gpu::guard::Destroy;
use crate::gpu::{self, Gpu, Image};
use crate::infer::ops::{compute_barrier, FrameImages};
use crate::infer::plan::choose_coopmat;
use crate::infer::{self, Engine, EngineSummary, Graph, PlanOptions, Precision};

pub struct InStream {
    engine: Engine,
    sampler: vk::Sampler,
    /// Why the engine runs another precision than the one asked for.
    fallback: Option<String>,
    /// With a temporal model: its pre- and post-process and its history.
    temporal: Option<TemporalIo>,
}

/// Loads and plans the model for these sizes and checks that its output fills the output image;
/// no GPU work (the start-up probe, with the reference options).
pub fn plan(model: &Path, render: (u32, u32), output: (u32, u32)) -> infer::Result<infer::Plan> {
    plan_with(model, render, output, &PlanOptions::reference())
}

/// [`plan`] with these options.
pub fn plan_with(
    model: &Path,
    render: (u32, u32),
    output: (u32, u32),
    options: &PlanOptions,
) -> infer::Result<infer::Plan> {
    let graph = Graph::load(model)?;
    if infer::is_temporal(&graph) {
        let plan = infer::plan_temporal(graph, render.0, render.1, options)?;
        if output != (2 * render.0, 2 * render.1) {
            return Err(infer::InferError::Graph {
                file: plan.file.clone(),
                reason: format!(
                    "a temporal model upscales x2: render size {}x{} gives {}x{}, the output is {}x{}; \
                     set `render.scale` to 2",
                    render.0,
                    render.1,
                    2 * render.0,
                    2 * render.1,
                    output.0,
                    output.1
                ),
            });
        }
        return Ok(plan);
    }
    let plan = infer::plan_graph(&graph, render.0, render.1, options)?;
    let shape = &plan.tensors[plan.outputs[0]].shape;
    let want = [1, 3, output.1 as usize, output.0 as usize];
    if shape.as_slice() != want {
        return Err(infer::InferError::Graph {
            file: plan.file.clone(),
            reason: format!(
                "for render size {}x{} the model outputs {shape:?}, the output image needs {want:?}; \
                 check `render.scale` against the model's scale",
                render.0, render.1
            ),
        });
    }
    Ok(plan)
}

impl InStream {
    pub fn new(gpu: &Gpu, ml: &MlSettings, input: &Image, output: &Image) -> anyhow::Result<Self> {
        let (ri, ro) = (input.extent(), output.extent());
        let (precision, fallback) = ml.precision.resolve(&gpu.info);
        if let Some(why) = &fallback {
            tracing::warn!("in-stream: {why}");
        }
        // Why the convs are not on the matrix units, for the overlay's line.
        let conv_note = match (precision, choose_coopmat(&gpu.info)) {
            (Precision::Fp16, Err(why)) => Some(format!("packed conv: {why}")),
            (Precision::Fp32, Ok(_)) => Some("the matrix units run in fp16 only".to_string()),
            _ => None,
        };
        let fallback = match (fallback, conv_note) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        let options = PlanOptions::fast(&gpu.info, precision, true);
        let plan = plan_with(
            &ml.model,
            (ri.width, ri.height),
            (ro.width, ro.height),
            &options,
        )?;
        for line in plan.report() {
            tracing::info!("in-stream plan: {line}");
        }
        // Only a temporal model's plan has a history (`plan_with`).
        let history = plan.history;
        let engine = Engine::new(gpu, plan)?.guard(gpu);
        let temporal = if let Some(history) = history {
            let sizes = ((ri.width, ri.height), (ro.width, ro.height));
            Some(TemporalIo::new(
                gpu,
                Mode::Engine,
                precision,
                history,
                sizes.0,
                sizes.1,
            )?)
        } else {
            None
        };
        let sampler =
            gpu::image::create_sampler(gpu, "in-stream input sampler", false, false, 0.0)?;
        Ok(Self {
            engine: engine.keep(),
            sampler,
            fallback,
            temporal,
        })
    }
}

/// Dispatches in the frame's command buffer: no split.
impl FrameSplit for InStream {}

impl Upscaler for InStream {
    fn pattern(&self) -> Pattern {
        Pattern::InStream
    }

    unsafe fn record(&mut self, io: &mut FrameIo) -> gpu::Result<()> {
        if let Some(t) = &mut self.temporal {
            t.record(io, &self.engine, self.sampler);
            return Ok(());
        }
        // The previous frame's dispatches read and wrote the same tensor buffers.
        compute_barrier(&io.gpu.device, io.cmd);
        let frame = FrameImages {
            input: io.inputs.color.view,
            sampler: self.sampler,
            output: io.output.view,
        };
        self.engine
            .record_frame(io.gpu, io.cmd, frame, Some(&mut *io.timestamps));
        Ok(())
    }

    fn temporal(&self) -> bool {
        self.temporal.is_some()
    }

    fn describe(&self) -> String {
        let mut line = self.engine.summary().line();
        if self.temporal.is_some() {
            line.push_str(", temporal model");
        }
        match &self.fallback {
            Some(why) => format!("{line}; {why}"),
            None => line,
        }
    }

    fn engine(&self) -> Option<EngineSummary> {
        Some(self.engine.summary())
    }

    fn destroy(self: Box<Self>, gpu: &Gpu) {
        unsafe { gpu.device.destroy_sampler(self.sampler, None) };
        if let Some(t) = self.temporal {
            t.destroy(gpu);
        }
        self.engine.destroy(gpu);
    }
}
