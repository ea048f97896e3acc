//! `upscale-demo run-model`: one inference of an ONNX model on .pb tensors (serialized ONNX
//! `TensorProto`s), on the in-stream engine or ONNX Runtime, writing the outputs as .pb too.
//! The way to compare the two engines on any input without the game.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use onnx_protobuf::{Message, TensorProto};

use crate::gpu::{Gpu, Validation};
use crate::infer::{tensor, Engine, Graph, Plan, PlanOptions, Precision};
use crate::upscale::model;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RunEngine {
    /// The project's Vulkan compute engine (headless, validation from UPSCALE_VALIDATION).
    InStream,
    /// ONNX Runtime on the CPU (any graph: one tensor per graph input, in order).
    Ort,
}

pub struct RunModelArgs {
    pub model: PathBuf,
    pub inputs: Vec<PathBuf>,
    pub outputs: Vec<PathBuf>,
    pub engine: RunEngine,
    /// The in-stream engine's storage precision.
    pub precision: Precision,
    /// The reference plan instead of the fused fast path.
    pub reference: bool,
    /// Print the plan's report.
    pub print_plan: bool,
}

/// A named float tensor.
pub use crate::upscale::model::NamedTensor as HostTensor;

pub fn read_tensor(path: &Path) -> anyhow::Result<HostTensor> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let proto = TensorProto::parse_from_bytes(&bytes)
        .with_context(|| format!("{} is not a serialized ONNX TensorProto", path.display()))?;
    let t = tensor::from_proto(&proto).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if t.ints.is_some() {
        bail!("{}: the tensor is not float32", path.display());
    }
    Ok(HostTensor {
        name: proto.name,
        shape: t.shape,
        data: t.data,
    })
}

pub fn write_tensor(path: &Path, t: &HostTensor) -> anyhow::Result<()> {
    let bytes = tensor::to_proto(&t.name, &t.shape, &t.data).write_to_bytes()?;
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

pub fn run(args: &RunModelArgs) -> anyhow::Result<Vec<HostTensor>> {
    let inputs = args
        .inputs
        .iter()
        .map(PathBuf::as_path)
        .map(read_tensor)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let outputs = match args.engine {
        RunEngine::InStream => run_in_stream(args, &inputs)?,
        RunEngine::Ort => run_ort(&args.model, &inputs)?,
    };
    let paths = output_paths(&args.outputs, outputs.len())?;
    for (path, t) in paths.iter().zip(&outputs) {
        write_tensor(path, t)?;
    }
    Ok(outputs)
}

/// One path per output: as given, or `OUT.pb`, `OUT.1.pb`, ... from a single `--output`.
fn output_paths(given: &[PathBuf], count: usize) -> anyhow::Result<Vec<PathBuf>> {
    match given {
        g if g.len() == count => Ok(g.to_vec()),
        [one] => Ok((0..count)
            .map(|i| match i {
                0 => one.clone(),
                i => one.with_extension(format!("{i}.pb")),
            })
            .collect()),
        _ => bail!(
            "the model has {count} output(s), {} --output given",
            given.len()
        ),
    }
}

fn run_in_stream(args: &RunModelArgs, inputs: &[HostTensor]) -> anyhow::Result<Vec<HostTensor>> {
    let graph = Graph::load(&args.model)?;
    let shapes: Vec<Vec<usize>> = inputs.iter().map(|t| t.shape.clone()).collect();
    let (gpu, _) = Gpu::new(Validation::from_env(), &[], "", None)?;
    if let Some(why) = args.precision.unsupported_on(&gpu.info) {
        bail!("--precision {}: {why}", args.precision);
    }
    let options = if args.reference {
        PlanOptions {
            precision: args.precision,
            ..PlanOptions::reference()
        }
    } else {
        PlanOptions::fast(&gpu.info, args.precision, false)
    };
    let plan = Plan::with_options(&graph, &shapes, &options)?;
    if args.print_plan {
        for line in plan.report() {
            println!("{line}");
        }
    }
    let engine = Engine::new(&gpu, plan)?;
    let data: Vec<&[f32]> = inputs.iter().map(|t| t.data.as_slice()).collect();
    let result = engine.run(&gpu, &data);
    let outputs = result.map(|outs| {
        outs.into_iter()
            .enumerate()
            .map(|(i, data)| {
                let info = engine.output(i).1;
                HostTensor {
                    name: info.name.clone(),
                    shape: info.shape.clone(),
                    data,
                }
            })
            .collect()
    });
    engine.destroy(&gpu);
    let errors = gpu.validation_errors();
    if errors > 0 {
        bail!("{errors} Vulkan validation error(s) (see the log)");
    }
    outputs.map_err(anyhow::Error::from)
}

fn run_ort(path: &Path, inputs: &[HostTensor]) -> anyhow::Result<Vec<HostTensor>> {
    let location = model::locate_runtime(None)?;
    model::init_runtime(&location.path)?;
    Ok(model::run_graph(path, inputs)?)
}
