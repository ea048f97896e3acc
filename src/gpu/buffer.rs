//! Buffers with their memory.

use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme};
use gpu_allocator::MemoryLocation;

use super::{Gpu, Result};

pub struct Buffer {
    pub raw: vk::Buffer,
    pub allocation: Allocation,
    pub size: u64,
}

impl Buffer {
    /// Allocation happens here only: at load time, on resize or on a pattern switch, never per frame.
    pub fn new(
        gpu: &Gpu,
        name: &str,
        size: u64,
        usage: vk::BufferUsageFlags,
        location: MemoryLocation,
    ) -> Result<Self> {
        let info = vk::BufferCreateInfo::default().size(size).usage(usage);
        let raw = unsafe { gpu.device.create_buffer(&info, None)? };
        let requirements = unsafe { gpu.device.get_buffer_memory_requirements(raw) };
        let allocation = gpu.allocator().allocate(&AllocationCreateDesc {
            name,
            requirements,
            location,
            linear: true,
            allocation_scheme: AllocationScheme::GpuAllocatorManaged,
        });
        let allocation = match allocation {
            Ok(a) => a,
            Err(e) => {
                unsafe { gpu.device.destroy_buffer(raw, None) };
                return Err(e.into());
            }
        };
        unsafe {
            gpu.device
                .bind_buffer_memory(raw, allocation.memory(), allocation.offset())?
        };
        gpu.name(raw, name);
        Ok(Self {
            raw,
            allocation,
            size,
        })
    }

    /// A host-visible buffer filled with `data` (vertex, index and staging data at load time).
    pub fn with_data(
        gpu: &Gpu,
        name: &str,
        usage: vk::BufferUsageFlags,
        data: &[u8],
    ) -> Result<Self> {
        let mut buffer = Self::new(
            gpu,
            name,
            data.len() as u64,
            usage,
            MemoryLocation::CpuToGpu,
        )?;
        buffer.mapped_mut()[..data.len()].copy_from_slice(data);
        Ok(buffer)
    }

    /// The mapped bytes; panics for GPU-only memory, which is a programming error.
    pub fn mapped(&self) -> &[u8] {
        &self
            .allocation
            .mapped_slice()
            .expect("buffer is not host-visible")[..self.size as usize]
    }

    pub fn mapped_mut(&mut self) -> &mut [u8] {
        let size = self.size as usize;
        &mut self
            .allocation
            .mapped_slice_mut()
            .expect("buffer is not host-visible")[..size]
    }

    pub fn destroy(self, gpu: &Gpu) {
        let _ = gpu.allocator().free(self.allocation);
        unsafe { gpu.device.destroy_buffer(self.raw, None) };
    }
}
