//! Host memory that Vulkan and a host-side runtime share (VK_EXT_external_memory_host): we
//! allocate page-aligned memory, import it into Vulkan as a buffer, and hand the same pointer to
//! ONNX Runtime, so neither side copies.

use std::alloc::Layout;
use std::ptr::NonNull;

use ash::vk;

use super::guard::Destroy;
use super::{Error, Gpu, Result};

/// A Vulkan buffer over host memory owned by this struct.
pub struct HostBuffer {
    pub raw: vk::Buffer,
    memory: vk::DeviceMemory,
    ptr: NonNull<u8>,
    layout: Layout,
    /// The bytes asked for; the allocation is rounded up to the import alignment.
    pub size: u64,
}

/// Rounds `size` up to a multiple of `align` (a power of two).
pub fn round_up(size: u64, align: u64) -> u64 {
    size.div_ceil(align) * align
}

impl HostBuffer {
    /// Fails with the reason when the device cannot import host memory.
    pub fn new(gpu: &Gpu, name: &str, size: u64, usage: vk::BufferUsageFlags) -> Result<Self> {
        let ext = gpu.external_memory_host.as_ref().ok_or_else(|| {
            Error::Missing(format!(
                "{} lacks VK_EXT_external_memory_host",
                gpu.info.name
            ))
        })?;
        let align = gpu.info.min_imported_host_pointer_alignment.max(4096);
        let alloc_size = round_up(size, align);
        let layout = Layout::from_size_align(alloc_size as usize, align as usize)
            .map_err(|e| Error::Missing(format!("host buffer layout: {e}")))?;
        // SAFETY: non-zero size (rounded up from the tensor size) and a valid power-of-two align.
        let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .ok_or_else(|| Error::Missing(format!("out of host memory for {name}")))?;
        let host = HostMemory { ptr, layout }.guard(gpu);
        let (raw, memory) = import(gpu, ext, name, ptr, alloc_size, usage)?;
        let HostMemory { ptr, layout } = host.keep();
        Ok(Self {
            raw,
            memory,
            ptr,
            layout,
            size,
        })
    }

    /// The memory as f32s (the requested size). The caller orders access against the GPU.
    pub fn as_f32_mut(&mut self) -> &mut [f32] {
        // SAFETY: the allocation is at least `size` bytes, 4096-aligned, zero-initialised, and
        // borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast(), self.size as usize / 4) }
    }

    /// Frees the Vulkan side first: the device memory must go before the host memory it maps.
    pub fn destroy(self, gpu: &Gpu) {
        unsafe {
            gpu.device.destroy_buffer(self.raw, None);
            gpu.device.free_memory(self.memory, None);
            std::alloc::dealloc(self.ptr.as_ptr(), self.layout);
        }
    }
}

fn import(
    gpu: &Gpu,
    ext: &ash::ext::external_memory_host::Device,
    name: &str,
    ptr: NonNull<u8>,
    size: u64,
    usage: vk::BufferUsageFlags,
) -> Result<(vk::Buffer, vk::DeviceMemory)> {
    let handle_type = vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;
    let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(handle_type);
    let info = vk::BufferCreateInfo::default()
        .size(size)
        .usage(usage)
        .push_next(&mut external);
    let raw = unsafe { gpu.device.create_buffer(&info, None)? }.guard(gpu);
    let mut props = vk::MemoryHostPointerPropertiesEXT::default();
    // ash 0.38 has no wrapper for this call: go through the function pointer.
    let r = unsafe {
        (ext.fp().get_memory_host_pointer_properties_ext)(
            gpu.device.handle(),
            handle_type,
            ptr.as_ptr().cast(),
            &mut props,
        )
    };
    r.result()?;
    let requirements = unsafe { gpu.device.get_buffer_memory_requirements(*raw) };
    let types = props.memory_type_bits & requirements.memory_type_bits;
    let type_index = (0..32).find(|i| types & (1 << i) != 0).ok_or_else(|| {
        Error::Missing(format!("no memory type can import host memory for {name}"))
    })?;
    let mut import = vk::ImportMemoryHostPointerInfoEXT::default()
        .handle_type(handle_type)
        .host_pointer(ptr.as_ptr().cast());
    let alloc = vk::MemoryAllocateInfo::default()
        .allocation_size(size)
        .memory_type_index(type_index)
        .push_next(&mut import);
    crate::fault::check("host memory import", name)?;
    let memory = unsafe { gpu.device.allocate_memory(&alloc, None)? }.guard(gpu);
    unsafe { gpu.device.bind_buffer_memory(*raw, *memory, 0)? };
    gpu.name(*raw, name);
    gpu.name(*memory, name);
    Ok((raw.keep(), memory.keep()))
}

/// Host memory from the global allocator, before a [`HostBuffer`] owns it: freed if the import
/// fails. The device memory that imports it is freed first (a guard made later drops earlier).
struct HostMemory {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Destroy for HostMemory {
    fn destroy_with(self, _gpu: &Gpu) {
        // SAFETY: allocated with `layout` by HostBuffer::new and not yet handed to a HostBuffer.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_round_up_to_the_import_alignment() {
        assert_eq!(super::round_up(1, 4096), 4096);
        assert_eq!(super::round_up(4096, 4096), 4096);
        assert_eq!(super::round_up(4097, 4096), 8192);
        assert_eq!(super::round_up(691_200, 65536), 720_896);
    }
}
