//! Compute pipelines of the engine's ops, made at load time and shared between ops that use the
//! same shader with the same specialization constants (lavapipe compiles each one with LLVM, a
//! real driver with its own compiler: both are slow enough to be worth sharing).

use std::collections::HashMap;

use ash::vk;

use super::precision::Precision;
use crate::gpu::pipeline;
use crate::gpu::{Gpu, Pipeline};

/// An op shader: every binding is a storage buffer, in binding order.
#[derive(Clone, Copy)]
pub struct Shader {
    pub name: &'static str,
    /// The fp32 and fp16 builds of the one source ([`op_shader!`](crate::op_shader)).
    pub spirv: [&'static [u8]; 2],
    pub buffers: usize,
    pub push_size: u32,
}

/// Both precisions' SPIR-V of an op shader with a `variants: FP16` directive.
#[macro_export]
macro_rules! op_shader {
    ($path:literal) => {
        [$crate::shader!($path), $crate::shader!($path, "fp16")]
    };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipeId(usize);

/// A pipeline the engine needs: a shader build with its bindings and constants.
pub struct PipelineDesc {
    /// Names the SPIR-V (with its variant): pipelines of equal name and `spec` are shared.
    pub name: String,
    pub spirv: &'static [u8],
    pub bindings: Vec<vk::DescriptorType>,
    pub push_size: u32,
    pub spec: Vec<u32>,
    /// Run in full subgroups of this size (cooperative-matrix shaders).
    pub full_subgroups: Option<u32>,
}

/// The pipelines of one engine, all built for its precision.
pub struct Pipelines {
    precision: Precision,
    index: HashMap<(String, Vec<u32>), PipeId>,
    list: Vec<Pipeline>,
}

impl Pipelines {
    pub fn new(precision: Precision) -> Self {
        Self {
            precision,
            index: HashMap::new(),
            list: Vec::new(),
        }
    }

    /// The storage precision of the engine's tensors and weights.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The pipeline of `shader` (all bindings storage buffers) in the engine's precision, with
    /// specialization constants `spec` (constant_id = index).
    pub fn get(&mut self, gpu: &Gpu, shader: Shader, spec: &[u32]) -> crate::gpu::Result<PipeId> {
        let spirv = match self.precision {
            Precision::Fp32 => shader.spirv[0],
            Precision::Fp16 => shader.spirv[1],
        };
        self.get_desc(
            gpu,
            PipelineDesc {
                name: format!("{} {}", shader.name, self.precision),
                spirv,
                bindings: vec![vk::DescriptorType::STORAGE_BUFFER; shader.buffers],
                push_size: shader.push_size,
                spec: spec.to_vec(),
                full_subgroups: None,
            },
        )
    }

    /// The pipeline `desc` describes, made once per name and constants.
    pub fn get_desc(&mut self, gpu: &Gpu, desc: PipelineDesc) -> crate::gpu::Result<PipeId> {
        let key = (desc.name, desc.spec);
        if let Some(&id) = self.index.get(&key) {
            return Ok(id);
        }
        let name = format!("{} {:?}", key.0, key.1);
        let p = pipeline::compute_full(
            gpu,
            &name,
            desc.spirv,
            &desc.bindings,
            desc.push_size,
            &key.1,
            desc.full_subgroups,
        )?;
        let id = PipeId(self.list.len());
        self.list.push(p);
        self.index.insert(key, id);
        Ok(id)
    }

    pub fn at(&self, id: PipeId) -> &Pipeline {
        &self.list[id.0]
    }

    /// How many pipelines the engine made.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn destroy(self, gpu: &Gpu) {
        for p in self.list {
            p.destroy(gpu);
        }
    }
}

impl crate::gpu::guard::Destroy for Pipelines {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
    }
}
