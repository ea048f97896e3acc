//! Scene state, camera and game rules for the demo arena.
//!
//! Nothing in here touches Vulkan: the renderer consumes [`mesh::Mesh`] data,
//! texture images and per-frame [`world::Draw`] lists produced by this module.

pub mod camera;
pub mod jitter;
pub mod mesh;
pub mod motion;
pub mod poses;
pub mod sequences;
pub mod textures;
pub mod world;
