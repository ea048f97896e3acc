//! Device memory and timeline semaphores that another API on the same GPU can import
//! (VK_KHR_external_memory_fd, VK_KHR_external_semaphore_fd, opaque fds): the CUDA domain of
//! the shared-memory pattern puts its tensors and its synchronisation in these.
//!
//! Each object is allocated once (pattern start-up), never per frame. An exported fd is a new
//! reference to the object; whoever imports it owns that fd (CUDA takes it over on a successful
//! import), and the Vulkan object must outlive every importer.

use std::os::fd::{FromRawFd, OwnedFd};

use ash::vk;

use super::guard::Destroy;
use super::{Error, Gpu, Result};

const HANDLE: vk::ExternalMemoryHandleTypeFlags = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;
const SEMAPHORE_HANDLE: vk::ExternalSemaphoreHandleTypeFlags =
    vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD;

/// How the device can export storage buffers as opaque fds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferExport {
    /// The driver allows only dedicated allocations (one buffer per memory object).
    pub dedicated_only: bool,
}

/// Whether storage buffers with `usage` can be exported as opaque fds, or why not.
pub fn buffer_export_support(gpu: &Gpu, usage: vk::BufferUsageFlags) -> Result<BufferExport> {
    if gpu.external_memory_fd.is_none() {
        return Err(Error::Missing(format!(
            "{} lacks VK_KHR_external_memory_fd",
            gpu.info.name
        )));
    }
    let info = vk::PhysicalDeviceExternalBufferInfo::default()
        .usage(usage)
        .handle_type(HANDLE);
    let mut props = vk::ExternalBufferProperties::default();
    unsafe {
        gpu.instance
            .raw
            .get_physical_device_external_buffer_properties(gpu.physical, &info, &mut props)
    };
    let features = props.external_memory_properties.external_memory_features;
    if !features.contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE) {
        return Err(Error::Missing(format!(
            "{} cannot export storage-buffer memory as an opaque fd",
            gpu.info.name
        )));
    }
    Ok(BufferExport {
        dedicated_only: features.contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY),
    })
}

/// Whether timeline semaphores can be exported as opaque fds, or why not.
pub fn timeline_export_support(gpu: &Gpu) -> Result<()> {
    if gpu.external_semaphore_fd.is_none() {
        return Err(Error::Missing(format!(
            "{} lacks VK_KHR_external_semaphore_fd",
            gpu.info.name
        )));
    }
    let mut timeline =
        vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE);
    let info = vk::PhysicalDeviceExternalSemaphoreInfo::default()
        .handle_type(SEMAPHORE_HANDLE)
        .push_next(&mut timeline);
    let mut props = vk::ExternalSemaphoreProperties::default();
    unsafe {
        gpu.instance
            .raw
            .get_physical_device_external_semaphore_properties(gpu.physical, &info, &mut props)
    };
    if !props
        .external_semaphore_features
        .contains(vk::ExternalSemaphoreFeatureFlags::EXPORTABLE)
    {
        return Err(Error::Missing(format!(
            "{} cannot export a timeline semaphore as an opaque fd",
            gpu.info.name
        )));
    }
    Ok(())
}

/// A device-local storage buffer in its own exportable memory object.
pub struct ExportBuffer {
    pub raw: vk::Buffer,
    memory: vk::DeviceMemory,
    /// The bytes asked for.
    pub size: u64,
    /// The memory object's size: what an importer must be told.
    pub allocation_size: u64,
    /// Allocated as a dedicated allocation (an importer must be told that too).
    pub dedicated: bool,
}

impl ExportBuffer {
    pub fn new(gpu: &Gpu, name: &str, size: u64, usage: vk::BufferUsageFlags) -> Result<Self> {
        let support = buffer_export_support(gpu, usage)?;
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(HANDLE);
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(usage)
            .push_next(&mut external);
        let raw = unsafe { gpu.device.create_buffer(&info, None)? }.guard(gpu);
        let (memory, allocation_size, dedicated) = allocate(gpu, *raw, name, support)?;
        gpu.name(*raw, name);
        Ok(Self {
            raw: raw.keep(),
            memory,
            size,
            allocation_size,
            dedicated,
        })
    }

    /// A new opaque fd referring to the buffer's memory.
    pub fn export_fd(&self, gpu: &Gpu) -> Result<OwnedFd> {
        let ext = gpu
            .external_memory_fd
            .as_ref()
            .ok_or_else(|| Error::Missing("VK_KHR_external_memory_fd".into()))?;
        let info = vk::MemoryGetFdInfoKHR::default()
            .memory(self.memory)
            .handle_type(HANDLE);
        let fd = unsafe { ext.get_memory_fd(&info)? };
        // SAFETY: vkGetMemoryFdKHR returns a new fd that the caller owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// # Safety-relevant order
    /// Call only after every importer released its mapping and the GPU is done with the buffer.
    pub fn destroy(self, gpu: &Gpu) {
        unsafe {
            gpu.device.destroy_buffer(self.raw, None);
            gpu.device.free_memory(self.memory, None);
        }
    }
}

/// Exportable device-local memory for `buffer`, bound to it: (memory, size, dedicated).
fn allocate(
    gpu: &Gpu,
    buffer: vk::Buffer,
    name: &str,
    support: BufferExport,
) -> Result<(vk::DeviceMemory, u64, bool)> {
    crate::fault::check("exportable memory", name)?;
    let mut dedicated_req = vk::MemoryDedicatedRequirements::default();
    let mut req2 = vk::MemoryRequirements2::default().push_next(&mut dedicated_req);
    let info = vk::BufferMemoryRequirementsInfo2::default().buffer(buffer);
    unsafe { gpu.device.get_buffer_memory_requirements2(&info, &mut req2) };
    let req = req2.memory_requirements;
    // Dedicated whenever the driver prefers it: importers handle that best (CUDA is told so).
    let dedicated = support.dedicated_only
        || dedicated_req.requires_dedicated_allocation != 0
        || dedicated_req.prefers_dedicated_allocation != 0;
    let props = unsafe {
        gpu.instance
            .raw
            .get_physical_device_memory_properties(gpu.physical)
    };
    let type_index = (0..props.memory_type_count)
        .find(|&i| {
            req.memory_type_bits & (1 << i) != 0
                && props.memory_types[i as usize]
                    .property_flags
                    .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
        })
        .ok_or_else(|| Error::Missing(format!("no device-local memory type for {name}")))?;
    let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(HANDLE);
    let mut dedicated_info = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
    let mut alloc = vk::MemoryAllocateInfo::default()
        .allocation_size(req.size)
        .memory_type_index(type_index)
        .push_next(&mut export);
    if dedicated {
        alloc = alloc.push_next(&mut dedicated_info);
    }
    let memory = unsafe { gpu.device.allocate_memory(&alloc, None)? }.guard(gpu);
    unsafe { gpu.device.bind_buffer_memory(buffer, *memory, 0)? };
    gpu.name(*memory, name);
    Ok((memory.keep(), req.size, dedicated))
}

/// A timeline semaphore that can be exported as an opaque fd.
pub struct ExportTimeline {
    pub raw: vk::Semaphore,
}

impl ExportTimeline {
    pub fn new(gpu: &Gpu, name: &str) -> Result<Self> {
        timeline_export_support(gpu)?;
        crate::fault::check("exportable semaphore", name)?;
        let mut export = vk::ExportSemaphoreCreateInfo::default().handle_types(SEMAPHORE_HANDLE);
        let mut timeline = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(0);
        let info = vk::SemaphoreCreateInfo::default()
            .push_next(&mut timeline)
            .push_next(&mut export);
        let raw = unsafe { gpu.device.create_semaphore(&info, None)? };
        gpu.name(raw, name);
        Ok(Self { raw })
    }

    /// A new opaque fd referring to the semaphore's payload.
    pub fn export_fd(&self, gpu: &Gpu) -> Result<OwnedFd> {
        let ext = gpu
            .external_semaphore_fd
            .as_ref()
            .ok_or_else(|| Error::Missing("VK_KHR_external_semaphore_fd".into()))?;
        let info = vk::SemaphoreGetFdInfoKHR::default()
            .semaphore(self.raw)
            .handle_type(SEMAPHORE_HANDLE);
        let fd = unsafe { ext.get_semaphore_fd(&info)? };
        // SAFETY: vkGetSemaphoreFdKHR returns a new fd that the caller owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// The value the semaphore has reached.
    pub fn value(&self, gpu: &Gpu) -> Result<u64> {
        Ok(unsafe { gpu.device.get_semaphore_counter_value(self.raw)? })
    }

    /// Waits on the host until the semaphore reaches `value` (error paths and tear-down only).
    pub fn wait(&self, gpu: &Gpu, value: u64, timeout_ns: u64) -> Result<()> {
        let semaphores = [self.raw];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default()
            .semaphores(&semaphores)
            .values(&values);
        unsafe { gpu.device.wait_semaphores(&info, timeout_ns)? };
        Ok(())
    }

    /// Signals `value` from the host (when the other side could not).
    pub fn signal(&self, gpu: &Gpu, value: u64) -> Result<()> {
        let info = vk::SemaphoreSignalInfo::default()
            .semaphore(self.raw)
            .value(value);
        unsafe { gpu.device.signal_semaphore(&info)? };
        Ok(())
    }

    pub fn destroy(self, gpu: &Gpu) {
        unsafe { gpu.device.destroy_semaphore(self.raw, None) };
    }
}
