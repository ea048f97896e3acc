//! 2D images (optionally layered and mipmapped) with their view and memory.

use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme};
use gpu_allocator::MemoryLocation;

use super::barrier::{State, Transition};
use super::{Gpu, Result};

#[derive(Clone, Copy, Debug)]
pub struct ImageDesc {
    pub extent: vk::Extent2D,
    pub format: vk::Format,
    pub usage: vk::ImageUsageFlags,
    pub mip_levels: u32,
    pub layers: u32,
}

impl ImageDesc {
    pub fn new_2d(extent: vk::Extent2D, format: vk::Format, usage: vk::ImageUsageFlags) -> Self {
        Self {
            extent,
            format,
            usage,
            mip_levels: 1,
            layers: 1,
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
        Transition {
            image: self.raw,
            range: self.desc.range(),
            from,
            to,
        }
    }

    pub fn new(gpu: &Gpu, name: &str, desc: ImageDesc) -> Result<Self> {
        let info = vk::ImageCreateInfo::default()
            .image_type(vk::ImageType::TYPE_2D)
            .format(desc.format)
            .extent(vk::Extent3D {
                width: desc.extent.width,
                height: desc.extent.height,
                depth: 1,
            })
            .mip_levels(desc.mip_levels)
            .array_layers(desc.layers)
            .samples(vk::SampleCountFlags::TYPE_1)
            .tiling(vk::ImageTiling::OPTIMAL)
            .usage(desc.usage)
            .initial_layout(vk::ImageLayout::UNDEFINED);
        let raw = unsafe { gpu.device.create_image(&info, None)? };
        let requirements = unsafe { gpu.device.get_image_memory_requirements(raw) };
        let allocation = gpu.allocator().allocate(&AllocationCreateDesc {
            name,
            requirements,
            location: MemoryLocation::GpuOnly,
            linear: false,
            allocation_scheme: AllocationScheme::GpuAllocatorManaged,
        });
        let allocation = match allocation {
            Ok(a) => a,
            Err(e) => {
                unsafe { gpu.device.destroy_image(raw, None) };
                return Err(e.into());
            }
        };
        unsafe {
            gpu.device
                .bind_image_memory(raw, allocation.memory(), allocation.offset())?
        };
        let view_type = if desc.layers > 1 {
            vk::ImageViewType::TYPE_2D_ARRAY
        } else {
            vk::ImageViewType::TYPE_2D
        };
        let view_info = vk::ImageViewCreateInfo::default()
            .image(raw)
            .view_type(view_type)
            .format(desc.format)
            .subresource_range(desc.range());
        let view = unsafe { gpu.device.create_image_view(&view_info, None)? };
        gpu.name(raw, name);
        gpu.name(view, name);
        Ok(Self {
            raw,
            view,
            allocation,
            desc,
        })
    }

    pub fn extent(&self) -> vk::Extent2D {
        self.desc.extent
    }

    pub fn destroy(self, gpu: &Gpu) {
        unsafe {
            gpu.device.destroy_image_view(self.view, None);
            gpu.device.destroy_image(self.raw, None);
        }
        let _ = gpu.allocator().free(self.allocation);
    }
}

/// A sampler; linear filtering or nearest, always clamped to the edge (no wrap across borders).
pub fn create_sampler(
    gpu: &Gpu,
    name: &str,
    linear: bool,
    repeat: bool,
    max_lod: f32,
) -> Result<vk::Sampler> {
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
