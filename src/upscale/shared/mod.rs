//! Pattern 2, external-memory share ("shared resources"): Vulkan and the ML runtime work on the
//! same tensor memory. A compute shader writes the frame straight into the input tensor's layout,
//! the runtime runs in place, a compute shader reads the output tensor straight into the
//! upscaled image. No staging copies and no host conversion passes.
//!
//! Where the tensors live and who runs the model is a [`Domain`]: `host` (memory we allocate,
//! imported into Vulkan with VK_EXT_external_memory_host, ONNX Runtime on the CPU) works on every
//! device that has that extension. A GPU domain (Vulkan memory exported as opaque fds, imported by
//! CUDA, ONNX Runtime's CUDA execution provider) fits behind the same trait; [`cuda_status`] says
//! whether this device and runtime could carry it.
//!
//! Synchronisation (`Schedule::HostSignal`): submission A (scene, `image_to_tensor`) signals the
//! frame timeline value `n` after a COMPUTE→HOST barrier; the host waits for `n`, the domain runs
//! the model, the host signals `n + 1`; submission B, queued right after A, waits for `n + 1`,
//! makes the host's writes visible (HOST→COMPUTE barrier) and runs `tensor_to_image`.
//!
//! One pair of tensors serves both frame slots: the host writes the output tensor only after
//! frame n+1's submission A signalled, and a semaphore signal waits for every earlier submission
//! on the queue, so frame n's submission B has finished reading it by then.

pub mod host;

use ash::vk;

use super::{FrameIo, HostTimes, MlSettings, Pattern, Schedule, Upscaler};
use crate::gpu::barrier;
use crate::gpu::pipeline::{self, Binding};
use crate::gpu::{self, Gpu, Image, Pipeline};
use crate::shader;

/// Tensor memory shared by Vulkan and the ML runtime, and the runtime that uses it in place.
pub trait Domain {
    fn name(&self) -> &'static str;
    /// The input tensor (NCHW f32) as a Vulkan storage buffer.
    fn input(&self) -> vk::Buffer;
    /// The output tensor (NCHW f32) as a Vulkan storage buffer.
    fn output(&self) -> vk::Buffer;
    /// Runs the model on the input tensor into the output tensor, in place.
    fn infer(&mut self, times: &mut HostTimes) -> anyhow::Result<()>;
    fn destroy(self: Box<Self>, gpu: &Gpu);
}

pub struct SharedMemory {
    domain: Box<dyn Domain>,
    to_tensor: Pipeline,
    from_tensor: Pipeline,
    sampler: vk::Sampler,
    /// Why the CUDA domain is not in use, for the overlay.
    cuda_note: String,
}

impl SharedMemory {
    pub fn new(gpu: &Gpu, ml: &MlSettings, input: &Image, output: &Image) -> anyhow::Result<Self> {
        let domain = Box::new(host::HostDomain::new(
            gpu,
            ml,
            input.extent(),
            output.extent(),
        )?);
        let to_tensor = pipeline::compute(
            gpu,
            "image_to_tensor",
            shader!("upscale/image_to_tensor.comp"),
            &[
                vk::DescriptorType::COMBINED_IMAGE_SAMPLER,
                vk::DescriptorType::STORAGE_BUFFER,
            ],
            0,
        )?;
        let from_tensor = pipeline::compute(
            gpu,
            "tensor_to_image",
            shader!("upscale/tensor_to_image.comp"),
            &[
                vk::DescriptorType::STORAGE_BUFFER,
                vk::DescriptorType::STORAGE_IMAGE,
            ],
            0,
        )?;
        let sampler =
            gpu::image::create_sampler(gpu, "image_to_tensor sampler", false, false, 0.0)?;
        let cuda_note = match cuda_status(gpu, ml) {
            Ok(()) => "cuda domain: device and runtime qualify, not in this build yet".into(),
            Err(why) => format!("cuda domain unavailable: {why}"),
        };
        Ok(Self {
            domain,
            to_tensor,
            from_tensor,
            sampler,
            cuda_note,
        })
    }
}

/// Whether the GPU domain could run here: opaque-fd memory and semaphore export on the Vulkan
/// device, and an ONNX Runtime library with the CUDA execution provider.
pub fn cuda_status(gpu: &Gpu, ml: &MlSettings) -> Result<(), String> {
    let mut missing = Vec::new();
    if !gpu.info.external_memory_fd {
        missing.push(format!("{} lacks VK_KHR_external_memory_fd", gpu.info.name));
    }
    if !gpu.info.external_semaphore_fd {
        missing.push(format!(
            "{} lacks VK_KHR_external_semaphore_fd",
            gpu.info.name
        ));
    }
    match ml.runtime() {
        Ok(rt) if rt.providers.iter().any(|p| p == "CUDAExecutionProvider") => {}
        Ok(rt) => missing.push(format!(
            "ONNX Runtime {} has no CUDAExecutionProvider (has {})",
            rt.version,
            rt.providers.join(", ")
        )),
        Err(e) => missing.push(e),
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("; "))
    }
}

/// Work groups of 16×16 cover `extent`.
fn groups(extent: vk::Extent2D) -> (u32, u32) {
    (extent.width.div_ceil(16), extent.height.div_ceil(16))
}

impl Upscaler for SharedMemory {
    fn pattern(&self) -> Pattern {
        Pattern::SharedMemory
    }

    fn schedule(&self) -> Schedule {
        Schedule::HostSignal
    }

    fn describe(&self) -> String {
        format!("domain: {} · {}", self.domain.name(), self.cuda_note)
    }

    unsafe fn record(&mut self, io: &mut FrameIo) -> gpu::Result<()> {
        let device = &io.gpu.device;
        let span = io.timestamps.begin(io.gpu, io.cmd, "to_tensor");
        device.cmd_bind_pipeline(io.cmd, vk::PipelineBindPoint::COMPUTE, self.to_tensor.raw);
        pipeline::push_descriptors(
            io.gpu,
            io.cmd,
            vk::PipelineBindPoint::COMPUTE,
            &self.to_tensor,
            &[
                Binding::SampledImage(io.input.view, self.sampler),
                Binding::StorageBuffer(self.domain.input()),
            ],
        );
        let (x, y) = groups(io.input.extent());
        device.cmd_dispatch(io.cmd, x, y, 1);
        // The runtime reads the tensor on the host once the timeline value of A is reached.
        barrier::memory(
            device,
            io.cmd,
            (
                vk::PipelineStageFlags2::COMPUTE_SHADER,
                vk::AccessFlags2::SHADER_STORAGE_WRITE,
            ),
            (vk::PipelineStageFlags2::HOST, vk::AccessFlags2::HOST_READ),
        );
        io.timestamps.end(io.gpu, io.cmd, span);
        Ok(())
    }

    fn run_host(&mut self, _gpu: &Gpu, _slot: usize, times: &mut HostTimes) -> anyhow::Result<()> {
        self.domain.infer(times)
    }

    unsafe fn record_after(&mut self, io: &mut FrameIo) -> gpu::Result<()> {
        let device = &io.gpu.device;
        // The runtime wrote the output tensor on the host before signalling the value B waits on.
        barrier::memory(
            device,
            io.cmd,
            (vk::PipelineStageFlags2::HOST, vk::AccessFlags2::HOST_WRITE),
            (
                vk::PipelineStageFlags2::COMPUTE_SHADER,
                vk::AccessFlags2::SHADER_STORAGE_READ,
            ),
        );
        let span = io.timestamps.begin(io.gpu, io.cmd, "from_tensor");
        device.cmd_bind_pipeline(io.cmd, vk::PipelineBindPoint::COMPUTE, self.from_tensor.raw);
        pipeline::push_descriptors(
            io.gpu,
            io.cmd,
            vk::PipelineBindPoint::COMPUTE,
            &self.from_tensor,
            &[
                Binding::StorageBuffer(self.domain.output()),
                Binding::StorageImage(io.output.view),
            ],
        );
        let (x, y) = groups(io.output.extent());
        device.cmd_dispatch(io.cmd, x, y, 1);
        io.timestamps.end(io.gpu, io.cmd, span);
        Ok(())
    }

    fn destroy(self: Box<Self>, gpu: &Gpu) {
        self.domain.destroy(gpu);
        self.to_tensor.destroy(gpu);
        self.from_tensor.destroy(gpu);
        unsafe { gpu.device.destroy_sampler(self.sampler, None) };
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn work_groups_cover_odd_sizes() {
        use ash::vk::Extent2D;
        assert_eq!(
            super::groups(Extent2D {
                width: 17,
                height: 16
            }),
            (2, 1)
        );
        assert_eq!(
            super::groups(Extent2D {
                width: 1,
                height: 33
            }),
            (1, 3)
        );
    }
}
