//! The only place raw Vulkan lives: instance, device, swapchain, frames in flight, buffers,
//! images, pipelines, barriers and timestamps.

pub mod barrier;
pub mod buffer;
pub mod device;
pub mod error;
pub mod export;
pub mod external;
pub mod frame;
pub mod guard;
pub mod image;
pub mod instance;
pub mod pipeline;
pub mod swapchain;
pub mod timestamps;

pub use buffer::Buffer;
pub use device::{DeviceInfo, Gpu, Teardown, TeardownWatch};
pub use error::{Error, Result};
pub use frame::Frame;
pub use guard::{Destroy, Guard};
pub use image::{Image, ImageDesc};
pub use instance::Validation;
pub use pipeline::Pipeline;
