//! Shader modules, pipeline layouts with push descriptors, and compute/graphics pipelines.
//! Pipelines are made at load time (or on a pattern/model switch), never per frame.

use std::io::Cursor;

use ash::vk;

use super::{Destroy as _, Gpu, Result};

/// The SPIR-V of `shaders/<path>`, compiled by build.rs; with a second argument, one of the
/// shader's variants (`shader!("ops/conv.comp", "fp16")`: built with `-DFP16`, see build.rs).
#[macro_export]
macro_rules! shader {
    ($path:literal) => {{
        let spirv: &'static [u8] =
            include_bytes!(concat!(env!("OUT_DIR"), "/shaders/", $path, ".spv"));
        spirv
    }};
    ($path:literal, $variant:literal) => {{
        let spirv: &'static [u8] = include_bytes!(concat!(
            env!("OUT_DIR"),
            "/shaders/",
            $path,
            ".",
            $variant,
            ".spv"
        ));
        spirv
    }};
}

pub fn shader_module(gpu: &Gpu, name: &str, spirv: &[u8]) -> Result<vk::ShaderModule> {
    let words = ash::util::read_spv(&mut Cursor::new(spirv)).expect("build.rs wrote valid SPIR-V");
    let info = vk::ShaderModuleCreateInfo::default().code(&words);
    let module = unsafe { gpu.device.create_shader_module(&info, None)? };
    gpu.name(module, name);
    Ok(module)
}

/// A pipeline with its layout and its one push-descriptor set layout.
pub struct Pipeline {
    pub raw: vk::Pipeline,
    pub layout: vk::PipelineLayout,
    pub set_layout: vk::DescriptorSetLayout,
}

impl Pipeline {
    pub fn destroy(self, gpu: &Gpu) {
        unsafe {
            gpu.device.destroy_pipeline(self.raw, None);
            gpu.device.destroy_pipeline_layout(self.layout, None);
            gpu.device
                .destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}

/// Set 0 is a push-descriptor set with these bindings (types in order, binding = index); one
/// push-constant range of `push_size` bytes for `stages`.
pub fn layout(
    gpu: &Gpu,
    name: &str,
    bindings: &[vk::DescriptorType],
    stages: vk::ShaderStageFlags,
    push_size: u32,
) -> Result<(vk::DescriptorSetLayout, vk::PipelineLayout)> {
    let bindings: Vec<_> = bindings
        .iter()
        .enumerate()
        .map(|(i, &ty)| {
            vk::DescriptorSetLayoutBinding::default()
                .binding(i as u32)
                .descriptor_type(ty)
                .descriptor_count(1)
                .stage_flags(stages)
        })
        .collect();
    let set_info = vk::DescriptorSetLayoutCreateInfo::default()
        .flags(vk::DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR_KHR)
        .bindings(&bindings);
    let set_layout =
        unsafe { gpu.device.create_descriptor_set_layout(&set_info, None)? }.guard(gpu);
    let ranges = [vk::PushConstantRange {
        stage_flags: stages,
        offset: 0,
        size: push_size,
    }];
    let set_layouts = [*set_layout];
    let mut info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts);
    if push_size > 0 {
        info = info.push_constant_ranges(&ranges);
    }
    let layout = unsafe { gpu.device.create_pipeline_layout(&info, None)? };
    gpu.name(*set_layout, name);
    gpu.name(layout, name);
    Ok((set_layout.keep(), layout))
}

pub fn compute(
    gpu: &Gpu,
    name: &str,
    spirv: &[u8],
    bindings: &[vk::DescriptorType],
    push_size: u32,
) -> Result<Pipeline> {
    compute_specialized(gpu, name, spirv, bindings, push_size, &[])
}

/// A compute pipeline whose 32-bit specialization constants `spec` have constant_id = index
/// (shader variants without copied files: an activation kind, a mode).
pub fn compute_specialized(
    gpu: &Gpu,
    name: &str,
    spirv: &[u8],
    bindings: &[vk::DescriptorType],
    push_size: u32,
    spec: &[u32],
) -> Result<Pipeline> {
    compute_full(gpu, name, spirv, bindings, push_size, spec, None)
}

/// [`compute_specialized`], and with `full_subgroups` the shader runs in full subgroups of
/// that size (cooperative-matrix shaders split their work group by subgroup; needs
/// `DeviceInfo::subgroup_size_control`).
pub fn compute_full(
    gpu: &Gpu,
    name: &str,
    spirv: &[u8],
    bindings: &[vk::DescriptorType],
    push_size: u32,
    spec: &[u32],
    full_subgroups: Option<u32>,
) -> Result<Pipeline> {
    // Guarded: a failure below releases the layouts; the module goes after the create call.
    let layouts = layout(
        gpu,
        name,
        bindings,
        vk::ShaderStageFlags::COMPUTE,
        push_size,
    )?
    .guard(gpu);
    let module = shader_module(gpu, name, spirv)?.guard(gpu);
    let entries = spec_entries(spec);
    let spec_info = vk::SpecializationInfo::default()
        .map_entries(&entries)
        .data(bytemuck::cast_slice(spec));
    let mut stage = vk::PipelineShaderStageCreateInfo::default()
        .stage(vk::ShaderStageFlags::COMPUTE)
        .module(*module)
        .name(c"main");
    if !spec.is_empty() {
        stage = stage.specialization_info(&spec_info);
    }
    let mut subgroup = vk::PipelineShaderStageRequiredSubgroupSizeCreateInfo::default()
        .required_subgroup_size(full_subgroups.unwrap_or(0));
    if full_subgroups.is_some() {
        stage = stage
            .flags(vk::PipelineShaderStageCreateFlags::REQUIRE_FULL_SUBGROUPS)
            .push_next(&mut subgroup);
    }
    let info = vk::ComputePipelineCreateInfo::default()
        .stage(stage)
        .layout(layouts.1);
    crate::fault::check("compute pipeline", name)?;
    let result = unsafe {
        gpu.device
            .create_compute_pipelines(vk::PipelineCache::null(), &[info], None)
    };
    drop(module);
    let raw = result.map_err(|(_, e)| e)?[0];
    gpu.name(raw, name);
    let (set_layout, layout) = layouts.keep();
    Ok(Pipeline {
        raw,
        layout,
        set_layout,
    })
}

/// Map entries for 32-bit specialization constants with constant_id = index.
fn spec_entries(spec: &[u32]) -> Vec<vk::SpecializationMapEntry> {
    (0..spec.len() as u32)
        .map(|i| vk::SpecializationMapEntry {
            constant_id: i,
            offset: i * 4,
            size: 4,
        })
        .collect()
}

/// What differs between the program's graphics pipelines.
pub struct GraphicsDesc<'a> {
    pub name: &'a str,
    pub vertex: &'a [u8],
    pub fragment: &'a [u8],
    pub bindings: &'a [vk::DescriptorType],
    pub push_size: u32,
    pub vertex_stride: u32,
    pub attributes: &'a [vk::VertexInputAttributeDescription],
    /// One per colour attachment, in location order.
    pub color_formats: &'a [vk::Format],
    pub depth: Option<(vk::Format, bool)>,
    pub cull: vk::CullModeFlags,
    /// Samples per pixel of the attachments (TYPE_1 unless multisampled).
    pub samples: vk::SampleCountFlags,
    /// The fragment shader's 32-bit specialization constants (constant_id = index).
    pub fragment_spec: &'a [u32],
}

pub fn graphics(gpu: &Gpu, desc: &GraphicsDesc) -> Result<Pipeline> {
    let stages_flags = vk::ShaderStageFlags::VERTEX | vk::ShaderStageFlags::FRAGMENT;
    // Guarded: a failure below releases the layouts; the modules go after the create call.
    let layouts = layout(gpu, desc.name, desc.bindings, stages_flags, desc.push_size)?.guard(gpu);
    let vs = shader_module(gpu, desc.name, desc.vertex)?.guard(gpu);
    let fs = shader_module(gpu, desc.name, desc.fragment)?.guard(gpu);
    let entries = spec_entries(desc.fragment_spec);
    let spec_info = vk::SpecializationInfo::default()
        .map_entries(&entries)
        .data(bytemuck::cast_slice(desc.fragment_spec));
    let mut fragment = vk::PipelineShaderStageCreateInfo::default()
        .stage(vk::ShaderStageFlags::FRAGMENT)
        .module(*fs)
        .name(c"main");
    if !desc.fragment_spec.is_empty() {
        fragment = fragment.specialization_info(&spec_info);
    }
    let stages = [
        vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::VERTEX)
            .module(*vs)
            .name(c"main"),
        fragment,
    ];
    crate::fault::check("graphics pipeline", desc.name)?;
    let result = create_graphics(gpu, desc, &stages, layouts.1);
    drop((vs, fs));
    let raw = result?;
    gpu.name(raw, desc.name);
    let (set_layout, layout) = layouts.keep();
    Ok(Pipeline {
        raw,
        layout,
        set_layout,
    })
}

/// The pipeline object: `desc`'s fixed-function state (its colour attachments, optional depth,
/// dynamic viewport and scissor, dynamic rendering) around `stages`.
fn create_graphics(
    gpu: &Gpu,
    desc: &GraphicsDesc,
    stages: &[vk::PipelineShaderStageCreateInfo],
    layout: vk::PipelineLayout,
) -> Result<vk::Pipeline> {
    let vb = [vk::VertexInputBindingDescription {
        binding: 0,
        stride: desc.vertex_stride,
        input_rate: vk::VertexInputRate::VERTEX,
    }];
    let mut vertex_input = vk::PipelineVertexInputStateCreateInfo::default();
    if desc.vertex_stride > 0 {
        vertex_input = vertex_input
            .vertex_binding_descriptions(&vb)
            .vertex_attribute_descriptions(desc.attributes);
    }
    let assembly = vk::PipelineInputAssemblyStateCreateInfo::default()
        .topology(vk::PrimitiveTopology::TRIANGLE_LIST);
    let viewport = vk::PipelineViewportStateCreateInfo::default()
        .viewport_count(1)
        .scissor_count(1);
    let raster = vk::PipelineRasterizationStateCreateInfo::default()
        .polygon_mode(vk::PolygonMode::FILL)
        .cull_mode(desc.cull)
        .front_face(vk::FrontFace::COUNTER_CLOCKWISE)
        .line_width(1.0);
    let multisample =
        vk::PipelineMultisampleStateCreateInfo::default().rasterization_samples(desc.samples);
    let (depth_format, depth_write) = desc.depth.unwrap_or((vk::Format::UNDEFINED, false));
    let depth = vk::PipelineDepthStencilStateCreateInfo::default()
        .depth_test_enable(desc.depth.is_some())
        .depth_write_enable(depth_write)
        .depth_compare_op(vk::CompareOp::LESS_OR_EQUAL);
    let blend_attachment: Vec<_> = desc
        .color_formats
        .iter()
        .map(|_| {
            vk::PipelineColorBlendAttachmentState::default()
                .color_write_mask(vk::ColorComponentFlags::RGBA)
        })
        .collect();
    let blend = vk::PipelineColorBlendStateCreateInfo::default().attachments(&blend_attachment);
    let dynamic_states = [vk::DynamicState::VIEWPORT, vk::DynamicState::SCISSOR];
    let dynamic = vk::PipelineDynamicStateCreateInfo::default().dynamic_states(&dynamic_states);
    let mut rendering = vk::PipelineRenderingCreateInfo::default()
        .color_attachment_formats(desc.color_formats)
        .depth_attachment_format(depth_format);
    let info = vk::GraphicsPipelineCreateInfo::default()
        .stages(stages)
        .vertex_input_state(&vertex_input)
        .input_assembly_state(&assembly)
        .viewport_state(&viewport)
        .rasterization_state(&raster)
        .multisample_state(&multisample)
        .depth_stencil_state(&depth)
        .color_blend_state(&blend)
        .dynamic_state(&dynamic)
        .layout(layout)
        .push_next(&mut rendering);
    let result = unsafe {
        gpu.device
            .create_graphics_pipelines(vk::PipelineCache::null(), &[info], None)
    };
    Ok(result.map_err(|(_, e)| e)?[0])
}

/// Writes for one push-descriptor update; kept here so passes only list their resources.
#[derive(Clone, Copy, Debug)]
pub enum Binding {
    SampledImage(vk::ImageView, vk::Sampler),
    StorageImage(vk::ImageView),
    StorageBuffer(vk::Buffer),
}

/// Pushes set 0 of `pipeline` with `bindings` (binding = index).
///
/// # Safety
/// `cmd` is recording and the resources stay alive until the command buffer completes.
pub unsafe fn push_descriptors(
    gpu: &Gpu,
    cmd: vk::CommandBuffer,
    bind_point: vk::PipelineBindPoint,
    pipeline: &Pipeline,
    bindings: &[Binding],
) {
    let images: Vec<[vk::DescriptorImageInfo; 1]> = bindings
        .iter()
        .map(|b| match *b {
            Binding::SampledImage(view, sampler) => [vk::DescriptorImageInfo {
                sampler,
                image_view: view,
                image_layout: vk::ImageLayout::SHADER_READ_ONLY_OPTIMAL,
            }],
            Binding::StorageImage(view) => [vk::DescriptorImageInfo {
                sampler: vk::Sampler::null(),
                image_view: view,
                image_layout: vk::ImageLayout::GENERAL,
            }],
            Binding::StorageBuffer(_) => [vk::DescriptorImageInfo::default()],
        })
        .collect();
    let buffers: Vec<[vk::DescriptorBufferInfo; 1]> = bindings
        .iter()
        .map(|b| match *b {
            Binding::StorageBuffer(buffer) => [vk::DescriptorBufferInfo {
                buffer,
                offset: 0,
                range: vk::WHOLE_SIZE,
            }],
            _ => [vk::DescriptorBufferInfo::default()],
        })
        .collect();
    let writes: Vec<vk::WriteDescriptorSet> = bindings
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let write = vk::WriteDescriptorSet::default().dst_binding(i as u32);
            match b {
                Binding::SampledImage(..) => write
                    .descriptor_type(vk::DescriptorType::COMBINED_IMAGE_SAMPLER)
                    .image_info(&images[i]),
                Binding::StorageImage(..) => write
                    .descriptor_type(vk::DescriptorType::STORAGE_IMAGE)
                    .image_info(&images[i]),
                Binding::StorageBuffer(..) => write
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(&buffers[i]),
            }
        })
        .collect();
    gpu.push_descriptor
        .cmd_push_descriptor_set(cmd, bind_point, pipeline.layout, 0, &writes);
}

/// Push constants as bytes of a plain-old-data struct.
///
/// # Safety
/// `cmd` is recording with a pipeline of `pipeline`'s layout.
pub unsafe fn push_constants<T: bytemuck::Pod>(
    gpu: &Gpu,
    cmd: vk::CommandBuffer,
    pipeline: &Pipeline,
    stages: vk::ShaderStageFlags,
    value: &T,
) {
    gpu.device
        .cmd_push_constants(cmd, pipeline.layout, stages, 0, bytemuck::bytes_of(value));
}

/// The compute dispatch every pass records the same way: binds `pipeline`, pushes `bindings`
/// as set 0 (binding = index), pushes `push` as compute push constants unless it is empty (`&()`),
/// and dispatches `groups`.
///
/// # Safety
/// `cmd` is recording outside a rendering scope, `pipeline` is a compute pipeline whose layout
/// matches `bindings` and `push`, and the resources stay alive until the command buffer
/// completes.
pub unsafe fn dispatch<P: bytemuck::Pod>(
    gpu: &Gpu,
    cmd: vk::CommandBuffer,
    pipeline: &Pipeline,
    bindings: &[Binding],
    push: &P,
    groups: [u32; 3],
) {
    let bind = vk::PipelineBindPoint::COMPUTE;
    gpu.device.cmd_bind_pipeline(cmd, bind, pipeline.raw);
    push_descriptors(gpu, cmd, bind, pipeline, bindings);
    if std::mem::size_of::<P>() > 0 {
        push_constants(gpu, cmd, pipeline, vk::ShaderStageFlags::COMPUTE, push);
    }
    gpu.device
        .cmd_dispatch(cmd, groups[0], groups[1], groups[2]);
}
