//! The scene's texture array: the material layers uploaded once at load time into one sRGB
//! image with a full mip chain built on the GPU (linear blits, so filtered in linear light).

use ash::vk;

use crate::gpu::barrier;
use crate::gpu::{self, Buffer, Destroy as _, Gpu, Image, ImageDesc};

/// Uploads the texture layers into one mipmapped array image (load time only).
pub(super) fn upload_texture_array(gpu: &Gpu, layers: &[image::RgbaImage]) -> gpu::Result<Image> {
    let (w, h) = layers[0].dimensions();
    let mip_levels = 32 - w.max(h).leading_zeros();
    let mut desc = ImageDesc::new_2d(
        vk::Extent2D {
            width: w,
            height: h,
        },
        // sRGB format: sampling and the mip blits filter in linear light.
        vk::Format::R8G8B8A8_SRGB,
        vk::ImageUsageFlags::SAMPLED
            | vk::ImageUsageFlags::TRANSFER_DST
            | vk::ImageUsageFlags::TRANSFER_SRC,
    );
    desc.mip_levels = mip_levels;
    desc.layers = layers.len() as u32;
    let image = Image::new(gpu, "scene textures", desc)?.guard(gpu);
    let bytes: Vec<u8> = layers
        .iter()
        .flat_map(|l| l.as_raw().iter().copied())
        .collect();
    let staging = Buffer::with_data(
        gpu,
        "texture staging",
        vk::BufferUsageFlags::TRANSFER_SRC,
        &bytes,
    )?
    .guard(gpu);
    // `one_shot` waits for the upload, so on failure both can be destroyed at once.
    gpu.one_shot(|cmd| unsafe { record_texture_upload(gpu, cmd, &image, &staging) })?;
    Ok(image.keep())
}

/// Copies mip 0 of every layer, then builds the mip chain with linear blits; leaves every level
/// SAMPLED.
///
/// # Safety
/// `cmd` is recording; `image` was just created (UNDEFINED layout).
unsafe fn record_texture_upload(
    gpu: &Gpu,
    cmd: vk::CommandBuffer,
    image: &Image,
    staging: &Buffer,
) {
    let device = &gpu.device;
    let desc = image.desc;
    barrier::transition(
        device,
        cmd,
        &[image.transition(barrier::REUSE, barrier::TRANSFER_DST)],
    );
    let copy = vk::BufferImageCopy::default()
        .image_subresource(mip_layers(&desc, 0))
        .image_extent(vk::Extent3D {
            width: desc.extent.width,
            height: desc.extent.height,
            depth: 1,
        });
    device.cmd_copy_buffer_to_image(
        cmd,
        staging.raw,
        image.raw,
        vk::ImageLayout::TRANSFER_DST_OPTIMAL,
        &[copy],
    );
    record_mip_chain(gpu, cmd, image);
    let last = desc.mip_levels - 1;
    let mut done = vec![image.transition_range(
        mip_range(&desc, last),
        barrier::TRANSFER_DST,
        barrier::SAMPLED,
    )];
    if last > 0 {
        let mut below = mip_range(&desc, 0);
        below.level_count = last;
        done.push(image.transition_range(below, barrier::TRANSFER_SRC, barrier::SAMPLED));
    }
    barrier::transition(device, cmd, &done);
}

/// Each level from the one above by a linear blit; level n-1 goes TRANSFER_SRC before it is
/// read, the last level stays TRANSFER_DST.
///
/// # Safety
/// `cmd` is recording; every level of `image` is in TRANSFER_DST and level 0 holds the data.
unsafe fn record_mip_chain(gpu: &Gpu, cmd: vk::CommandBuffer, image: &Image) {
    let desc = image.desc;
    for mip in 1..desc.mip_levels {
        barrier::transition(
            &gpu.device,
            cmd,
            &[image.transition_range(
                mip_range(&desc, mip - 1),
                barrier::TRANSFER_DST,
                barrier::TRANSFER_SRC,
            )],
        );
        let blit = vk::ImageBlit::default()
            .src_subresource(mip_layers(&desc, mip - 1))
            .src_offsets([vk::Offset3D::default(), mip_size(&desc, mip - 1)])
            .dst_subresource(mip_layers(&desc, mip))
            .dst_offsets([vk::Offset3D::default(), mip_size(&desc, mip)]);
        gpu.device.cmd_blit_image(
            cmd,
            image.raw,
            vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
            image.raw,
            vk::ImageLayout::TRANSFER_DST_OPTIMAL,
            &[blit],
            vk::Filter::LINEAR,
        );
    }
}

/// Level `mip` of every layer.
fn mip_range(desc: &ImageDesc, mip: u32) -> vk::ImageSubresourceRange {
    vk::ImageSubresourceRange {
        aspect_mask: vk::ImageAspectFlags::COLOR,
        base_mip_level: mip,
        level_count: 1,
        base_array_layer: 0,
        layer_count: desc.layers,
    }
}

fn mip_layers(desc: &ImageDesc, mip: u32) -> vk::ImageSubresourceLayers {
    vk::ImageSubresourceLayers {
        aspect_mask: vk::ImageAspectFlags::COLOR,
        mip_level: mip,
        base_array_layer: 0,
        layer_count: desc.layers,
    }
}

/// The far corner of level `mip` (each side halved per level, at least 1).
fn mip_size(desc: &ImageDesc, mip: u32) -> vk::Offset3D {
    vk::Offset3D {
        x: (desc.extent.width >> mip).max(1) as i32,
        y: (desc.extent.height >> mip).max(1) as i32,
        z: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mip_sizes_halve_down_to_one() {
        let desc = ImageDesc::new_2d(
            vk::Extent2D {
                width: 256,
                height: 64,
            },
            vk::Format::R8G8B8A8_SRGB,
            vk::ImageUsageFlags::SAMPLED,
        );
        let side = |mip| (mip_size(&desc, mip).x, mip_size(&desc, mip).y);
        assert_eq!(side(0), (256, 64));
        assert_eq!(side(6), (4, 1));
        assert_eq!(side(8), (1, 1));
    }
}
