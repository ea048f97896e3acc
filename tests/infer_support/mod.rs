//! Helpers of the in-stream engine tests: one shared device, ONNX models built in memory with
//! the onnx-protobuf types, a deterministic random source and error measures.

#![allow(dead_code)]

use std::sync::{Mutex, OnceLock};

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::{AttributeProto, ModelProto, NodeProto, TensorProto, ValueInfoProto};
use upscale_demo::gpu::{Gpu, Validation};
use upscale_demo::infer::{tensor, Engine, Graph, Plan, PlanOptions, Precision};

/// One device for the whole file: tests run on several threads and a queue must not be used
/// by two at once.
pub fn gpu() -> std::sync::MutexGuard<'static, Gpu> {
    static GPU: OnceLock<Mutex<Gpu>> = OnceLock::new();
    GPU.get_or_init(|| {
        let (gpu, _) = Gpu::new(Validation::from_env(), &[], "", None).expect("a Vulkan device");
        assert_eq!(
            gpu.instance.validation_enabled,
            std::env::var("UPSCALE_VALIDATION").as_deref() != Ok("0")
        );
        Mutex::new(gpu)
    })
    .lock()
    .unwrap_or_else(|e| e.into_inner())
}

// ---- building models -------------------------------------------------------------------

pub enum A {
    I(i64),
    Is(&'static [i64]),
    F(f32),
    S(&'static str),
}

pub fn attr(name: &str, value: A) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    let ty = match value {
        A::I(v) => {
            a.i = v;
            AttributeType::INT
        }
        A::Is(v) => {
            a.ints = v.to_vec();
            AttributeType::INTS
        }
        A::F(v) => {
            a.f = v;
            AttributeType::FLOAT
        }
        A::S(v) => {
            a.s = v.as_bytes().to_vec();
            AttributeType::STRING
        }
    };
    a.type_ = ty.into();
    a
}

pub fn node(
    op: &str,
    name: &str,
    inputs: &[&str],
    outputs: &[&str],
    attrs: Vec<(&str, A)>,
) -> NodeProto {
    let mut n = NodeProto::new();
    n.op_type = op.into();
    n.name = name.into();
    n.input = inputs.iter().map(|s| s.to_string()).collect();
    n.output = outputs.iter().map(|s| s.to_string()).collect();
    n.attribute = attrs.into_iter().map(|(k, v)| attr(k, v)).collect();
    n
}

pub fn value_info(name: &str, dims: &[usize]) -> ValueInfoProto {
    use onnx_protobuf::tensor_shape_proto::Dimension;
    use onnx_protobuf::type_proto::{Tensor, Value};
    let mut shape = onnx_protobuf::TensorShapeProto::new();
    for &d in dims {
        let mut dim = Dimension::new();
        dim.set_dim_value(d as i64);
        shape.dim.push(dim);
    }
    let mut t = Tensor::new();
    t.elem_type = 1;
    t.shape = Some(shape).into();
    let mut ty = onnx_protobuf::TypeProto::new();
    ty.value = Some(Value::TensorType(t));
    let mut v = ValueInfoProto::new();
    v.name = name.into();
    v.type_ = Some(ty).into();
    v
}

pub fn ints(name: &str, v: &[i64]) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.into();
    t.dims = vec![v.len() as i64];
    t.data_type = 7;
    t.int64_data = v.to_vec();
    t
}

pub fn floats(name: &str, shape: &[usize], v: &[f32]) -> TensorProto {
    tensor::to_proto(name, shape, v)
}

pub fn model(
    nodes: Vec<NodeProto>,
    inputs: &[(&str, &[usize])],
    inits: Vec<TensorProto>,
    output: &str,
) -> ModelProto {
    let mut g = onnx_protobuf::GraphProto::new();
    g.name = "test".into();
    g.node = nodes;
    g.input = inputs.iter().map(|(n, d)| value_info(n, d)).collect();
    g.output = vec![value_info(output, &[])];
    g.initializer = inits;
    let mut m = ModelProto::new();
    m.ir_version = 8;
    m.graph = Some(g).into();
    m
}

pub struct Ran {
    pub out: Vec<f32>,
    pub shape: Vec<usize>,
    pub labels: Vec<String>,
}

/// Runs the model on the reference plan (fp32, one dispatch per op) and returns that run; on
/// the way it also runs every other plan this device has and checks them against it:
/// - the fused fast path in fp32 must give the same bits (it computes the same sums in the
///   same order: "fp32 stays the reference");
/// - the fast path in fp16 (fp16 storage, fp32 arithmetic) within [`fp16_tolerance`]; on a
///   device with matrix units also with conv → conv chains there (`coopmat_chains`, off by
///   default).
pub fn run(m: &ModelProto, inputs: &[(&[usize], &[f32])]) -> Ran {
    let graph = Graph::from_model(m, "<memory>").unwrap();
    let shapes: Vec<Vec<usize>> = inputs.iter().map(|(s, _)| s.to_vec()).collect();
    let gpu = gpu();
    let data: Vec<&[f32]> = inputs.iter().map(|(_, d)| *d).collect();
    let reference = run_plan(&gpu, Plan::new(&graph, &shapes).unwrap(), &data);
    for precision in Precision::ALL {
        if precision.unsupported_on(&gpu.info).is_some() {
            println!("fast path {precision}: skipped, the device cannot store it");
            continue;
        }
        let options = PlanOptions::fast(&gpu.info, precision, false);
        let mut variants = vec![options.clone()];
        if options.coopmat.is_some() {
            variants.push(PlanOptions {
                coopmat_chains: true,
                ..options
            });
        }
        for options in variants {
            let fast = run_plan(
                &gpu,
                Plan::with_options(&graph, &shapes, &options).unwrap(),
                &data,
            );
            assert_eq!(fast.shape, reference.shape);
            match precision {
                Precision::Fp32 => assert!(
                    fast.out
                        .iter()
                        .zip(&reference.out)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "the fp32 fast path ({:?}) differs from the reference ({:?}): max abs {:e}",
                    fast.labels,
                    reference.labels,
                    max_err(&fast.out, &reference.out)
                ),
                Precision::Fp16 => {
                    let tol = fp16_tolerance(&reference.out);
                    let what = if options.coopmat_chains {
                        "fast path fp16, chains on the matrix units"
                    } else {
                        "fast path fp16"
                    };
                    check(what, &fast.out, &reference.out, tol);
                }
            }
        }
    }
    reference
}

/// fp16 storage keeps 11 significant bits: every stored tensor adds a relative error up to
/// 2^-11, and sums of many stored terms more. Stated per test as 1e-2 of the output's largest
/// magnitude (at least 1e-2): what the issue allows on 0..1 images.
pub fn fp16_tolerance(want: &[f32]) -> f32 {
    1e-2 * want.iter().fold(1.0f32, |m, v| m.max(v.abs()))
}

fn run_plan(gpu: &Gpu, plan: Plan, data: &[&[f32]]) -> Ran {
    let engine = Engine::new(gpu, plan).unwrap();
    let mut outs = engine.run(gpu, data).unwrap();
    let shape = engine.output(0).1.shape.clone();
    let labels = engine.labels().iter().map(|s| s.to_string()).collect();
    engine.destroy(gpu);
    assert_eq!(gpu.validation_errors(), 0, "validation errors");
    Ran {
        out: outs.remove(0),
        shape,
        labels,
    }
}

pub fn random(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}

pub fn max_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "lengths differ");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

pub fn check(what: &str, got: &[f32], want: &[f32], tol: f32) {
    let e = max_err(got, want);
    println!("{what}: max abs error {e:.3e} (tolerance {tol:.0e})");
    assert!(e <= tol, "{what}: max abs error {e} > {tol}");
}
