//! `taau`: temporal anti-aliasing upscaling, the non-ML temporal baseline (FSR 2 / TAAU style).
//! The renderer jitters each frame by a sub-pixel offset; this pattern gathers the jittered
//! samples of many frames into a history at output resolution. Two compute passes in the
//! frame's command buffer, no host step, nothing allocated per frame.
//!
//! Per output pixel (`shaders/upscale/taau.comp`, then `taau_sharpen.comp`):
//!
//! 1. **Reconstruct this frame's sample.** The output pixel's centre in render pixels is
//!    `(o + 0.5) * render / output`; render pixel `k` holds the scene at `k + 0.5 - jitter`.
//!    The 3×3 render pixels around the nearest one (read once per 16×16 group into shared
//!    memory) are weighted by a Gaussian of their sample's distance to the centre: narrow (σ =
//!    0.5 output pixel) for the sample that joins the history, with the largest weight as its
//!    confidence; wide (σ = 0.5 render pixel) for a frame that starts a history alone.
//! 2. **Reproject.** The motion vector of the nearest surface in the 3×3 (dilated motion, as
//!    FSR 2 does, so an object's edge moves with it) gives the centre's position in the
//!    previous frame; the history is resampled there with a 5-tap Catmull-Rom filter.
//! 3. **Reject stale history.** Disocclusion: the history keeps each pixel's linear depth; where
//!    the reprojected history saw a surface more than 10 % nearer than the current one, the
//!    occluder has moved away and the history is dropped. Then the history colour is clipped
//!    toward this frame's 3×3 min/max box in YCoCg, which removes what no longer matches
//!    (ghosts, lighting changes).
//! 4. **Accumulate.** The history carries its accumulated weight; the new sample's share is
//!    `confidence / (weight + confidence)`: about 1/N for the N-th frame, and small for a
//!    sample far from the pixel's centre. The weight is capped at 6 for a still pixel (a share
//!    of at least 1/7 at the centre) and 2 for one moving a quarter output pixel a frame or more
//!    (1/3), since every reprojection resamples, and softens, the history. Where there is no
//!    history (reset, off-screen, disoccluded) the wide reconstruction replaces it.
//! 5. **Sharpen.** RCAS (FSR 1's contrast-adaptive sharpening) of the new history into the
//!    output image; the history stays unsharpened so sharpening never accumulates.
//!
//! History: two sets (colour + weight RGBA16F, linear depth R32F, both at output size), the
//! previous frame's read while the other is written, in turn. Each is written by one frame
//! and read by the next in queue order, ordered by the barriers recorded here, so neither is
//! touched by the host and both live as long as the upscaler (a pattern switch hands it to the
//! deferred-destroy list like any other).

use ash::vk;

use super::{FrameInputs, FrameIo, FrameSplit, Pattern, Upscaler};
use crate::game::camera;
use crate::gpu::barrier::{self, State};
use crate::gpu::guard::Destroy;
use crate::gpu::pipeline::{self, Binding};
use crate::gpu::{self, Gpu, Image, ImageDesc, Pipeline};
use crate::shader;

/// How strongly the output is sharpened (0: not at all, 1: RCAS's strongest).
pub const SHARPNESS: f32 = 0.8;

/// Work-group size of both passes (16×16).
const GROUP: u32 = 16;

const HISTORY_FORMAT: vk::Format = vk::Format::R16G16B16A16_SFLOAT;
const DEPTH_FORMAT: vk::Format = vk::Format::R32_SFLOAT;

/// A history image written by the accumulation pass.
const HISTORY_WRITE: State = State {
    stage: vk::PipelineStageFlags2::COMPUTE_SHADER,
    access: vk::AccessFlags2::SHADER_STORAGE_WRITE,
    layout: vk::ImageLayout::GENERAL,
};

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct AccumulatePush {
    jitter: [f32; 2],
    near: f32,
    far: f32,
    reset: u32,
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct SharpenPush {
    sharpness: f32,
}

/// One frame's history: colour and accumulated weight, and linear depth.
struct History {
    color: Image,
    depth: Image,
    /// Written at least once, so in `barrier::SAMPLED` with defined contents.
    written: bool,
}

impl History {
    fn new(gpu: &Gpu, size: vk::Extent2D, index: usize) -> gpu::Result<Self> {
        let usage = vk::ImageUsageFlags::STORAGE | vk::ImageUsageFlags::SAMPLED;
        let color = Image::new(
            gpu,
            &format!("taau history colour {index}"),
            ImageDesc::new_2d(size, HISTORY_FORMAT, usage),
        )?
        .guard(gpu);
        let depth = Image::new(
            gpu,
            &format!("taau history depth {index}"),
            ImageDesc::new_2d(size, DEPTH_FORMAT, usage),
        )?;
        Ok(Self {
            color: color.keep(),
            depth,
            written: false,
        })
    }
}

impl Destroy for History {
    fn destroy_with(self, gpu: &Gpu) {
        self.depth.destroy(gpu);
        self.color.destroy(gpu);
    }
}

pub struct Taau {
    accumulate: Pipeline,
    sharpen: Pipeline,
    /// Bilinear, clamped: the history's Catmull-Rom taps.
    linear: vk::Sampler,
    /// Nearest, clamped: texel fetches of the inputs and the history depth.
    nearest: vk::Sampler,
    history: Vec<History>,
    /// The history set the next frame writes; the other one is the previous frame's.
    next: usize,
}

impl Taau {
    /// The two pipelines, samplers and both history sets at `output`'s size. The render size
    /// must not exceed the output size (the shader's shared tile assumes it).
    pub fn new(gpu: &Gpu, input: &Image, output: &Image) -> anyhow::Result<Self> {
        let (i, o) = (input.extent(), output.extent());
        anyhow::ensure!(
            i.width <= o.width && i.height <= o.height,
            "taau upscales: the render size {}x{} exceeds the output size {}x{}",
            i.width,
            i.height,
            o.width,
            o.height
        );
        let sampled = vk::DescriptorType::COMBINED_IMAGE_SAMPLER;
        let storage = vk::DescriptorType::STORAGE_IMAGE;
        let accumulate = pipeline::compute(
            gpu,
            "taau accumulate",
            shader!("upscale/taau.comp"),
            &[
                sampled, sampled, sampled, sampled, sampled, storage, storage,
            ],
            std::mem::size_of::<AccumulatePush>() as u32,
        )?
        .guard(gpu);
        let sharpen = pipeline::compute(
            gpu,
            "taau sharpen",
            shader!("upscale/taau_sharpen.comp"),
            &[sampled, storage],
            std::mem::size_of::<SharpenPush>() as u32,
        )?
        .guard(gpu);
        let linear =
            gpu::image::create_sampler(gpu, "taau history sampler", true, false, 0.0)?.guard(gpu);
        let nearest =
            gpu::image::create_sampler(gpu, "taau texel sampler", false, false, 0.0)?.guard(gpu);
        let history =
            gpu::guard::try_collect(gpu, (0..2).map(|index| History::new(gpu, o, index)))?;
        Ok(Self {
            accumulate: accumulate.keep(),
            sharpen: sharpen.keep(),
            linear: linear.keep(),
            nearest: nearest.keep(),
            history,
            next: 0,
        })
    }

    /// Step 1–4: the new history from this frame's inputs and the previous history.
    ///
    /// # Safety
    /// As [`Upscaler::record`]; the previous history is in `barrier::SAMPLED`.
    unsafe fn record_accumulate(&self, gpu: &Gpu, cmd: vk::CommandBuffer, inputs: &FrameInputs) {
        let (prev, next) = (&self.history[1 - self.next], &self.history[self.next]);
        // Without motion vectors and depth there is nothing to reproject with: every frame
        // starts over (the colour stands in for the missing images, which are not read then).
        let reset = inputs.reset || !prev.written || inputs.motion.is_none();
        let depth = inputs.depth.unwrap_or(inputs.color);
        let motion = inputs.motion.unwrap_or(inputs.color);
        let push = AccumulatePush {
            jitter: inputs.jitter,
            near: camera::NEAR,
            far: camera::FAR,
            reset: reset as u32,
        };
        let extent = next.color.extent();
        pipeline::dispatch(
            gpu,
            cmd,
            &self.accumulate,
            &[
                Binding::SampledImage(inputs.color.view, self.nearest),
                Binding::SampledImage(depth.view, self.nearest),
                Binding::SampledImage(motion.view, self.nearest),
                Binding::SampledImage(prev.color.view, self.linear),
                Binding::SampledImage(prev.depth.view, self.nearest),
                Binding::StorageImage(next.color.view),
                Binding::StorageImage(next.depth.view),
            ],
            &push,
            groups(extent),
        );
    }

    /// Step 5: the sharpened output from the new history (in `barrier::SAMPLED`).
    ///
    /// # Safety
    /// As [`Upscaler::record`].
    unsafe fn record_sharpen(&self, gpu: &Gpu, cmd: vk::CommandBuffer, output: &Image) {
        let next = &self.history[self.next];
        pipeline::dispatch(
            gpu,
            cmd,
            &self.sharpen,
            &[
                Binding::SampledImage(next.color.view, self.nearest),
                Binding::StorageImage(output.view),
            ],
            &SharpenPush {
                sharpness: SHARPNESS,
            },
            groups(output.extent()),
        );
    }
}

fn groups(extent: vk::Extent2D) -> [u32; 3] {
    [
        extent.width.div_ceil(GROUP),
        extent.height.div_ceil(GROUP),
        1,
    ]
}

/// Two dispatches in the frame's command buffer: no split.
impl FrameSplit for Taau {}

impl Upscaler for Taau {
    fn pattern(&self) -> Pattern {
        Pattern::Taau
    }

    unsafe fn record(&mut self, io: &mut FrameIo) -> gpu::Result<()> {
        let device = &io.gpu.device;
        let prev = 1 - self.next;
        // The history to write: its previous contents (read two frames ago) are not needed. A
        // history never written yet becomes readable (its contents unused: that frame resets).
        let next = &self.history[self.next];
        let mut to_write = [
            next.color.transition(barrier::REUSE, HISTORY_WRITE),
            next.depth.transition(barrier::REUSE, HISTORY_WRITE),
            next.color.transition(barrier::REUSE, barrier::SAMPLED),
            next.depth.transition(barrier::REUSE, barrier::SAMPLED),
        ];
        let mut count = 2;
        if !self.history[prev].written {
            let p = &self.history[prev];
            to_write[2] = p.color.transition(barrier::REUSE, barrier::SAMPLED);
            to_write[3] = p.depth.transition(barrier::REUSE, barrier::SAMPLED);
            count = 4;
        }
        barrier::transition(device, io.cmd, &to_write[..count]);

        let span = io.timestamps.begin(io.gpu, io.cmd, "accumulate");
        self.record_accumulate(io.gpu, io.cmd, &io.inputs);
        io.timestamps.end(io.gpu, io.cmd, span);

        let next = &self.history[self.next];
        barrier::transition(
            device,
            io.cmd,
            &[
                next.color.transition(HISTORY_WRITE, barrier::SAMPLED),
                next.depth.transition(HISTORY_WRITE, barrier::SAMPLED),
            ],
        );
        let span = io.timestamps.begin(io.gpu, io.cmd, "sharpen");
        self.record_sharpen(io.gpu, io.cmd, io.output);
        io.timestamps.end(io.gpu, io.cmd, span);

        self.history[self.next].written = true;
        self.next = prev;
        Ok(())
    }

    fn describe(&self) -> String {
        format!("temporal: jittered samples accumulated at output size, RCAS sharpness {SHARPNESS}")
    }

    fn destroy(self: Box<Self>, gpu: &Gpu) {
        self.history.destroy_with(gpu);
        self.nearest.destroy_with(gpu);
        self.linear.destroy_with(gpu);
        self.sharpen.destroy(gpu);
        self.accumulate.destroy(gpu);
    }
}
