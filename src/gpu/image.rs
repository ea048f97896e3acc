//! 2D images (optionally layered and mipmapped) with their view and memory.

use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme};
use gpu_allocator::MemoryLocation;

use super::barrier::{State, Transition};
use super::{Destroy as _, Gpu, Result};

#[derive(Clone, Copy, Debug)]
pub struct ImageDesc {
    pub extent: vk::Extent2D,
    pub format: vk::Format,
    pub usage: vk::ImageUsageFlags,
    pub mip_levels: u32,
    pub layers: u32,
    /// Samples per pixel (TYPE_1 except for multisampled attachments).
    pub samples: vk::SampleCountFlags,
    /// Formats that views of this image may have besides `format` (MUTABLE_FORMAT with a format
    /// list, so drivers can keep compression for the listed ones); empty for most images.
    pub view_formats: &'static [vk::Format],
}

impl ImageDesc {
    pub fn new_2d(extent: vk::Extent2D, format: vk::Format, usage: vk::ImageUsageFlags) -> Self {
        Self {
            extent,
            format,
            usage,
            mip_levels: 1,
            layers: 1,
            samples: vk::SampleCountFlags::TYPE_1,
            view_formats: &[],
        }
    }

    pub fn aspect(&self) -> vk::ImageAspectFlags {
        match self.format {
            vk::Format::D32_SFLOAT | vk::Format::D16_UNORM => vk::ImageAspectFlags::DEPTH,
            _ => vk::ImageAspectFlags::COLOR,
        }
    }

    pub fn range(&self) -> vk::ImageSubresourceRange {
        vk::ImageSubresourceRange {
            aspect_mask: self.aspect(),
            base_mip_level: 0,
            level_count: self.mip_levels,
            base_array_layer: 0,
            layer_count: self.layers,
        }
    }
}

pub struct Image {
    pub raw: vk::Image,
    pub view: vk::ImageView,
    pub allocation: Allocation,
    pub desc: ImageDesc,
}

impl Image {
    /// The whole image moving from one state to another (for `barrier::transition`).
    pub fn transition(&self, from: State, to: State) -> Transition {
        self.transition_range(self.desc.range(), from, to)
    }

    /// Part of the image (some mip levels or layers) moving from one state to another.
    pub fn transition_range(
        &self,
        range: vk::ImageSubresourceRange,
        from: State,
        to: State,
    ) -> Transition {
        Transition {
            image: self.raw,
            range,
            from,
            to,
        }
    }

    pub fn new(gpu: &Gpu, name: &str, desc: ImageDesc) -> Result<Self> {
        let formats: Vec<vk::Format> = std::iter::once(desc.format)
            .chain(desc.view_formats.iter().copied())
            .collect();
        let mut format_list = vk::ImageFormatListCreateInfo::default().view_formats(&formats);
        let mut info = vk::ImageCreateInfo::default()
            .image_type(vk::ImageType::TYPE_2D)
            .format(desc.format)
            .extent(vk::Extent3D {
                width: desc.extent.width,
                height: desc.extent.height,
                depth: 1,
            })
            .mip_levels(desc.mip_levels)
            .array_layers(desc.layers)
            .samples(desc.samples)
            .tiling(vk::ImageTiling::OPTIMAL)
            .usage(desc.usage)
            .initial_layout(vk::ImageLayout::UNDEFINED);
        if !desc.view_formats.is_empty() {
            info = info
                .flags(vk::ImageCreateFlags::MUTABLE_FORMAT)
                .push_next(&mut format_list);
        }
        // Guarded: a failure below releases the image and its memory.
        let raw = unsafe { gpu.device.create_image(&info, None)? }.guard(gpu);
        let requirements = unsafe { gpu.device.get_image_memory_requirements(*raw) };
        crate::fault::check("image memory", name)?;
        let allocation = gpu
            .allocator()
            .allocate(&AllocationCreateDesc {
                name,
                requirements,
                location: MemoryLocation::GpuOnly,
                linear: false,
                allocation_scheme: AllocationScheme::GpuAllocatorManaged,
            })?
            .guard(gpu);
        unsafe {
            gpu.device
                .bind_image_memory(*raw, allocation.memory(), allocation.offset())?
        };
        let view_type = if desc.layers > 1 {
            vk::ImageViewType::TYPE_2D_ARRAY
        } else {
            vk::ImageViewType::TYPE_2D
        };
        let view_info = vk::ImageViewCreateInfo::default()
            .image(*raw)
            .view_type(view_type)
            .format(desc.format)
            .subresource_range(desc.range());
        crate::fault::check("image view", name)?;
        let view = unsafe { gpu.device.create_image_view(&view_info, None)? };
        gpu.name(*raw, name);
        gpu.name(view, name);
        Ok(Self {
            raw: raw.keep(),
            view,
            allocation: allocation.keep(),
            desc,
        })
    }

    pub fn extent(&self) -> vk::Extent2D {
        self.desc.extent
    }

    /// A second view of the whole image in another of its `view_formats`, for `usage` only (the
    /// image's other usages may not hold for that format). The caller destroys it before the image.
    pub fn format_view(
        &self,
        gpu: &Gpu,
        name: &str,
        format: vk::Format,
        usage: vk::ImageUsageFlags,
    ) -> Result<vk::ImageView> {
        debug_assert!(self.desc.view_formats.contains(&format));
        let mut usage_info = vk::ImageViewUsageCreateInfo::default().usage(usage);
        let info = vk::ImageViewCreateInfo::default()
            .image(self.raw)
            .view_type(vk::ImageViewType::TYPE_2D)
            .format(format)
            .subresource_range(self.desc.range())
            .push_next(&mut usage_info);
        let view = unsafe { gpu.device.create_image_view(&info, None)? };
        gpu.name(view, name);
        Ok(view)
    }

    pub fn destroy(self, gpu: &Gpu) {
        unsafe {
            gpu.device.destroy_image_view(self.view, None);
            gpu.device.destroy_image(self.raw, None);
        }
        let _ = gpu.allocator().free(self.allocation);
    }
}

/// The flag for `n` samples per pixel (1, 2, 4 ... 64).
pub fn sample_count(n: u32) -> vk::SampleCountFlags {
    assert!(
        n.is_power_of_two() && n <= 64,
        "{n} samples per pixel is not a Vulkan sample count"
    );
    vk::SampleCountFlags::from_raw(n)
}

/// The sample counts set in `flags`, as numbers of samples, ascending.
pub fn sample_counts(flags: vk::SampleCountFlags) -> Vec<u32> {
    (0..7)
        .map(|bit| 1u32 << bit)
        .filter(|&n| flags.contains(vk::SampleCountFlags::from_raw(n)))
        .collect()
}

/// A sampler; linear filtering or nearest, always clamped to the edge (no wrap across borders).
pub fn create_sampler(
    gpu: &Gpu,
    name: &str,
    linear: bool,
    repeat: bool,
    max_lod: f32,
) -> Result<vk::Sampler> {
    create_sampler_with_bias(gpu, name, linear, repeat, max_lod, 0.0)
}

/// [`create_sampler`] with a mip LOD bias (negative: sharper mips than the footprint asks for).
pub fn create_sampler_with_bias(
    gpu: &Gpu,
    name: &str,
    linear: bool,
    repeat: bool,
    max_lod: f32,
    mip_lod_bias: f32,
) -> Result<vk::Sampler> {
    crate::fault::check("sampler", name)?;
    let filter = if linear {
        vk::Filter::LINEAR
    } else {
        vk::Filter::NEAREST
    };
    let mode = if repeat {
        vk::SamplerAddressMode::REPEAT
    } else {
        vk::SamplerAddressMode::CLAMP_TO_EDGE
    };
    let info = vk::SamplerCreateInfo::default()
        .mag_filter(filter)
        .min_filter(filter)
        .mipmap_mode(if linear {
            vk::SamplerMipmapMode::LINEAR
        } else {
            vk::SamplerMipmapMode::NEAREST
        })
        .address_mode_u(mode)
        .address_mode_v(mode)
        .address_mode_w(mode)
        .mip_lod_bias(mip_lod_bias)
        .max_lod(max_lod);
    let sampler = unsafe { gpu.device.create_sampler(&info, None)? };
    gpu.name(sampler, name);
    Ok(sampler)
}

/// A buffer<->image copy of a whole single-layer colour image, tightly packed.
pub fn whole_copy(extent: vk::Extent2D) -> vk::BufferImageCopy {
    vk::BufferImageCopy::default()
        .image_subresource(vk::ImageSubresourceLayers {
            aspect_mask: vk::ImageAspectFlags::COLOR,
            mip_level: 0,
            base_array_layer: 0,
            layer_count: 1,
        })
        .image_extent(vk::Extent3D {
            width: extent.width,
            height: extent.height,
            depth: 1,
        })
}

/// Copies `image` (in state `state`) into `buffer` (tightly packed 4 bytes per pixel) and
/// returns it to `state`; the buffer is visible to host reads once the frame's fence signalled.
///
/// # Safety
/// `cmd` is recording outside a rendering scope; the image is in `state`.
pub unsafe fn record_capture(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    image: vk::Image,
    extent: vk::Extent2D,
    state: State,
    buffer: vk::Buffer,
) {
    let range = super::barrier::color_range();
    record_capture_range(device, cmd, image, extent, range, state, buffer);
}

/// [`record_capture`] for an [`Image`] of any single-plane format, depth included (the copy
/// is tightly packed in the format's texel size).
///
/// # Safety
/// As [`record_capture`].
pub unsafe fn record_capture_image(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    image: &Image,
    state: State,
    buffer: vk::Buffer,
) {
    let range = image.desc.range();
    record_capture_range(device, cmd, image.raw, image.extent(), range, state, buffer);
}

unsafe fn record_capture_range(
    device: &ash::Device,
    cmd: vk::CommandBuffer,
    image: vk::Image,
    extent: vk::Extent2D,
    range: vk::ImageSubresourceRange,
    state: State,
    buffer: vk::Buffer,
) {
    let t = |from, to| Transition {
        image,
        range,
        from,
        to,
    };
    super::barrier::transition(device, cmd, &[t(state, super::barrier::TRANSFER_SRC)]);
    let mut copy = whole_copy(extent);
    copy.image_subresource.aspect_mask = range.aspect_mask;
    device.cmd_copy_image_to_buffer(
        cmd,
        image,
        vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
        buffer,
        &[copy],
    );
    super::barrier::memory(
        device,
        cmd,
        (
            vk::PipelineStageFlags2::COPY,
            vk::AccessFlags2::TRANSFER_WRITE,
        ),
        (vk::PipelineStageFlags2::HOST, vk::AccessFlags2::HOST_READ),
    );
    // Back to the state the next user expects (the UI pass loads the composited pixels).
    super::barrier::transition(device, cmd, &[t(super::barrier::TRANSFER_SRC, state)]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_counts_are_numbers_of_samples() {
        assert_eq!(sample_count(1), vk::SampleCountFlags::TYPE_1);
        assert_eq!(sample_count(4), vk::SampleCountFlags::TYPE_4);
        assert_eq!(sample_count(8), vk::SampleCountFlags::TYPE_8);
        let lavapipe = vk::SampleCountFlags::TYPE_1 | vk::SampleCountFlags::TYPE_4;
        assert_eq!(sample_counts(lavapipe), [1, 4]);
        assert_eq!(
            sample_counts(vk::SampleCountFlags::from_raw(0x7f)),
            [1, 2, 4, 8, 16, 32, 64]
        );
        assert!(sample_counts(vk::SampleCountFlags::empty()).is_empty());
    }

    #[test]
    #[should_panic(expected = "3 samples per pixel")]
    fn three_samples_is_not_a_sample_count() {
        sample_count(3);
    }
}
