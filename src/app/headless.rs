//! The headless runner: the scripted camera path rendered offscreen (no window, no display),
//! writing `last.png` (the final composited frame, overlay excluded), `input.png` (that frame's
//! low-resolution scene image, what the upscaler got) and `summary.json`.
//! Used by tests, benchmarks, the soak run and machines without a display.

use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use ash::vk;
use gpu_allocator::MemoryLocation;

use super::capture;
use super::config::Config;
use super::session::Session;
use super::summary::Summary;
use crate::gpu::barrier::{self, State};
use crate::gpu::{Buffer, Gpu, Image, ImageDesc};
use crate::render::{Target, UiFrame};
use crate::upscale::Pattern;

pub struct HeadlessArgs {
    pub frames: u64,
    pub out: PathBuf,
    pub pattern: Option<Pattern>,
    /// Cycle through the available patterns every this many frames (switching test).
    pub switch_every: Option<u64>,
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

pub fn run(config: &Config, args: &HeadlessArgs) -> anyhow::Result<Summary> {
    anyhow::ensure!(args.frames > 0, "--frames must be at least 1");
    anyhow::ensure!(
        args.switch_every != Some(0),
        "--switch-every must be at least 1"
    );
    let pattern = args.pattern.unwrap_or(config.pattern());
    let mut r = Runner::new(config, pattern)?;
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
    summary
        .write(&args.out.join("summary.json"))
        .context("writing the summary")?;
    Ok(summary)
}

/// An offscreen session with what a frame needs besides it: the target image, the capture
/// buffers and the egui context. Frames are driven one at a time by [`Runner::frame`], so the
/// plain run and the soak share them.
pub struct Runner {
    pub session: Session,
    capture: ManuallyDrop<Capture>,
    egui_ctx: egui::Context,
}

/// The offscreen target and the host-readable copies of the last frame and its input.
struct Capture {
    target: Image,
    readback: Buffer,
    input_readback: Buffer,
}

impl Capture {
    fn new(gpu: &Gpu, render: vk::Extent2D, output: vk::Extent2D) -> anyhow::Result<Self> {
        let target = Image::new(
            gpu,
            "headless target",
            ImageDesc::new_2d(
                output,
                vk::Format::R8G8B8A8_UNORM,
                vk::ImageUsageFlags::COLOR_ATTACHMENT | vk::ImageUsageFlags::TRANSFER_SRC,
            ),
        )?;
        let buffer = |name, extent: vk::Extent2D| {
            Buffer::new(
                gpu,
                name,
                extent.width as u64 * extent.height as u64 * 4,
                vk::BufferUsageFlags::TRANSFER_DST,
                MemoryLocation::GpuToCpu,
            )
        };
        let readback = match buffer("headless capture", output) {
            Ok(b) => b,
            Err(e) => {
                target.destroy(gpu);
                return Err(e.into());
            }
        };
        match buffer("headless input capture", render) {
            Ok(input_readback) => Ok(Self {
                target,
                readback,
                input_readback,
            }),
            Err(e) => {
                readback.destroy(gpu);
                target.destroy(gpu);
                Err(e.into())
            }
        }
    }

    fn destroy(self, gpu: &Gpu) {
        self.input_readback.destroy(gpu);
        self.readback.destroy(gpu);
        self.target.destroy(gpu);
    }
}

impl Runner {
    pub fn new(config: &Config, pattern: Pattern) -> anyhow::Result<Self> {
        let session = Session::new(config, None, vk::Format::R8G8B8A8_UNORM, pattern)?;
        let sizes = session.renderer.sizes();
        let capture = Capture::new(&session.gpu, sizes.render, sizes.output)?;
        Ok(Self {
            session,
            capture: ManuallyDrop::new(capture),
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
        let s = &mut self.session;
        let output = s.renderer.sizes().output;
        s.world.set_scripted(n);
        let raw_input = egui::RawInput {
            screen_rect: Some(egui::Rect::from_min_size(
                egui::Pos2::ZERO,
                egui::vec2(output.width as f32, output.height as f32),
            )),
            ..Default::default()
        };
        let mut full = self.egui_ctx.run_ui(raw_input, |ui| {
            s.overlay(ui.ctx(), true, true);
        });
        let primitives = self.egui_ctx.tessellate(full.shapes, full.pixels_per_point);
        let mut ui = UiFrame {
            primitives: &primitives,
            pixels_per_point: full.pixels_per_point,
            textures: &mut full.textures_delta,
        };
        let c = &*self.capture;
        let mut acquire = |_sem| {
            Ok(Some(Target {
                image: c.target.raw,
                view: c.target.view,
                extent: output,
                initial: TARGET_REUSE,
                final_state: barrier::TRANSFER_SRC,
                wait: None,
                signal: None,
                capture: capture.then_some(c.readback.raw),
                capture_input: capture.then_some(c.input_readback.raw),
            }))
        };
        s.renderer
            .render(&s.gpu, &s.world, Some(&mut ui), &mut acquire)?;
        Ok(())
    }

    /// Waits for the frames in flight and writes `last.png` and `input.png` into `out` (the
    /// frame rendered with `capture` set).
    pub fn save_pngs(&mut self, out: &Path) -> anyhow::Result<()> {
        let s = &mut self.session;
        s.renderer.wait_all(&s.gpu)?;
        let sizes = s.renderer.sizes();
        let c = &*self.capture;
        capture::save_png(
            &out.join("last.png"),
            c.readback.mapped(),
            sizes.output.width,
            sizes.output.height,
            false,
        )?;
        capture::save_png(
            &out.join("input.png"),
            c.input_readback.mapped(),
            sizes.render.width,
            sizes.render.height,
            false,
        )
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let s = &mut self.session;
        // The last frames may still write the target: wait before destroying it.
        let _ = s.renderer.wait_all(&s.gpu);
        // SAFETY: taken once, here; no frame in flight uses the capture resources any more.
        let capture = unsafe { ManuallyDrop::take(&mut self.capture) };
        capture.destroy(&s.gpu);
    }
}
