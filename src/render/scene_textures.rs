//! The scene's texture array: the material layers uploaded once at load time into one sRGB
//! image with a full mip chain built on the GPU (linear blits, so filtered in linear light).

use ash::vk;

use crate::gpu::barrier::{self, Transition};
use crate::gpu::{self, Buffer, Gpu, Image, ImageDesc};

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
    let image = Image::new(gpu, "scene textures", desc)?;
    let bytes: Vec<u8> = layers
        .iter()
        .flat_map(|l| l.as_raw().iter().copied())
        .collect();
    let staging = Buffer::with_data(
        gpu,
        "texture staging",
        vk::BufferUsageFlags::TRANSFER_SRC,
        &bytes,
    )?;
    let result = gpu.one_shot(|cmd| unsafe { record_texture_upload(gpu, cmd, &image, &staging) });
    staging.destroy(gpu);
    result?;
    Ok(image)
}

/// Copies mip 0 of every layer, then builds the mip chain with linear blits.
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
    let level = |mip: u32| vk::ImageSubresourceRange {
        aspect_mask: vk::ImageAspectFlags::COLOR,
        base_mip_level: mip,
        level_count: 1,
        base_array_layer: 0,
        layer_count: desc.layers,
    };
    let layers = |mip: u32| vk::ImageSubresourceLayers {
        aspect_mask: vk::ImageAspectFlags::COLOR,
        mip_level: mip,
        base_array_layer: 0,
        layer_count: desc.layers,
    };
    let t = |range, from, to| Transition {
        image: image.raw,
        range,
        from,
        to,
    };
    barrier::transition(
        device,
        cmd,
        &[t(desc.range(), barrier::REUSE, barrier::TRANSFER_DST)],
    );
    let copy = vk::BufferImageCopy::default()
        .image_subresource(layers(0))
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
    let size = |mip: u32| vk::Offset3D {
        x: (desc.extent.width >> mip).max(1) as i32,
        y: (desc.extent.height >> mip).max(1) as i32,
        z: 1,
    };
    for mip in 1..desc.mip_levels {
        barrier::transition(
            device,
            cmd,
            &[t(
                level(mip - 1),
                barrier::TRANSFER_DST,
                barrier::TRANSFER_SRC,
            )],
        );
        let blit = vk::ImageBlit::default()
            .src_subresource(layers(mip - 1))
            .src_offsets([vk::Offset3D::default(), size(mip - 1)])
            .dst_subresource(layers(mip))
            .dst_offsets([vk::Offset3D::default(), size(mip)]);
        device.cmd_blit_image(
            cmd,
            image.raw,
            vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
            image.raw,
            vk::ImageLayout::TRANSFER_DST_OPTIMAL,
            &[blit],
            vk::Filter::LINEAR,
        );
    }
    let last = desc.mip_levels - 1;
    let mut done = vec![t(level(last), barrier::TRANSFER_DST, barrier::SAMPLED)];
    if last > 0 {
        let mut below = level(0);
        below.level_count = last;
        done.push(t(below, barrier::TRANSFER_SRC, barrier::SAMPLED));
    }
    barrier::transition(device, cmd, &done);
}
