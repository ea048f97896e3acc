//! The CUDA domain: the tensors live in Vulkan device memory exported as opaque fds and
//! imported by CUDA; ONNX Runtime's CUDA execution provider runs the model on them in place, on
//! a CUDA stream we own; a timeline semaphore exported by Vulkan and imported by CUDA orders the
//! two APIs on the GPU. The host only queues work: no frame data crosses the bus, no host wait.
//!
//! One frame, shared semaphore value `k` before it:
//! ```text
//! Vulkan A: scene, image_to_tensor ──signal k+1──▶ CUDA stream: wait k+1, ORT run,
//!           signal k+2 ──▶ Vulkan B: wait k+2, tensor_to_image, composite, UI
//! ```
//! The CUDA driver is loaded at run time (`cudarc`, dynamic loading): where it is absent the
//! program starts normally and [`availability`] says why this domain cannot be used.

use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use ash::vk;
use cudarc::driver::{result, sys, CudaContext, CudaStream, DriverError};

use super::{DeviceSync, Domain, SharedModel};
use crate::gpu::device::hex;
use crate::gpu::export::{self, ExportBuffer, ExportTimeline};
use crate::gpu::frame::FRAMES_IN_FLIGHT;
use crate::gpu::guard::Destroy;
use crate::gpu::Gpu;
use crate::upscale::model::temporal::History;
use crate::upscale::model::{CudaTarget, ExecutionProvider, OrtModel, OrtTemporal};
use crate::upscale::{FrameSplit, HostTimes, MlSettings, Schedule};

const USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::STORAGE_BUFFER;
/// How long a failure path waits on the host for Vulkan's half before signalling for CUDA.
const FALLBACK_WAIT_NS: u64 = 5_000_000_000;

/// The CUDA device that is the same GPU as the Vulkan device, or every reason this domain cannot
/// run here (Vulkan export support, the CUDA driver, ONNX Runtime's CUDA execution provider).
pub fn availability(gpu: &Gpu, ml: &MlSettings) -> Result<i32, String> {
    let mut missing = Vec::new();
    if let Err(e) = export::buffer_export_support(gpu, USAGE) {
        missing.push(e.to_string());
    }
    if let Err(e) = export::timeline_export_support(gpu) {
        missing.push(e.to_string());
    }
    let device = cuda_device_for(&gpu.info.device_uuid, &gpu.info.name);
    if let Err(e) = &device {
        missing.push(e.clone());
    }
    match ml.runtime() {
        Ok(rt) if rt.providers.iter().any(|p| p == ExecutionProvider::Cuda.ort_name()) => {}
        Ok(rt) => missing.push(format!(
            "ONNX Runtime {} has no CUDAExecutionProvider (has {}; `make run ORT=gpu` installs the GPU build)",
            rt.version,
            rt.providers.join(", ")
        )),
        Err(e) => missing.push(e),
    }
    match (missing.is_empty(), device) {
        (true, Ok(ordinal)) => Ok(ordinal),
        _ => Err(missing.join("; ")),
    }
}

/// The ordinal of the CUDA device whose UUID is `uuid` (hex, as `DeviceInfo::device_uuid`).
fn cuda_device_for(uuid: &str, vulkan_name: &str) -> Result<i32, String> {
    // SAFETY: only tries to open the library; nothing is called through it.
    if !unsafe { sys::is_culib_present() } {
        return Err("no CUDA driver (libcuda.so.1 not found)".into());
    }
    result::init().map_err(|e| format!("the CUDA driver does not start (cuInit: {e})"))?;
    let count = result::device::get_count().map_err(|e| format!("cuDeviceGetCount: {e}"))?;
    let mut seen = Vec::new();
    for ordinal in 0..count {
        let device = result::device::get(ordinal).map_err(|e| format!("cuDeviceGet: {e}"))?;
        let id = result::device::get_uuid(device).map_err(|e| format!("cuDeviceGetUuid: {e}"))?;
        let id = hex(&id.bytes.map(|b| b as u8));
        if id == uuid {
            return Ok(ordinal);
        }
        seen.push(id);
    }
    Err(format!(
        "no CUDA device is the Vulkan device {vulkan_name} (UUID {uuid}; CUDA has [{}])",
        seen.join(", ")
    ))
}

/// A Vulkan buffer exported to CUDA: the Vulkan side, the imported memory, its device pointer.
struct SharedTensor {
    vk: ExportBuffer,
    external: sys::CUexternalMemory,
    ptr: sys::CUdeviceptr,
}

impl SharedTensor {
    /// The CUDA context must be current.
    fn new(gpu: &Gpu, name: &str, bytes: u64) -> anyhow::Result<Self> {
        let vk = ExportBuffer::new(gpu, name, bytes, USAGE)
            .with_context(|| format!("allocating the exportable {name}"))?
            .guard(gpu);
        let (external, ptr) = crate::fault::check("CUDA memory import", name)
            .map_err(anyhow::Error::from)
            .and_then(|()| import_memory(&vk, gpu))
            .with_context(|| format!("importing the {name} into CUDA"))?;
        Ok(Self {
            vk: vk.keep(),
            external,
            ptr,
        })
    }

    /// The CUDA context must be current and no queued CUDA work may still use the memory.
    fn destroy(self, gpu: &Gpu) {
        unsafe {
            let _ = result::memory_free(self.ptr);
            let _ = result::external_memory::destroy_external_memory(self.external);
        }
        self.vk.destroy(gpu);
    }
}

fn import_memory(
    buffer: &ExportBuffer,
    gpu: &Gpu,
) -> anyhow::Result<(sys::CUexternalMemory, sys::CUdeviceptr)> {
    let fd: OwnedFd = buffer.export_fd(gpu)?;
    // (Built field by field: the handle-type enum has no zero value, so `zeroed` is invalid.)
    let desc = sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
        type_: sys::CUexternalMemoryHandleType::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
        handle: sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC_st__bindgen_ty_1 { fd: fd.as_raw_fd() },
        size: buffer.allocation_size,
        flags: if buffer.dedicated {
            sys::CUDA_EXTERNAL_MEMORY_DEDICATED
        } else {
            0
        },
        reserved: [0; 16],
    };
    let mut external = std::ptr::null_mut();
    // SAFETY: `desc` describes a live opaque fd of `allocation_size` bytes.
    unsafe { sys::cuImportExternalMemory(&mut external, &desc) }
        .result()
        .map_err(cuda("cuImportExternalMemory"))?;
    // CUDA owns the fd only after a successful import (on failure the `?` drops `fd`, which closes it).
    let _ = fd.into_raw_fd();
    let external = ExternalMemory(external).guard(gpu);
    let map = sys::CUDA_EXTERNAL_MEMORY_BUFFER_DESC {
        offset: 0,
        size: buffer.size,
        flags: 0,
        reserved: [0; 16],
    };
    let mut ptr: sys::CUdeviceptr = 0;
    // SAFETY: maps the first `size` bytes of the imported object.
    unsafe { sys::cuExternalMemoryGetMappedBuffer(&mut ptr, external.0, &map) }
        .result()
        .map_err(cuda("cuExternalMemoryGetMappedBuffer"))?;
    Ok((external.keep().0, ptr))
}

/// Imported CUDA memory not yet mapped into a [`SharedTensor`] (the CUDA context is current).
struct ExternalMemory(sys::CUexternalMemory);

impl Destroy for ExternalMemory {
    fn destroy_with(self, _gpu: &Gpu) {
        unsafe {
            let _ = result::external_memory::destroy_external_memory(self.0);
        }
    }
}

/// CUDA events around one frame's ORT run: the `inference` GPU time.
#[derive(Clone, Copy)]
struct Timing {
    start: sys::CUevent,
    end: sys::CUevent,
    recorded: bool,
}

pub struct CudaDomain {
    /// Declared first: the session must go before the stream it queues on.
    model: Option<SharedModel>,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    input: Option<SharedTensor>,
    output: Option<SharedTensor>,
    semaphore: ExportTimeline,
    imported: sys::CUexternalSemaphore,
    /// The shared semaphore's last value handed out (A signals +1, CUDA +2).
    value: u64,
    /// The values of the frame being built: (A signals, B waits).
    pending: Option<(u64, u64)>,
    timing: [Timing; FRAMES_IN_FLIGHT],
    in_shape: [usize; 4],
    out_shape: [usize; 4],
    label: String,
}

impl CudaDomain {
    pub fn new(
        gpu: &Gpu,
        ml: &MlSettings,
        ordinal: i32,
        render: vk::Extent2D,
        output: vk::Extent2D,
    ) -> anyhow::Result<Self> {
        let ctx = CudaContext::new(ordinal as usize).map_err(cuda("creating the CUDA context"))?;
        let stream = ctx.new_stream().map_err(cuda("creating the CUDA stream"))?;
        let in_shape = [1, 3, render.height as usize, render.width as usize];
        let out_shape = [1, 3, output.height as usize, output.width as usize];
        let semaphore = ExportTimeline::new(gpu, "shared cuda timeline")?.guard(gpu);
        // Nothing fails between the import and the domain that owns it.
        let imported = import_semaphore(&semaphore, gpu)?;
        let mut domain = Self {
            model: None,
            ctx,
            stream,
            input: None,
            output: None,
            semaphore: semaphore.keep(),
            imported,
            value: 0,
            pending: None,
            timing: [Timing {
                start: std::ptr::null_mut(),
                end: std::ptr::null_mut(),
                recorded: false,
            }; FRAMES_IN_FLIGHT],
            in_shape,
            out_shape,
            label: String::new(),
        }
        .guard(gpu);
        // Built in place: from here on the domain's own destroy releases whatever was made.
        domain.build(gpu, ml, ordinal, render, output)?;
        domain.label = format!("cuda (CUDA device {ordinal}, the same GPU by UUID)");
        Ok(domain.keep())
    }

    /// The tensors, the timing events and the model on this domain's stream.
    fn build(
        &mut self,
        gpu: &Gpu,
        ml: &MlSettings,
        ordinal: i32,
        render: vk::Extent2D,
        output: vk::Extent2D,
    ) -> anyhow::Result<()> {
        let target = CudaTarget {
            device_id: ordinal,
            stream: self.stream.cu_stream() as usize,
        };
        // SAFETY (both loads): the stream is owned by this domain and dropped after the model.
        let model = SharedModel::load(
            ml,
            render,
            output,
            || unsafe { OrtModel::load_on_cuda_stream(&ml.model, target) },
            || unsafe { OrtTemporal::load_on_cuda_stream(&ml.model, target) },
        )?;
        // A temporal model's input tensor holds its five inputs' channels.
        self.in_shape[1] = model.input_channels();
        let bytes = |shape: [usize; 4]| (shape.iter().product::<usize>() * 4) as u64;
        self.input = Some(SharedTensor::new(
            gpu,
            "cuda input tensor",
            bytes(self.in_shape),
        )?);
        self.output = Some(SharedTensor::new(
            gpu,
            "cuda output tensor",
            bytes(self.out_shape),
        )?);
        for t in &mut self.timing {
            t.start = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                .map_err(cuda("creating a CUDA event"))?;
            t.end = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                .map_err(cuda("creating a CUDA event"))?;
        }
        self.model = Some(model);
        Ok(())
    }

    /// Queues the wait for A, the run and the signal for B; Err when the run could not be
    /// queued (the signal is queued anyway, or given from the host).
    fn queue_frame(&mut self, slot: usize, wait: u64, signal: u64) -> anyhow::Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(cuda("binding the context"))?;
        let stream = self.stream.cu_stream();
        // SAFETY: zeroed C structs with the fence value set, as cuWait/SignalExternalSemaphores
        // expect for timeline semaphores.
        let mut wait_params: sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS =
            unsafe { std::mem::zeroed() };
        wait_params.params.fence.value = wait;
        unsafe { sys::cuWaitExternalSemaphoresAsync(&self.imported, &wait_params, 1, stream) }
            .result()
            .map_err(cuda("cuWaitExternalSemaphoresAsync"))?;
        let timing = &mut self.timing[slot];
        let ran = (|| -> anyhow::Result<()> {
            unsafe { result::event::record(timing.start, stream) }
                .map_err(cuda("cuEventRecord"))?;
            let (input, output) = (self.input.as_ref().unwrap(), self.output.as_ref().unwrap());
            // SAFETY: both tensors are mapped device memory of the shapes' sizes, alive until
            // this domain is destroyed (after the frames that use them completed).
            unsafe {
                self.model.as_mut().unwrap().run_device(
                    input.ptr,
                    self.in_shape,
                    output.ptr,
                    self.out_shape,
                )?
            };
            unsafe { result::event::record(timing.end, stream) }.map_err(cuda("cuEventRecord"))?;
            timing.recorded = true;
            Ok(())
        })();
        if ran.is_err() {
            timing.recorded = false;
        }
        let mut signal_params: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS =
            unsafe { std::mem::zeroed() };
        signal_params.params.fence.value = signal;
        unsafe { sys::cuSignalExternalSemaphoresAsync(&self.imported, &signal_params, 1, stream) }
            .result()
            .map_err(cuda("cuSignalExternalSemaphoresAsync"))?;
        ran
    }
}

fn import_semaphore(
    semaphore: &ExportTimeline,
    gpu: &Gpu,
) -> anyhow::Result<sys::CUexternalSemaphore> {
    crate::fault::check("CUDA semaphore import", "shared cuda timeline")?;
    let fd = semaphore.export_fd(gpu)?;
    let desc = sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
        type_:
            sys::CUexternalSemaphoreHandleType::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD,
        handle: sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC_st__bindgen_ty_1 {
            fd: fd.as_raw_fd(),
        },
        flags: 0,
        reserved: [0; 16],
    };
    let mut imported = std::ptr::null_mut();
    // SAFETY: `desc` holds a live opaque fd of a timeline semaphore.
    unsafe { sys::cuImportExternalSemaphore(&mut imported, &desc) }
        .result()
        .map_err(cuda(
            "importing the timeline semaphore into CUDA (cuImportExternalSemaphore)",
        ))?;
    // CUDA owns the fd only after a successful import (on failure the `?` drops `fd`, which closes it).
    let _ = fd.into_raw_fd();
    Ok(imported)
}

/// A domain under construction: its own destroy skips what was not made yet.
impl Destroy for CudaDomain {
    fn destroy_with(self, gpu: &Gpu) {
        Domain::destroy(Box::new(self), gpu);
    }
}

fn cuda(what: &'static str) -> impl Fn(DriverError) -> anyhow::Error {
    move |e| anyhow::anyhow!("{what}: {e}")
}

impl Domain for CudaDomain {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn label(&self) -> String {
        self.label.clone()
    }

    fn input(&self) -> vk::Buffer {
        self.input.as_ref().unwrap().vk.raw
    }

    fn temporal(&self) -> Option<History> {
        self.model.as_ref().and_then(SharedModel::history)
    }

    fn output(&self) -> vk::Buffer {
        self.output.as_ref().unwrap().vk.raw
    }

    fn destroy(self: Box<Self>, gpu: &Gpu) {
        let mut this = *self;
        let _ = this.ctx.bind_to_thread();
        let _ = this.stream.synchronize();
        drop(this.model.take());
        unsafe {
            for t in &this.timing {
                for e in [t.start, t.end] {
                    if !e.is_null() {
                        let _ = result::event::destroy(e);
                    }
                }
            }
            let _ = sys::cuDestroyExternalSemaphore(this.imported);
        }
        if let Some(t) = this.input.take() {
            t.destroy(gpu);
        }
        if let Some(t) = this.output.take() {
            t.destroy(gpu);
        }
        this.semaphore.destroy(gpu);
    }
}

/// ONNX Runtime's CUDA EP on a CUDA stream, ordered with the frame by the shared timeline
/// semaphore: no host step.
impl FrameSplit for CudaDomain {
    fn schedule(&self) -> Schedule {
        Schedule::DeviceSignal
    }

    fn device_sync(&mut self) -> Option<DeviceSync> {
        let (signal, wait) = (self.value + 1, self.value + 2);
        self.value += 2;
        self.pending = Some((signal, wait));
        Some(DeviceSync {
            semaphore: self.semaphore.raw,
            signal,
            wait,
        })
    }

    fn run_host(&mut self, _gpu: &Gpu, _slot: usize, _times: &mut HostTimes) -> anyhow::Result<()> {
        anyhow::bail!("the cuda domain runs on the GPU (run_device), not on the host")
    }

    fn run_device(&mut self, gpu: &Gpu, slot: usize, times: &mut HostTimes) -> anyhow::Result<()> {
        let (wait, signal) = self
            .pending
            .take()
            .context("run_device without device_sync")?;
        let start = Instant::now();
        let queued = self.queue_frame(slot, wait, signal);
        times.push(("enqueue", start.elapsed().as_secs_f64() * 1e3));
        if let Err(e) = &queued {
            // B waits for `signal` on the GPU. When CUDA could not be asked to give it (it
            // never saw the frame), give it from the host once A is done.
            if self.semaphore.value(gpu).is_ok_and(|v| v < signal)
                && self.semaphore.wait(gpu, wait, FALLBACK_WAIT_NS).is_ok()
            {
                let stream_done = unsafe { sys::cuStreamSynchronize(self.stream.cu_stream()) };
                if self.semaphore.value(gpu).is_ok_and(|v| v < signal) {
                    let _ = self.semaphore.signal(gpu, signal);
                }
                tracing::warn!("cuda domain: {e:#} (stream: {stream_done:?})");
            }
        }
        queued
    }

    fn collect_gpu(&mut self, slot: usize, spans: &mut Vec<(&'static str, f64)>) {
        let t = &mut self.timing[slot];
        if !std::mem::take(&mut t.recorded) {
            return;
        }
        // The slot's fence passed: B waited for CUDA's signal, queued after the end event.
        if let Ok(ms) = unsafe { result::event::elapsed(t.start, t.end) } {
            spans.push(("inference", ms as f64));
        }
    }
}
