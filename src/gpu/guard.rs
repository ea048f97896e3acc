//! How a constructor that creates several GPU objects releases them when it fails half-way.
//!
//! Each object is wrapped in a [`Guard`] as soon as it exists; a `?` that returns early drops
//! the guards made so far, in reverse order of creation, and each destroys its object. Once
//! nothing can fail any more, [`Guard::keep`] takes the objects out for the struct being built.
//!
//! ```ignore
//! let color = Image::new(gpu, "colour", desc)?.guard(gpu);
//! let depth = Image::new(gpu, "depth", depth_desc)?.guard(gpu); // fails: `color` is destroyed
//! Ok(Targets { color: color.keep(), depth: depth.keep() })
//! ```

use std::ops::{Deref, DerefMut};

use ash::vk;

use super::export::{ExportBuffer, ExportTimeline};
use super::external::HostBuffer;
use super::timestamps::Timestamps;
use super::{Buffer, Frame, Gpu, Image, Pipeline};

/// A GPU object that can be destroyed on its own: a constructor's part.
pub trait Destroy {
    /// Releases the object. Only called on objects no submitted work still uses (a constructor
    /// waits for its own uploads before it can fail).
    fn destroy_with(self, gpu: &Gpu);

    /// Wraps the object so that it is destroyed if the constructor returns before
    /// [`Guard::keep`].
    fn guard(self, gpu: &Gpu) -> Guard<'_, Self>
    where
        Self: Sized,
    {
        Guard {
            gpu,
            value: Some(self),
        }
    }
}

/// Owns an object under construction: destroys it when dropped, unless kept.
#[must_use = "a guard dropped at once destroys its object"]
pub struct Guard<'g, T: Destroy> {
    gpu: &'g Gpu,
    value: Option<T>,
}

impl<T: Destroy> Guard<'_, T> {
    /// The constructor succeeded: hands the object to its owner (no longer destroyed here).
    pub fn keep(mut self) -> T {
        self.value
            .take()
            .expect("a guard holds its object until kept")
    }
}

impl<T: Destroy> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
            .as_ref()
            .expect("a guard holds its object until kept")
    }
}

impl<T: Destroy> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value
            .as_mut()
            .expect("a guard holds its object until kept")
    }
}

impl<T: Destroy> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        if let Some(value) = self.value.take() {
            value.destroy_with(self.gpu);
        }
    }
}

impl Destroy for Image {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
    }
}

impl Destroy for Buffer {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
    }
}

impl Destroy for Pipeline {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
    }
}

impl Destroy for Frame {
    fn destroy_with(self, gpu: &Gpu) {
        // SAFETY: a frame still under construction (or whose constructor failed) never submitted.
        unsafe { self.destroy(gpu) }
    }
}

impl Destroy for vk::Sampler {
    fn destroy_with(self, gpu: &Gpu) {
        unsafe { gpu.device.destroy_sampler(self, None) }
    }
}

impl Destroy for vk::ImageView {
    fn destroy_with(self, gpu: &Gpu) {
        unsafe { gpu.device.destroy_image_view(self, None) }
    }
}

impl Destroy for vk::Image {
    fn destroy_with(self, gpu: &Gpu) {
        unsafe { gpu.device.destroy_image(self, None) }
    }
}

impl Destroy for vk::Buffer {
    fn destroy_with(self, gpu: &Gpu) {
        unsafe { gpu.device.destroy_buffer(self, None) }
    }
}

/// gpu-allocator memory. A guarded constructor frees it before destroying the image or buffer
/// bound to it (reverse order), which Vulkan allows for an object that is not used again.
impl Destroy for gpu_allocator::vulkan::Allocation {
    fn destroy_with(self, gpu: &Gpu) {
        let _ = gpu.allocator().free(self);
    }
}

/// Raw device memory (exported or imported memory, which gpu-allocator does not manage). Freed
/// before the buffer bound to it, as for [`gpu_allocator::vulkan::Allocation`].
impl Destroy for vk::DeviceMemory {
    fn destroy_with(self, gpu: &Gpu) {
        unsafe { gpu.device.free_memory(self, None) }
    }
}

/// Only before any importer mapped it: an importer's mapping must go first.
impl Destroy for ExportBuffer {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
    }
}

impl Destroy for ExportTimeline {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
    }
}

impl Destroy for HostBuffer {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
    }
}

impl Destroy for Timestamps {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
    }
}

impl Destroy for vk::ShaderModule {
    fn destroy_with(self, gpu: &Gpu) {
        unsafe { gpu.device.destroy_shader_module(self, None) }
    }
}

impl Destroy for vk::PipelineLayout {
    fn destroy_with(self, gpu: &Gpu) {
        unsafe { gpu.device.destroy_pipeline_layout(self, None) }
    }
}

impl Destroy for vk::DescriptorSetLayout {
    fn destroy_with(self, gpu: &Gpu) {
        unsafe { gpu.device.destroy_descriptor_set_layout(self, None) }
    }
}

impl Destroy for vk::Semaphore {
    fn destroy_with(self, gpu: &Gpu) {
        unsafe { gpu.device.destroy_semaphore(self, None) }
    }
}

impl Destroy for vk::Fence {
    fn destroy_with(self, gpu: &Gpu) {
        unsafe { gpu.device.destroy_fence(self, None) }
    }
}

/// Destroying the pool frees the command buffers allocated from it.
impl Destroy for vk::CommandPool {
    fn destroy_with(self, gpu: &Gpu) {
        unsafe { gpu.device.destroy_command_pool(self, None) }
    }
}

impl<T: Destroy> Destroy for Option<T> {
    fn destroy_with(self, gpu: &Gpu) {
        if let Some(v) = self {
            v.destroy_with(gpu);
        }
    }
}

/// In reverse order, like the constructor's own locals.
impl<T: Destroy> Destroy for Vec<T> {
    fn destroy_with(self, gpu: &Gpu) {
        for v in self.into_iter().rev() {
            v.destroy_with(gpu);
        }
    }
}

impl<A: Destroy, B: Destroy> Destroy for (A, B) {
    fn destroy_with(self, gpu: &Gpu) {
        self.1.destroy_with(gpu);
        self.0.destroy_with(gpu);
    }
}

/// Collects fallible creations into a Vec whose finished items are destroyed if a later one
/// fails (`(0..n).map(...).collect::<Result<Vec<_>>>()?` would drop them undestroyed).
pub fn try_collect<T: Destroy, E>(
    gpu: &Gpu,
    items: impl IntoIterator<Item = Result<T, E>>,
) -> Result<Vec<T>, E> {
    let mut made = Vec::new().guard(gpu);
    for item in items {
        made.push(item?);
    }
    Ok(made.keep())
}
