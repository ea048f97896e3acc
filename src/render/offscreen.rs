//! The scene pass rendered offscreen at one or more sizes, read back to host memory as RGBA8.
//!
//! Used by the dataset and quality tools: the low-resolution image is exactly what the game's
//! frame loop feeds the upscalers (same `ScenePass`, same `SceneTargets` format, size and MSAA),
//! and a larger size of the same view gives the supersampled reference (with the same MSAA: one
//! pass draws every size). No frame loop, no upscaler: one `Gpu::one_shot` per view, which also
//! waits, so the readbacks are complete when it returns.
//!
//! For the sequence dataset the first size can also be drawn as a temporal upscaler's input
//! ([`Offscreen::read_back_temporal`]): with a sub-pixel jitter, its motion history advancing
//! from view to view, and its motion vectors and depth read back beside the colour.

use ash::vk;
use glam::Vec2;

use super::scene::{ScenePass, SceneTargets};
use crate::game::world::World;
use crate::gpu::guard::Destroy;
use crate::gpu::image::record_capture_image;
use crate::gpu::{self, barrier, Buffer, Gpu};

/// One render size: its targets and the host-readable buffer its colour image is copied into.
struct Slot {
    targets: SceneTargets,
    /// Written by the copy at the end of the one-shot submission, read by the host after its fence.
    readback: Buffer,
}

/// Host-readable copies of the first size's motion vectors (RG16F) and depth (D32), written by
/// the copies at the end of the one-shot submission, read by the host after its fence.
struct TemporalReadback {
    motion: Buffer,
    depth: Buffer,
}

pub struct Offscreen {
    scene: ScenePass,
    slots: Vec<Slot>,
    /// Present after [`Offscreen::read_back_temporal`].
    temporal: Option<TemporalReadback>,
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
            temporal: None,
        })
    }

    /// From now on every [`Offscreen::render`] also reads back the first size's motion vectors
    /// and depth ([`Offscreen::motion`], [`Offscreen::depth`]). The targets keep both already
    /// (`SceneTargets` keeps them unless told not to); this adds only the copies.
    pub fn read_back_temporal(&mut self, gpu: &Gpu) -> gpu::Result<()> {
        if self.temporal.is_some() {
            return Ok(());
        }
        let size = self.size(0);
        // Both formats are 4 bytes per pixel, as RGBA8 is.
        let motion = Buffer::readback_rgba8(gpu, "offscreen motion readback", size)?.guard(gpu);
        let depth = Buffer::readback_rgba8(gpu, "offscreen depth readback", size)?;
        self.temporal = Some(TemporalReadback {
            motion: motion.keep(),
            depth,
        });
        Ok(())
    }

    /// Draw the next views at size `index` with this sub-pixel offset (render pixels,
    /// `game::jitter`); the motion vectors stay unjittered.
    pub fn set_jitter(&mut self, index: usize, jitter: Vec2) {
        self.slots[index].targets.set_jitter(jitter);
    }

    /// Forget the previous view at every size: the next one has zero motion (a sequence starts).
    pub fn reset_history(&self) {
        for slot in &self.slots {
            slot.targets.reset_history();
        }
    }

    /// Renders `world` at every size in one submission and waits for it. Afterwards
    /// [`Offscreen::pixels`] holds each size's frame.
    pub fn render(&mut self, gpu: &Gpu, world: &World) -> gpu::Result<()> {
        let scene = &mut self.scene;
        let slots = &self.slots;
        let temporal = self.temporal.as_ref();
        gpu.one_shot(|cmd| {
            for (i, slot) in slots.iter().enumerate() {
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
                    if let (0, Some(t)) = (i, temporal) {
                        let device = &gpu.device;
                        let targets = &slot.targets;
                        let state = barrier::SAMPLED;
                        record_capture_image(device, cmd, targets.motion(), state, t.motion.raw);
                        record_capture_image(device, cmd, targets.depth(), state, t.depth.raw);
                    }
                }
            }
        })?;
        for slot in &self.slots {
            slot.readback.invalidate_for_host(gpu)?;
        }
        if let Some(t) = &self.temporal {
            t.motion.invalidate_for_host(gpu)?;
            t.depth.invalidate_for_host(gpu)?;
        }
        Ok(())
    }

    /// The last rendered frame's motion vectors at the first size (`game::motion`'s convention):
    /// two little-endian f16 per pixel, tightly packed; None without
    /// [`Offscreen::read_back_temporal`].
    pub fn motion(&self) -> Option<&[u8]> {
        self.temporal.as_ref().map(|t| t.motion.mapped())
    }

    /// The last rendered frame's depth-buffer values at the first size (D32: one f32 per pixel,
    /// 0 near .. 1 far plane; with MSAA sample 0's); None without
    /// [`Offscreen::read_back_temporal`].
    pub fn depth(&self) -> Option<&[u8]> {
        self.temporal.as_ref().map(|t| t.depth.mapped())
    }

    /// The last rendered frame at size `index` (as passed to `new`): tightly packed RGBA8.
    pub fn pixels(&self, index: usize) -> &[u8] {
        self.slots[index].readback.mapped()
    }

    pub fn size(&self, index: usize) -> vk::Extent2D {
        self.slots[index].targets.color.extent()
    }

    pub fn destroy(self, gpu: &Gpu) {
        if let Some(t) = self.temporal {
            t.depth.destroy(gpu);
            t.motion.destroy(gpu);
        }
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
