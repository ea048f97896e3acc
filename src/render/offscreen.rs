//! The scene pass rendered offscreen at one or more sizes, read back to host memory as RGBA8.
//!
//! Used by the dataset and quality tools: the low-resolution image is exactly what the game's
//! frame loop feeds the upscalers (same `ScenePass`, same `SceneTargets` format, size and MSAA),
//! and a larger size of the same view gives the supersampled reference (with the same MSAA: one
//! pass draws every size). No frame loop, no upscaler: one `Gpu::one_shot` per view, which also
//! waits, so the readbacks are complete when it returns.

use ash::vk;

use super::scene::{ScenePass, SceneTargets};
use crate::game::world::World;
use crate::gpu::guard::Destroy;
use crate::gpu::{self, barrier, Buffer, Gpu};

/// One render size: its targets and the host-readable buffer its colour image is copied into.
struct Slot {
    targets: SceneTargets,
    /// Written by the copy at the end of the one-shot submission, read by the host after its fence.
    readback: Buffer,
}

pub struct Offscreen {
    scene: ScenePass,
    slots: Vec<Slot>,
}

impl Offscreen {
    pub fn new(
        gpu: &Gpu,
        world: &World,
        layers: &[image::RgbaImage],
        sizes: &[vk::Extent2D],
        msaa: u32,
        upscale_mip_bias: f32,
    ) -> gpu::Result<Self> {
        let scene = ScenePass::new(gpu, world, layers, msaa, upscale_mip_bias)?.guard(gpu);
        let slots = gpu::guard::try_collect(
            gpu,
            sizes
                .iter()
                .enumerate()
                .map(|(i, &size)| -> gpu::Result<Slot> {
                    // The first size is the frame the upscalers read (with its mip bias, if any).
                    let targets = if i == 0 {
                        scene.upscale_targets(gpu, size)
                    } else {
                        scene.targets(gpu, size)
                    }?
                    .guard(gpu);
                    let readback =
                        Buffer::readback_rgba8(gpu, &format!("offscreen readback {i}"), size)?;
                    Ok(Slot {
                        targets: targets.keep(),
                        readback,
                    })
                }),
        )?;
        Ok(Self {
            scene: scene.keep(),
            slots,
        })
    }

    /// Renders `world` at every size in one submission and waits for it. Afterwards
    /// [`Offscreen::pixels`] holds each size's frame.
    pub fn render(&mut self, gpu: &Gpu, world: &World) -> gpu::Result<()> {
        let scene = &mut self.scene;
        let slots = &self.slots;
        gpu.one_shot(|cmd| {
            for slot in slots {
                // SAFETY: one_shot's command buffer is recording outside a rendering scope; the
                // previous one-shot (the only other user of these targets) has completed, and the
                // scene pass's REUSE barrier orders the new writes after its copy.
                unsafe {
                    scene.record(gpu, cmd, &slot.targets, world);
                    let color = &slot.targets.color;
                    crate::gpu::image::record_capture(
                        &gpu.device,
                        cmd,
                        color.raw,
                        color.extent(),
                        barrier::SAMPLED,
                        slot.readback.raw,
                    );
                }
            }
        })?;
        for slot in &self.slots {
            slot.readback.invalidate_for_host(gpu)?;
        }
        Ok(())
    }

    /// The last rendered frame at size `index` (as passed to `new`): tightly packed RGBA8.
    pub fn pixels(&self, index: usize) -> &[u8] {
        self.slots[index].readback.mapped()
    }

    pub fn size(&self, index: usize) -> vk::Extent2D {
        self.slots[index].targets.color.extent()
    }

    pub fn destroy(self, gpu: &Gpu) {
        for slot in self.slots {
            slot.destroy_with(gpu);
        }
        self.scene.destroy(gpu);
    }
}

impl Destroy for Slot {
    fn destroy_with(self, gpu: &Gpu) {
        self.readback.destroy(gpu);
        self.targets.destroy(gpu);
    }
}
