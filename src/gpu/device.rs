//! Physical-device choice, the logical device, its one queue and the memory allocator.

use std::ffi::{CStr, CString};
use std::sync::{Arc, Mutex, OnceLock};

use ash::{ext, khr, vk};
use gpu_allocator::vulkan::{Allocator, AllocatorCreateDesc};

use super::instance::{Instance, Validation, ValidationCounter};
use super::{Destroy as _, Error, Result};

/// What the rest of the program may want to know about the device, read once.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeviceInfo {
    pub name: String,
    pub driver: String,
    pub api_version: String,
    pub device_type: String,
    /// Nanoseconds per timestamp tick.
    pub timestamp_period: f32,
    /// 0 when the queue cannot write timestamps; GPU stage times are then reported as missing.
    pub timestamp_valid_bits: u32,
    pub max_image_dimension_2d: u32,
    /// Samples per pixel that both colour and depth attachments may have (`render.msaa`).
    pub msaa_sample_counts: Vec<u32>,
    /// Alignment of flush/invalidate ranges for non-coherent host memory.
    pub non_coherent_atom_size: u64,
    /// VK_EXT_external_memory_host is there (the host-memory domain of the shared-memory pattern).
    pub external_memory_host: bool,
    /// Alignment of host pointers and sizes imported with VK_EXT_external_memory_host.
    pub min_imported_host_pointer_alignment: u64,
    /// Opaque-fd export of memory and semaphores (the CUDA domain of the shared-memory pattern).
    pub external_memory_fd: bool,
    pub external_semaphore_fd: bool,
    /// VkPhysicalDeviceIDProperties::deviceUUID as 32 hex digits: the same GPU seen by another
    /// API (CUDA's cuDeviceGetUuid) reports the same bytes.
    pub device_uuid: String,
    /// shaderFloat16 and 16-bit storage buffers: the engine's fp16 precision (enabled when
    /// present).
    pub fp16_storage: bool,
    /// Cooperative-matrix shapes (VK_KHR_cooperative_matrix, subgroup scope) the engine's
    /// matrix-unit convolution can use: fp16 A and B, any accumulator. Empty without the
    /// extension or its feature.
    pub cooperative_matrix: Vec<CoopMatShape>,
    /// Shared memory one compute work group may use, in bytes.
    pub max_compute_shared_memory: u32,
    /// The default subgroup size of compute shaders.
    pub subgroup_size: u32,
    /// A compute pipeline can require full subgroups of `subgroup_size`
    /// (VK_EXT_subgroup_size_control, core in 1.3, enabled when present).
    pub subgroup_size_control: bool,
}

/// One M×N×K shape of `vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR` with fp16 A and B:
/// D (M×N) = A (M×K) · B (K×N) + C, accumulated in fp32 (`fp32_accumulator`) or fp16.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CoopMatShape {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub fp32_accumulator: bool,
}

/// A window surface the chosen queue must be able to present to.
pub struct SurfaceSupport<'a> {
    pub loader: &'a khr::surface::Instance,
    pub surface: vk::SurfaceKHR,
}

/// Creates the window surface once the instance exists (windowed runs only).
pub type MakeSurface<'a> = dyn Fn(&Instance) -> Result<vk::SurfaceKHR> + 'a;

/// The Vulkan context: instance, device, queue and allocator. The top-level owner of everything
/// GPU-side; dropping it waits for the device and destroys in reverse creation order.
pub struct Gpu {
    pub instance: Instance,
    pub physical: vk::PhysicalDevice,
    pub device: ash::Device,
    pub queue: vk::Queue,
    pub queue_family: u32,
    pub info: DeviceInfo,
    pub push_descriptor: khr::push_descriptor::Device,
    /// Present when the device has VK_EXT_external_memory_host (and it was not disabled).
    pub external_memory_host: Option<ext::external_memory_host::Device>,
    /// Present when the device has VK_KHR_external_memory_fd (opaque-fd export of memory).
    pub external_memory_fd: Option<khr::external_memory_fd::Device>,
    /// Present when the device has VK_KHR_external_semaphore_fd (opaque-fd export of semaphores).
    pub external_semaphore_fd: Option<khr::external_semaphore_fd::Device>,
    debug: Option<ext::debug_utils::Device>,
    /// Option so Drop can release it before the device; shared with egui-ash-renderer.
    pub allocator: Option<Arc<Mutex<Allocator>>>,
    /// Allocations still live when Drop released the allocator; read by [`TeardownWatch`].
    leaked: Arc<OnceLock<u32>>,
}

/// What was left when the device was destroyed: part of a run's result, since a leak or a
/// `vkDestroyDevice` validation error only shows up then.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Teardown {
    /// Validation errors reported from the watch's start through the device's destruction
    /// (objects still alive at `vkDestroyDevice`, ...).
    pub validation_errors: u32,
    /// gpu-allocator allocations never freed (each is logged with its name).
    pub leaked_allocations: u32,
}

impl Teardown {
    /// What is wrong, for a person, when teardown left anything.
    pub fn problem(&self) -> Option<String> {
        (self.leaked_allocations > 0 || self.validation_errors > 0).then(|| {
            format!(
                "teardown left {} leaked GPU allocations and {} validation errors \
                 (the log above names them)",
                self.leaked_allocations, self.validation_errors
            )
        })
    }
}

/// Taken from a [`Gpu`] before it is dropped; afterwards, says what teardown left.
pub struct TeardownWatch {
    counter: Arc<ValidationCounter>,
    errors_before: u32,
    leaked: Arc<OnceLock<u32>>,
}

impl TeardownWatch {
    /// None while the `Gpu` still exists.
    pub fn report(&self) -> Option<Teardown> {
        let leaked_allocations = *self.leaked.get()?;
        Some(Teardown {
            validation_errors: self.total_validation_errors() - self.errors_before,
            leaked_allocations,
        })
    }

    /// Every validation error of the instance's life, teardown included.
    pub fn total_validation_errors(&self) -> u32 {
        self.counter.errors()
    }
}

/// The teardown of the last `Gpu` dropped in this process, validation errors counted over its
/// whole life: what a caller reads when the context was dropped inside a constructor that
/// failed (a session whose start-up stopped), where no [`TeardownWatch`] could be taken.
static LAST_TEARDOWN: Mutex<Option<Teardown>> = Mutex::new(None);

/// See `LAST_TEARDOWN`; None until a `Gpu` has been dropped.
pub fn last_teardown() -> Option<Teardown> {
    *LAST_TEARDOWN.lock().unwrap_or_else(|e| e.into_inner())
}

impl Gpu {
    /// `device_filter`: empty picks the best device (discrete first); otherwise a decimal index
    /// or a case-insensitive part of the device name (config key `gpu.device`).
    pub fn new(
        validation: Validation,
        surface_extensions: &[*const i8],
        device_filter: &str,
        surface: Option<&MakeSurface>,
    ) -> Result<(Self, Option<vk::SurfaceKHR>)> {
        let instance = Instance::new(validation, surface_extensions)?;
        let surface = match surface {
            Some(make) => Some(make(&instance)?),
            None => None,
        };
        let surface_loader =
            surface.map(|_| khr::surface::Instance::new(&instance.entry, &instance.raw));
        let support = surface.map(|s| SurfaceSupport {
            loader: surface_loader.as_ref().unwrap(),
            surface: s,
        });
        let (physical, queue_family) = pick_device(&instance.raw, device_filter, support.as_ref())?;
        let info = read_info(&instance, physical, queue_family);
        let device = create_device(
            &instance.raw,
            physical,
            queue_family,
            surface.is_some(),
            &info,
        )?;
        let gpu = Self::with_device(instance, physical, queue_family, info, device)?;
        Ok((gpu, surface))
    }

    /// The rest of the context around a created `device`: its queue, the memory allocator and
    /// the loaders of the device extensions `info` says it has.
    fn with_device(
        instance: Instance,
        physical: vk::PhysicalDevice,
        queue_family: u32,
        info: DeviceInfo,
        device: ash::Device,
    ) -> Result<Self> {
        let queue = unsafe { device.get_device_queue(queue_family, 0) };
        let allocator = Allocator::new(&AllocatorCreateDesc {
            instance: instance.raw.clone(),
            device: device.clone(),
            physical_device: physical,
            debug_settings: Default::default(),
            buffer_device_address: false,
            allocation_sizes: Default::default(),
        })?;
        let push_descriptor = khr::push_descriptor::Device::new(&instance.raw, &device);
        let external_memory_host = info
            .external_memory_host
            .then(|| ext::external_memory_host::Device::new(&instance.raw, &device));
        let external_memory_fd = info
            .external_memory_fd
            .then(|| khr::external_memory_fd::Device::new(&instance.raw, &device));
        let external_semaphore_fd = info
            .external_semaphore_fd
            .then(|| khr::external_semaphore_fd::Device::new(&instance.raw, &device));
        let debug = instance
            .debug_utils
            .as_ref()
            .map(|_| ext::debug_utils::Device::new(&instance.raw, &device));
        tracing::info!(
            "GPU: {} ({}, driver {}, Vulkan {})",
            info.name,
            info.device_type,
            info.driver,
            info.api_version
        );
        Ok(Self {
            instance,
            physical,
            device,
            queue,
            queue_family,
            info,
            push_descriptor,
            external_memory_host,
            external_memory_fd,
            external_semaphore_fd,
            debug,
            allocator: Some(Arc::new(Mutex::new(allocator))),
            leaked: Arc::default(),
        })
    }

    pub fn allocator(&self) -> std::sync::MutexGuard<'_, Allocator> {
        self.allocator.as_ref().unwrap().lock().unwrap()
    }

    /// Number of validation errors reported so far (0 when the layer is off).
    pub fn validation_errors(&self) -> u32 {
        self.instance.counter.errors()
    }

    /// Watches this context's teardown: call just before dropping it (errors counted from here).
    pub fn teardown_watch(&self) -> TeardownWatch {
        TeardownWatch {
            counter: self.instance.counter.clone(),
            errors_before: self.validation_errors(),
            leaked: self.leaked.clone(),
        }
    }

    /// Counts (and logs by name) the allocations nobody freed.
    fn count_leaks(&self) -> u32 {
        let Some(allocator) = &self.allocator else {
            return 0;
        };
        let report = allocator.lock().map(|a| a.generate_report());
        let Ok(report) = report else { return 0 };
        for a in &report.allocations {
            tracing::error!(
                "leaked GPU allocation at teardown: {} ({} bytes)",
                a.name,
                a.size
            );
        }
        report.allocations.len() as u32
    }

    /// Gives a Vulkan object a debug name, so validation messages and captures name it.
    pub fn name<H: vk::Handle>(&self, handle: H, name: &str) {
        let Some(debug) = &self.debug else { return };
        let Ok(name) = CString::new(name) else { return };
        let info = vk::DebugUtilsObjectNameInfoEXT::default()
            .object_handle(handle)
            .object_name(&name);
        // SAFETY: the handle belongs to this device; naming has no other effect.
        unsafe {
            let _ = debug.set_debug_utils_object_name(&info);
        }
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: owners of device objects destroyed them before dropping the context; waiting
        // for idle makes sure nothing still executes when the device goes.
        unsafe {
            let _ = self.device.device_wait_idle();
            let leaked = self.count_leaks();
            self.allocator = None;
            self.device.destroy_device(None);
            self.instance.destroy();
            // Last: a watch reports only once the device's own validation messages are in.
            let _ = self.leaked.set(leaked);
            *LAST_TEARDOWN.lock().unwrap_or_else(|e| e.into_inner()) = Some(Teardown {
                validation_errors: self.instance.counter.errors(),
                leaked_allocations: leaked,
            });
        }
    }
}

fn pick_device(
    instance: &ash::Instance,
    filter: &str,
    surface: Option<&SurfaceSupport>,
) -> Result<(vk::PhysicalDevice, u32)> {
    let devices = unsafe { instance.enumerate_physical_devices()? };
    let mut candidates = Vec::new();
    let mut names = Vec::new();
    for (index, &pd) in devices.iter().enumerate() {
        let props = unsafe { instance.get_physical_device_properties(pd) };
        let name = props
            .device_name_as_c_str()
            .unwrap_or(c"?")
            .to_string_lossy()
            .into_owned();
        names.push(format!("{index}: {name}"));
        if !matches_filter(filter, index, &name) || props.api_version < vk::API_VERSION_1_3 {
            continue;
        }
        let Some(family) = pick_queue_family(instance, pd, surface) else {
            continue;
        };
        let rank = match props.device_type {
            vk::PhysicalDeviceType::DISCRETE_GPU => 0,
            vk::PhysicalDeviceType::INTEGRATED_GPU => 1,
            vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
            _ => 3,
        };
        candidates.push((rank, index, pd, family));
    }
    candidates.sort_by_key(|c| (c.0, c.1));
    candidates
        .first()
        .map(|c| (c.2, c.3))
        .ok_or_else(|| {
            Error::NoDevice(format!(
                "none of [{}] matches `gpu.device = \"{filter}\"` with Vulkan 1.3 and a graphics+compute queue{}",
                names.join(", "),
                if surface.is_some() { " that can present" } else { "" }
            ))
        })
}

/// `filter` is empty (any), a device index, or a case-insensitive part of its name.
pub fn matches_filter(filter: &str, index: usize, name: &str) -> bool {
    let filter = filter.trim();
    if filter.is_empty() {
        return true;
    }
    match filter.parse::<usize>() {
        Ok(i) => i == index,
        Err(_) => name.to_lowercase().contains(&filter.to_lowercase()),
    }
}

fn pick_queue_family(
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
    surface: Option<&SurfaceSupport>,
) -> Option<u32> {
    let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
    families.iter().enumerate().find_map(|(i, f)| {
        let i = i as u32;
        let flags = vk::QueueFlags::GRAPHICS | vk::QueueFlags::COMPUTE;
        let can_present = surface.is_none_or(|s| unsafe {
            s.loader
                .get_physical_device_surface_support(pd, i, s.surface)
                .unwrap_or(false)
        });
        (f.queue_flags.contains(flags) && can_present).then_some(i)
    })
}

fn read_info(vk_instance: &Instance, pd: vk::PhysicalDevice, family: u32) -> DeviceInfo {
    let instance = &vk_instance.raw;
    let mut driver = vk::PhysicalDeviceDriverProperties::default();
    let mut host = vk::PhysicalDeviceExternalMemoryHostPropertiesEXT::default();
    let mut ids = vk::PhysicalDeviceIDProperties::default();
    let mut v11 = vk::PhysicalDeviceVulkan11Properties::default();
    let mut props2 = vk::PhysicalDeviceProperties2::default()
        .push_next(&mut driver)
        .push_next(&mut host)
        .push_next(&mut ids)
        .push_next(&mut v11);
    unsafe { instance.get_physical_device_properties2(pd, &mut props2) };
    let props = props2.properties;
    let features = Features::read(instance, pd);
    let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
    let extensions =
        unsafe { instance.enumerate_device_extension_properties(pd) }.unwrap_or_default();
    let has = |name: &CStr| {
        extensions
            .iter()
            .any(|e| e.extension_name_as_c_str() == Ok(name))
    };
    let v = props.api_version;
    let cstr = |s: std::result::Result<&CStr, std::ffi::FromBytesUntilNulError>| {
        s.map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    DeviceInfo {
        name: cstr(props.device_name_as_c_str()),
        driver: format!(
            "{} {}",
            cstr(driver.driver_name_as_c_str()),
            cstr(driver.driver_info_as_c_str())
        )
        .trim()
        .to_string(),
        api_version: format!(
            "{}.{}.{}",
            vk::api_version_major(v),
            vk::api_version_minor(v),
            vk::api_version_patch(v)
        ),
        device_type: format!("{:?}", props.device_type),
        timestamp_period: props.limits.timestamp_period,
        timestamp_valid_bits: families[family as usize].timestamp_valid_bits,
        max_image_dimension_2d: props.limits.max_image_dimension2_d,
        msaa_sample_counts: super::image::sample_counts(
            props.limits.framebuffer_color_sample_counts
                & props.limits.framebuffer_depth_sample_counts,
        ),
        non_coherent_atom_size: props.limits.non_coherent_atom_size,
        external_memory_host: has(ext::external_memory_host::NAME),
        min_imported_host_pointer_alignment: host.min_imported_host_pointer_alignment,
        external_memory_fd: has(khr::external_memory_fd::NAME),
        external_semaphore_fd: has(khr::external_semaphore_fd::NAME),
        device_uuid: hex(&ids.device_uuid),
        fp16_storage: features.fp16_storage(),
        cooperative_matrix: if features.cooperative_matrix && has(khr::cooperative_matrix::NAME) {
            coop_mat_shapes(vk_instance, pd)
        } else {
            Vec::new()
        },
        max_compute_shared_memory: props.limits.max_compute_shared_memory_size,
        subgroup_size: v11.subgroup_size,
        subgroup_size_control: features.subgroup_size_control,
    }
}

/// The optional device features the engine uses, as the device reports them.
#[derive(Clone, Copy, Debug, Default)]
struct Features {
    shader_float16: bool,
    storage_buffer_16bit: bool,
    cooperative_matrix: bool,
    vulkan_memory_model: bool,
    subgroup_size_control: bool,
}

impl Features {
    fn read(instance: &ash::Instance, pd: vk::PhysicalDevice) -> Self {
        let mut v11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut v13 = vk::PhysicalDeviceVulkan13Features::default();
        let mut coop = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default();
        let mut f2 = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut v11)
            .push_next(&mut v12)
            .push_next(&mut v13)
            .push_next(&mut coop);
        unsafe { instance.get_physical_device_features2(pd, &mut f2) };
        Features {
            shader_float16: v12.shader_float16 == vk::TRUE,
            storage_buffer_16bit: v11.storage_buffer16_bit_access == vk::TRUE,
            // The KHR shaders use the Vulkan memory model (SPIR-V 1.6).
            cooperative_matrix: coop.cooperative_matrix == vk::TRUE
                && v12.vulkan_memory_model == vk::TRUE,
            vulkan_memory_model: v12.vulkan_memory_model == vk::TRUE,
            subgroup_size_control: v13.subgroup_size_control == vk::TRUE
                && v13.compute_full_subgroups == vk::TRUE,
        }
    }

    fn fp16_storage(&self) -> bool {
        self.shader_float16 && self.storage_buffer_16bit
    }
}

/// The subgroup-scope shapes with fp16 A and B that the device offers.
fn coop_mat_shapes(instance: &Instance, pd: vk::PhysicalDevice) -> Vec<CoopMatShape> {
    let loader = khr::cooperative_matrix::Instance::new(&instance.entry, &instance.raw);
    let props = unsafe { loader.get_physical_device_cooperative_matrix_properties(pd) };
    let f16 = vk::ComponentTypeKHR::FLOAT16;
    let f32 = vk::ComponentTypeKHR::FLOAT32;
    props
        .unwrap_or_default()
        .iter()
        .filter(|p| p.scope == vk::ScopeKHR::SUBGROUP && p.a_type == f16 && p.b_type == f16)
        .filter(|p| p.c_type == p.result_type && (p.c_type == f16 || p.c_type == f32))
        .map(|p| CoopMatShape {
            m: p.m_size,
            n: p.n_size,
            k: p.k_size,
            fp32_accumulator: p.c_type == f32,
        })
        .collect()
}

/// Lower-case hex of `bytes`, as device UUIDs are compared and reported.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn create_device(
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
    family: u32,
    windowed: bool,
    info: &DeviceInfo,
) -> Result<ash::Device> {
    let available = unsafe { instance.enumerate_device_extension_properties(pd)? };
    let has = |name: &CStr| {
        available
            .iter()
            .any(|e| e.extension_name_as_c_str() == Ok(name))
    };
    let mut extensions = vec![khr::push_descriptor::NAME];
    if windowed {
        extensions.push(khr::swapchain::NAME);
    }
    if info.external_memory_host {
        extensions.push(ext::external_memory_host::NAME);
    }
    // Enabled when present: they only add export paths, used by the CUDA domain.
    if info.external_memory_fd {
        extensions.push(khr::external_memory_fd::NAME);
    }
    if info.external_semaphore_fd {
        extensions.push(khr::external_semaphore_fd::NAME);
    }
    // The in-stream engine's matrix-unit convolution, when the device offers a shape it uses.
    if !info.cooperative_matrix.is_empty() {
        extensions.push(khr::cooperative_matrix::NAME);
    }
    if let Some(missing) = extensions.iter().find(|e| !has(e)) {
        return Err(Error::NoDevice(format!(
            "{} lacks the extension {}",
            info.name,
            missing.to_string_lossy()
        )));
    }
    let ext_ptrs: Vec<*const i8> = extensions.iter().map(|e| e.as_ptr()).collect();
    let priorities = [1.0];
    let queues = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(family)
        .queue_priorities(&priorities)];
    // The engine's optional paths (fp16 storage, matrix units, full subgroups) are enabled
    // where the device has them; `info` tells the engine which ones it may use.
    let optional = Features::read(instance, pd);
    let fp16 = info.fp16_storage;
    let coop = !info.cooperative_matrix.is_empty();
    let mut v11 = vk::PhysicalDeviceVulkan11Features::default().storage_buffer16_bit_access(fp16);
    let mut v12 = vk::PhysicalDeviceVulkan12Features::default()
        .timeline_semaphore(true)
        .host_query_reset(true)
        .shader_float16(fp16)
        .vulkan_memory_model(optional.vulkan_memory_model);
    let mut v13 = vk::PhysicalDeviceVulkan13Features::default()
        .synchronization2(true)
        .dynamic_rendering(true)
        // glslc's Vulkan 1.3 output declares work-group sizes with LocalSizeId.
        .maintenance4(true)
        .subgroup_size_control(info.subgroup_size_control)
        .compute_full_subgroups(info.subgroup_size_control);
    let mut coop_features =
        vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default().cooperative_matrix(coop);
    let mut create = vk::DeviceCreateInfo::default()
        .queue_create_infos(&queues)
        .enabled_extension_names(&ext_ptrs)
        .push_next(&mut v11)
        .push_next(&mut v12)
        .push_next(&mut v13);
    if coop {
        create = create.push_next(&mut coop_features);
    }
    Ok(unsafe { instance.create_device(pd, &create, None)? })
}

impl Gpu {
    /// Records and runs a command buffer to completion. Load-time only (texture and mesh upload,
    /// screenshot copies): it blocks until this one submission finishes, never the whole device.
    pub fn one_shot(&self, record: impl FnOnce(vk::CommandBuffer)) -> Result<()> {
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(self.queue_family)
            .flags(vk::CommandPoolCreateFlags::TRANSIENT);
        unsafe {
            // Guarded: each `?` below releases what was made (the pool frees its buffer).
            let pool = self
                .device
                .create_command_pool(&pool_info, None)?
                .guard(self);
            let alloc = vk::CommandBufferAllocateInfo::default()
                .command_pool(*pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1);
            let cmd = self.device.allocate_command_buffers(&alloc)?[0];
            crate::fault::check("fence", "one-shot submission")?;
            let fence = self
                .device
                .create_fence(&vk::FenceCreateInfo::default(), None)?
                .guard(self);
            let run = (|| -> Result<()> {
                super::frame::begin(self, cmd)?;
                record(cmd);
                self.device.end_command_buffer(cmd)?;
                let cmds = [cmd];
                let submit = vk::SubmitInfo::default().command_buffers(&cmds);
                self.device.queue_submit(self.queue, &[submit], *fence)?;
                self.device.wait_for_fences(&[*fence], true, u64::MAX)?;
                Ok(())
            })();
            run
        }
    }
}

#[cfg(test)]
mod tests {
    use super::matches_filter;

    #[test]
    fn device_filter_matches_index_or_name_part() {
        assert!(matches_filter("", 3, "llvmpipe"));
        assert!(matches_filter("1", 1, "llvmpipe"));
        assert!(!matches_filter("0", 1, "llvmpipe"));
        assert!(matches_filter(
            "LLVM",
            0,
            "llvmpipe (LLVM 15.0.6, 256 bits)"
        ));
        assert!(!matches_filter("nvidia", 0, "llvmpipe"));
    }
}
