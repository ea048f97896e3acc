//! Named image states and the barriers between them (synchronization2).
//!
//! A state says which stage last touched (or will touch) an image, how, and in which layout, so a
//! transition reads as "from COLOR_WRITE to SAMPLED_COMPUTE" instead of six flags.

use ash::vk;

#[derive(Clone, Copy, Debug)]
pub struct State {
    pub stage: vk::PipelineStageFlags2,
    pub access: vk::AccessFlags2,
    pub layout: vk::ImageLayout,
}

const fn state(
    stage: vk::PipelineStageFlags2,
    access: vk::AccessFlags2,
    layout: vk::ImageLayout,
) -> State {
    State {
        stage,
        access,
        layout,
    }
}

/// Contents not needed (the next writer overwrites all of them), but earlier readers in the queue
/// (an upscaler, the composite or a copy of the previous frame) must be done before the write.
pub const REUSE: State = state(
    vk::PipelineStageFlags2::from_raw(
        vk::PipelineStageFlags2::COMPUTE_SHADER.as_raw()
            | vk::PipelineStageFlags2::FRAGMENT_SHADER.as_raw()
            | vk::PipelineStageFlags2::COPY.as_raw(),
    ),
    vk::AccessFlags2::NONE,
    vk::ImageLayout::UNDEFINED,
);
/// A depth buffer whose previous frame's contents are not needed.
pub const DEPTH_REUSE: State = state(
    vk::PipelineStageFlags2::from_raw(
        vk::PipelineStageFlags2::EARLY_FRAGMENT_TESTS.as_raw()
            | vk::PipelineStageFlags2::LATE_FRAGMENT_TESTS.as_raw(),
    ),
    vk::AccessFlags2::DEPTH_STENCIL_ATTACHMENT_WRITE,
    vk::ImageLayout::UNDEFINED,
);
/// A colour attachment only render passes use (the scene's multisampled one), whose previous
/// contents are not needed: the previous pass's writes (draws, store) must be done first.
pub const ATTACHMENT_REUSE: State = state(
    vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT,
    vk::AccessFlags2::COLOR_ATTACHMENT_WRITE,
    vk::ImageLayout::UNDEFINED,
);
/// A swapchain image just acquired: the acquire semaphore wait (at colour output) orders it.
pub const ACQUIRED: State = state(
    vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT,
    vk::AccessFlags2::NONE,
    vk::ImageLayout::UNDEFINED,
);
pub const COLOR_WRITE: State = state(
    vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT,
    vk::AccessFlags2::from_raw(
        vk::AccessFlags2::COLOR_ATTACHMENT_WRITE.as_raw()
            | vk::AccessFlags2::COLOR_ATTACHMENT_READ.as_raw(),
    ),
    vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL,
);
pub const DEPTH_WRITE: State = state(
    vk::PipelineStageFlags2::from_raw(
        vk::PipelineStageFlags2::EARLY_FRAGMENT_TESTS.as_raw()
            | vk::PipelineStageFlags2::LATE_FRAGMENT_TESTS.as_raw(),
    ),
    vk::AccessFlags2::from_raw(
        vk::AccessFlags2::DEPTH_STENCIL_ATTACHMENT_WRITE.as_raw()
            | vk::AccessFlags2::DEPTH_STENCIL_ATTACHMENT_READ.as_raw(),
    ),
    vk::ImageLayout::DEPTH_ATTACHMENT_OPTIMAL,
);
/// The single-sample target of a depth resolve at the end of a rendering scope. The spec runs
/// resolves at the colour-output stage as colour-attachment writes, whatever the aspect; the
/// depth-test stages and writes are included for implementations that count them as depth.
pub const DEPTH_RESOLVE_WRITE: State = state(
    vk::PipelineStageFlags2::from_raw(
        vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT.as_raw()
            | vk::PipelineStageFlags2::EARLY_FRAGMENT_TESTS.as_raw()
            | vk::PipelineStageFlags2::LATE_FRAGMENT_TESTS.as_raw(),
    ),
    vk::AccessFlags2::from_raw(
        vk::AccessFlags2::COLOR_ATTACHMENT_WRITE.as_raw()
            | vk::AccessFlags2::DEPTH_STENCIL_ATTACHMENT_WRITE.as_raw(),
    ),
    vk::ImageLayout::DEPTH_ATTACHMENT_OPTIMAL,
);
/// Sampled by a compute or fragment shader (the upscaler's input, the composite's input).
pub const SAMPLED: State = state(
    vk::PipelineStageFlags2::from_raw(
        vk::PipelineStageFlags2::COMPUTE_SHADER.as_raw()
            | vk::PipelineStageFlags2::FRAGMENT_SHADER.as_raw(),
    ),
    vk::AccessFlags2::SHADER_SAMPLED_READ,
    vk::ImageLayout::SHADER_READ_ONLY_OPTIMAL,
);
/// Written by a compute shader as a storage image or by a copy (upscaler outputs).
pub const UPSCALE_WRITE: State = state(
    vk::PipelineStageFlags2::from_raw(
        vk::PipelineStageFlags2::COMPUTE_SHADER.as_raw() | vk::PipelineStageFlags2::COPY.as_raw(),
    ),
    vk::AccessFlags2::from_raw(
        vk::AccessFlags2::SHADER_STORAGE_WRITE.as_raw() | vk::AccessFlags2::TRANSFER_WRITE.as_raw(),
    ),
    vk::ImageLayout::GENERAL,
);
/// Written by a compute shader as a storage image (the composite's compute pass).
pub const STORAGE_WRITE: State = state(
    vk::PipelineStageFlags2::COMPUTE_SHADER,
    vk::AccessFlags2::SHADER_STORAGE_WRITE,
    vk::ImageLayout::GENERAL,
);
pub const TRANSFER_SRC: State = state(
    vk::PipelineStageFlags2::from_raw(
        vk::PipelineStageFlags2::COPY.as_raw() | vk::PipelineStageFlags2::BLIT.as_raw(),
    ),
    vk::AccessFlags2::TRANSFER_READ,
    vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
);
pub const TRANSFER_DST: State = state(
    vk::PipelineStageFlags2::from_raw(
        vk::PipelineStageFlags2::COPY.as_raw() | vk::PipelineStageFlags2::BLIT.as_raw(),
    ),
    vk::AccessFlags2::TRANSFER_WRITE,
    vk::ImageLayout::TRANSFER_DST_OPTIMAL,
);
/// Handed to the presentation engine; the acquire semaphore orders the next use.
pub const PRESENT: State = state(
    vk::PipelineStageFlags2::BOTTOM_OF_PIPE,
    vk::AccessFlags2::NONE,
    vk::ImageLayout::PRESENT_SRC_KHR,
);

/// One image (or a mip/layer range of it) moving between two states.
#[derive(Clone, Copy, Debug)]
pub struct Transition {
    pub image: vk::Image,
    pub range: vk::ImageSubresourceRange,
    pub from: State,
    pub to: State,
}

pub fn color_range() -> vk::ImageSubresourceRange {
    vk::ImageSubresourceRange {
        aspect_mask: vk::ImageAspectFlags::COLOR,
        base_mip_level: 0,
        level_count: 1,
        base_array_layer: 0,
        layer_count: 1,
    }
}

/// Records all transitions in one barrier.
///
/// # Safety
/// `cmd` is in the recording state and belongs to `device`.
pub unsafe fn transition(device: &ash::Device, cmd: vk::CommandBuffer, transitions: &[Transition]) {
    let barriers: Vec<vk::ImageMemoryBarrier2> = transitions
        .iter()
        .map(|t| {
            vk::ImageMemoryBarrier2::default()
                .image(t.image)
                .subresource_range(t.range)
                .src_stage_mask(t.from.stage)
                .src_access_mask(t.from.access)
                .old_layout(t.from.layout)
                .dst_stage_mask(t.to.stage)
                .dst_access_mask(t.to.access)
                .new_layout(t.to.layout)
        })
        .collect();
    let dependency = vk::DependencyInfo::default().image_memory_barriers(&barriers);
    device.cmd_pipeline_barrier2(cmd, &dependency);
}

/// A global memory barrier, for buffer hand-overs between passes.
///
/// # Safety
/// `cmd` is in the recording state and belongs to `device`.
pub unsafe fn memory(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    src: (vk::PipelineStageFlags2, vk::AccessFlags2),
    dst: (vk::PipelineStageFlags2, vk::AccessFlags2),
) {
    let barrier = [vk::MemoryBarrier2::default()
        .src_stage_mask(src.0)
        .src_access_mask(src.1)
        .dst_stage_mask(dst.0)
        .dst_access_mask(dst.1)];
    let dependency = vk::DependencyInfo::default().memory_barriers(&barrier);
    device.cmd_pipeline_barrier2(cmd, &dependency);
}
