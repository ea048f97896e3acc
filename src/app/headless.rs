//! The headless runner: the scripted camera path rendered offscreen (no window, no display),
//! writing `last.png` (the final composited frame, overlay excluded), `input.png` (that frame's
//! low-resolution scene image, what the upscaler got) and `summary.json`.
//! Used by tests, benchmarks and machines without a display.

use std::path::PathBuf;

use anyhow::Context as _;
use ash::vk;
use gpu_allocator::MemoryLocation;

use super::config::Config;
use super::session::Session;
use super::summary::Summary;
use super::{capture, session};
use crate::gpu::barrier::{self, State};
use crate::gpu::{Buffer, Gpu, Image, ImageDesc};
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
                vk::ImageUsageFlags::COLOR_ATTACHMENT | vk::ImageUsageFlags::TRANSFER_SRC,
            ),
        )?;
        let buffer = |name, e: vk::Extent2D| {
            Buffer::new(
                gpu,
                name,
                e.width as u64 * e.height as u64 * 4,
                vk::BufferUsageFlags::TRANSFER_DST,
                MemoryLocation::GpuToCpu,
            )
        };
        let readback = match buffer("headless capture", output) {
            Ok(b) => b,
            Err(e) => {
                image.destroy(gpu);
                return Err(e.into());
            }
        };
        let input_readback = match buffer("headless input capture", render) {
            Ok(b) => b,
            Err(e) => {
                readback.destroy(gpu);
                image.destroy(gpu);
                return Err(e.into());
            }
        };
        Ok(Self {
            image,
            readback,
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
            wait: None,
            signal: None,
            capture: capture.then_some(self.readback.raw),
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

pub fn run(config: &Config, args: &HeadlessArgs) -> anyhow::Result<Summary> {
    anyhow::ensure!(args.frames > 0, "--frames must be at least 1");
    let pattern = args.pattern.unwrap_or(config.pattern());
    let mut s = session::Session::new(config, None, vk::Format::R8G8B8A8_UNORM, pattern)?;
    let target = OffscreenTarget::for_session(&s)?;
    if let Some(side) = args.compare {
        s.renderer
            .set_compare(&s.gpu, Some(side))
            .with_context(|| format!("turning on the compare view (right side {side})"))?;
    }
    if let Some(d) = args.divider {
        s.renderer.set_divider(d);
    }
    let egui_ctx = egui::Context::default();
    let available: Vec<Pattern> = s
        .patterns()
        .iter()
        .filter(|p| p.1.is_ok())
        .map(|p| p.0)
        .collect();
    let mut used = vec![pattern.name().to_string()];
    let progress_every = (args.frames / 10).max(1);
    let mut rendered = Ok(());
    for n in 0..args.frames {
        if let Some(k) = args.switch_every {
            if n > 0 && n % k == 0 && available.len() > 1 {
                let i = available
                    .iter()
                    .position(|&p| p == s.renderer.pattern())
                    .unwrap_or(0);
                let next = available[(i + 1) % available.len()];
                if let Err(e) = s.renderer.switch_pattern(&s.gpu, next) {
                    rendered = Err(e);
                    break;
                }
                if !used.iter().any(|u| u == next.name()) {
                    used.push(next.name().into());
                }
            }
        }
        let last = n + 1 == args.frames;
        rendered = render_scripted(&mut s, &egui_ctx, &target, n, last);
        if rendered.is_err() {
            break;
        }
        if (n + 1) % progress_every == 0 {
            tracing::info!("headless: frame {}/{}", n + 1, args.frames);
        }
    }
    let waited = s.renderer.wait_all(&s.gpu);
    let saved = rendered.and(waited).and_then(|()| {
        target.save(
            &s.gpu,
            &args.out.join("last.png"),
            &args.out.join("input.png"),
        )
    });
    target.destroy(&s.gpu);
    saved?;
    let summary = Summary::new(&s.gpu, &s.renderer, &s.model_label(), used);
    summary
        .write(&args.out.join("summary.json"))
        .context("writing the summary")?;
    Ok(summary)
}
