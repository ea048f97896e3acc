//! The headless runner: the scripted camera path rendered offscreen (no window, no display),
//! writing `last.png` (the final composited frame, overlay excluded), `input.png` (that frame's
//! low-resolution scene image, what the upscaler got) and `summary.json`.
//! Used by tests, benchmarks, the soak run and machines without a display.

use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use ash::vk;

use super::capture;
use super::config::Config;
use super::session::Session;
use super::summary::Summary;
use crate::gpu::barrier::{self, State};
use crate::gpu::{Buffer, Destroy as _, Gpu, Image, ImageDesc};
use crate::render::compare::CompareSide;
use crate::render::{Target, UiFrame};
use crate::upscale::Pattern;

#[derive(Default)]
pub struct HeadlessArgs {
    pub frames: u64,
    pub out: PathBuf,
    pub pattern: Option<Pattern>,
    /// Cycle through the available patterns every this many frames (switching test).
    pub switch_every: Option<u64>,
    /// Turn the compare view on with this right side.
    pub compare: Option<CompareSide>,
    /// The compare view's divider, 0..1 from the left (default 0.5).
    pub divider: Option<f32>,
    /// The compare view's right side shows the current output's error heatmap.
    pub heatmap: bool,
}

/// The headless target as the previous frame left it: written by the UI pass, read by a copy.
const TARGET_REUSE: State = State {
    stage: vk::PipelineStageFlags2::from_raw(
        vk::PipelineStageFlags2::COLOR_ATTACHMENT_OUTPUT.as_raw()
            | vk::PipelineStageFlags2::COPY.as_raw(),
    ),
    access: vk::AccessFlags2::COLOR_ATTACHMENT_WRITE,
    layout: vk::ImageLayout::UNDEFINED,
};

/// The image a headless frame is composited into (instead of a swapchain image), and the
/// host-readable buffers a captured frame is copied into. Made once per session, not per frame.
pub struct OffscreenTarget {
    image: Image,
    /// The composited frame (overlay excluded) of the last captured frame; written by that
    /// frame's copy, read by the host after its fence.
    readback: Buffer,
    /// The low-resolution scene image of the last captured frame.
    input_readback: Buffer,
    output: vk::Extent2D,
    render: vk::Extent2D,
}

impl OffscreenTarget {
    pub fn new(gpu: &Gpu, output: vk::Extent2D, render: vk::Extent2D) -> anyhow::Result<Self> {
        let image = Image::new(
            gpu,
            "headless target",
            ImageDesc::new_2d(
                output,
                vk::Format::R8G8B8A8_UNORM,
                vk::ImageUsageFlags::COLOR_ATTACHMENT
                    | vk::ImageUsageFlags::STORAGE
                    | vk::ImageUsageFlags::TRANSFER_SRC,
            ),
        )?
        .guard(gpu);
        let buffer = |name, e: vk::Extent2D| Buffer::readback_rgba8(gpu, name, e);
        let readback = buffer("headless capture", output)?.guard(gpu);
        let input_readback = buffer("headless input capture", render)?;
        Ok(Self {
            image: image.keep(),
            readback: readback.keep(),
            input_readback,
            output,
            render,
        })
    }

    /// The session's output and render sizes.
    pub fn for_session(s: &Session) -> anyhow::Result<Self> {
        let sizes = s.renderer.sizes();
        Self::new(&s.gpu, sizes.output, sizes.render)
    }

    fn target(&self, capture: bool) -> Target {
        Target {
            image: self.image.raw,
            view: self.image.view,
            extent: self.output,
            initial: TARGET_REUSE,
            final_state: barrier::TRANSFER_SRC,
            storage: true,
            wait: None,
            signal: None,
            capture: capture.then_some(self.readback.raw),
            capture_with_ui: false,
            capture_input: capture.then_some(self.input_readback.raw),
        }
    }

    /// The last captured frame as RGBA8 at output size. Call after `Renderer::wait_all`.
    pub fn output_image(&self, gpu: &Gpu) -> anyhow::Result<image::RgbaImage> {
        self.readback.invalidate_for_host(gpu)?;
        let (w, h) = (self.output.width, self.output.height);
        image::RgbaImage::from_raw(
            w,
            h,
            self.readback.mapped()[..(w * h * 4) as usize].to_vec(),
        )
        .context("capture buffer has the wrong size")
    }

    /// Writes the last captured frame and its input as PNGs. Call after `Renderer::wait_all`.
    fn save(
        &self,
        gpu: &Gpu,
        last: &std::path::Path,
        input: &std::path::Path,
    ) -> anyhow::Result<()> {
        self.readback.invalidate_for_host(gpu)?;
        self.input_readback.invalidate_for_host(gpu)?;
        let (o, r) = (self.output, self.render);
        capture::save_png(last, self.readback.mapped(), o.width, o.height, false)?;
        capture::save_png(
            input,
            self.input_readback.mapped(),
            r.width,
            r.height,
            false,
        )
    }

    /// Call only after every frame that used the target has completed.
    pub fn destroy(self, gpu: &Gpu) {
        self.input_readback.destroy(gpu);
        self.readback.destroy(gpu);
        self.image.destroy(gpu);
    }
}

/// Renders frame `n` of the scripted camera path with the overlay, as the game would show it.
/// `capture`: copy the composited frame (before the overlay) and its input for
/// [`OffscreenTarget::output_image`], readable once the frame has completed.
pub fn render_scripted(
    s: &mut Session,
    egui_ctx: &egui::Context,
    target: &OffscreenTarget,
    n: u64,
    capture: bool,
) -> anyhow::Result<()> {
    s.world.set_scripted(n);
    let output = target.output;
    let raw_input = egui::RawInput {
        screen_rect: Some(egui::Rect::from_min_size(
            egui::Pos2::ZERO,
            egui::vec2(output.width as f32, output.height as f32),
        )),
        ..Default::default()
    };
    let mut full = egui_ctx.run_ui(raw_input, |ui| {
        s.overlay(ui.ctx(), true, true);
    });
    let primitives = egui_ctx.tessellate(full.shapes, full.pixels_per_point);
    let mut ui = UiFrame {
        primitives: &primitives,
        pixels_per_point: full.pixels_per_point,
        textures: &mut full.textures_delta,
    };
    let mut acquire = |_sem| Ok(Some(target.target(capture)));
    s.renderer
        .render(&s.gpu, &s.world, Some(&mut ui), &mut acquire)?;
    Ok(())
}

/// Renders `s.world` as it stands (camera and clock set by the caller), without the overlay,
/// and captures the composited frame for [`OffscreenTarget::output_image`].
pub fn render_captured(s: &mut Session, target: &OffscreenTarget) -> anyhow::Result<()> {
    let mut acquire = |_sem| Ok(Some(target.target(true)));
    s.renderer.render(&s.gpu, &s.world, None, &mut acquire)?;
    Ok(())
}

pub fn run(config: &Config, args: &HeadlessArgs) -> anyhow::Result<Summary> {
    anyhow::ensure!(args.frames > 0, "--frames must be at least 1");
    anyhow::ensure!(
        args.switch_every != Some(0),
        "--switch-every must be at least 1"
    );
    let pattern = args.pattern.unwrap_or(config.pattern());
    let mut r = Runner::new(config, pattern)?;
    if let Some(side) = args.compare {
        r.session
            .renderer
            .set_compare(&r.session.gpu, Some(side))
            .with_context(|| format!("turning on the compare view (right side {side})"))?;
    }
    if let Some(d) = args.divider {
        r.session.renderer.set_divider(d);
    }
    r.session.renderer.set_heatmap(args.heatmap);
    let mut used = vec![r.session.renderer.pattern().name().to_string()];
    let progress_every = (args.frames / 10).max(1);
    for n in 0..args.frames {
        if let Some(k) = args.switch_every {
            let available = r.available_patterns();
            if n > 0 && n % k == 0 && available.len() > 1 {
                let i = available
                    .iter()
                    .position(|&p| p == r.session.renderer.pattern())
                    .unwrap_or(0);
                let next = available[(i + 1) % available.len()];
                r.session.switch(next);
                if r.session.renderer.pattern() != next {
                    anyhow::bail!(
                        "frame {n}: {}",
                        r.session.notice.as_deref().unwrap_or("switch failed")
                    );
                }
                if !used.iter().any(|u| u == next.name()) {
                    used.push(next.name().into());
                }
            }
        }
        r.frame(n, n + 1 == args.frames)?;
        if (n + 1) % progress_every == 0 {
            tracing::info!("headless: frame {}/{}", n + 1, args.frames);
        }
    }
    r.save_pngs(&args.out)?;
    let summary = Summary::new(&r.session, used);
    finish(r, summary, &args.out)
}

/// Writes summary.json, tears the session down, then rewrites it with what teardown left
/// (the first write stays if teardown crashes). Returns the final summary; the caller decides
/// whether a teardown problem fails the run ([`Summary::teardown_failure`]).
pub fn finish(r: Runner, mut summary: Summary, out: &Path) -> anyhow::Result<Summary> {
    let path = out.join("summary.json");
    summary.write(&path).context("writing the summary")?;
    let watch = r.session.gpu.teardown_watch();
    drop(r);
    summary.after_teardown(&watch);
    summary
        .write(&path)
        .context("rewriting the summary after teardown")?;
    Ok(summary)
}

/// An offscreen session with what a frame needs besides it: the target and capture buffers
/// and the egui context. Frames are driven one at a time by [`Runner::frame`], so the plain
/// run and the soak share them.
pub struct Runner {
    pub session: Session,
    target: ManuallyDrop<OffscreenTarget>,
    egui_ctx: egui::Context,
}

impl Runner {
    pub fn new(config: &Config, pattern: Pattern) -> anyhow::Result<Self> {
        let session = Session::new(config, None, vk::Format::R8G8B8A8_UNORM, pattern)?;
        let target = OffscreenTarget::for_session(&session)?;
        Ok(Self {
            session,
            target: ManuallyDrop::new(target),
            egui_ctx: egui::Context::default(),
        })
    }

    /// The patterns that can run now (with the current model), in the UI's order.
    pub fn available_patterns(&self) -> Vec<Pattern> {
        self.session
            .patterns()
            .iter()
            .filter(|p| p.1.is_ok())
            .map(|p| p.0)
            .collect()
    }

    /// Renders frame `n` of the scripted path with the overlay; `capture`: also copy the
    /// composited frame and its input for [`Runner::save_pngs`].
    pub fn frame(&mut self, n: u64, capture: bool) -> anyhow::Result<()> {
        render_scripted(&mut self.session, &self.egui_ctx, &self.target, n, capture)
    }

    /// Waits for the frames in flight and returns the composited frame (overlay excluded) of
    /// the last frame rendered with `capture` set, RGBA8 at output size.
    pub fn captured(&mut self) -> anyhow::Result<image::RgbaImage> {
        let s = &mut self.session;
        s.renderer.wait_all(&s.gpu)?;
        self.target.output_image(&s.gpu)
    }

    /// Waits for the frames in flight and writes `last.png` and `input.png` into `out` (the
    /// frame rendered with `capture` set).
    pub fn save_pngs(&mut self, out: &Path) -> anyhow::Result<()> {
        let s = &mut self.session;
        s.renderer.wait_all(&s.gpu)?;
        self.target
            .save(&s.gpu, &out.join("last.png"), &out.join("input.png"))
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let s = &mut self.session;
        // The last frames may still write the target: wait before destroying it.
        let _ = s.renderer.wait_all(&s.gpu);
        // SAFETY: taken once, here; no frame in flight uses the target any more.
        let target = unsafe { ManuallyDrop::take(&mut self.target) };
        target.destroy(&s.gpu);
    }
}
