//! The scene pass: sky, then the world's meshes, drawn at render (low) resolution into the
//! colour image the upscalers read, with motion vectors (`game::motion`) into a second
//! attachment and the depth kept. With `render.msaa` > 1 they draw into multisampled attachments
//! that resolve at the end of the pass: colour (average, in linear light) into that image,
//! motion by averaging, depth with SAMPLE_ZERO. The projection may carry a sub-pixel jitter
//! (`SceneTargets::set_jitter`); the motion vectors never do.

use ash::vk;
use glam::{Mat4, Vec2};

use crate::game::jitter;
use crate::game::mesh::{Mesh, Vertex};
use crate::game::world::{Draw, MeshId, World};
use crate::gpu::pipeline::{self, Binding, GraphicsDesc};
use crate::gpu::{self, Buffer, Destroy, Gpu, Image, Pipeline};
use crate::shader;

use super::scene_motion::MotionScratch;
pub use super::scene_targets::SceneTargets;
use super::scene_targets::{
    begin_transitions, color_attachment, depth_attachment, end_transitions, motion_attachment,
};
use super::scene_textures::upload_texture_array;

/// Format of the low-resolution colour image: display-encoded RGBA8, what ML upscalers take.
pub const COLOR_FORMAT: vk::Format = vk::Format::R8G8B8A8_UNORM;
/// Format of the multisampled colour attachment: the same bytes as `COLOR_FORMAT`, but sRGB, so
/// the hardware encodes each sample and the resolve averages in linear light. Averaging encoded
/// values would make every edge darker than the light it mixes (thin bright features fade, thin
/// dark ones stand out), unlike the dataset's supersampled reference, averaged in linear light.
pub(super) const MSAA_COLOR_FORMAT: vk::Format = vk::Format::R8G8B8A8_SRGB;
pub(super) const DEPTH_FORMAT: vk::Format = vk::Format::D32_SFLOAT;
/// Format of the motion vectors: two half floats, render pixels (`game::motion`).
pub const MOTION_FORMAT: vk::Format = vk::Format::R16G16_SFLOAT;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct MeshPush {
    mvp: [f32; 16],
    model_rows: [[f32; 4]; 3],
    /// x = emissive, yzw = direction toward the sun.
    params: [f32; 4],
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct SkyPush {
    inv_view_proj: [f32; 16],
    sun: [f32; 4],
}

struct GpuMesh {
    vertices: Buffer,
    indices: Buffer,
    index_count: u32,
}

impl GpuMesh {
    fn new(gpu: &Gpu, name: &str, mesh: &Mesh) -> gpu::Result<Self> {
        let vertices = Buffer::with_data(
            gpu,
            &format!("{name} vertices"),
            vk::BufferUsageFlags::VERTEX_BUFFER,
            bytemuck::cast_slice(&mesh.vertices),
        )?
        .guard(gpu);
        let indices = Buffer::with_data(
            gpu,
            &format!("{name} indices"),
            vk::BufferUsageFlags::INDEX_BUFFER,
            bytemuck::cast_slice(&mesh.indices),
        )?;
        Ok(Self {
            vertices: vertices.keep(),
            indices,
            index_count: mesh.indices.len() as u32,
        })
    }

    fn destroy(self, gpu: &Gpu) {
        self.vertices.destroy(gpu);
        self.indices.destroy(gpu);
    }
}

impl Destroy for GpuMesh {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
    }
}

pub struct ScenePass {
    /// Samples per pixel of the pipelines and of the targets made by [`ScenePass::targets`].
    samples: vk::SampleCountFlags,
    sky: Pipeline,
    meshes_pipeline: Pipeline,
    /// The same two for frames whose motion attachment has no view (`keep_temporal` off): its
    /// format is VK_FORMAT_UNDEFINED there (a null view under a pipeline that names a format is
    /// invalid without `dynamicRenderingUnusedAttachments`), and the fragment shaders are their
    /// NO_MOTION variants, which write no motion (an output with no attachment format draws
    /// the validation layer's interface warning).
    sky_no_motion: Pipeline,
    meshes_no_motion: Pipeline,
    textures: Image,
    sampler: vk::Sampler,
    /// For the frame the upscalers read, when `render.upscale_mip_bias` is on: textures sampled
    /// with LOD bias log2(render / output), i.e. at the output size's detail.
    upscale_sampler: Option<vk::Sampler>,
    meshes: Vec<(MeshId, GpuMesh)>,
    draws: Vec<Draw>,
    motion: MotionScratch,
}

/// The sky and mesh pipelines for `samples` per pixel, with the motion attachment or
/// (`motion` false) with that attachment's format undefined.
fn create_pipelines(
    gpu: &Gpu,
    samples: vk::SampleCountFlags,
    motion: bool,
) -> gpu::Result<(Pipeline, Pipeline)> {
    let single = samples == vk::SampleCountFlags::TYPE_1;
    // Single-sample: the pass as it was before MSAA, the shaders encode into the UNORM image.
    let (color_format, fragment_spec): (_, &[u32]) = if single {
        (COLOR_FORMAT, &[])
    } else {
        (MSAA_COLOR_FORMAT, &[vk::FALSE])
    };
    let motion_format = if motion {
        MOTION_FORMAT
    } else {
        vk::Format::UNDEFINED
    };
    let color_formats = [color_format, motion_format];
    let sky = pipeline::graphics(
        gpu,
        &GraphicsDesc {
            name: "sky",
            vertex: shader!("render/fullscreen.vert"),
            fragment: if motion {
                shader!("render/sky.frag")
            } else {
                shader!("render/sky.frag", "no_motion")
            },
            bindings: &[vk::DescriptorType::STORAGE_BUFFER],
            push_size: std::mem::size_of::<SkyPush>() as u32,
            vertex_stride: 0,
            attributes: &[],
            color_formats: &color_formats,
            depth: Some((DEPTH_FORMAT, false)),
            cull: vk::CullModeFlags::NONE,
            samples,
            fragment_spec,
        },
    )?
    .guard(gpu);
    let attributes = vertex_attributes();
    let meshes_pipeline = pipeline::graphics(
        gpu,
        &GraphicsDesc {
            name: "scene meshes",
            vertex: shader!("render/scene.vert"),
            fragment: if motion {
                shader!("render/scene.frag")
            } else {
                shader!("render/scene.frag", "no_motion")
            },
            bindings: &[
                vk::DescriptorType::COMBINED_IMAGE_SAMPLER,
                vk::DescriptorType::STORAGE_BUFFER,
            ],
            push_size: std::mem::size_of::<MeshPush>() as u32,
            vertex_stride: std::mem::size_of::<Vertex>() as u32,
            attributes: &attributes,
            color_formats: &color_formats,
            depth: Some((DEPTH_FORMAT, true)),
            cull: vk::CullModeFlags::BACK,
            samples,
            fragment_spec,
        },
    )?;
    Ok((sky.keep(), meshes_pipeline))
}

/// The world's three meshes in device memory, once at start-up.
fn upload_meshes(gpu: &Gpu, world: &World) -> gpu::Result<Vec<(MeshId, GpuMesh)>> {
    let meshes = [
        (MeshId::Static, "static world", &world.static_mesh),
        (MeshId::Orb, "orb", &world.orb_mesh),
        (MeshId::Wheel, "wheel", &world.wheel_mesh),
    ];
    let made = gpu::guard::try_collect(
        gpu,
        meshes
            .iter()
            .map(|&(_, name, mesh)| GpuMesh::new(gpu, name, mesh)),
    )?;
    Ok(meshes.iter().map(|m| m.0).zip(made).collect())
}

impl ScenePass {
    /// `msaa`: samples per pixel (1, 2, 4 or 8; the device must support it, see
    /// `render.msaa`).
    pub fn new(
        gpu: &Gpu,
        world: &World,
        layers: &[image::RgbaImage],
        msaa: u32,
        upscale_mip_bias: f32,
    ) -> gpu::Result<Self> {
        let samples = gpu::image::sample_count(msaa);
        let pipelines = create_pipelines(gpu, samples, true)?.guard(gpu);
        let no_motion = create_pipelines(gpu, samples, false)?.guard(gpu);
        let textures = upload_texture_array(gpu, layers)?.guard(gpu);
        let max_lod = textures.desc.mip_levels as f32;
        let sampler =
            gpu::image::create_sampler(gpu, "scene texture sampler", true, true, max_lod)?
                .guard(gpu);
        let upscale_sampler = if upscale_mip_bias != 0.0 {
            Some(gpu::image::create_sampler_with_bias(
                gpu,
                "scene texture sampler (upscaler input, mip bias)",
                true,
                true,
                max_lod,
                upscale_mip_bias,
            )?)
        } else {
            None
        }
        .guard(gpu);
        let meshes = upload_meshes(gpu, world)?;
        let (sky, meshes_pipeline) = pipelines.keep();
        let (sky_no_motion, meshes_no_motion) = no_motion.keep();
        Ok(Self {
            samples,
            sky,
            meshes_pipeline,
            sky_no_motion,
            meshes_no_motion,
            textures: textures.keep(),
            sampler: sampler.keep(),
            upscale_sampler: upscale_sampler.keep(),
            meshes,
            draws: Vec::with_capacity(64),
            motion: MotionScratch::new(),
        })
    }

    /// Samples per pixel (1: no MSAA).
    pub fn msaa(&self) -> u32 {
        self.samples.as_raw()
    }

    /// Targets of `size` for this pass (its sample count). Not per frame: at start-up, or when
    /// the compare view is turned on.
    pub fn targets(&self, gpu: &Gpu, size: vk::Extent2D) -> gpu::Result<SceneTargets> {
        SceneTargets::new(gpu, size, self.samples)
    }

    /// Targets for the frame the upscalers read: drawn with the upscaler-input mip bias when
    /// the pass has one (`render.upscale_mip_bias`), else as [`ScenePass::targets`].
    pub fn upscale_targets(&self, gpu: &Gpu, size: vk::Extent2D) -> gpu::Result<SceneTargets> {
        let mut targets = SceneTargets::new(gpu, size, self.samples)?;
        targets.mip_biased = self.upscale_sampler.is_some();
        Ok(targets)
    }

    /// Whether the upscaler-input frame samples textures with a mip bias.
    pub fn has_upscale_mip_bias(&self) -> bool {
        self.upscale_sampler.is_some()
    }

    /// Draws the world into `targets`; leaves the colour, motion and kept depth images in
    /// `barrier::SAMPLED`. Advances the targets' motion history to this frame.
    ///
    /// # Safety
    /// `cmd` is recording outside a rendering scope; `targets` were made by
    /// [`ScenePass::targets`].
    pub unsafe fn record(
        &mut self,
        gpu: &Gpu,
        cmd: vk::CommandBuffer,
        targets: &SceneTargets,
        world: &World,
    ) {
        let device = &gpu.device;
        debug_assert_eq!(targets.samples(), self.samples, "targets of another pass");
        let extent = targets.color.extent();
        let aspect = extent.width as f32 / extent.height as f32;
        let proj = world.camera.proj(aspect);
        let view_proj = proj * world.camera.view();
        // Unjittered frames keep the exact matrix they always had.
        let sampled_view_proj = if targets.jitter == Vec2::ZERO {
            view_proj
        } else {
            let size = (extent.width, extent.height);
            jitter::jittered(proj, targets.jitter, size) * world.camera.view()
        };
        world.draws(&mut self.draws);
        self.motion
            .record_upload(gpu, cmd, targets, world, &self.draws, view_proj);
        begin_transitions(device, cmd, targets);
        let color = [color_attachment(targets), motion_attachment(targets)];
        let depth = depth_attachment(targets);
        let area = vk::Rect2D {
            offset: vk::Offset2D::default(),
            extent,
        };
        let info = vk::RenderingInfo::default()
            .render_area(area)
            .layer_count(1)
            .color_attachments(&color)
            .depth_attachment(&depth);
        device.cmd_begin_rendering(cmd, &info);
        set_viewport(device, cmd, extent);

        let sun = world.sun_dir();
        self.record_sky(gpu, cmd, targets, sampled_view_proj, sun);
        self.record_meshes(gpu, cmd, targets, sampled_view_proj, sun);
        device.cmd_end_rendering(cmd);
        end_transitions(device, cmd, targets);
    }

    /// The sky: one full-screen triangle shaded from the inverse view-projection.
    ///
    /// # Safety
    /// `cmd` is inside this pass's rendering scope.
    unsafe fn record_sky(
        &self,
        gpu: &Gpu,
        cmd: vk::CommandBuffer,
        targets: &SceneTargets,
        view_proj: Mat4,
        sun: glam::Vec3,
    ) {
        let device = &gpu.device;
        let sky = SkyPush {
            inv_view_proj: view_proj.inverse().to_cols_array(),
            sun: [sun.x, sun.y, sun.z, 0.0],
        };
        let (sky_pipeline, _) = self.pipelines(targets);
        device.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::GRAPHICS, sky_pipeline.raw);
        pipeline::push_descriptors(
            gpu,
            cmd,
            vk::PipelineBindPoint::GRAPHICS,
            sky_pipeline,
            &[Binding::StorageBuffer(targets.draw_data.raw)],
        );
        pipeline::push_constants(
            gpu,
            cmd,
            sky_pipeline,
            vk::ShaderStageFlags::VERTEX | vk::ShaderStageFlags::FRAGMENT,
            &sky,
        );
        device.cmd_draw(cmd, 3, 1, 0, 0);
    }

    /// The world's meshes, each bound once per run of draws that share it.
    ///
    /// # Safety
    /// `cmd` is inside this pass's rendering scope; `targets` were made by this pass.
    unsafe fn record_meshes(
        &self,
        gpu: &Gpu,
        cmd: vk::CommandBuffer,
        targets: &SceneTargets,
        view_proj: Mat4,
        sun: glam::Vec3,
    ) {
        let device = &gpu.device;
        let (_, meshes_pipeline) = self.pipelines(targets);
        device.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::GRAPHICS, meshes_pipeline.raw);
        pipeline::push_descriptors(
            gpu,
            cmd,
            vk::PipelineBindPoint::GRAPHICS,
            meshes_pipeline,
            &[
                Binding::SampledImage(
                    self.textures.view,
                    match (targets.mip_biased, self.upscale_sampler) {
                        (true, Some(biased)) => biased,
                        _ => self.sampler,
                    },
                ),
                Binding::StorageBuffer(targets.draw_data.raw),
            ],
        );
        let mut bound = None;
        for (index, draw) in self.draws.iter().enumerate() {
            let Some((_, mesh)) = self.meshes.iter().find(|(id, _)| *id == draw.mesh) else {
                continue;
            };
            if bound != Some(draw.mesh) {
                device.cmd_bind_vertex_buffers(cmd, 0, &[mesh.vertices.raw], &[0]);
                device.cmd_bind_index_buffer(cmd, mesh.indices.raw, 0, vk::IndexType::UINT32);
                bound = Some(draw.mesh);
            }
            let push = mesh_push(view_proj, draw.model, draw.emissive, sun);
            pipeline::push_constants(
                gpu,
                cmd,
                meshes_pipeline,
                vk::ShaderStageFlags::VERTEX | vk::ShaderStageFlags::FRAGMENT,
                &push,
            );
            // The first instance is the draw's index into the motion data (`gl_InstanceIndex`).
            device.cmd_draw_indexed(cmd, mesh.index_count, 1, 0, 0, index as u32);
        }
    }

    /// The sky and mesh pipelines matching `targets`' motion attachment (a view or none).
    fn pipelines(&self, targets: &SceneTargets) -> (&Pipeline, &Pipeline) {
        if targets.keep_temporal {
            (&self.sky, &self.meshes_pipeline)
        } else {
            (&self.sky_no_motion, &self.meshes_no_motion)
        }
    }

    pub fn destroy(self, gpu: &Gpu) {
        self.sky.destroy(gpu);
        self.meshes_pipeline.destroy(gpu);
        self.sky_no_motion.destroy(gpu);
        self.meshes_no_motion.destroy(gpu);
        self.textures.destroy(gpu);
        unsafe { gpu.device.destroy_sampler(self.sampler, None) };
        if let Some(s) = self.upscale_sampler {
            unsafe { gpu.device.destroy_sampler(s, None) };
        }
        for (_, mesh) in self.meshes {
            mesh.destroy(gpu);
        }
    }
}

fn mesh_push(view_proj: Mat4, model: Mat4, emissive: f32, sun: glam::Vec3) -> MeshPush {
    let rows = model.transpose().to_cols_array_2d();
    MeshPush {
        mvp: (view_proj * model).to_cols_array(),
        model_rows: [rows[0], rows[1], rows[2]],
        params: [emissive, sun.x, sun.y, sun.z],
    }
}

fn vertex_attributes() -> [vk::VertexInputAttributeDescription; 4] {
    let attr = |location, format, offset: usize| vk::VertexInputAttributeDescription {
        location,
        binding: 0,
        format,
        offset: offset as u32,
    };
    [
        attr(
            0,
            vk::Format::R32G32B32_SFLOAT,
            std::mem::offset_of!(Vertex, pos),
        ),
        attr(
            1,
            vk::Format::R32G32B32_SFLOAT,
            std::mem::offset_of!(Vertex, normal),
        ),
        attr(
            2,
            vk::Format::R32G32_SFLOAT,
            std::mem::offset_of!(Vertex, uv),
        ),
        attr(
            3,
            vk::Format::R32G32B32A32_SFLOAT,
            std::mem::offset_of!(Vertex, color),
        ),
    ]
}

/// Sets a full-extent viewport and scissor.
///
/// # Safety
/// `cmd` is recording.
pub unsafe fn set_viewport(device: &ash::Device, cmd: vk::CommandBuffer, extent: vk::Extent2D) {
    set_viewport_rect(
        device,
        cmd,
        vk::Rect2D {
            offset: vk::Offset2D::default(),
            extent,
        },
    );
}

/// # Safety
/// `cmd` is recording.
pub unsafe fn set_viewport_rect(device: &ash::Device, cmd: vk::CommandBuffer, rect: vk::Rect2D) {
    let viewport = vk::Viewport {
        x: rect.offset.x as f32,
        y: rect.offset.y as f32,
        width: rect.extent.width as f32,
        height: rect.extent.height as f32,
        min_depth: 0.0,
        max_depth: 1.0,
    };
    device.cmd_set_viewport(cmd, 0, &[viewport]);
    device.cmd_set_scissor(cmd, 0, &[rect]);
}

impl Destroy for ScenePass {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
    }
}
