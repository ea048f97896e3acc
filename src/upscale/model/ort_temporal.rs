//! A temporal model in ONNX Runtime: one session, run each frame on the five inputs
//! [`TEMPORAL_INPUTS`] either as host tensors (cpu-roundtrip, from `temporal::fill_inputs`) or
//! in place on one packed tensor that Vulkan wrote (shared-memory: the five inputs are channel
//! ranges of the concatenation `temporal_pre.comp` writes, on the host or on a CUDA device).
//! The output is written straight into the caller's buffer: nothing frame-sized is allocated
//! per run.

use std::borrow::Cow;
use std::ffi::c_void;
use std::path::{Path, PathBuf};

use ort::memory::MemoryInfo;
use ort::session::{HasSelectedOutputs, OutputSelector, RunOptions, Session, SessionInputValue};
use ort::value::TensorRefMut;

use super::graph_run::feeds;
use super::memory::{cpu_memory_info, cuda_memory_info, to_shape, wrap_f32_memory};
use super::session::{invalid_model, open_session};
use super::temporal::History;
use super::{
    CudaTarget, ExecutionProvider, ModelError, NamedTensor, OutputBinding, HISTORY_CLAMP_KEY,
    HISTORY_FILTER_KEY, TEMPORAL_INPUTS,
};

/// Channels of the packed input: the five inputs' channels, concatenated.
pub const TEMPORAL_CHANNELS: usize = {
    let mut sum = 0;
    let mut i = 0;
    while i < TEMPORAL_INPUTS.len() {
        sum += TEMPORAL_INPUTS[i].1;
        i += 1;
    }
    sum
};

pub struct OrtTemporal {
    session: Session,
    path: PathBuf,
    names: Vec<String>,
    output_name: String,
    output: Option<OutputBinding>,
    /// Which history the model takes (its `upscale.history_clamp` and `upscale.history_filter`
    /// metadata).
    history: History,
    /// Set when the session runs on a caller's CUDA stream.
    cuda: Option<CudaTarget>,
}

impl OrtTemporal {
    /// Which history the model takes: what the pattern must feed it.
    pub fn history(&self) -> History {
        self.history
    }

    /// Loads `path`, which must be a temporal model (metadata `upscale.kind` = `temporal`,
    /// inputs [`TEMPORAL_INPUTS`], scale 2).
    pub fn load(
        path: &Path,
        ep: ExecutionProvider,
        intra_threads: Option<usize>,
    ) -> Result<Self, ModelError> {
        Self::load_inner(path, ep, intra_threads, None)
    }

    /// Loads `path` for [`OrtTemporal::run_packed_on_device`]: the CUDA execution provider on
    /// device `target.device_id`, every kernel queued on `target.stream`.
    ///
    /// # Safety
    /// `target.stream` must be a live `CUstream` of that device's primary context and outlive
    /// the returned model.
    pub unsafe fn load_on_cuda_stream(path: &Path, target: CudaTarget) -> Result<Self, ModelError> {
        Self::load_inner(path, ExecutionProvider::Cuda, Some(1), Some(target))
    }

    fn load_inner(
        path: &Path,
        ep: ExecutionProvider,
        intra_threads: Option<usize>,
        cuda: Option<CudaTarget>,
    ) -> Result<Self, ModelError> {
        let (session, threads) = open_session(path, ep, intra_threads, cuda)?;
        let (kind, scale, clamp, filter) = {
            let meta = session
                .metadata()
                .map_err(|e| invalid_model(path, format!("cannot read metadata: {e}")))?;
            (
                meta.custom(super::KIND_KEY),
                meta.custom(super::SCALE_KEY),
                meta.custom(HISTORY_CLAMP_KEY),
                meta.custom(HISTORY_FILTER_KEY),
            )
        };
        let history = History::from_metadata(clamp.as_deref(), filter.as_deref())
            .map_err(|why| invalid_model(path, why))?;
        if kind.as_deref() != Some(super::TEMPORAL_KIND) || scale.as_deref() != Some("2") {
            return Err(invalid_model(
                path,
                "a temporal model has metadata upscale.kind = temporal and scale = 2".into(),
            ));
        }
        let names: Vec<String> = session
            .inputs()
            .iter()
            .map(|i| i.name().to_string())
            .collect();
        let want: Vec<&str> = TEMPORAL_INPUTS.iter().map(|(n, _)| *n).collect();
        if names != want || session.outputs().len() != 1 {
            return Err(invalid_model(
                path,
                format!(
                    "a temporal model takes {want:?} and gives one output; this one takes {names:?} \
                     and gives {}",
                    session.outputs().len()
                ),
            ));
        }
        let output_name = session.outputs()[0].name().to_string();
        tracing::info!(model = %path.display(), provider = %ep, threads, "temporal model loaded");
        Ok(Self {
            session,
            path: path.to_path_buf(),
            names,
            output_name,
            output: None,
            history,
            cuda,
        })
    }

    fn run_error(&self, what: &str, e: ort::Error) -> ModelError {
        ModelError::Run(format!("model {}: {what}: {e}", self.path.display()))
    }

    /// Run options writing the output into `output` (`shape` f32 values on `mem`'s device),
    /// kept while the caller passes the same buffer; on a device, queued without a sync.
    ///
    /// # Safety
    /// `output` is live memory of `shape` f32 values that outlives every run given it.
    unsafe fn output_options(
        &mut self,
        mem: MemoryInfo<'static>,
        output: *mut c_void,
        shape: [usize; 4],
        device: bool,
    ) -> Result<&RunOptions<HasSelectedOutputs>, ModelError> {
        let key = (output as usize, shape);
        if self.output.as_ref().map(|b| (b.ptr, b.shape)) != Some(key) {
            self.output = None;
            // SAFETY: as this function's contract.
            let value = unsafe { wrap_f32_memory(mem, output, shape, self.session.allocator()) }
                .map_err(|e| self.run_error("cannot wrap the output buffer", e))?;
            let name = self.output_name.as_str();
            let mut options = RunOptions::new()
                .map_err(|e| self.run_error("cannot create run options", e))?
                .with_outputs(
                    OutputSelector::no_default()
                        .with(name)
                        .preallocate(name, value),
                );
            if device {
                // Queue the kernels and return: the stream's next commands order what follows.
                options
                    .disable_device_sync()
                    .map_err(|e| self.run_error("cannot set run options", e))?;
            }
            self.output = Some(OutputBinding {
                ptr: key.0,
                shape,
                options,
            });
        }
        Ok(&self.output.as_ref().expect("set above").options)
    }

    /// Runs the model on `inputs` (host tensors in [`TEMPORAL_INPUTS`] order) into `output`
    /// ([1, 3, 2h, 2w]).
    pub fn run(&mut self, inputs: &[NamedTensor], output: &mut [f32]) -> Result<(), ModelError> {
        let shape = output_shape(&inputs[0].shape);
        self.check_output(output.len(), shape)?;
        let mem = cpu_memory_info().map_err(|e| self.run_error("cannot describe CPU memory", e))?;
        // SAFETY: `output` holds `shape` values (checked) and is lent for this run; a later run
        // with another buffer rebuilds the options.
        unsafe { self.output_options(mem, output.as_mut_ptr().cast(), shape, false)? };
        let feeds = feeds(&self.path, &self.names, inputs)?;
        let options = &self.output.as_ref().expect("set above").options;
        let outputs = self
            .session
            .run_with_options(feeds, options)
            .map_err(|e| ModelError::Run(format!("model {}: {e}", self.path.display())))?;
        drop(outputs);
        Ok(())
    }

    /// Runs the model in place on `packed`, the five inputs concatenated as one NCHW tensor
    /// [1, [`TEMPORAL_CHANNELS`], h, w] (render size `(w, h)`), into `output` ([1, 3, 2h, 2w]).
    pub fn run_packed(
        &mut self,
        packed: &mut [f32],
        render: (usize, usize),
        output: &mut [f32],
    ) -> Result<(), ModelError> {
        let plane = render.0 * render.1;
        if packed.len() != TEMPORAL_CHANNELS * plane {
            return Err(ModelError::Run(format!(
                "model {}: the packed inputs hold {} values, {TEMPORAL_CHANNELS} planes of {}x{} are {}",
                self.path.display(),
                packed.len(),
                render.0,
                render.1,
                TEMPORAL_CHANNELS * plane
            )));
        }
        let shape = output_shape(&[1, 1, render.1, render.0]);
        self.check_output(output.len(), shape)?;
        // SAFETY: both buffers hold the values their shapes say (checked) and are lent for the
        // run.
        unsafe {
            self.run_views(
                cpu_memory_info,
                packed.as_mut_ptr().cast(),
                render,
                output.as_mut_ptr().cast(),
                false,
            )
        }
    }

    /// [`OrtTemporal::run_packed`] on CUDA device memory: the kernels are queued on the stream
    /// given at load time, and the call returns without waiting for them.
    ///
    /// # Safety
    /// `packed` and `output` are live device allocations of the sizes `run_packed` checks, on
    /// the device given at load time, that outlive the queued work.
    pub unsafe fn run_packed_on_device(
        &mut self,
        packed: u64,
        render: (usize, usize),
        output: u64,
    ) -> Result<(), ModelError> {
        let Some(target) = self.cuda else {
            return Err(ModelError::Run(format!(
                "model {}: a device run needs the model loaded on a CUDA stream",
                self.path.display()
            )));
        };
        let device = target.device_id;
        // SAFETY: as this function's contract.
        unsafe {
            self.run_views(
                move || cuda_memory_info(device),
                packed as *mut c_void,
                render,
                output as *mut c_void,
                true,
            )
        }
    }

    /// One run with each input a view of its channel range of `packed`.
    ///
    /// # Safety
    /// `packed` holds [`TEMPORAL_CHANNELS`] planes of `render` and `output` [1, 3, 2h, 2w]
    /// f32 values, in the memory `mem` describes, both live for the run (and, on a device,
    /// until the queued work is done).
    unsafe fn run_views(
        &mut self,
        mem: impl Fn() -> ort::Result<MemoryInfo<'static>>,
        packed: *mut c_void,
        render: (usize, usize),
        output: *mut c_void,
        device: bool,
    ) -> Result<(), ModelError> {
        let (w, h) = render;
        let out_mem = mem().map_err(|e| self.run_error("cannot describe the memory", e))?;
        // SAFETY: as this function's contract.
        unsafe { self.output_options(out_mem, output, [1, 3, 2 * h, 2 * w], device)? };
        let mut feeds: Vec<(Cow<str>, SessionInputValue)> = Vec::with_capacity(5);
        let mut channel = 0;
        for (name, (_, c)) in self.names.iter().zip(TEMPORAL_INPUTS) {
            let at = mem().map_err(|e| self.run_error("cannot describe the memory", e))?;
            let offset = channel * w * h * std::mem::size_of::<f32>();
            // SAFETY: channels channel..channel + c of `packed` lie inside it (contract).
            let view = unsafe {
                TensorRefMut::<f32>::from_raw(
                    at,
                    packed.cast::<u8>().add(offset).cast(),
                    to_shape([1, c, h, w]),
                )
            }
            .map_err(|e| self.run_error(&format!("cannot wrap input {name}"), e))?;
            feeds.push((Cow::Borrowed(name.as_str()), view.into()));
            channel += c;
        }
        let options = &self.output.as_ref().expect("set by output_options").options;
        let outputs = self.session.run_with_options(feeds, options).map_err(|e| {
            ModelError::Run(format!(
                "model {}: inference failed: {e}",
                self.path.display()
            ))
        })?;
        drop(outputs);
        Ok(())
    }

    fn check_output(&self, len: usize, shape: [usize; 4]) -> Result<(), ModelError> {
        if len == shape.iter().product::<usize>() {
            return Ok(());
        }
        Err(ModelError::Run(format!(
            "model {}: the output buffer holds {len} values, its shape {shape:?} needs {}",
            self.path.display(),
            shape.iter().product::<usize>()
        )))
    }
}

/// The output shape [1, 3, 2h, 2w] for an input of shape [1, C, h, w].
fn output_shape(input: &[usize]) -> [usize; 4] {
    let (h, w) = (input[input.len() - 2], input[input.len() - 1]);
    [1, 3, 2 * h, 2 * w]
}
