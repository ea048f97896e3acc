//! The host-memory domain: both tensors in page-aligned host memory that we allocate, imported
//! into Vulkan (VK_EXT_external_memory_host), and given to ONNX Runtime as tensors over that
//! same memory, so ORT reads the input and writes the output in place (a temporal model's five
//! inputs as views of the one input tensor).

use std::time::Instant;

use anyhow::Context as _;
use ash::vk;

use super::{Domain, SharedModel};
use crate::gpu::external::HostBuffer;
use crate::gpu::guard::Destroy;
use crate::gpu::Gpu;
use crate::upscale::model::temporal::History;
use crate::upscale::model::{OrtModel, OrtTemporal};
use crate::upscale::{FrameSplit, HostTimes, MlSettings, Schedule};

pub struct HostDomain {
    model: SharedModel,
    input: HostBuffer,
    output: HostBuffer,
    in_shape: [usize; 4],
    out_shape: [usize; 4],
}

impl HostDomain {
    pub fn new(
        gpu: &Gpu,
        ml: &MlSettings,
        render: vk::Extent2D,
        output: vk::Extent2D,
    ) -> anyhow::Result<Self> {
        let model = SharedModel::load(
            ml,
            render,
            output,
            || OrtModel::load(&ml.model, ml.provider, ml.intra_threads),
            || OrtTemporal::load(&ml.model, ml.provider, ml.intra_threads),
        )?;
        let channels = model.input_channels();
        let in_shape = [1, channels, render.height as usize, render.width as usize];
        let out_shape = [1, 3, output.height as usize, output.width as usize];
        let bytes = |shape: [usize; 4]| (shape.iter().product::<usize>() * 4) as u64;
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER;
        let input = HostBuffer::new(gpu, "shared input tensor", bytes(in_shape), usage)
            .context("importing the input tensor's host memory into Vulkan")?
            .guard(gpu);
        let output = HostBuffer::new(gpu, "shared output tensor", bytes(out_shape), usage)
            .context("importing the output tensor's host memory")?;
        Ok(Self {
            model,
            input: input.keep(),
            output,
            in_shape,
            out_shape,
        })
    }
}

impl Domain for HostDomain {
    fn name(&self) -> &'static str {
        "host"
    }

    fn input(&self) -> vk::Buffer {
        self.input.raw
    }

    fn output(&self) -> vk::Buffer {
        self.output.raw
    }

    fn temporal(&self) -> Option<History> {
        self.model.history()
    }

    fn destroy(self: Box<Self>, gpu: &Gpu) {
        let this = *self;
        // The ORT session goes first: it holds tensors over the host memory.
        drop(this.model);
        this.input.destroy(gpu);
        this.output.destroy(gpu);
    }
}

/// ONNX Runtime on the CPU: the host waits for submission A, runs the model in place, and
/// signals the value submission B waits for.
impl FrameSplit for HostDomain {
    fn schedule(&self) -> Schedule {
        Schedule::HostSignal
    }

    /// Runs the model on the input tensor into the output tensor, in place.
    fn run_host(&mut self, _gpu: &Gpu, _slot: usize, times: &mut HostTimes) -> anyhow::Result<()> {
        let start = Instant::now();
        let (in_shape, out_shape) = (self.in_shape, self.out_shape);
        self.model.run_host(
            self.input.as_f32_mut(),
            in_shape,
            self.output.as_f32_mut(),
            out_shape,
        )?;
        times.push(("inference", start.elapsed().as_secs_f64() * 1e3));
        Ok(())
    }
}
