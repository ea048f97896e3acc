//! ONNX Runtime session options for an upscaler model, and the errors loading one gives.

use std::path::Path;

use ort::session::Session;

use super::{runtime, CudaTarget, ExecutionProvider, ModelError, RuntimeInfo};

/// A session for the model at `path` on `ep` (CUDA on `cuda`'s device and stream when given),
/// after checking that the file exists and the runtime has that provider; also the intra-op
/// threads it uses (`intra_threads`, else every core).
pub(super) fn open_session(
    path: &Path,
    ep: ExecutionProvider,
    intra_threads: Option<usize>,
    cuda: Option<CudaTarget>,
) -> Result<(Session, usize), ModelError> {
    if !path.is_file() {
        return Err(ModelError::NotFound(path.to_path_buf()));
    }
    let (env, rt) = runtime::environment()?;
    if !rt.providers.iter().any(|p| p == ep.ort_name()) {
        return Err(provider_unavailable(
            path,
            ep,
            rt,
            format!(
                "the ONNX Runtime library at {} was built without it",
                rt.path.display()
            ),
        ));
    }
    let threads = intra_threads
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1);
    let session = session_builder(env, rt, path, ep, threads, cuda)?
        .commit_from_file(path)
        .map_err(|e| invalid_model(path, e.to_string()))?;
    Ok((session, threads))
}

/// The session options for `path`: `threads` intra-op threads without spinning and, for CUDA,
/// its execution provider (on `cuda`'s device and stream when given), TF32 off and no silent
/// fallback to the CPU.
pub(super) fn session_builder(
    env: &ort::environment::Environment,
    rt: &RuntimeInfo,
    path: &Path,
    ep: ExecutionProvider,
    threads: usize,
    cuda: Option<CudaTarget>,
) -> Result<ort::session::builder::SessionBuilder, ModelError> {
    crate::fault::check("ONNX Runtime session", &path.display().to_string())?;
    // `ort::Error<SessionBuilder>` is not Send, so errors become strings right away.
    let builder = Session::builder(env)
        .map_err(|e| invalid_model(path, e.to_string()))?
        .with_intra_threads(threads)
        .map_err(|e| invalid_model(path, e.to_string()))?
        // Spinning workers would keep CPU cores busy between frames, starving the renderer.
        .with_intra_op_spinning(false)
        .map_err(|e| invalid_model(path, e.to_string()))?;
    if ep != ExecutionProvider::Cuda {
        return Ok(builder);
    }
    // TF32 off: the CUDA path must match the CPU path to 1/255 (and the pattern tests compare
    // them); TF32 convolutions differ from fp32 by up to ~1e-3 relative.
    let mut cuda_ep = ort::ep::CUDA::default().with_tf32(false);
    if let Some(target) = cuda {
        // SAFETY: the caller keeps the stream alive as long as the model (see
        // `OrtModel::load_on_cuda_stream`).
        cuda_ep = unsafe {
            cuda_ep
                .with_device_id(target.device_id)
                .with_compute_stream(target.stream as *mut ())
        };
    }
    // Without error_on_failure ORT would silently fall back to the CPU.
    builder
        .with_execution_providers([cuda_ep.build().error_on_failure()])
        .map_err(|e| provider_unavailable(path, ep, rt, format!("registering it failed: {e}")))
}

/// ORT's messages may end in a newline; the advice follows after a semicolon.
pub(super) fn invalid_model(path: &Path, reason: String) -> ModelError {
    ModelError::Invalid {
        path: path.to_path_buf(),
        reason: reason.trim_end().to_string(),
    }
}

pub(super) fn provider_unavailable(
    path: &Path,
    ep: ExecutionProvider,
    rt: &RuntimeInfo,
    reason: String,
) -> ModelError {
    ModelError::ProviderUnavailable {
        model: path.to_path_buf(),
        provider: ep.ort_name().to_string(),
        available: rt.providers.clone(),
        reason,
    }
}
