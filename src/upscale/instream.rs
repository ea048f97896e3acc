//! Pattern 3, in-stream: the project's own engine (`crate::infer`) runs the model as compute
//! dispatches in the frame's one command buffer, between the scene and the composite. No host
//! step, no copy to or from host memory.
//!
//! Per frame: `to_tensor` (instream_pre.comp: scene image → input tensor), one span per layer
//! (`OpType:node`), `from_tensor` (instream_post.comp: output tensor → output image). The tensor
//! buffers are shared by both frame slots: every dispatch is ordered after the previous frame's
//! by the barrier at the start of `record` (a pipeline barrier also orders commands of earlier
//! submissions on the queue).

use std::path::Path;

use ash::vk;

use super::{FrameIo, MlSettings, Pattern, Upscaler};
use crate::gpu::pipeline::{self, Binding};
use crate::gpu::{self, Gpu, Image, Pipeline};
use crate::infer::{self, ops::compute_barrier, Engine};
use crate::shader;

pub struct InStream {
    engine: Engine,
    pre: Pipeline,
    post: Pipeline,
    sampler: vk::Sampler,
}

/// Loads and plans the model for these sizes and checks that its output fills the output image;
/// no GPU work (the start-up probe).
pub fn plan(model: &Path, render: (u32, u32), output: (u32, u32)) -> infer::Result<infer::Plan> {
    let plan = infer::plan_upscaler(model, render.0, render.1)?;
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
        let plan = plan(&ml.model, (ri.width, ri.height), (ro.width, ro.height))?;
        let engine = Engine::new(gpu, plan)?;
        match Self::pipelines(gpu) {
            Ok((pre, post, sampler)) => Ok(Self {
                engine,
                pre,
                post,
                sampler,
            }),
            Err(e) => {
                engine.destroy(gpu);
                Err(e.into())
            }
        }
    }

    fn pipelines(gpu: &Gpu) -> gpu::Result<(Pipeline, Pipeline, vk::Sampler)> {
        let pre = pipeline::compute(
            gpu,
            "in-stream pre",
            shader!("upscale/instream_pre.comp"),
            &[
                vk::DescriptorType::COMBINED_IMAGE_SAMPLER,
                vk::DescriptorType::STORAGE_BUFFER,
            ],
            0,
        )?;
        let post = pipeline::compute(
            gpu,
            "in-stream post",
            shader!("upscale/instream_post.comp"),
            &[
                vk::DescriptorType::STORAGE_BUFFER,
                vk::DescriptorType::STORAGE_IMAGE,
            ],
            0,
        );
        let post = match post {
            Ok(p) => p,
            Err(e) => {
                pre.destroy(gpu);
                return Err(e);
            }
        };
        match gpu::image::create_sampler(gpu, "in-stream input sampler", false, false, 0.0) {
            Ok(sampler) => Ok((pre, post, sampler)),
            Err(e) => {
                pre.destroy(gpu);
                post.destroy(gpu);
                Err(e)
            }
        }
    }

    /// # Safety
    /// As for [`Upscaler::record`].
    unsafe fn dispatch_image(
        &self,
        io: &FrameIo,
        pipe: &Pipeline,
        bindings: &[Binding],
        extent: vk::Extent2D,
    ) {
        let bind = vk::PipelineBindPoint::COMPUTE;
        io.gpu.device.cmd_bind_pipeline(io.cmd, bind, pipe.raw);
        pipeline::push_descriptors(io.gpu, io.cmd, bind, pipe, bindings);
        io.gpu.device.cmd_dispatch(
            io.cmd,
            extent.width.div_ceil(16),
            extent.height.div_ceil(8),
            1,
        );
    }
}

impl Upscaler for InStream {
    fn pattern(&self) -> Pattern {
        Pattern::InStream
    }

    unsafe fn record(&mut self, io: &mut FrameIo) -> gpu::Result<()> {
        let device = &io.gpu.device;
        // The previous frame's dispatches read and wrote the same tensor buffers.
        compute_barrier(device, io.cmd);
        let span = io.timestamps.begin(io.gpu, io.cmd, "to_tensor");
        let input = self.engine.input(0).0;
        let bindings = [
            Binding::SampledImage(io.input.view, self.sampler),
            Binding::StorageBuffer(input),
        ];
        self.dispatch_image(io, &self.pre, &bindings, io.input.extent());
        io.timestamps.end(io.gpu, io.cmd, span);
        compute_barrier(device, io.cmd);
        self.engine
            .record(io.gpu, io.cmd, Some(&mut *io.timestamps));
        compute_barrier(device, io.cmd);
        let span = io.timestamps.begin(io.gpu, io.cmd, "from_tensor");
        let output = self.engine.output(0).0;
        let bindings = [
            Binding::StorageBuffer(output),
            Binding::StorageImage(io.output.view),
        ];
        self.dispatch_image(io, &self.post, &bindings, io.output.extent());
        io.timestamps.end(io.gpu, io.cmd, span);
        Ok(())
    }

    fn destroy(self: Box<Self>, gpu: &Gpu) {
        unsafe { gpu.device.destroy_sampler(self.sampler, None) };
        self.pre.destroy(gpu);
        self.post.destroy(gpu);
        self.engine.destroy(gpu);
    }
}
