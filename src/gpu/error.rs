//! Errors of the Vulkan layer.

use ash::vk;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Vulkan call failed: {0}")]
    Vk(#[from] vk::Result),
    #[error("cannot load the Vulkan library: {0}. Install a Vulkan loader and driver (`make setup` installs libvulkan1 and Mesa's lavapipe)")]
    Loader(#[from] ash::LoadingError),
    #[error("GPU memory allocation failed: {0}")]
    Alloc(#[from] gpu_allocator::AllocationError),
    #[error("no usable Vulkan device: {0}")]
    NoDevice(String),
    #[error("{0}")]
    Missing(String),
    #[error(transparent)]
    Fault(#[from] crate::fault::Fault),
}

pub type Result<T> = std::result::Result<T, Error>;
