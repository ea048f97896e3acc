//! ONNX upscaler models run through ONNX Runtime (`ort`, loaded dynamically).
//!
//! Start-up order: [`locate_runtime`] → [`init_runtime`] (once per process) →
//! [`OrtModel::load`] → [`OrtModel::check_sizes`] → [`OrtModel::run`] per frame.
//! `OrtModel::load` initialises the runtime from `locate_runtime(None)` if the app did not.

mod graph_run;
mod info;
mod inspect;
mod memory;
mod ort_temporal;
mod runtime;
mod session;
pub mod temporal;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use ort::session::{HasSelectedOutputs, OutputSelector, RunOptions, Session};
use ort::value::TensorRefMut;

pub use graph_run::{run_graph, NamedTensor};
pub use info::{
    history_clamp, history_filter, ModelInfo, ScaleSource, HISTORY_CLAMP_COLOR_3X3,
    HISTORY_CLAMP_KEY, HISTORY_FILTER_BILINEAR, HISTORY_FILTER_CATMULL_ROM, HISTORY_FILTER_KEY,
    IMAGE_CHANNELS, KIND_KEY, MAX_SCALE, SCALE_KEY, TEMPORAL_INPUTS, TEMPORAL_KIND,
    TEMPORAL_REFUSAL,
};
use inspect::inspect;
use memory::{cpu_memory_info, cuda_memory_info, to_shape, wrap_f32_memory};
pub use ort_temporal::{OrtTemporal, TEMPORAL_CHANNELS};
pub use runtime::{
    check_runtime_path, init_runtime, locate_runtime, locate_runtime_in, RuntimeInfo,
    RuntimeLocation, RuntimeSource, DEPS_DIR, RUNTIME_ENV_VAR, RUNTIME_FILE_NAME,
};
use session::open_session;

const CUDA_PROVIDER: &str = "CUDAExecutionProvider";
/// Probe size for models whose output shape is only known after a run.
const PROBE_SIZE: u32 = 8;

#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum ModelError {
    #[error(
        "ONNX Runtime library not found: {searched}; run the set-up script to fetch it into {DEPS_DIR}/, \
         or point the runtime path in the config (or {RUNTIME_ENV_VAR}) at libonnxruntime.so"
    )]
    RuntimeMissing { searched: String },
    #[error(
        "cannot load ONNX Runtime from {}: {reason}; this build needs ONNX Runtime 1.30 or newer \
         (run the set-up script, or fix the runtime path in the config / {RUNTIME_ENV_VAR})", path.display()
    )]
    RuntimeLoad { path: PathBuf, reason: String },
    #[error("model file {} does not exist; check the model path in the config", .0.display())]
    NotFound(PathBuf),
    #[error(
        "model {}: ONNX Runtime cannot load it: {reason}; check that the file is a complete .onnx model made of standard ONNX operators", path.display()
    )]
    Invalid { path: PathBuf, reason: String },
    #[error(
        "model {}: {found}; the upscaler needs NCHW float32 with {IMAGE_CHANNELS} channels in and out \
         (one input, one output)", path.display()
    )]
    NotImage { path: PathBuf, found: String },
    #[error("model {}: {TEMPORAL_REFUSAL}", path.display())]
    Temporal { path: PathBuf },
    #[error("model {}: cannot determine the upscale factor: {reason}", path.display())]
    Scale { path: PathBuf, reason: String },
    #[error(
        "model {} upscales x{scale}, so render size {}x{} gives {}x{}, but the output size is {}x{}; \
         change `render.output_width`/`render.output_height` or `render.scale` so that render size x {scale} = output size",
        model.display(), render.0, render.1, render.0 * scale, render.1 * scale, output.0, output.1
    )]
    SizeMismatch {
        model: PathBuf,
        scale: u32,
        render: (u32, u32),
        output: (u32, u32),
    },
    #[error(
        "model {}: execution provider {provider} is not available ({reason}); available: {}; \
         set the execution provider to `cpu` in the config, or install an ONNX Runtime build that has {provider}",
        model.display(), available.join(", ")
    )]
    ProviderUnavailable {
        model: PathBuf,
        provider: String,
        available: Vec<String>,
        reason: String,
    },
    #[error("{0}")]
    Run(String),
    #[error(transparent)]
    Fault(#[from] crate::fault::Fault),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecutionProvider {
    #[default]
    Cpu,
    Cuda,
}

impl ExecutionProvider {
    pub const ALLOWED: &'static str = "cpu, cuda";

    /// ONNX Runtime's name, as listed by `GetAvailableProviders`.
    pub fn ort_name(self) -> &'static str {
        match self {
            Self::Cpu => "CPUExecutionProvider",
            Self::Cuda => CUDA_PROVIDER,
        }
    }
}

impl fmt::Display for ExecutionProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cpu => "cpu",
            Self::Cuda => "cuda",
        })
    }
}

#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[error("unknown execution provider {0:?}; allowed values: {allowed}", allowed = ExecutionProvider::ALLOWED)]
pub struct UnknownProvider(pub String);

impl FromStr for ExecutionProvider {
    type Err = UnknownProvider;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(Self::Cpu),
            "cuda" => Ok(Self::Cuda),
            _ => Err(UnknownProvider(s.to_string())),
        }
    }
}

/// The preallocated-output run options, reused while the caller keeps passing the same
/// output buffer (the usual case: one persistent staging buffer per frame size).
struct OutputBinding {
    ptr: usize,
    shape: [usize; 4],
    options: RunOptions<HasSelectedOutputs>,
}

/// ONNX Runtime's CUDA execution provider on a stream the caller owns (the CUDA domain).
#[derive(Debug, Clone, Copy)]
pub struct CudaTarget {
    /// CUDA device ordinal (the device whose UUID matched the Vulkan device's).
    pub device_id: i32,
    /// The `CUstream` every kernel of a run is queued on, as an address (a plain integer keeps
    /// the model `Send`; the stream is only ever used by the thread that runs the model).
    pub stream: usize,
}

pub struct OrtModel {
    session: Session,
    info: ModelInfo,
    output: Option<OutputBinding>,
    /// Set when the session runs on a caller's CUDA stream ([`OrtModel::load_on_cuda_stream`]).
    cuda: Option<CudaTarget>,
}

impl fmt::Debug for OrtModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OrtModel")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl OrtModel {
    /// Loads and validates an upscaler model. `intra_threads` defaults to
    /// `std::thread::available_parallelism()`.
    pub fn load(
        path: &Path,
        ep: ExecutionProvider,
        intra_threads: Option<usize>,
    ) -> Result<(Self, ModelInfo), ModelError> {
        Self::load_inner(path, ep, intra_threads, None)
    }

    /// Loads a model for [`OrtModel::run_on_device`]: the CUDA execution provider on device
    /// `target.device_id`, every kernel queued on `target.stream`.
    ///
    /// # Safety
    /// `target.stream` must be a live `CUstream` of that device's primary context and outlive
    /// the returned model.
    pub unsafe fn load_on_cuda_stream(
        path: &Path,
        target: CudaTarget,
    ) -> Result<(Self, ModelInfo), ModelError> {
        Self::load_inner(path, ExecutionProvider::Cuda, Some(1), Some(target))
    }

    fn load_inner(
        path: &Path,
        ep: ExecutionProvider,
        intra_threads: Option<usize>,
        cuda: Option<CudaTarget>,
    ) -> Result<(Self, ModelInfo), ModelError> {
        let (mut session, threads) = open_session(path, ep, intra_threads, cuda)?;

        let info = inspect(path, &mut session)?;
        tracing::info!(
            model = %path.display(), scale = info.scale, scale_source = ?info.scale_source,
            provider = %ep, threads, "upscaler model loaded"
        );
        let model = Self {
            session,
            info: info.clone(),
            output: None,
            cuda,
        };
        Ok((model, info))
    }

    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// Checks the configured sizes against the model: `render × scale == output`, and a
    /// fixed-size model input must equal the render size.
    pub fn check_sizes(
        info: &ModelInfo,
        render: (u32, u32),
        output: (u32, u32),
    ) -> Result<(), ModelError> {
        let scaled = (
            render.0.checked_mul(info.scale),
            render.1.checked_mul(info.scale),
        );
        if scaled != (Some(output.0), Some(output.1)) {
            return Err(ModelError::SizeMismatch {
                model: info.path.clone(),
                scale: info.scale,
                render,
                output,
            });
        }
        let fixed = info::both(info.input_height, info.input_width);
        if let Some((h, w)) = fixed.filter(|&(h, w)| (w, h) != render) {
            return Err(ModelError::NotImage {
                path: info.path.clone(),
                found: format!(
                    "input '{}' has a fixed size of {w}x{h} but the render size is {}x{}; \
                     set `render.output_width`/`render.output_height` and `render.scale` to match",
                    info.input_name, render.0, render.1
                ),
            });
        }
        Ok(())
    }

    /// Runs the model on `input` (`in_shape` = [N, C, H, W]) writing into `output`
    /// (`out_shape` = [N, C, H×scale, W×scale]). Both buffers are used in place: ORT reads
    /// `input` through a tensor view and writes the result directly into `output`.
    ///
    /// Frame-sized buffers are never allocated here. What remains per call is small and
    /// inside ort/ORT: the input `OrtValue` + `OrtMemoryInfo` wrappers and ORT's
    /// intermediate activations (served from its arena after the first frames). The
    /// output wrapper is rebuilt only when the output buffer's address or shape changes.
    pub fn run(
        &mut self,
        input: &mut [f32],
        in_shape: [usize; 4],
        output: &mut [f32],
        out_shape: [usize; 4],
    ) -> Result<(), ModelError> {
        self.check_run_shapes(input.len(), in_shape, output.len(), out_shape)?;
        let path = self.info.path.clone();
        let run_err = move |what: &str, e: ort::Error| {
            ModelError::Run(format!("model {}: {what}: {e}", path.display()))
        };

        let key = (output.as_mut_ptr() as usize, out_shape);
        if self.output.as_ref().map(|b| (b.ptr, b.shape)) != Some(key) {
            self.output = None;
            // SAFETY: `output` is a live CPU buffer of exactly `out_shape` f32 elements
            // (checked above). The wrapper is only used by a run that is passed the same
            // address and shape again, i.e. while the caller lends us that buffer.
            let mem = cpu_memory_info().map_err(|e| run_err("cannot describe CPU memory", e))?;
            let value = unsafe {
                wrap_f32_memory(
                    mem,
                    output.as_mut_ptr().cast(),
                    out_shape,
                    self.session.allocator(),
                )
            }
            .map_err(|e| run_err("cannot wrap the output buffer", e))?;
            let name = self.info.output_name.as_str();
            let options = RunOptions::new()
                .map_err(|e| run_err("cannot create run options", e))?
                .with_outputs(
                    OutputSelector::no_default()
                        .with(name)
                        .preallocate(name, value),
                );
            self.output = Some(OutputBinding {
                ptr: key.0,
                shape: out_shape,
                options,
            });
        }
        let options = &self.output.as_ref().expect("set above").options;

        let mem = cpu_memory_info().map_err(|e| run_err("cannot describe CPU memory", e))?;
        // SAFETY: `input` holds exactly `in_shape` elements (checked above) and outlives
        // `input_view`, which is dropped at the end of this call.
        let input_view = unsafe {
            TensorRefMut::<f32>::from_raw(mem, input.as_mut_ptr().cast(), to_shape(in_shape))
        }
        .map_err(|e| run_err("cannot wrap the input buffer", e))?;
        let outputs = self
            .session
            .run_with_options(ort::inputs![input_view], options)
            .map_err(|e| run_err("inference failed", e))?;
        drop(outputs);
        Ok(())
    }

    /// Runs the model on CUDA device memory: `input` and `output` are device pointers of
    /// `in_shape` / `out_shape` f32 tensors (NCHW). ORT reads and writes them in place and
    /// queues every kernel on the model's stream without waiting for it: the caller orders the
    /// run with work queued on that stream before and after this call.
    ///
    /// # Safety
    /// Both pointers are valid device memory of the model's CUDA device for at least the
    /// shapes' sizes, until the work queued on the stream has completed.
    pub unsafe fn run_on_device(
        &mut self,
        input: u64,
        in_shape: [usize; 4],
        output: u64,
        out_shape: [usize; 4],
    ) -> Result<(), ModelError> {
        let elements = |s: [usize; 4]| s.iter().product::<usize>();
        self.check_run_shapes(elements(in_shape), in_shape, elements(out_shape), out_shape)?;
        let path = self.info.path.clone();
        let run_err = move |what: &str, e: ort::Error| {
            ModelError::Run(format!("model {}: {what}: {e}", path.display()))
        };
        let Some(target) = self.cuda else {
            return Err(ModelError::Run(format!(
                "model {}: run_on_device needs a model loaded with load_on_cuda_stream",
                self.info.path.display()
            )));
        };
        let mem = || cuda_memory_info(target.device_id);
        let key = (output as usize, out_shape);
        if self.output.as_ref().map(|b| (b.ptr, b.shape)) != Some(key) {
            self.output = None;
            let info = mem().map_err(|e| run_err("cannot describe CUDA memory", e))?;
            // SAFETY: the caller vouches for the device pointer and its size.
            let options = unsafe { self.cuda_output_options(info, output, out_shape) }
                .map_err(|(what, e)| run_err(what, e))?;
            self.output = Some(OutputBinding {
                ptr: key.0,
                shape: out_shape,
                options,
            });
        }
        let options = &self.output.as_ref().expect("set above").options;
        let info = mem().map_err(|e| run_err("cannot describe CUDA memory", e))?;
        // SAFETY: the caller vouches for the device pointer; the view is dropped at the end.
        let input_view = unsafe {
            TensorRefMut::<f32>::from_raw(info, input as *mut std::ffi::c_void, to_shape(in_shape))
        }
        .map_err(|e| run_err("cannot wrap the input tensor", e))?;
        let outputs = self
            .session
            .run_with_options(ort::inputs![input_view], options)
            .map_err(|e| run_err("inference failed", e))?;
        drop(outputs);
        Ok(())
    }

    /// Run options that write the model's output straight into the device memory at `output`
    /// and queue the kernels without a device sync (the stream's next commands order what
    /// follows). Errors say which step failed.
    ///
    /// # Safety
    /// `output` is a live device allocation of `out_shape` f32 values on `info`'s device, and
    /// outlives the returned options.
    unsafe fn cuda_output_options(
        &self,
        info: ort::memory::MemoryInfo<'static>,
        output: u64,
        out_shape: [usize; 4],
    ) -> Result<RunOptions<HasSelectedOutputs>, (&'static str, ort::Error)> {
        // SAFETY: as this function's contract.
        let value = unsafe {
            wrap_f32_memory(
                info,
                output as *mut std::ffi::c_void,
                out_shape,
                self.session.allocator(),
            )
        }
        .map_err(|e| ("cannot wrap the output tensor", e))?;
        let name = self.info.output_name.as_str();
        let mut options = RunOptions::new()
            .map_err(|e| ("cannot create run options", e))?
            .with_outputs(
                OutputSelector::no_default()
                    .with(name)
                    .preallocate(name, value),
            );
        // Queue the kernels and return: the stream's next commands (the semaphore signal)
        // order everything after the run on the GPU, with no host wait.
        options
            .disable_device_sync()
            .map_err(|e| ("cannot set run options", e))?;
        Ok(options)
    }

    fn check_run_shapes(
        &self,
        in_len: usize,
        in_shape: [usize; 4],
        out_len: usize,
        out_shape: [usize; 4],
    ) -> Result<(), ModelError> {
        let info = &self.info;
        let s = info.scale as usize;
        let c = info.channels as usize;
        let expected_out = [in_shape[0], c, in_shape[2] * s, in_shape[3] * s];
        let problem = if in_shape[1] != c || in_shape.contains(&0) {
            Some(format!(
                "input shape {in_shape:?} must be [N, {c}, H, W] with non-zero sizes"
            ))
        } else if out_shape != expected_out {
            Some(format!(
                "output shape {out_shape:?} must be {expected_out:?} for input {in_shape:?} at x{s}"
            ))
        } else if in_len != in_shape.iter().product::<usize>() {
            Some(format!(
                "input buffer has {in_len} floats but shape {in_shape:?} needs {}",
                in_shape.iter().product::<usize>()
            ))
        } else if out_len != out_shape.iter().product::<usize>() {
            Some(format!(
                "output buffer has {out_len} floats but shape {out_shape:?} needs {}",
                out_shape.iter().product::<usize>()
            ))
        } else {
            None
        };
        match problem {
            Some(p) => Err(ModelError::Run(format!(
                "model {}: {p}",
                info.path.display()
            ))),
            None => Ok(()),
        }
    }
}
