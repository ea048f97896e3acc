//! The upscaler seam: the interface every integration pattern implements, and the registry of
//! patterns the UI lists.
//!
//! # What a pattern is given and what it declares
//! An upscaler takes images and returns one: each frame it gets [`FrameInputs`] (the scene's
//! colour; depth, motion vectors and the projection's jitter in render pixels where the
//! renderer provides them; `reset` when history from earlier frames no longer applies) and
//! writes [`FrameIo::output`]. It never reaches into the renderer.
//!
//! What a pattern can do is data, [`Pattern::caps`]: whether it needs a model, runs ONNX
//! Runtime, splits the frame, which memory domains and precisions it offers, whether it keeps
//! history. The session, bench, renderer and compare view ask these whenever the question is
//! what a pattern can do; a name is matched only to build that pattern ([`create`]) or to pick
//! one (bilinear as the fallback that needs nothing).
//!
//! # How a pattern joins the frame
//! The frame loop (`render::Renderer`) owns acquire/present, the frame fences, the timeline
//! semaphore and the image layouts at the seam. Before [`Upscaler::record`] the input images
//! ([`FrameInputs`], at render resolution) are in [`barrier::SAMPLED`] and the output image in
//! [`barrier::UPSCALE_WRITE`] (GENERAL); a pattern leaves them in those states when it is done
//! (it may change them in between), and the loop then moves the output to SAMPLED for the
//! composite, with a barrier that covers compute and copy writes.
//!
//! How the frame is split is the [`FrameSplit`] protocol, declared once: [`Upscaler`] builds on
//! it, and the shared-memory pattern's memory domains implement it too (the pattern passes its
//! domain's split on).
//!
//! - [`Schedule::Single`] (bilinear, in-stream compute, taau): `record` puts all GPU work into
//!   the frame's single command buffer.
//! - [`Schedule::HostStep`] (CPU roundtrip): the loop submits command buffer A (scene + `record`)
//!   signalling the frame's timeline value `n`, waits for `n` on the host, calls
//!   [`FrameSplit::run_host`], then records command buffer B starting with
//!   [`Upscaler::record_after`] followed by composite and UI, and submits B.
//! - [`Schedule::HostSignal`] (external-memory share): A signals `n` as above, and B is recorded
//!   and submitted right away, waiting on the GPU for `n + 1`; the host waits for `n`, runs
//!   [`FrameSplit::run_host`] and then signals `n + 1` itself (vkSignalSemaphore). The host thread
//!   only waits and runs the model; it never records or submits between the two halves.
//! - [`Schedule::DeviceSignal`] (external-memory share on CUDA): before A the pattern hands out
//!   [`FrameSplit::device_sync`] values of its own timeline semaphore; A also signals the first,
//!   [`FrameSplit::run_device`] queues the runtime's GPU work between the two (it waits for the
//!   first and signals the second on the other API's queue, and returns without waiting), and B
//!   waits for the second on the GPU. The host waits for nothing.
//!
//! Per-frame resources of a pattern are indexed by frame slot (`FrameIo::slot`), because the
//! other slot's frame may still be in flight. A pattern switch hands the old upscaler to the
//! current slot's deferred-destroy list, so it is destroyed only after that frame's fence.
//! Patterns never wait for the whole device.
//!
//! [`barrier::SAMPLED`]: crate::gpu::barrier::SAMPLED
//! [`barrier::UPSCALE_WRITE`]: crate::gpu::barrier::UPSCALE_WRITE

pub mod bilinear;
pub mod instream;
pub mod model;
pub mod roundtrip;
pub mod shared;
pub mod taau;
mod temporal_io;

use std::fmt;
use std::path::PathBuf;

use ash::vk;

use crate::gpu::timestamps::Timestamps;
use crate::gpu::{self, Gpu, Image};

/// The integration patterns, in the order the UI lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    Bilinear,
    CpuRoundtrip,
    SharedMemory,
    InStream,
    Taau,
}

impl Pattern {
    pub const ALL: [Pattern; 5] = [
        Pattern::Bilinear,
        Pattern::CpuRoundtrip,
        Pattern::SharedMemory,
        Pattern::InStream,
        Pattern::Taau,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Pattern::Bilinear => "bilinear",
            Pattern::CpuRoundtrip => "cpu-roundtrip",
            Pattern::SharedMemory => "shared-memory",
            Pattern::InStream => "in-stream",
            Pattern::Taau => "taau",
        }
    }

    pub fn parse(s: &str) -> Option<Pattern> {
        Pattern::ALL.into_iter().find(|p| p.name() == s)
    }

    pub fn names() -> String {
        Pattern::ALL.map(|p| p.name()).join(", ")
    }

    /// What this pattern can do and needs, for code that must decide by capability (compare
    /// view, session, bench) instead of by name.
    pub const fn caps(self) -> Caps {
        const NONE: Caps = Caps {
            needs_model: false,
            onnx_runtime: false,
            host_step: false,
            domains: &[],
            precisions: false,
            temporal: false,
        };
        match self {
            Pattern::Bilinear => NONE,
            Pattern::CpuRoundtrip => Caps {
                needs_model: true,
                onnx_runtime: true,
                host_step: true,
                ..NONE
            },
            Pattern::SharedMemory => Caps {
                needs_model: true,
                onnx_runtime: true,
                host_step: true,
                domains: shared::DOMAINS,
                ..NONE
            },
            Pattern::InStream => Caps {
                needs_model: true,
                precisions: true,
                ..NONE
            },
            Pattern::Taau => Caps {
                temporal: true,
                ..NONE
            },
        }
    }
}

/// A pattern's capabilities ([`Pattern::caps`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// Runs an ONNX model (`upscale.model`): it has a model to switch, and a model that cannot
    /// run makes it unavailable.
    pub needs_model: bool,
    /// Runs that model through ONNX Runtime, so it needs the library; such patterns load the
    /// same session for the same model and settings.
    pub onnx_runtime: bool,
    /// Splits the frame around work outside the frame's command buffer (any [`Schedule`] but
    /// `Single`), so it cannot be recorded as a second upscaler into the same command buffer.
    pub host_step: bool,
    /// Where it can keep its tensors (`upscale.shared_domain`); empty: no choice, nothing that
    /// depends on the device beyond Vulkan 1.3.
    pub domains: &'static [&'static str],
    /// Has the in-stream engine's storage precision choice (`upscale.precision`: fp32, fp16).
    pub precisions: bool,
    /// Keeps history across frames: reads [`FrameInputs::reset`] (and, where given, depth,
    /// motion and jitter). The renderer jitters its frames while such a pattern runs
    /// (`render.jitter = "auto"`).
    pub temporal: bool,
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a pattern's work is placed in the frame (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    Single,
    HostStep,
    HostSignal,
    DeviceSignal,
}

/// A frame's handshake with work outside Vulkan ([`Schedule::DeviceSignal`]): submission A
/// signals `semaphore` = `signal`, submission B waits for `semaphore` = `wait`.
#[derive(Clone, Copy, Debug)]
pub struct DeviceSync {
    pub semaphore: vk::Semaphore,
    pub signal: u64,
    pub wait: u64,
}

/// What the renderer gives an upscaler for one frame: images at render resolution, all in
/// `barrier::SAMPLED`, and what a temporal pattern needs to reuse its history. The upscaler
/// reads these and nothing else of the renderer.
#[derive(Clone, Copy)]
pub struct FrameInputs<'a> {
    /// The scene's colour.
    pub color: &'a Image,
    /// The scene's depth (single-sample D32; with MSAA its sample-zero resolve), where given.
    pub depth: Option<&'a Image>,
    /// Per-pixel motion vectors (RG16F, render pixels, `game::motion`: previous = current −
    /// motion), where given.
    pub motion: Option<&'a Image>,
    /// The sub-pixel offset of this frame's projection, in render pixels ([0, 0] unjittered).
    pub jitter: [f32; 2],
    /// History from earlier frames no longer applies (first frame, pattern, model or precision
    /// switch, compare view toggled, restart, camera cut): a temporal pattern starts over. The
    /// renderer also starts the jitter sequence over on such a frame.
    pub reset: bool,
}

impl<'a> FrameInputs<'a> {
    /// Colour only, no jitter, no history to keep.
    pub fn color(color: &'a Image, reset: bool) -> Self {
        Self {
            color,
            depth: None,
            motion: None,
            jitter: [0.0, 0.0],
            reset,
        }
    }
}

/// What a pattern records against in one frame.
pub struct FrameIo<'a> {
    pub gpu: &'a Gpu,
    pub cmd: vk::CommandBuffer,
    /// The frame slot (0..frames in flight) for per-slot resources.
    pub slot: usize,
    pub inputs: FrameInputs<'a>,
    /// The upscaled image at output resolution, in `barrier::UPSCALE_WRITE` (GENERAL).
    pub output: &'a Image,
    /// For sub-stage spans (`upscale/...`) that the overlay and summary show.
    pub timestamps: &'a mut Timestamps,
}

/// Host-side sub-stage times of one frame, in milliseconds (e.g. `inference`).
pub type HostTimes = Vec<(&'static str, f64)>;

/// The split-frame protocol (see the module documentation): how a frame is split around work
/// outside its command buffers, and that work. Every upscaler speaks it (the defaults: no
/// split); so do the shared-memory pattern's memory domains, whose split that pattern passes on.
pub trait FrameSplit {
    /// How the frame is split around [`FrameSplit::run_host`] or
    /// [`FrameSplit::run_device`], if at all.
    fn schedule(&self) -> Schedule {
        Schedule::Single
    }

    /// [`Schedule::HostStep`] / [`Schedule::HostSignal`]: the host step between the two
    /// submissions; the first submission has completed.
    fn run_host(&mut self, _gpu: &Gpu, _slot: usize, _times: &mut HostTimes) -> anyhow::Result<()> {
        Ok(())
    }

    /// [`Schedule::DeviceSignal`]: the semaphore values of the frame being built.
    fn device_sync(&mut self) -> Option<DeviceSync> {
        None
    }

    /// [`Schedule::DeviceSignal`]: queues the work outside Vulkan between the values of the last
    /// [`FrameSplit::device_sync`], after A was submitted. The value B waits for is given even
    /// when this fails.
    fn run_device(
        &mut self,
        _gpu: &Gpu,
        _slot: usize,
        _times: &mut HostTimes,
    ) -> anyhow::Result<()> {
        Ok(())
    }

    /// GPU sub-stages of the slot's completed frame measured outside Vulkan's timestamps (e.g.
    /// CUDA events), added to the frame's GPU spans.
    fn collect_gpu(&mut self, _slot: usize, _spans: &mut Vec<(&'static str, f64)>) {}
}

pub trait Upscaler: FrameSplit {
    fn pattern(&self) -> Pattern;

    /// Keeps history across frames, so the renderer jitters its frames and gives depth and
    /// motion vectors ([`Caps::temporal`]): the temporal pattern, or a pattern running a
    /// temporal model.
    fn temporal(&self) -> bool {
        self.pattern().caps().temporal
    }

    /// Records this pattern's GPU work into the frame's (first) command buffer.
    ///
    /// # Safety
    /// `io.cmd` is recording outside any rendering scope; the images are in the states the
    /// module documentation gives.
    unsafe fn record(&mut self, io: &mut FrameIo) -> gpu::Result<()>;

    /// Records the GPU work after the host step, at the start of the second command buffer.
    ///
    /// # Safety
    /// As for [`Upscaler::record`].
    unsafe fn record_after(&mut self, _io: &mut FrameIo) -> gpu::Result<()> {
        Ok(())
    }

    /// Host bytes this pattern copied in the last frame (conversion and staging copies).
    fn host_copy_bytes(&self) -> u64 {
        0
    }

    /// Bytes this pattern moves between device and host memory per frame.
    fn bus_bytes(&self) -> u64 {
        0
    }

    /// A line for the overlay about how the pattern runs here (e.g. its memory domain).
    fn describe(&self) -> String {
        String::new()
    }

    /// What the in-stream engine chose (precision, kernels, dispatches), for patterns that run
    /// it.
    fn engine(&self) -> Option<crate::infer::EngineSummary> {
        None
    }

    /// Destroys GPU objects; called only after every frame that used them has completed.
    fn destroy(self: Box<Self>, gpu: &Gpu);
}

impl gpu::Destroy for Box<dyn Upscaler> {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
    }
}

/// What the ML patterns load: from `config.toml` (`upscale.model`, `[onnxruntime]`).
#[derive(Clone, Debug)]
pub struct MlSettings {
    pub model: PathBuf,
    /// Explicit ONNX Runtime library, or None for the usual search.
    pub library: Option<PathBuf>,
    pub provider: model::ExecutionProvider,
    pub intra_threads: Option<usize>,
    /// Where the shared-memory pattern keeps its tensors (`upscale.shared_domain`).
    pub shared_domain: shared::DomainChoice,
    /// The in-stream engine's storage precision (`upscale.precision`).
    pub precision: crate::infer::PrecisionChoice,
}

impl MlSettings {
    /// Loads ONNX Runtime (once per process) and says why it cannot be used.
    pub fn runtime(&self) -> Result<model::RuntimeInfo, String> {
        let location = model::locate_runtime(self.library.as_deref()).map_err(|e| e.to_string())?;
        model::init_runtime(&location.path).map_err(|e| e.to_string())
    }
}

/// Builds the upscaler for `pattern`, or says why it cannot run here.
pub fn create(
    gpu: &Gpu,
    pattern: Pattern,
    ml: &MlSettings,
    input: &Image,
    output: &Image,
) -> anyhow::Result<Box<dyn Upscaler>> {
    let upscaler = create_pattern(gpu, pattern, ml, input, output)?;
    debug_assert_eq!(
        upscaler.schedule() != Schedule::Single,
        pattern.caps().host_step,
        "{pattern}'s schedule disagrees with its capabilities"
    );
    Ok(upscaler)
}

fn create_pattern(
    gpu: &Gpu,
    pattern: Pattern,
    ml: &MlSettings,
    input: &Image,
    output: &Image,
) -> anyhow::Result<Box<dyn Upscaler>> {
    match pattern {
        Pattern::Bilinear => Ok(Box::new(bilinear::Bilinear::new(gpu)?)),
        Pattern::CpuRoundtrip => {
            ml.runtime().map_err(anyhow::Error::msg)?;
            Ok(Box::new(roundtrip::CpuRoundtrip::new(
                gpu, ml, input, output,
            )?))
        }
        Pattern::SharedMemory => {
            ml.runtime().map_err(anyhow::Error::msg)?;
            Ok(Box::new(shared::SharedMemory::new(gpu, ml, input, output)?))
        }
        Pattern::InStream => Ok(Box::new(instream::InStream::new(gpu, ml, input, output)?)),
        Pattern::Taau => Ok(Box::new(taau::Taau::new(gpu, input, output)?)),
    }
}

/// Why `pattern` cannot run on `gpu`, for reasons that depend on the device (and, for the
/// shared-memory pattern's domains, on CUDA and the ONNX Runtime build).
pub fn device_support(gpu: &Gpu, pattern: Pattern, ml: &MlSettings) -> Result<(), String> {
    if pattern.caps().domains.is_empty() {
        return Ok(());
    }
    let host = || {
        if gpu.external_memory_host.is_none() {
            Err(format!(
                "{} cannot import host memory (VK_EXT_external_memory_host missing, or disabled by gpu.external_memory_host = false)",
                gpu.info.name
            ))
        } else {
            Ok(())
        }
    };
    let cuda = || {
        shared::cuda::availability(gpu, ml)
            .map(drop)
            .map_err(|why| format!("the cuda domain cannot run here: {why}"))
    };
    match ml.shared_domain {
        shared::DomainChoice::Host => host(),
        shared::DomainChoice::Cuda => cuda(),
        shared::DomainChoice::Auto => host().or_else(|h| cuda().map_err(|c| format!("{h}; {c}"))),
    }
}

/// Whether `pattern` can run with these settings and sizes, checked once at start-up so the UI
/// can grey it out with the reason (ONNX Runtime missing or too old, a bad model, sizes that do
/// not fit the model's scale).
pub fn probe(
    pattern: Pattern,
    ml: &MlSettings,
    render: (u32, u32),
    output: (u32, u32),
) -> Result<(), String> {
    let caps = pattern.caps();
    if !caps.needs_model {
        return Ok(());
    }
    if !caps.onnx_runtime {
        // Our own engine: no ONNX Runtime needed, just a model it can plan for these sizes.
        return instream::plan(&ml.model, render, output)
            .map(drop)
            .map_err(|e| e.to_string());
    }
    ml.runtime()?;
    match model::OrtModel::load(&ml.model, ml.provider, Some(1)) {
        Ok((_, info)) => {
            model::OrtModel::check_sizes(&info, render, output).map_err(|e| e.to_string())
        }
        // A temporal model: both ONNX Runtime patterns feed it.
        Err(model::ModelError::Temporal { .. }) => {
            model::OrtTemporal::load(&ml.model, ml.provider, Some(1)).map_err(|e| e.to_string())?;
            roundtrip::check_temporal_sizes(&ml.model, render, output).map_err(|e| e.to_string())
        }
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::{shared, Pattern};

    #[test]
    fn pattern_names_round_trip() {
        for p in Pattern::ALL {
            assert_eq!(Pattern::parse(p.name()), Some(p));
        }
        assert_eq!(Pattern::parse("bicubic"), None);
    }

    #[test]
    fn capabilities_hang_together() {
        for p in Pattern::ALL {
            let caps = p.caps();
            // ONNX Runtime only ever runs a model.
            assert!(!caps.onnx_runtime || caps.needs_model, "{p}");
            // A model runs either in ONNX Runtime or in the project's own engine, which alone
            // has the precision choice.
            assert_eq!(
                caps.needs_model && !caps.onnx_runtime,
                caps.precisions,
                "{p}"
            );
            // Memory domains are where ONNX Runtime keeps tensors shared with Vulkan, and
            // ordering it with the frame splits the frame.
            assert!(
                caps.domains.is_empty() || (caps.onnx_runtime && caps.host_step),
                "{p}"
            );
            // Running ONNX Runtime is work outside the frame's command buffer.
            assert_eq!(caps.onnx_runtime, caps.host_step, "{p}");
            // History at output resolution is the pattern's own GPU work: no host step.
            assert!(!caps.temporal || !caps.host_step, "{p}");
        }
        assert!(Pattern::Taau.caps().temporal && !Pattern::Taau.caps().needs_model);
        // The baseline needs nothing, so it is always there to fall back on.
        assert!(!Pattern::Bilinear.caps().needs_model);
        for domain in Pattern::SharedMemory.caps().domains {
            assert!(
                shared::DomainChoice::parse(domain).is_some(),
                "upscale.shared_domain names {domain}"
            );
        }
    }
}
