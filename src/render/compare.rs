//! The compare view: the picture split by a divider, the current pattern's output on the left
//! and, on the right, the scene rendered natively at output resolution or the output of a second
//! upscaler (bilinear, or the in-stream engine on the same model), with live PSNR of the
//! current output (and of the right side) against the native frame.
//!
//! Everything here exists only while the view is on: turning it on allocates the native-size
//! scene targets, the right-side image and upscaler and the PSNR buffers once; turning it off
//! hands them to a frame slot's deferred-destroy list. Per frame it records, into the frame's last
//! command buffer before the composite: the scene at output size, the right-side upscaler, and
//! one compute dispatch that sums squared luma errors per 16×16 tile into a per-slot
//! host-visible buffer, which the host reads when that slot's fence has signalled (PSNR is one
//! or two frames behind the picture). The same dispatch writes the error heatmap (the current
//! output's |luma − native luma| × [`HEATMAP_GAIN`], false-coloured), which the right side
//! shows instead of its own image while the heatmap is on: ghosting and shimmer seen, not only
//! read.

use std::fmt;

use ash::vk;
use gpu_allocator::MemoryLocation;

use super::scene::{self, ScenePass, SceneTargets};
use crate::game::world::World;
use crate::gpu::barrier::{self, State};
use crate::gpu::frame::FRAMES_IN_FLIGHT;
use crate::gpu::guard::Destroy;
use crate::gpu::pipeline::{self, Binding};
use crate::gpu::timestamps::Timestamps;
use crate::gpu::{self, Buffer, Gpu, Image, ImageDesc, Pipeline};
use crate::metrics::psnr_from_mse;
use crate::shader;
use crate::upscale::{self, FrameInputs, FrameIo, MlSettings, Pattern, Schedule, Upscaler};

/// What the right side of the divider shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareSide {
    /// The scene rendered at output resolution by the game's scene pass (its `render.msaa`), no
    /// upscaling.
    Native,
    /// A second upscaler of this pattern on the same low-resolution frame.
    Pattern(Pattern),
}

impl CompareSide {
    /// Every choice, in the order the UI lists them.
    pub const ALL: [CompareSide; 4] = [
        CompareSide::Pattern(Pattern::Bilinear),
        CompareSide::Native,
        CompareSide::Pattern(Pattern::InStream),
        CompareSide::Pattern(Pattern::Taau),
    ];

    pub fn name(self) -> &'static str {
        match self {
            CompareSide::Native => "native",
            CompareSide::Pattern(p) => p.name(),
        }
    }

    pub fn parse(s: &str) -> Option<CompareSide> {
        if s == "native" {
            return Some(CompareSide::Native);
        }
        Pattern::parse(s).map(CompareSide::Pattern)
    }

    /// Whether this side can be shown next to `current` (Err = why not). The right side is
    /// recorded into the frame's command buffer, so only patterns without a host step qualify.
    pub fn support(self, current: Pattern) -> Result<(), String> {
        match self {
            CompareSide::Native => Ok(()),
            CompareSide::Pattern(p) if p == current => {
                Err(format!("{p} is already the current pattern (left side)"))
            }
            CompareSide::Pattern(p) if p.caps().host_step => Err(
                format!("{p} runs on the host between two submissions; compare it by making it the current pattern"),
            ),
            CompareSide::Pattern(_) => Ok(()),
        }
    }
}

impl fmt::Display for CompareSide {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The latest live PSNR (luma, dB) against the native frame.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct ComparePsnr {
    /// The frame these figures belong to.
    pub frame: u64,
    /// The current pattern's output (left side) vs native.
    pub current_y: f64,
    /// The right side vs native, when the right side is an upscaler.
    pub right_y: Option<f64>,
}

/// The output image while the PSNR pass reads it as a storage image.
const PSNR_READ: State = State {
    stage: vk::PipelineStageFlags2::COMPUTE_SHADER,
    access: vk::AccessFlags2::SHADER_STORAGE_READ,
    layout: vk::ImageLayout::GENERAL,
};

const TILE: u32 = 16;

/// The heatmap's amplification: a luma error of 255 / 8 (about 32 levels) is full scale.
pub const HEATMAP_GAIN: f32 = 8.0;

/// The heatmap while the PSNR pass writes it.
const HEATMAP_WRITE: State = barrier::STORAGE_WRITE;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct PsnrPush {
    has_right: u32,
    gain: f32,
}

/// A second upscaler writing its own output image.
struct RightUpscaler {
    image: Image,
    upscaler: Box<dyn Upscaler>,
    /// Its sub-stage spans, per slot: kept out of the frame's stage table and dropped.
    timestamps: Vec<Timestamps>,
}

pub struct Compare {
    side: CompareSide,
    native: SceneTargets,
    right: Option<RightUpscaler>,
    /// The current output's error against native, false-coloured (output size, written every
    /// frame by the PSNR pass, sampled by the composite when shown).
    heatmap: Image,
    psnr: PsnrPass,
    /// Per slot: the frame whose sums the buffer holds, until read.
    recorded: [Option<u64>; FRAMES_IN_FLIGHT],
    pixels: f64,
    scratch: Vec<(&'static str, f64)>,
    last: Option<ComparePsnr>,
}

impl Compare {
    /// Allocates everything the view needs (not per frame: when the view is turned on or its
    /// right side changes). `input` is the low-resolution scene image the upscalers read.
    pub fn new(
        gpu: &Gpu,
        side: CompareSide,
        current: Pattern,
        ml: &MlSettings,
        scene: &ScenePass,
        input: &Image,
        output: vk::Extent2D,
    ) -> anyhow::Result<Self> {
        side.support(current).map_err(anyhow::Error::msg)?;
        // The same pass as the game's frame, at output size: the same MSAA.
        let native = scene.targets(gpu, output)?.guard(gpu);
        let right = match side {
            CompareSide::Pattern(pattern) => {
                Some(RightUpscaler::new(gpu, pattern, ml, input, output)?)
            }
            CompareSide::Native => None,
        }
        .guard(gpu);
        let heatmap = Image::new(
            gpu,
            "compare error heatmap",
            ImageDesc::new_2d(
                output,
                vk::Format::R8G8B8A8_UNORM,
                vk::ImageUsageFlags::STORAGE | vk::ImageUsageFlags::SAMPLED,
            ),
        )?
        .guard(gpu);
        let psnr = PsnrPass::new(gpu, output)?;
        Ok(Self {
            side,
            native: native.keep(),
            right: right.keep(),
            heatmap: heatmap.keep(),
            psnr,
            recorded: [None; FRAMES_IN_FLIGHT],
            pixels: output.width as f64 * output.height as f64,
            scratch: Vec::with_capacity(64),
            last: None,
        })
    }

    /// Whether the right side's upscaler keeps history (`Upscaler::temporal`).
    pub fn right_temporal(&self) -> bool {
        self.right.as_ref().is_some_and(|r| r.upscaler.temporal())
    }

    pub fn side(&self) -> CompareSide {
        self.side
    }

    pub fn last(&self) -> Option<ComparePsnr> {
        self.last
    }

    /// The image the composite shows right of the divider (in `barrier::SAMPLED` after
    /// [`Compare::record`]): the error heatmap when `heatmap`, else the right side.
    pub fn right_image(&self, heatmap: bool) -> &Image {
        match &self.right {
            _ if heatmap => &self.heatmap,
            Some(r) => &r.image,
            None => &self.native.color,
        }
    }

    /// Reads what the slot's previous frame left (its fence has signalled).
    pub fn collect(&mut self, gpu: &Gpu, slot: usize) -> gpu::Result<()> {
        if let Some(r) = &mut self.right {
            self.scratch.clear();
            r.timestamps[slot].collect(gpu, &mut self.scratch);
        }
        let Some(frame) = self.recorded[slot].take() else {
            return Ok(());
        };
        let buffer = &self.psnr.partials[slot];
        buffer.invalidate_for_host(gpu)?;
        let tiles: &[[f32; 2]] = bytemuck::cast_slice(buffer.mapped());
        let (mut current, mut right) = (0.0f64, 0.0f64);
        for t in tiles {
            current += t[0] as f64;
            right += t[1] as f64;
        }
        let newer = self.last.is_none_or(|l| l.frame < frame);
        if newer {
            self.last = Some(ComparePsnr {
                frame,
                current_y: psnr_from_mse(current / self.pixels),
                right_y: self
                    .right
                    .is_some()
                    .then(|| psnr_from_mse(right / self.pixels)),
            });
        }
        Ok(())
    }

    /// Records the native scene, the right-side upscaler and the PSNR pass. `output` (the current
    /// pattern's result) is in `barrier::UPSCALE_WRITE`; it is left in the returned state, the
    /// right image and the native frame in `barrier::SAMPLED`.
    ///
    /// # Safety
    /// `cmd` is recording outside a rendering scope; the slot's fence was waited on and
    /// [`Compare::collect`] ran for it; `inputs` are in `barrier::SAMPLED`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn record(
        &mut self,
        gpu: &Gpu,
        cmd: vk::CommandBuffer,
        slot: usize,
        frame: u64,
        scene: &mut ScenePass,
        world: &World,
        inputs: FrameInputs,
        output: &Image,
    ) -> anyhow::Result<State> {
        let device = &gpu.device;
        scene.record(gpu, cmd, &self.native, world);
        let to_read = |image: &Image| image.transition(barrier::UPSCALE_WRITE, PSNR_READ);
        let mut reads = [to_read(output), to_read(output), to_read(output)];
        let mut count = 1;
        if let Some(r) = &mut self.right {
            let write = r.image.transition(barrier::REUSE, barrier::UPSCALE_WRITE);
            barrier::transition(device, cmd, &[write]);
            let mut io = FrameIo {
                gpu,
                cmd,
                slot,
                inputs,
                output: &r.image,
                timestamps: &mut r.timestamps[slot],
            };
            r.upscaler.record(&mut io)?;
            reads[1] = to_read(&r.image);
            count = 2;
        }
        reads[count] = self.heatmap.transition(barrier::REUSE, HEATMAP_WRITE);
        barrier::transition(device, cmd, &reads[..count + 1]);
        self.record_psnr(gpu, cmd, slot, output);
        let mut sampled = [self.heatmap.transition(HEATMAP_WRITE, barrier::SAMPLED); 2];
        let mut count = 1;
        if let Some(r) = &self.right {
            sampled[1] = r.image.transition(PSNR_READ, barrier::SAMPLED);
            count = 2;
        }
        barrier::transition(device, cmd, &sampled[..count]);
        self.recorded[slot] = Some(frame);
        Ok(PSNR_READ)
    }

    /// The PSNR pass over the left (`output`) and right images against native, into the slot's
    /// partial sums, made visible to the host.
    ///
    /// # Safety
    /// As [`Compare::record`]; the images are in `PSNR_READ`.
    unsafe fn record_psnr(&self, gpu: &Gpu, cmd: vk::CommandBuffer, slot: usize, output: &Image) {
        let device = &gpu.device;
        let right_view = self.right.as_ref().map_or(output.view, |r| r.image.view);
        let push = PsnrPush {
            has_right: self.right.is_some() as u32,
            gain: HEATMAP_GAIN,
        };
        pipeline::dispatch(
            gpu,
            cmd,
            &self.psnr.pipeline,
            &[
                Binding::StorageImage(output.view),
                Binding::StorageImage(right_view),
                Binding::SampledImage(self.native.color.view, self.psnr.nearest),
                Binding::StorageBuffer(self.psnr.partials[slot].raw),
                Binding::StorageImage(self.heatmap.view),
            ],
            &push,
            [self.psnr.groups[0], self.psnr.groups[1], 1],
        );
        barrier::memory(
            device,
            cmd,
            (
                vk::PipelineStageFlags2::COMPUTE_SHADER,
                vk::AccessFlags2::SHADER_STORAGE_WRITE,
            ),
            (vk::PipelineStageFlags2::HOST, vk::AccessFlags2::HOST_READ),
        );
    }

    /// Reverse order of creation.
    pub fn destroy(self, gpu: &Gpu) {
        self.psnr.destroy_with(gpu);
        self.heatmap.destroy(gpu);
        self.right.destroy_with(gpu);
        self.native.destroy(gpu);
    }
}

impl RightUpscaler {
    /// The right side's own upscaler (`pattern`, same model) writing its own output image, and
    /// its spans.
    fn new(
        gpu: &Gpu,
        pattern: Pattern,
        ml: &MlSettings,
        input: &Image,
        output: vk::Extent2D,
    ) -> anyhow::Result<Self> {
        let image = Image::new(
            gpu,
            "compare right side",
            ImageDesc::new_2d(
                output,
                scene::COLOR_FORMAT,
                vk::ImageUsageFlags::STORAGE
                    | vk::ImageUsageFlags::SAMPLED
                    | vk::ImageUsageFlags::TRANSFER_DST,
            ),
        )?
        .guard(gpu);
        let upscaler = upscale::create(gpu, pattern, ml, input, &image)?.guard(gpu);
        anyhow::ensure!(
            upscaler.schedule() == Schedule::Single,
            "{pattern} has a host step and cannot be the compare view's right side"
        );
        let timestamps = gpu::guard::try_collect(
            gpu,
            (0..FRAMES_IN_FLIGHT)
                .map(|slot| Timestamps::new(gpu, &format!("compare right side spans {slot}"))),
        )?;
        Ok(Self {
            upscaler: upscaler.keep(),
            image: image.keep(),
            timestamps,
        })
    }
}

/// Reverse order of creation: the upscaler writes the image.
impl Destroy for RightUpscaler {
    fn destroy_with(self, gpu: &Gpu) {
        self.timestamps.destroy_with(gpu);
        self.upscaler.destroy_with(gpu);
        self.image.destroy(gpu);
    }
}

/// The live-PSNR pass: its pipeline, the nearest sampler and one per-tile partial-sums buffer
/// per frame slot.
struct PsnrPass {
    pipeline: Pipeline,
    nearest: vk::Sampler,
    /// Per slot: two f32 sums per tile (current, right).
    partials: Vec<Buffer>,
    /// Work groups over the output image.
    groups: [u32; 2],
}

impl PsnrPass {
    fn new(gpu: &Gpu, output: vk::Extent2D) -> anyhow::Result<Self> {
        let pipeline = pipeline::compute(
            gpu,
            "compare psnr",
            shader!("render/compare_psnr.comp"),
            &[
                vk::DescriptorType::STORAGE_IMAGE,
                vk::DescriptorType::STORAGE_IMAGE,
                vk::DescriptorType::COMBINED_IMAGE_SAMPLER,
                vk::DescriptorType::STORAGE_BUFFER,
                vk::DescriptorType::STORAGE_IMAGE,
            ],
            std::mem::size_of::<PsnrPush>() as u32,
        )?
        .guard(gpu);
        let nearest =
            gpu::image::create_sampler(gpu, "compare nearest", false, false, 0.0)?.guard(gpu);
        let groups = [output.width.div_ceil(TILE), output.height.div_ceil(TILE)];
        let bytes = groups[0] as u64 * groups[1] as u64 * 8;
        let partials = gpu::guard::try_collect(
            gpu,
            (0..FRAMES_IN_FLIGHT).map(|slot| {
                Buffer::new(
                    gpu,
                    &format!("compare psnr tiles {slot}"),
                    bytes,
                    vk::BufferUsageFlags::STORAGE_BUFFER,
                    MemoryLocation::GpuToCpu,
                )
            }),
        )?;
        Ok(Self {
            partials,
            nearest: nearest.keep(),
            pipeline: pipeline.keep(),
            groups,
        })
    }
}

impl Destroy for PsnrPass {
    fn destroy_with(self, gpu: &Gpu) {
        self.partials.destroy_with(gpu);
        self.nearest.destroy_with(gpu);
        self.pipeline.destroy(gpu);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_parse_and_name_round_trip() {
        for side in CompareSide::ALL {
            assert_eq!(CompareSide::parse(side.name()), Some(side));
        }
        assert_eq!(CompareSide::parse("nope"), None);
    }

    #[test]
    fn host_step_patterns_cannot_be_the_right_side() {
        let side = CompareSide::Pattern(Pattern::CpuRoundtrip);
        assert!(side
            .support(Pattern::InStream)
            .unwrap_err()
            .contains("host"));
        let same = CompareSide::Pattern(Pattern::Bilinear);
        assert!(same
            .support(Pattern::Bilinear)
            .unwrap_err()
            .contains("already"));
        assert!(CompareSide::Native.support(Pattern::Bilinear).is_ok());
        assert!(CompareSide::Pattern(Pattern::InStream)
            .support(Pattern::CpuRoundtrip)
            .is_ok());
        // By capability, not by name: every pattern with a host step is refused, and the UI
        // offers none.
        for p in Pattern::ALL.into_iter().filter(|p| p.caps().host_step) {
            let other = Pattern::ALL.into_iter().find(|&q| q != p).unwrap();
            assert!(CompareSide::Pattern(p).support(other).is_err(), "{p}");
        }
        for side in CompareSide::ALL {
            if let CompareSide::Pattern(p) = side {
                assert!(!p.caps().host_step, "{p} is offered as a right side");
            }
        }
    }
}
