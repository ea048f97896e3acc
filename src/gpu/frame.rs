//! One frame in flight: its command buffers, fence, acquire semaphore, timestamp queries and the
//! resources waiting for this slot's fence before they may be destroyed.

use ash::vk;

use super::timestamps::Timestamps;
use super::{Destroy as _, Gpu, Result};

/// Frames the CPU may record ahead of the GPU: the number of [`Frame`] slots, and of every
/// per-slot resource (upscaler buffers, compare-view readbacks, UI frees) indexed by slot.
pub const FRAMES_IN_FLIGHT: usize = 2;

/// A destructor that must run only after the GPU finished every frame that could use the object.
pub type Deferred = Box<dyn FnOnce(&Gpu)>;

pub struct Frame {
    pool: vk::CommandPool,
    /// `cmd[0]` records the whole frame, or the part before a host step; `cmd[1]` the part after.
    pub cmd: [vk::CommandBuffer; 2],
    /// Signalled by this frame's last queue submission; the host waits on it before re-recording
    /// this slot's command buffers or reading its timestamps.
    pub fence: vk::Fence,
    /// Signalled by swapchain acquire; waited on by the submission that writes the swapchain image.
    pub acquired: vk::Semaphore,
    pub timestamps: Timestamps,
    deferred: Vec<Deferred>,
}

impl Frame {
    pub fn new(gpu: &Gpu, index: usize) -> Result<Self> {
        let device = &gpu.device;
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(gpu.queue_family)
            .flags(vk::CommandPoolCreateFlags::TRANSIENT);
        // Guarded: a failure below releases what was made (the pool frees its buffers).
        let pool = unsafe { device.create_command_pool(&pool_info, None)? }.guard(gpu);
        let alloc = vk::CommandBufferAllocateInfo::default()
            .command_pool(*pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(2);
        let cmds = unsafe { device.allocate_command_buffers(&alloc)? };
        // Created signalled so the first wait on a fresh slot returns at once.
        let fence = unsafe {
            device.create_fence(
                &vk::FenceCreateInfo::default().flags(vk::FenceCreateFlags::SIGNALED),
                None,
            )?
        }
        .guard(gpu);
        let acquired =
            unsafe { device.create_semaphore(&vk::SemaphoreCreateInfo::default(), None)? }
                .guard(gpu);
        gpu.name(*pool, &format!("frame {index} command pool"));
        gpu.name(cmds[0], &format!("frame {index} commands A"));
        gpu.name(cmds[1], &format!("frame {index} commands B"));
        gpu.name(*fence, &format!("frame {index} fence"));
        gpu.name(*acquired, &format!("frame {index} acquire semaphore"));
        let timestamps = Timestamps::new(gpu, &format!("frame {index} timestamps"))?;
        Ok(Self {
            pool: pool.keep(),
            cmd: [cmds[0], cmds[1]],
            fence: fence.keep(),
            acquired: acquired.keep(),
            timestamps,
            deferred: Vec::new(),
        })
    }

    /// Waits until the GPU is done with this slot's previous frame, then runs its deferred
    /// destructors and resets the command pool for re-recording.
    pub fn wait_and_reset(&mut self, gpu: &Gpu) -> Result<()> {
        unsafe {
            gpu.device.wait_for_fences(&[self.fence], true, u64::MAX)?;
            for destroy in self.deferred.drain(..) {
                destroy(gpu);
            }
            gpu.device
                .reset_command_pool(self.pool, vk::CommandPoolResetFlags::empty())?;
        }
        Ok(())
    }

    /// Queues `destroy` to run once this slot's fence has signalled again.
    pub fn defer(&mut self, destroy: Deferred) {
        self.deferred.push(destroy);
    }

    /// # Safety
    /// The fence has signalled (the caller waited), so nothing of this slot is in use.
    pub unsafe fn destroy(mut self, gpu: &Gpu) {
        for destroy in self.deferred.drain(..) {
            destroy(gpu);
        }
        self.timestamps.destroy(gpu);
        gpu.device.destroy_semaphore(self.acquired, None);
        gpu.device.destroy_fence(self.fence, None);
        gpu.device.destroy_command_pool(self.pool, None);
    }
}

/// Begins recording a one-time-submit command buffer.
///
/// # Safety
/// `cmd`'s pool was reset and the buffer is not pending.
pub unsafe fn begin(gpu: &Gpu, cmd: vk::CommandBuffer) -> Result<()> {
    let info =
        vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
    gpu.device.begin_command_buffer(cmd, &info)?;
    Ok(())
}

/// A timeline semaphore: monotonically increasing values, waited and signalled by the host or
/// the queue. Created here so every timeline in the program is made the same way.
pub fn timeline_semaphore(gpu: &Gpu, name: &str) -> Result<vk::Semaphore> {
    crate::fault::check("timeline semaphore", name)?;
    let mut kind = vk::SemaphoreTypeCreateInfo::default()
        .semaphore_type(vk::SemaphoreType::TIMELINE)
        .initial_value(0);
    let info = vk::SemaphoreCreateInfo::default().push_next(&mut kind);
    let sem = unsafe { gpu.device.create_semaphore(&info, None)? };
    gpu.name(sem, name);
    Ok(sem)
}

/// Blocks the host until `semaphore` reaches `value`.
pub fn wait_timeline(gpu: &Gpu, semaphore: vk::Semaphore, value: u64) -> Result<()> {
    let sems = [semaphore];
    let values = [value];
    let info = vk::SemaphoreWaitInfo::default()
        .semaphores(&sems)
        .values(&values);
    unsafe { gpu.device.wait_semaphores(&info, u64::MAX)? };
    Ok(())
}

/// Signals `semaphore` to `value` from the host (the host step of a split frame is done).
pub fn signal_timeline(gpu: &Gpu, semaphore: vk::Semaphore, value: u64) -> Result<()> {
    let info = vk::SemaphoreSignalInfo::default()
        .semaphore(semaphore)
        .value(value);
    unsafe { gpu.device.signal_semaphore(&info)? };
    Ok(())
}
