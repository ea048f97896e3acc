//! Compute pipelines of the engine's ops, made at load time and shared between ops that use the
//! same shader with the same specialization constants (lavapipe compiles each one with LLVM, a
//! real driver with its own compiler: both are slow enough to be worth sharing).

use std::collections::HashMap;

use ash::vk;

use crate::gpu::pipeline;
use crate::gpu::{Gpu, Pipeline};

/// An op shader: every binding is a storage buffer, in binding order.
#[derive(Clone, Copy)]
pub struct Shader {
    pub name: &'static str,
    pub spirv: &'static [u8],
    pub buffers: usize,
    pub push_size: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipeId(usize);

#[derive(Default)]
pub struct Pipelines {
    index: HashMap<(&'static str, Vec<u32>), PipeId>,
    list: Vec<Pipeline>,
}

impl Pipelines {
    /// The pipeline of `shader` with specialization constants `spec` (constant_id = index).
    pub fn get(&mut self, gpu: &Gpu, shader: Shader, spec: &[u32]) -> crate::gpu::Result<PipeId> {
        if let Some(&id) = self.index.get(&(shader.name, spec.to_vec())) {
            return Ok(id);
        }
        let bindings = vec![vk::DescriptorType::STORAGE_BUFFER; shader.buffers];
        let name = format!("{} {spec:?}", shader.name);
        let p = pipeline::compute_specialized(
            gpu,
            &name,
            shader.spirv,
            &bindings,
            shader.push_size,
            spec,
        )?;
        let id = PipeId(self.list.len());
        self.list.push(p);
        self.index.insert((shader.name, spec.to_vec()), id);
        Ok(id)
    }

    pub fn at(&self, id: PipeId) -> &Pipeline {
        &self.list[id.0]
    }

    pub fn destroy(self, gpu: &Gpu) {
        for p in self.list {
            p.destroy(gpu);
        }
    }
}
