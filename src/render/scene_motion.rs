//! The scene pass's motion-vector inputs: per frame, the unjittered view-projection of this and
//! the previous frame and every draw's MVP in both, written into the targets' `draw_data` buffer
//! inside the frame's command buffer. `game::motion` defines what the vectors mean.

use ash::vk;
use glam::{Mat4, Vec2};

use super::scene_targets::{SceneTargets, DRAW_DATA_HEADER, MAX_DRAWS};
use crate::game::motion::Previous;
use crate::game::world::{Draw, World};
use crate::gpu::{barrier, Gpu};

/// The buffer's header, as `shaders/render/scene_motion.glsl` declares it (std430).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Header {
    view_proj: [f32; 16],
    prev_view_proj: [f32; 16],
    /// x, y: the target's size in pixels.
    size: [f32; 4],
}

/// One draw's entry, indexed by the draw's position in `World::draws` (the shader's
/// `gl_InstanceIndex`: each draw is recorded with that first instance).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(super) struct DrawMotion {
    mvp: [f32; 16],
    prev_mvp: [f32; 16],
}

/// Host-side scratch for one frame's draw data, kept so a frame allocates nothing.
pub(super) struct MotionScratch {
    prev_draws: Vec<Draw>,
    entries: Vec<DrawMotion>,
}

impl MotionScratch {
    pub fn new() -> Self {
        Self {
            prev_draws: Vec::with_capacity(64),
            entries: Vec::with_capacity(64),
        }
    }

    /// Advances `targets`' history to this frame (`view_proj` unjittered) and records the
    /// upload of this frame's draw data for `draws` (this frame's, from `world`).
    ///
    /// # Safety
    /// `cmd` is recording outside a rendering scope; the scene shaders of earlier frames are
    /// the only other users of the buffer (the barriers order this write after their reads).
    pub unsafe fn record_upload(
        &mut self,
        gpu: &Gpu,
        cmd: vk::CommandBuffer,
        targets: &SceneTargets,
        world: &World,
        draws: &[Draw],
        view_proj: Mat4,
    ) {
        let mut history = targets.history.get();
        let prev = history.advance(Previous {
            view_proj,
            time: world.time,
        });
        targets.history.set(history);
        world.draws_at(prev.time, &mut self.prev_draws);
        assert!(draws.len() <= MAX_DRAWS, "{} draws", draws.len());
        debug_assert_eq!(draws.len(), self.prev_draws.len());
        self.entries.clear();
        self.entries.extend(
            draws
                .iter()
                .zip(&self.prev_draws)
                .map(|(now, before)| DrawMotion {
                    mvp: (view_proj * now.model).to_cols_array(),
                    prev_mvp: (prev.view_proj * before.model).to_cols_array(),
                }),
        );
        let extent = targets.color.extent();
        let size = Vec2::new(extent.width as f32, extent.height as f32);
        let header = Header {
            view_proj: view_proj.to_cols_array(),
            prev_view_proj: prev.view_proj.to_cols_array(),
            size: [size.x, size.y, 0.0, 0.0],
        };
        let device = &gpu.device;
        let shaders =
            vk::PipelineStageFlags2::VERTEX_SHADER | vk::PipelineStageFlags2::FRAGMENT_SHADER;
        let transfer = vk::PipelineStageFlags2::ALL_TRANSFER;
        // The previous frame's draws must have read the buffer before it is rewritten.
        barrier::memory(
            device,
            cmd,
            (shaders, vk::AccessFlags2::NONE),
            (transfer, vk::AccessFlags2::TRANSFER_WRITE),
        );
        let buffer = targets.draw_data.raw;
        device.cmd_update_buffer(cmd, buffer, 0, bytemuck::bytes_of(&header));
        device.cmd_update_buffer(
            cmd,
            buffer,
            DRAW_DATA_HEADER,
            bytemuck::cast_slice(&self.entries),
        );
        barrier::memory(
            device,
            cmd,
            (transfer, vk::AccessFlags2::TRANSFER_WRITE),
            (shaders, vk::AccessFlags2::SHADER_STORAGE_READ),
        );
    }
}
