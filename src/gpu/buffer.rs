//! Buffers with their memory.

use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme};
use gpu_allocator::MemoryLocation;

use super::{Destroy as _, Gpu, Result};

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
        // Guarded: a failure below releases the buffer and its memory.
        let raw = unsafe { gpu.device.create_buffer(&info, None)? }.guard(gpu);
        let requirements = unsafe { gpu.device.get_buffer_memory_requirements(*raw) };
        crate::fault::check("buffer memory", name)?;
        let allocation = gpu
            .allocator()
            .allocate(&AllocationCreateDesc {
                name,
                requirements,
                location,
                linear: true,
                allocation_scheme: AllocationScheme::GpuAllocatorManaged,
            })?
            .guard(gpu);
        unsafe {
            gpu.device
                .bind_buffer_memory(*raw, allocation.memory(), allocation.offset())?
        };
        gpu.name(*raw, name);
        Ok(Self {
            raw: raw.keep(),
            allocation: allocation.keep(),
            size,
        })
    }

    /// A host-readable buffer for one tightly packed copy of a 4-byte-per-pixel image of
    /// `extent` (captures, screenshots, the offscreen readbacks).
    pub fn readback_rgba8(gpu: &Gpu, name: &str, extent: vk::Extent2D) -> Result<Self> {
        Self::new(
            gpu,
            name,
            extent.width as u64 * extent.height as u64 * 4,
            vk::BufferUsageFlags::TRANSFER_DST,
            MemoryLocation::GpuToCpu,
        )
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

impl Buffer {
    /// Makes device writes visible to host reads of a mapped buffer whose memory is not
    /// host-coherent (the device side is covered by a HOST-stage barrier in the command buffer).
    pub fn invalidate_for_host(&self, gpu: &Gpu) -> Result<()> {
        if let Some(range) = self.non_coherent_range(gpu) {
            unsafe { gpu.device.invalidate_mapped_memory_ranges(&[range])? };
        }
        Ok(())
    }

    /// Makes host writes to a mapped buffer visible to the device when its memory is not
    /// host-coherent (queue submission covers coherent memory).
    pub fn flush_for_device(&self, gpu: &Gpu) -> Result<()> {
        if let Some(range) = self.non_coherent_range(gpu) {
            unsafe { gpu.device.flush_mapped_memory_ranges(&[range])? };
        }
        Ok(())
    }

    /// The atom-aligned memory range covering this buffer, or None for coherent memory.
    fn non_coherent_range(&self, gpu: &Gpu) -> Option<vk::MappedMemoryRange<'static>> {
        let coherent = self
            .allocation
            .memory_properties()
            .contains(vk::MemoryPropertyFlags::HOST_COHERENT);
        if coherent {
            return None;
        }
        let atom = gpu.info.non_coherent_atom_size.max(1);
        let start = self.allocation.offset() / atom * atom;
        // SAFETY: the memory object outlives this call; the range is only used right away.
        let memory = unsafe { self.allocation.memory() };
        Some(
            vk::MappedMemoryRange::default()
                .memory(memory)
                .offset(start)
                // To the end of the memory object: always atom-valid, and touching neighbours
                // of the same (host-mapped) block is harmless.
                .size(vk::WHOLE_SIZE),
        )
    }
}
