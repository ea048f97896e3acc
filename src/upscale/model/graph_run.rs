//! One ONNX Runtime inference of any graph on host tensors, on the CPU: the reference the
//! in-stream engine is compared with for graphs that are not single-image upscalers (the
//! temporal model's five inputs), and `run-model --engine ort`.

use std::borrow::Cow;
use std::path::Path;

use ort::session::SessionInputValue;
use ort::value::TensorRef;

use super::session::{invalid_model, session_builder};
use super::{runtime, ExecutionProvider, ModelError};

/// A named float tensor on the host.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// Runs `path` once on the CPU with `inputs`, given in the graph's input order (their names
/// are the graph's, whatever the tensors are called), and returns every output in the graph's
/// order.
pub fn run_graph(path: &Path, inputs: &[NamedTensor]) -> Result<Vec<NamedTensor>, ModelError> {
    if !path.is_file() {
        return Err(ModelError::NotFound(path.to_path_buf()));
    }
    let (env, rt) = runtime::environment()?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut session = session_builder(env, rt, path, ExecutionProvider::Cpu, threads, None)?
        .commit_from_file(path)
        .map_err(|e| invalid_model(path, e.to_string()))?;
    let names: Vec<String> = session
        .inputs()
        .iter()
        .map(|i| i.name().to_string())
        .collect();
    if names.len() != inputs.len() {
        return Err(ModelError::Run(format!(
            "model {}: the graph has {} input(s) {names:?}, {} given",
            path.display(),
            names.len(),
            inputs.len()
        )));
    }
    let run_err = |e: ort::Error| ModelError::Run(format!("model {}: {e}", path.display()));
    let output_names: Vec<String> = session
        .outputs()
        .iter()
        .map(|o| o.name().to_string())
        .collect();
    let outputs = session.run(feeds(path, &names, inputs)?).map_err(run_err)?;
    output_names
        .iter()
        .map(|name| {
            let (shape, data) = outputs[name.as_str()]
                .try_extract_tensor::<f32>()
                .map_err(run_err)?;
            Ok(NamedTensor {
                name: name.clone(),
                shape: shape.iter().map(|&d| d as usize).collect(),
                data: data.to_vec(),
            })
        })
        .collect()
}

/// Borrowed views of `inputs` named `names` (the graph's input names, in order).
fn feeds<'a>(
    path: &Path,
    names: &'a [String],
    inputs: &'a [NamedTensor],
) -> Result<Vec<(Cow<'a, str>, SessionInputValue<'a>)>, ModelError> {
    let run_err = |e: ort::Error| ModelError::Run(format!("model {}: {e}", path.display()));
    names
        .iter()
        .zip(inputs)
        .map(|(name, t)| {
            let view = TensorRef::from_array_view((t.shape.clone(), t.data.as_slice()))
                .map_err(run_err)?;
            Ok((Cow::Borrowed(name.as_str()), view.into()))
        })
        .collect()
}

/// A temporal model in ONNX Runtime (the cpu-roundtrip pattern's): one session, run on the
/// five host tensors `temporal::fill_inputs` writes each frame.
pub struct OrtTemporal {
    session: ort::session::Session,
    path: std::path::PathBuf,
    names: Vec<String>,
}

impl OrtTemporal {
    /// Loads `path`, which must be a temporal model (metadata `upscale.kind` = `temporal`,
    /// inputs [`TEMPORAL_INPUTS`](super::TEMPORAL_INPUTS), scale 2).
    pub fn load(
        path: &Path,
        ep: ExecutionProvider,
        intra_threads: Option<usize>,
    ) -> Result<Self, ModelError> {
        if !path.is_file() {
            return Err(ModelError::NotFound(path.to_path_buf()));
        }
        let (env, rt) = runtime::environment()?;
        let threads = intra_threads
            .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
            .unwrap_or(1);
        let session = session_builder(env, rt, path, ep, threads, None)?
            .commit_from_file(path)
            .map_err(|e| invalid_model(path, e.to_string()))?;
        let (kind, scale) = {
            let meta = session
                .metadata()
                .map_err(|e| invalid_model(path, format!("cannot read metadata: {e}")))?;
            (meta.custom(super::KIND_KEY), meta.custom(super::SCALE_KEY))
        };
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
        let want: Vec<&str> = super::TEMPORAL_INPUTS.iter().map(|(n, _)| *n).collect();
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
        tracing::info!(model = %path.display(), provider = %ep, threads, "temporal model loaded");
        Ok(Self {
            session,
            path: path.to_path_buf(),
            names,
        })
    }

    /// Runs the model on `inputs` (in [`TEMPORAL_INPUTS`](super::TEMPORAL_INPUTS) order) and
    /// copies its output into `output` ([1, 3, 2h, 2w]).
    pub fn run(&mut self, inputs: &[NamedTensor], output: &mut [f32]) -> Result<(), ModelError> {
        let path = self.path.clone();
        let run_err = |e: ort::Error| ModelError::Run(format!("model {}: {e}", path.display()));
        let feeds = feeds(&self.path, &self.names, inputs)?;
        let outputs = self.session.run(feeds).map_err(run_err)?;
        let (_, data) = outputs[0].try_extract_tensor::<f32>().map_err(run_err)?;
        if data.len() != output.len() {
            return Err(ModelError::Run(format!(
                "model {}: {} output values, the output image has {}",
                self.path.display(),
                data.len(),
                output.len()
            )));
        }
        output.copy_from_slice(data);
        Ok(())
    }
}
