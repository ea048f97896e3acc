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
pub(super) fn feeds<'a>(
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
