//! Pattern 2, external-memory share ("shared resources"): Vulkan and the ML runtime work on the
//! same tensor memory. A compute shader writes the frame straight into the input tensor's layout,
//! the runtime runs in place, a compute shader reads the output tensor straight into the
//! upscaled image. No staging copies and no host conversion passes.
//!
//! Where the tensors live and who runs the model is a [`Domain`]:
//! - `host` ([`host::HostDomain`]): memory we allocate, imported into Vulkan with
//!   VK_EXT_external_memory_host, ONNX Runtime on the CPU. Works on every device with that
//!   extension.
//! - `cuda` ([`cuda::CudaDomain`]): Vulkan device memory exported as opaque fds and imported by
//!   CUDA, ONNX Runtime's CUDA execution provider on a CUDA stream, ordered with Vulkan by an
//!   exported timeline semaphore. Needs an NVIDIA GPU, its CUDA driver and the GPU build of ONNX
//!   Runtime; [`cuda::availability`] says why it cannot run elsewhere.
//!
//! `upscale.shared_domain` picks one: `auto` (cuda where available, else host, with the reason
//! in the overlay), `host` or `cuda`.
//!
//! A temporal model ([`SharedModel::Temporal`]) runs the same way: `temporal_pre.comp` writes
//! its five inputs into the input tensor (one NCHW tensor of their channels concatenated, of
//! which the runtime sees each input as a view), the runtime runs the whole graph, and
//! `temporal_output.comp` writes the image and keeps the history (`upscale::temporal_io`).
//!
//! Host domain (`Schedule::HostSignal`): submission A (scene, `image_to_tensor`) signals the
//! frame timeline value `n` after a COMPUTE→HOST barrier; the host waits for `n`, the domain runs
//! the model, the host signals `n + 1`; submission B, queued right after A, waits for `n + 1`,
//! makes the host's writes visible (HOST→COMPUTE barrier) and runs `tensor_to_image`.
//!
//! CUDA domain (`Schedule::DeviceSignal`): A also signals the shared semaphore's `k + 1`; the
//! host queues on the CUDA stream a wait for `k + 1`, the ORT run and a signal of `k + 2`, and
//! returns; B waits for `k + 2` on the GPU. The semaphore operations order the memory.
//!
//! One pair of tensors serves both frame slots: the runtime writes the output tensor only after
//! frame n+1's submission A signalled, and a semaphore signal waits for every earlier submission
//! on the queue, so frame n's submission B has finished reading it by then (and B's wait comes
//! before every later submission, so A of the next frame writes the input only after the runtime
//! has read it).

pub mod cuda;
pub mod host;

use ash::vk;

use anyhow::Context as _;

use super::model::temporal::History;
use super::model::{self, ModelError, OrtModel, OrtTemporal, TEMPORAL_CHANNELS};
use super::temporal_io::{Mode, TemporalIo};
use super::{FrameIo, FrameSplit, HostTimes, MlSettings, Pattern, Schedule, Upscaler};
use crate::gpu::barrier;
use crate::gpu::guard::Destroy;
use crate::gpu::pipeline::{self, Binding};
use crate::gpu::{self, Gpu, Image, Pipeline};
use crate::infer::Precision;
use crate::shader;

/// The domains this pattern can use, by [`Domain::name`].
pub const DOMAINS: &[&str] = &["host", "cuda"];

/// Which domain `upscale.shared_domain` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DomainChoice {
    /// CUDA where it is available, else host.
    #[default]
    Auto,
    Host,
    Cuda,
}

impl DomainChoice {
    pub const ALLOWED: &'static str = "auto, host, cuda";

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "auto" => Some(Self::Auto),
            "host" => Some(Self::Host),
            "cuda" => Some(Self::Cuda),
            _ => None,
        }
    }
}

pub use super::DeviceSync;

/// The model a domain's runtime runs: a single-image model on the frame's tensor, or a temporal
/// model on the packed inputs `temporal_pre.comp` writes.
pub enum SharedModel {
    Image(OrtModel),
    Temporal(OrtTemporal),
}

impl SharedModel {
    /// The history a temporal model takes; None for an image model.
    pub fn history(&self) -> Option<History> {
        match self {
            SharedModel::Image(_) => None,
            SharedModel::Temporal(m) => Some(m.history()),
        }
    }

    /// Loads `ml.model` with `load_image` or, when it is a temporal model, `load_temporal`, and
    /// checks it fits the sizes.
    pub fn load(
        ml: &MlSettings,
        render: vk::Extent2D,
        output: vk::Extent2D,
        load_image: impl FnOnce() -> Result<(OrtModel, model::ModelInfo), ModelError>,
        load_temporal: impl FnOnce() -> Result<OrtTemporal, ModelError>,
    ) -> anyhow::Result<Self> {
        let (render, output) = ((render.width, render.height), (output.width, output.height));
        match load_image() {
            Ok((model, info)) => {
                OrtModel::check_sizes(&info, render, output)?;
                Ok(Self::Image(model))
            }
            Err(ModelError::Temporal { .. }) => {
                let model = load_temporal()?;
                super::roundtrip::check_temporal_sizes(&ml.model, render, output)?;
                Ok(Self::Temporal(model))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Channels of the input tensor: the image's, or the temporal model's five inputs'.
    pub fn input_channels(&self) -> usize {
        match self {
            Self::Image(_) => 3,
            Self::Temporal(_) => TEMPORAL_CHANNELS,
        }
    }

    /// Runs the model in place on host memory: `input` ([1, C, h, w], C =
    /// [`SharedModel::input_channels`]) into `output` ([1, 3, H, W]).
    pub fn run_host(
        &mut self,
        input: &mut [f32],
        in_shape: [usize; 4],
        output: &mut [f32],
        out_shape: [usize; 4],
    ) -> Result<(), ModelError> {
        match self {
            Self::Image(m) => m.run(input, in_shape, output, out_shape),
            Self::Temporal(m) => m.run_packed(input, (in_shape[3], in_shape[2]), output),
        }
    }

    /// [`SharedModel::run_host`] on CUDA device memory, queued on the model's stream.
    ///
    /// # Safety
    /// As `OrtModel::run_on_device`: live device allocations of the shapes' sizes that outlive
    /// the queued work, and a model loaded on a CUDA stream.
    pub unsafe fn run_device(
        &mut self,
        input: u64,
        in_shape: [usize; 4],
        output: u64,
        out_shape: [usize; 4],
    ) -> Result<(), ModelError> {
        // SAFETY: as this function's contract.
        unsafe {
            match self {
                Self::Image(m) => m.run_on_device(input, in_shape, output, out_shape),
                Self::Temporal(m) => {
                    m.run_packed_on_device(input, (in_shape[3], in_shape[2]), output)
                }
            }
        }
    }
}

/// Tensor memory shared by Vulkan and the ML runtime, and the runtime that uses it in place.
/// How the runtime joins the frame is the split-frame protocol ([`FrameSplit`]), which the
/// pattern passes on: a host domain runs the model in [`FrameSplit::run_host`]
/// ([`Schedule::HostSignal`]), a GPU domain queues it in [`FrameSplit::run_device`]
/// ([`Schedule::DeviceSignal`]).
pub trait Domain: FrameSplit {
    fn name(&self) -> &'static str;
    /// The overlay's line about it.
    fn label(&self) -> String {
        self.name().to_string()
    }
    /// The input tensor (NCHW f32) as a Vulkan storage buffer.
    fn input(&self) -> vk::Buffer;
    /// The output tensor (NCHW f32) as a Vulkan storage buffer.
    fn output(&self) -> vk::Buffer;
    /// The history the runtime's temporal model takes, if it runs one ([`SharedModel::Temporal`]).
    fn temporal(&self) -> Option<History>;
    fn destroy(self: Box<Self>, gpu: &Gpu);
}

pub struct SharedMemory {
    domain: Box<dyn Domain>,
    to_tensor: Pipeline,
    from_tensor: Pipeline,
    sampler: vk::Sampler,
    /// Why the CUDA domain is or is not in use, for the overlay.
    cuda_note: String,
    /// A temporal model's passes and history (in place of `to_tensor` and `from_tensor`).
    temporal: Option<TemporalIo>,
}

/// Builds the domain `ml.shared_domain` asks for, with the overlay's note about CUDA.
fn make_domain(
    gpu: &Gpu,
    ml: &MlSettings,
    render: vk::Extent2D,
    output: vk::Extent2D,
) -> anyhow::Result<(Box<dyn Domain>, String)> {
    let host = || -> anyhow::Result<Box<dyn Domain>> {
        Ok(Box::new(host::HostDomain::new(gpu, ml, render, output)?))
    };
    match ml.shared_domain {
        DomainChoice::Host => Ok((
            host()?,
            "cuda domain not used: upscale.shared_domain = \"host\"".into(),
        )),
        DomainChoice::Cuda => {
            let ordinal = cuda::availability(gpu, ml).map_err(|why| {
                anyhow::anyhow!(
                    "the cuda domain (upscale.shared_domain = \"cuda\") cannot run here: {why}"
                )
            })?;
            let domain = cuda::CudaDomain::new(gpu, ml, ordinal, render, output)
                .context("starting the cuda domain")?;
            Ok((Box::new(domain), "forced by upscale.shared_domain".into()))
        }
        DomainChoice::Auto => match cuda::availability(gpu, ml) {
            Ok(ordinal) => match cuda::CudaDomain::new(gpu, ml, ordinal, render, output) {
                Ok(domain) => Ok((Box::new(domain), "chosen automatically".into())),
                Err(e) => {
                    tracing::warn!("cuda domain failed to start, using host: {e:#}");
                    Ok((host()?, format!("cuda domain failed to start: {e:#}")))
                }
            },
            Err(why) => Ok((host()?, format!("cuda domain unavailable: {why}"))),
        },
    }
}

impl SharedMemory {
    pub fn new(gpu: &Gpu, ml: &MlSettings, input: &Image, output: &Image) -> anyhow::Result<Self> {
        let (domain, cuda_note) = make_domain(gpu, ml, input.extent(), output.extent())?;
        let domain = domain.guard(gpu);
        let to_tensor = pipeline::compute(
            gpu,
            "image_to_tensor",
            shader!("upscale/image_to_tensor.comp"),
            &[
                vk::DescriptorType::COMBINED_IMAGE_SAMPLER,
                vk::DescriptorType::STORAGE_BUFFER,
            ],
            0,
        )?
        .guard(gpu);
        let from_tensor = pipeline::compute(
            gpu,
            "tensor_to_image",
            shader!("upscale/tensor_to_image.comp"),
            &[
                vk::DescriptorType::STORAGE_BUFFER,
                vk::DescriptorType::STORAGE_IMAGE,
            ],
            0,
        )?
        .guard(gpu);
        let temporal = if let Some(history) = domain.temporal() {
            let size = |e: vk::Extent2D| (e.width, e.height);
            let io = TemporalIo::new(
                gpu,
                Mode::Runtime,
                Precision::Fp32,
                history,
                size(input.extent()),
                size(output.extent()),
            )?;
            Some(io)
        } else {
            None
        };
        let sampler = gpu::image::create_sampler(gpu, "image_to_tensor sampler", false, false, 0.0);
        let sampler = match sampler {
            Ok(s) => s,
            Err(e) => {
                if let Some(t) = temporal {
                    t.destroy(gpu);
                }
                return Err(e.into());
            }
        };
        Ok(Self {
            domain: domain.keep(),
            to_tensor: to_tensor.keep(),
            from_tensor: from_tensor.keep(),
            sampler,
            cuda_note,
            temporal,
        })
    }
}

impl SharedMemory {
    /// The domain's runtime works on the GPU, ordered by semaphores (no host step, no host
    /// barriers).
    fn on_device(&self) -> bool {
        self.domain.schedule() == Schedule::DeviceSignal
    }

    /// The domain in use: `host` or `cuda`.
    pub fn domain_name(&self) -> &'static str {
        self.domain.name()
    }
}

/// Work groups of 16×16 cover `extent`.
fn groups(extent: vk::Extent2D) -> (u32, u32) {
    (extent.width.div_ceil(16), extent.height.div_ceil(16))
}

/// The domain's split, passed on: the image conversions around it are recorded in
/// [`Upscaler::record`] and [`Upscaler::record_after`].
impl FrameSplit for SharedMemory {
    fn schedule(&self) -> Schedule {
        self.domain.schedule()
    }

    fn run_host(&mut self, gpu: &Gpu, slot: usize, times: &mut HostTimes) -> anyhow::Result<()> {
        self.domain.run_host(gpu, slot, times)
    }

    fn device_sync(&mut self) -> Option<DeviceSync> {
        self.domain.device_sync()
    }

    fn run_device(&mut self, gpu: &Gpu, slot: usize, times: &mut HostTimes) -> anyhow::Result<()> {
        self.domain.run_device(gpu, slot, times)
    }

    fn collect_gpu(&mut self, slot: usize, spans: &mut Vec<(&'static str, f64)>) {
        self.domain.collect_gpu(slot, spans);
    }
}

impl Upscaler for SharedMemory {
    fn pattern(&self) -> Pattern {
        Pattern::SharedMemory
    }

    fn describe(&self) -> String {
        let model = if self.temporal.is_some() {
            " · temporal model"
        } else {
            ""
        };
        format!(
            "domain: {}{model} · {}",
            self.domain.label(),
            self.cuda_note
        )
    }

    fn temporal(&self) -> bool {
        self.temporal.is_some()
    }

    unsafe fn record(&mut self, io: &mut FrameIo) -> gpu::Result<()> {
        let device = &io.gpu.device;
        if let Some(t) = &mut self.temporal {
            t.record_pre(io, self.sampler, self.domain.input());
        } else {
            let span = io.timestamps.begin(io.gpu, io.cmd, "to_tensor");
            let (x, y) = groups(io.inputs.color.extent());
            pipeline::dispatch(
                io.gpu,
                io.cmd,
                &self.to_tensor,
                &[
                    Binding::SampledImage(io.inputs.color.view, self.sampler),
                    Binding::StorageBuffer(self.domain.input()),
                ],
                &(),
                [x, y, 1],
            );
            io.timestamps.end(io.gpu, io.cmd, span);
        }
        if !self.on_device() {
            // The runtime reads the tensor on the host once the timeline value of A is reached.
            // (On the device, A's semaphore signal orders the write before CUDA's read.)
            barrier::memory(
                device,
                io.cmd,
                (
                    vk::PipelineStageFlags2::COMPUTE_SHADER,
                    vk::AccessFlags2::SHADER_STORAGE_WRITE,
                ),
                (vk::PipelineStageFlags2::HOST, vk::AccessFlags2::HOST_READ),
            );
        }
        Ok(())
    }

    unsafe fn record_after(&mut self, io: &mut FrameIo) -> gpu::Result<()> {
        let device = &io.gpu.device;
        if !self.on_device() {
            // The runtime wrote the output tensor on the host before signalling the value B
            // waits on. (On the device, B's semaphore wait orders CUDA's write before the read.)
            barrier::memory(
                device,
                io.cmd,
                (vk::PipelineStageFlags2::HOST, vk::AccessFlags2::HOST_WRITE),
                (
                    vk::PipelineStageFlags2::COMPUTE_SHADER,
                    vk::AccessFlags2::SHADER_STORAGE_READ,
                ),
            );
        }
        if let Some(t) = &mut self.temporal {
            t.record_post(io, self.domain.output());
            return Ok(());
        }
        let span = io.timestamps.begin(io.gpu, io.cmd, "from_tensor");
        let (x, y) = groups(io.output.extent());
        pipeline::dispatch(
            io.gpu,
            io.cmd,
            &self.from_tensor,
            &[
                Binding::StorageBuffer(self.domain.output()),
                Binding::StorageImage(io.output.view),
            ],
            &(),
            [x, y, 1],
        );
        io.timestamps.end(io.gpu, io.cmd, span);
        Ok(())
    }

    fn destroy(self: Box<Self>, gpu: &Gpu) {
        self.domain.destroy(gpu);
        if let Some(t) = self.temporal {
            t.destroy(gpu);
        }
        self.to_tensor.destroy(gpu);
        self.from_tensor.destroy(gpu);
        unsafe { gpu.device.destroy_sampler(self.sampler, None) };
    }
}

impl Destroy for Box<dyn Domain> {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
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
