//! The frame: scene pass at render resolution → upscaler → composite → UI, recorded into the
//! current frame slot's command buffer(s) and submitted. Owns everything a frame needs except the
//! presentation target, which the caller supplies (swapchain image or headless image).

pub mod compare;
pub mod composite;
mod history;
pub mod offscreen;
pub mod overlay;
mod record;
pub mod scene;
mod scene_motion;
mod scene_targets;
mod scene_textures;
pub mod stats;
mod temporal;

use std::time::Instant;

use anyhow::Context as _;
use ash::vk;
use egui_ash_renderer::allocator::GpuAllocator;

use crate::game::world::World;
use crate::gpu::barrier::State;
use crate::gpu::frame::{self, Frame, FRAMES_IN_FLIGHT};
use crate::gpu::{self, Destroy as _, Gpu, Image, ImageDesc};
use crate::upscale::{self, HostTimes, MlSettings, Pattern, Upscaler};
use compare::{Compare, ComparePsnr, CompareSide};
use composite::CompositePass;
use history::{CutWatch, HistoryReset};
use scene::{ScenePass, SceneTargets};
use stats::{FrameRecord, Stats};
use temporal::TemporalInputs;

/// Where this frame's final image goes.
pub struct Target {
    pub image: vk::Image,
    pub view: vk::ImageView,
    pub extent: vk::Extent2D,
    /// How the previous user left the image (contents are always overwritten).
    pub initial: State,
    /// The state the image must be in when the frame ends (PRESENT for the swapchain).
    pub final_state: State,
    /// The image takes storage writes (an RGBA8 UNORM image made with STORAGE usage): the
    /// composite runs as a compute pass.
    pub storage: bool,
    /// Swapchain acquire semaphore, waited on before the composite writes the image.
    pub wait: Option<vk::Semaphore>,
    /// Present-ready semaphore, signalled by the frame's last submission.
    pub signal: Option<vk::Semaphore>,
    /// A host-readable buffer to copy the composited image into, before the UI is drawn.
    pub capture: Option<vk::Buffer>,
    /// Copy into `capture` after the UI instead: the picture as seen (the compare view's
    /// divider and side labels are UI).
    pub capture_with_ui: bool,
    /// A host-readable buffer to copy this frame's low-resolution scene image into (tests
    /// compare a pattern's output with a reference run on exactly this input).
    pub capture_input: Option<vk::Buffer>,
}

/// The UI to draw on top this frame (egui output, already tessellated).
pub struct UiFrame<'a> {
    pub primitives: &'a [egui::ClippedPrimitive],
    pub pixels_per_point: f32,
    /// Drained here: uploads happen before the frame, frees after its fence.
    pub textures: &'a mut egui::TexturesDelta,
}

pub struct Renderer {
    frames: Vec<Frame>,
    /// The frame number each slot last submitted, to attach its GPU times when they arrive.
    slot_frame: [Option<u64>; FRAMES_IN_FLIGHT],
    frame_number: u64,
    scene: ScenePass,
    targets: SceneTargets,
    /// Jitter and mip bias of the frames the upscalers read.
    temporal: TemporalInputs,
    /// What the composite shows (the overlay's debug view).
    debug_view: composite::DebugView,
    output: Image,
    composite: CompositePass,
    upscaler: Box<dyn Upscaler>,
    ml: MlSettings,
    /// The compare view, while it is on.
    compare: Option<Compare>,
    /// Where the compare view splits the picture, 0..1 from the left.
    divider: f32,
    /// The compare view's right side shows the current output's error heatmap.
    heatmap: bool,
    /// Timeline of split frames. Submission A signals `n` (queue); the host waits for `n` before
    /// its step. For `Schedule::HostSignal` the host then signals `n + 1` and submission B,
    /// already queued, waits for `n + 1` on the GPU.
    timeline: vk::Semaphore,
    timeline_value: u64,
    egui: egui_ash_renderer::Renderer<GpuAllocator>,
    egui_pool: vk::CommandPool,
    egui_free: [Vec<egui::TextureId>; FRAMES_IN_FLIGHT],
    pub stats: Stats,
    last_frame_start: Option<Instant>,
    spans: Vec<(&'static str, f64)>,
    /// The `upscale` span of a split frame, opened in command buffer A and closed in B.
    open_span: Option<gpu::timestamps::Span>,
    /// Whether the next recorded frame starts the upscalers' history over.
    history: HistoryReset,
    /// The frame being recorded starts it over (`FrameInputs::reset`, taken from `history`).
    frame_reset: bool,
    /// Notices camera cuts between recorded frames.
    cuts: CutWatch,
}

/// The image sizes of the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    pub render: vk::Extent2D,
    pub output: vk::Extent2D,
    /// Samples per pixel of the scene pass (`render.msaa`; 1: no MSAA).
    pub msaa: u32,
    /// `render.upscale_mip_bias`: the render-size frame samples textures with LOD bias
    /// log2(render width / output width) (-1 at x2), at the output size's texture detail.
    pub mip_bias: bool,
}

impl Sizes {
    /// The LOD bias the render-size frame's textures get (0 when `mip_bias` is off).
    pub fn upscale_mip_bias(&self) -> f32 {
        if self.mip_bias {
            upscale_mip_bias(self.render.width, self.output.width)
        } else {
            0.0
        }
    }
}

/// The upscaled image at output size: written by the upscalers (storage or transfer), sampled
/// by the composite and copied by captures.
fn output_image(gpu: &Gpu, size: vk::Extent2D) -> gpu::Result<Image> {
    Image::new(
        gpu,
        "upscaled output",
        ImageDesc::new_2d(
            size,
            scene::COLOR_FORMAT,
            vk::ImageUsageFlags::STORAGE
                | vk::ImageUsageFlags::SAMPLED
                | vk::ImageUsageFlags::TRANSFER_DST
                | vk::ImageUsageFlags::TRANSFER_SRC,
        ),
    )
}

/// The overlay's renderer (dynamic rendering into `target_format`) and the command pool its
/// texture uploads are recorded from.
fn egui_renderer(
    gpu: &Gpu,
    target_format: vk::Format,
) -> anyhow::Result<(egui_ash_renderer::Renderer<GpuAllocator>, vk::CommandPool)> {
    let egui = egui_ash_renderer::Renderer::with_gpu_allocator(
        gpu.allocator.clone().unwrap(),
        gpu.device.clone(),
        egui_ash_renderer::RenderMode::DynamicRendering(egui_ash_renderer::DynamicRendering {
            color_attachment_format: target_format,
            depth_attachment_format: None,
            stencil_attachment_format: None,
        }),
        egui_ash_renderer::Options {
            in_flight_frames: FRAMES_IN_FLIGHT,
            srgb_framebuffer: gpu::swapchain::is_srgb(target_format),
            ..Default::default()
        },
    )
    .context("creating the egui renderer")?;
    let pool_info = vk::CommandPoolCreateInfo::default()
        .queue_family_index(gpu.queue_family)
        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
    crate::fault::check("command pool", "egui texture uploads")?;
    let egui_pool = unsafe { gpu.device.create_command_pool(&pool_info, None)? };
    gpu.name(egui_pool, "egui texture uploads");
    Ok((egui, egui_pool))
}

/// log2(render / output): the mip LOD bias that samples textures at the output size's detail.
pub fn upscale_mip_bias(render_width: u32, output_width: u32) -> f32 {
    (render_width as f32 / output_width as f32).log2()
}

impl Renderer {
    pub fn new(
        gpu: &Gpu,
        world: &World,
        textures: &[image::RgbaImage],
        sizes: Sizes,
        target_format: vk::Format,
        pattern: Pattern,
        ml: MlSettings,
    ) -> anyhow::Result<Self> {
        // Each part is guarded until the end: a failure (typically the upscaler refusing the
        // model, after which the session starts bilinear instead) destroys what was made.
        let frames = (0..FRAMES_IN_FLIGHT).map(|i| Frame::new(gpu, i));
        let frames = gpu::guard::try_collect(gpu, frames)?.guard(gpu);
        // The biased sampler always exists: jittered frames use it whatever the setting.
        let bias = upscale_mip_bias(sizes.render.width, sizes.output.width);
        let scene = ScenePass::new(gpu, world, textures, sizes.msaa, bias)?.guard(gpu);
        let mut targets = scene.upscale_targets(gpu, sizes.render)?.guard(gpu);
        targets.mip_biased = sizes.mip_bias;
        let output = output_image(gpu, sizes.output)?.guard(gpu);
        let composite = CompositePass::new(gpu, target_format)?.guard(gpu);
        let upscaler = upscale::create(gpu, pattern, &ml, &targets.color, &output)?.guard(gpu);
        let timeline = frame::timeline_semaphore(gpu, "frame timeline")?.guard(gpu);
        let (egui, egui_pool) = egui_renderer(gpu, target_format)?;
        Ok(Self {
            frames: frames.keep(),
            slot_frame: [None; FRAMES_IN_FLIGHT],
            frame_number: 0,
            scene: scene.keep(),
            targets: targets.keep(),
            temporal: TemporalInputs::new(&sizes),
            debug_view: composite::DebugView::Off,
            output: output.keep(),
            composite: composite.keep(),
            upscaler: upscaler.keep(),
            ml,
            compare: None,
            divider: 0.5,
            heatmap: false,
            timeline: timeline.keep(),
            timeline_value: 0,
            egui,
            egui_pool,
            egui_free: Default::default(),
            stats: Stats::new(600),
            last_frame_start: None,
            spans: Vec::with_capacity(32),
            open_span: None,
            history: HistoryReset::new(),
            frame_reset: false,
            cuts: CutWatch::default(),
        })
    }

    pub fn pattern(&self) -> Pattern {
        self.upscaler.pattern()
    }

    /// Whether the running upscaler keeps history (`Upscaler::temporal`).
    pub fn upscaler_temporal(&self) -> bool {
        self.upscaler.temporal()
    }

    pub fn frame_number(&self) -> u64 {
        self.frame_number
    }

    pub fn sizes(&self) -> Sizes {
        Sizes {
            render: self.targets.color.extent(),
            output: self.output.extent(),
            msaa: self.scene.msaa(),
            mip_bias: self.temporal.mip_bias(),
        }
    }

    pub fn host_copy_bytes(&self) -> u64 {
        self.upscaler.host_copy_bytes()
    }

    pub fn bus_bytes(&self) -> u64 {
        self.upscaler.bus_bytes()
    }

    pub fn describe(&self) -> String {
        self.upscaler.describe()
    }

    pub fn engine(&self) -> Option<crate::infer::EngineSummary> {
        self.upscaler.engine()
    }

    /// Whether the upscaler splits the frame around a host or device step (its `upscale` span
    /// then runs from the scene's end to the output being ready, that step included).
    pub fn split(&self) -> bool {
        self.upscaler.schedule() != crate::upscale::Schedule::Single
    }

    /// Replaces the upscaler. The old one goes to the deferred-destroy list of the slot that
    /// submitted last: when that slot's fence next signals, every frame that used it is done.
    pub fn switch_pattern(&mut self, gpu: &Gpu, pattern: Pattern) -> anyhow::Result<()> {
        if pattern == self.upscaler.pattern() {
            return Ok(());
        }
        let new = upscale::create(gpu, pattern, &self.ml, &self.targets.color, &self.output)?;
        let old = std::mem::replace(&mut self.upscaler, new);
        let last_slot = self.last_slot();
        self.frames[last_slot].defer(Box::new(move |gpu| old.destroy(gpu)));
        self.stats.new_configuration();
        self.history.request();
        tracing::info!("upscaler: {pattern}");
        // The right side never duplicates the left: compare against native instead.
        if self.compare_side() == Some(CompareSide::Pattern(pattern)) {
            self.set_compare(gpu, Some(CompareSide::Native))?;
        }
        Ok(())
    }

    /// Turns the compare view on (with that right side) or off. Allocates or frees its
    /// resources: a user action, not per frame. On failure the view stays as it was.
    pub fn set_compare(&mut self, gpu: &Gpu, side: Option<CompareSide>) -> anyhow::Result<()> {
        if side == self.compare_side() {
            return Ok(());
        }
        let new = match side {
            Some(side) => Some(Compare::new(
                gpu,
                side,
                self.upscaler.pattern(),
                &self.ml,
                &self.scene,
                &self.targets.color,
                self.output.extent(),
            )?),
            None => None,
        };
        if let Some(old) = std::mem::replace(&mut self.compare, new) {
            let last_slot = self.last_slot();
            self.frames[last_slot].defer(Box::new(move |gpu| old.destroy(gpu)));
        }
        self.stats.new_configuration();
        // The right side's upscaler is new (or gone): both sides start over together.
        self.history.request();
        tracing::info!(
            "compare view: {}",
            side.map_or("off".to_string(), |s| format!("right side {s}"))
        );
        Ok(())
    }

    pub fn compare_side(&self) -> Option<CompareSide> {
        self.compare.as_ref().map(Compare::side)
    }

    /// The latest live PSNR of the compare view (None while it is off or before its first read).
    pub fn compare_psnr(&self) -> Option<ComparePsnr> {
        self.compare.as_ref().and_then(Compare::last)
    }

    pub fn divider(&self) -> f32 {
        self.divider
    }

    pub fn set_divider(&mut self, divider: f32) {
        self.divider = divider.clamp(0.0, 1.0);
    }

    /// Whether the compare view's right side shows the current output's error against native
    /// (amplified |out − native| luma, false-coloured) instead of its own image. Kept while the
    /// view is off; nothing is allocated (the view's PSNR pass writes the heatmap every frame).
    pub fn set_heatmap(&mut self, on: bool) {
        self.heatmap = on;
    }

    pub fn heatmap(&self) -> bool {
        self.heatmap
    }

    /// Runs the current pattern on another model (`ml`). The new upscaler is built before the
    /// old one is retired, so on failure nothing changes and the previous model keeps running.
    /// A pattern without a model only remembers the settings for the next ML pattern.
    pub fn switch_model(&mut self, gpu: &Gpu, ml: MlSettings) -> anyhow::Result<()> {
        let pattern = self.upscaler.pattern();
        if pattern.caps().needs_model {
            let new = upscale::create(gpu, pattern, &ml, &self.targets.color, &self.output)?;
            let old = std::mem::replace(&mut self.upscaler, new);
            let last_slot = self.last_slot();
            self.frames[last_slot].defer(Box::new(move |gpu| old.destroy(gpu)));
        }
        tracing::info!("model: {}", ml.model.display());
        self.stats.new_configuration();
        self.history.request();
        self.ml = ml;
        // A second ML upscaler on the compare view's right side follows the model too.
        let runs_model =
            |s: &CompareSide| matches!(s, CompareSide::Pattern(p) if p.caps().needs_model);
        if let Some(side) = self.compare_side().filter(runs_model) {
            self.set_compare(gpu, None)?;
            if let Err(e) = self.set_compare(gpu, Some(side)) {
                tracing::warn!("compare view off: {side} cannot run the new model: {e:#}");
            }
        }
        Ok(())
    }

    /// The picture jumps (the game restarted): the next frame starts the upscalers' history
    /// over. Pattern, model, precision and compare-view switches do this themselves, and so
    /// does a camera cut, noticed when a frame is recorded; the render and output sizes are
    /// fixed for a renderer's life, so a new size is a new renderer, whose first frame starts
    /// over.
    pub fn reset_history(&mut self) {
        self.history.request();
        self.reset_temporal();
    }

    /// Whether the last recorded frame told the upscalers to start their history over.
    pub fn last_frame_reset(&self) -> bool {
        self.frame_reset
    }

    fn last_slot(&self) -> usize {
        (self.frame_number + FRAMES_IN_FLIGHT as u64 - 1) as usize % FRAMES_IN_FLIGHT
    }

    /// Records and submits one frame. `acquire` gets the slot's acquire semaphore and returns the
    /// target, or None to skip the frame (out-of-date swapchain). Returns whether it submitted.
    pub fn render(
        &mut self,
        gpu: &Gpu,
        world: &World,
        mut ui: Option<&mut UiFrame>,
        acquire: &mut dyn FnMut(vk::Semaphore) -> gpu::Result<Option<Target>>,
    ) -> anyhow::Result<bool> {
        let start = Instant::now();
        let slot = self.frame_number as usize % FRAMES_IN_FLIGHT;
        self.begin_slot(gpu, slot)?;
        // Before acquiring, so a skipped frame does not lose texture updates.
        if let Some(ui) = ui.as_deref_mut() {
            self.upload_ui_textures(gpu, slot, ui)?;
        }
        let Some(target) = acquire(self.frames[slot].acquired)? else {
            return Ok(false);
        };
        let ui = ui.as_deref();
        // Taken only once the frame is sure to be recorded: a skipped frame passes it on.
        if self.cuts.cut(world.camera.pos, world.time) {
            tracing::debug!("camera cut at frame {}: history reset", self.frame_number);
            self.reset_history();
        }
        self.frame_reset = self.history.take();
        let mut host = HostTimes::new();
        self.prepare_temporal();
        let cmd = unsafe { self.record_until_split(gpu, slot, world)? };
        // SAFETY: each command buffer is recorded once, after this slot's fence was waited on.
        unsafe { self.submit_by_schedule(gpu, slot, cmd, world, &target, ui, &mut host)? };
        self.finish_frame(slot, start, host);
        Ok(true)
    }

    /// Frame statistics (start-to-start and CPU time, host step times, host copies) and the
    /// slot's frame number.
    fn finish_frame(&mut self, slot: usize, start: Instant, host: HostTimes) {
        let now = Instant::now();
        // Start to start: one whole frame of the loop, whatever it spent outside `render`.
        let frame_ms = self
            .last_frame_start
            .replace(start)
            .map(|t| (start - t).as_secs_f64() * 1e3);
        self.stats.push(FrameRecord {
            frame: self.frame_number,
            frame_ms,
            cpu_ms: (now - start).as_secs_f64() * 1e3,
            gpu: Vec::new(),
            host,
            host_copy_bytes: self.upscaler.host_copy_bytes(),
            configuration: 0, // stamped by `push`
        });
        self.slot_frame[slot] = Some(self.frame_number);
        self.frame_number += 1;
    }

    /// Waits for the slot's previous frame, collects its GPU times, frees what waited for it.
    fn begin_slot(&mut self, gpu: &Gpu, slot: usize) -> anyhow::Result<()> {
        let frame = &mut self.frames[slot];
        frame.wait_and_reset(gpu)?;
        self.spans.clear();
        frame.timestamps.collect(gpu, &mut self.spans);
        self.upscaler.collect_gpu(slot, &mut self.spans);
        if let Some(n) = self.slot_frame[slot].take() {
            self.stats.add_gpu(n, &self.spans);
        }
        if let Some(compare) = &mut self.compare {
            compare.collect(gpu, slot)?;
        }
        for id in self.egui_free[slot].drain(..) {
            self.egui.free_texture(id)?;
        }
        Ok(())
    }

    fn upload_ui_textures(
        &mut self,
        gpu: &Gpu,
        slot: usize,
        ui: &mut UiFrame,
    ) -> anyhow::Result<()> {
        // Rare (fonts, new images): egui-ash-renderer uploads and waits for the queue here.
        for (id, deltas) in ui.textures.set.drain() {
            for delta in &deltas {
                self.egui
                    .set_texture(gpu.queue, self.egui_pool, id, delta)?;
            }
        }
        self.egui_free[slot].extend(ui.textures.free.drain());
        Ok(())
    }

    /// Waits for every frame in flight and attaches their GPU times (end of a headless run,
    /// before a capture is read, before a swapchain is recreated).
    pub fn wait_all(&mut self, gpu: &Gpu) -> anyhow::Result<()> {
        for slot in 0..FRAMES_IN_FLIGHT {
            self.begin_slot(gpu, slot)?;
        }
        Ok(())
    }

    pub fn destroy(mut self, gpu: &Gpu) {
        let _ = self.wait_all(gpu);
        // SAFETY: every slot's fence has signalled; nothing of this renderer is in use.
        unsafe {
            for frame in self.frames.drain(..) {
                frame.destroy(gpu);
            }
            gpu.device.destroy_semaphore(self.timeline, None);
            gpu.device.destroy_command_pool(self.egui_pool, None);
        }
        drop(self.egui);
        if let Some(compare) = self.compare.take() {
            compare.destroy(gpu);
        }
        self.upscaler.destroy(gpu);
        self.composite.destroy(gpu);
        self.output.destroy(gpu);
        self.targets.destroy(gpu);
        self.scene.destroy(gpu);
    }
}
