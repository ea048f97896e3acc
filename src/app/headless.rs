//! The headless runner: the scripted camera path rendered offscreen (no window, no display),
//! writing `last.png` (the final composited frame, overlay excluded), `input.png` (that frame's
//! low-resolution scene image, what the upscaler got) and `summary.json`.
//! Used by tests, benchmarks and machines without a display.

use std::path::PathBuf;

use anyhow::Context as _;
use ash::vk;
use gpu_allocator::MemoryLocation;

use super::config::Config;
use super::summary::Summary;
use super::{capture, session};
use crate::gpu::barrier::{self, State};
use crate::gpu::{Buffer, Image, ImageDesc};
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
    let pattern = args.pattern.unwrap_or(config.pattern());
    let mut s = session::Session::new(config, None, vk::Format::R8G8B8A8_UNORM, pattern)?;
    let gpu = &s.gpu;
    let output = s.renderer.sizes().output;
    let target = Image::new(
        gpu,
        "headless target",
        ImageDesc::new_2d(
            output,
            vk::Format::R8G8B8A8_UNORM,
            vk::ImageUsageFlags::COLOR_ATTACHMENT | vk::ImageUsageFlags::TRANSFER_SRC,
        ),
    )?;
    let size = output.width as u64 * output.height as u64 * 4;
    let readback = Buffer::new(
        gpu,
        "headless capture",
        size,
        vk::BufferUsageFlags::TRANSFER_DST,
        MemoryLocation::GpuToCpu,
    )?;
    let render = s.renderer.sizes().render;
    let input_readback = Buffer::new(
        gpu,
        "headless input capture",
        render.width as u64 * render.height as u64 * 4,
        vk::BufferUsageFlags::TRANSFER_DST,
        MemoryLocation::GpuToCpu,
    )?;
    let egui_ctx = egui::Context::default();
    let available: Vec<Pattern> = s
        .patterns()
        .iter()
        .filter(|p| p.1.is_ok())
        .map(|p| p.0)
        .collect();
    let mut used = vec![pattern.name().to_string()];
    let progress_every = (args.frames / 10).max(1);
    for n in 0..args.frames {
        if let Some(k) = args.switch_every {
            if n > 0 && n % k == 0 && available.len() > 1 {
                let i = available
                    .iter()
                    .position(|&p| p == s.renderer.pattern())
                    .unwrap_or(0);
                let next = available[(i + 1) % available.len()];
                s.renderer.switch_pattern(&s.gpu, next)?;
                if !used.iter().any(|u| u == next.name()) {
                    used.push(next.name().into());
                }
            }
        }
        s.world.set_scripted(n);
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
        let last = n + 1 == args.frames;
        let mut acquire = |_sem| {
            Ok(Some(Target {
                image: target.raw,
                view: target.view,
                extent: output,
                initial: TARGET_REUSE,
                final_state: barrier::TRANSFER_SRC,
                wait: None,
                signal: None,
                capture: last.then_some(readback.raw),
                capture_input: last.then_some(input_readback.raw),
            }))
        };
        s.renderer
            .render(&s.gpu, &s.world, Some(&mut ui), &mut acquire)?;
        if (n + 1) % progress_every == 0 {
            tracing::info!("headless: frame {}/{}", n + 1, args.frames);
        }
    }
    s.renderer.wait_all(&s.gpu)?;
    let saved = capture::save_png(
        &args.out.join("last.png"),
        readback.mapped(),
        output.width,
        output.height,
        false,
    )
    .and_then(|()| {
        capture::save_png(
            &args.out.join("input.png"),
            input_readback.mapped(),
            render.width,
            render.height,
            false,
        )
    });
    input_readback.destroy(&s.gpu);
    readback.destroy(&s.gpu);
    target.destroy(&s.gpu);
    saved?;
    let summary = Summary::new(&s, used);
    summary
        .write(&args.out.join("summary.json"))
        .context("writing the summary")?;
    Ok(summary)
}
