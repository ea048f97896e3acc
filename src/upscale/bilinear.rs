//! The non-ML baseline: a compute shader samples the low-resolution frame bilinearly. One
//! dispatch in the frame's command buffer, no host step.

use ash::vk;

use super::{FrameIo, FrameSplit, Pattern, Upscaler};
use crate::gpu::guard::Destroy;
use crate::gpu::pipeline::{self, Binding};
use crate::gpu::{self, Gpu, Pipeline};
use crate::shader;

pub struct Bilinear {
    pipeline: Pipeline,
    sampler: vk::Sampler,
}

impl Bilinear {
    pub fn new(gpu: &Gpu) -> gpu::Result<Self> {
        let pipeline = pipeline::compute(
            gpu,
            "bilinear upscale",
            shader!("upscale/bilinear.comp"),
            &[
                vk::DescriptorType::COMBINED_IMAGE_SAMPLER,
                vk::DescriptorType::STORAGE_IMAGE,
            ],
            0,
        )?
        .guard(gpu);
        let sampler = gpu::image::create_sampler(gpu, "bilinear sampler", true, false, 0.0)?;
        Ok(Self {
            pipeline: pipeline.keep(),
            sampler,
        })
    }
}

/// One dispatch in the frame's command buffer: no split.
impl FrameSplit for Bilinear {}

impl Upscaler for Bilinear {
    fn pattern(&self) -> Pattern {
        Pattern::Bilinear
    }

    unsafe fn record(&mut self, io: &mut FrameIo) -> gpu::Result<()> {
        let span = io.timestamps.begin(io.gpu, io.cmd, "bilinear");
        let extent = io.output.extent();
        pipeline::dispatch(
            io.gpu,
            io.cmd,
            &self.pipeline,
            &[
                Binding::SampledImage(io.inputs.color.view, self.sampler),
                Binding::StorageImage(io.output.view),
            ],
            &(),
            [extent.width.div_ceil(8), extent.height.div_ceil(8), 1],
        );
        io.timestamps.end(io.gpu, io.cmd, span);
        Ok(())
    }

    fn destroy(self: Box<Self>, gpu: &Gpu) {
        unsafe { gpu.device.destroy_sampler(self.sampler, None) };
        self.pipeline.destroy(gpu);
    }
}
