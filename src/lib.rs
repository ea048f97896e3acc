//! upscale-demo: a small Vulkan game rendered at low resolution and upscaled live by one of
//! three ways of joining a renderer and an ML runtime (see README.md).

pub mod app;
pub mod fault;
pub mod game;
pub mod gpu;
pub mod infer;
pub mod metrics;
pub mod render;
pub mod upscale;
