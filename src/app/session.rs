//! What a running game holds, windowed or headless: the Vulkan context, the optional window
//! surface and swapchain, the renderer and the game world. Owns teardown order.

use std::mem::ManuallyDrop;

use anyhow::Context as _;
use ash::{khr, vk};
use raw_window_handle::{HasDisplayHandle, HasWindowHandle};

use super::config::Config;
use super::paths;
use crate::game::{textures, world::World};
use crate::gpu::swapchain::Swapchain;
use crate::gpu::{Gpu, Validation};
use crate::render::compare::CompareSide;
use crate::render::overlay::{self, Action, CompareView, Hud, OverlayModel};
use crate::render::{Renderer, Sizes};
use crate::upscale::{self, MlSettings, Pattern};

pub struct Surface {
    pub loader: khr::surface::Instance,
    pub raw: vk::SurfaceKHR,
    pub swapchain: Option<Swapchain>,
}

pub struct Session {
    pub config: Config,
    pub renderer: ManuallyDrop<Renderer>,
    pub world: World,
    pub surface: Option<Surface>,
    patterns: Vec<(Pattern, Result<(), String>)>,
    /// The last problem to show the player (a pattern that failed to start, ...).
    pub notice: Option<String>,
    /// Declared last: dropped after everything above was destroyed in `Drop`.
    pub gpu: Gpu,
}

impl Session {
    /// `window`: create a surface and swapchain for it; else render for `headless_format`.
    pub fn new(
        config: &Config,
        window: Option<&winit::window::Window>,
        headless_format: vk::Format,
        pattern: Pattern,
    ) -> anyhow::Result<Self> {
        let (mut gpu, surface) = create_gpu(config, window)?;
        if !config.gpu.external_memory_host {
            // Behave as a device without the extension (tests, and users comparing domains).
            gpu.external_memory_host = None;
            gpu.info.external_memory_host = false;
        }
        let ((rw, rh), (ow, oh)) = config.sizes();
        let limit = gpu.info.max_image_dimension_2d;
        if ow.max(oh) > limit {
            anyhow::bail!(
                "render.output_width/output_height = {ow}x{oh}: larger than {} allows ({limit} pixels per side)",
                gpu.info.name
            );
        }
        let sizes = Sizes {
            render: vk::Extent2D {
                width: rw,
                height: rh,
            },
            output: vk::Extent2D {
                width: ow,
                height: oh,
            },
        };
        let layers = textures::load_all(&paths::root().join("assets"))?;
        let world = World::new(config.game.seed);
        let format = match &surface {
            Some(s) => s.swapchain.as_ref().unwrap().format,
            None => headless_format,
        };
        let ml = ml_settings(config)?;
        // cpu-roundtrip and shared-memory load the same model into ONNX Runtime: probe it once.
        let mut ort_probe: Option<Result<(), String>> = None;
        let mut patterns = Vec::with_capacity(Pattern::ALL.len());
        for p in Pattern::ALL {
            let probe = |p| upscale::probe(p, &ml, (rw, rh), (ow, oh));
            let ok = upscale::device_support(&gpu, p).and_then(|()| match p {
                Pattern::CpuRoundtrip | Pattern::SharedMemory => {
                    ort_probe.get_or_insert_with(|| probe(p)).clone()
                }
                _ => probe(p),
            });
            patterns.push((p, ok));
        }
        for (p, why) in &patterns {
            if let Err(why) = why {
                tracing::info!("{p} unavailable: {why}");
            }
        }
        let mut notice = None;
        let renderer =
            match Renderer::new(&gpu, &world, &layers, sizes, format, pattern, ml.clone()) {
                Ok(r) => r,
                Err(e) if pattern != Pattern::Bilinear => {
                    tracing::warn!("{pattern} failed to start ({e:#}); falling back to bilinear");
                    notice = Some(format!("{pattern} is not available: {e:#}; using bilinear"));
                    Renderer::new(&gpu, &world, &layers, sizes, format, Pattern::Bilinear, ml)?
                }
                Err(e) => return Err(e),
            };
        Ok(Self {
            config: config.clone(),
            renderer: ManuallyDrop::new(renderer),
            world,
            surface,
            patterns,
            notice,
            gpu,
        })
    }

    pub fn patterns(&self) -> &[(Pattern, Result<(), String>)] {
        &self.patterns
    }

    pub fn model_label(&self) -> String {
        self.config.upscale.model.display().to_string()
    }

    /// Switches pattern, keeping the current one (and saying why) when the new one fails.
    pub fn switch(&mut self, pattern: Pattern) {
        match self.renderer.switch_pattern(&self.gpu, pattern) {
            Ok(()) => self.notice = None,
            Err(e) => {
                tracing::warn!("cannot switch to {pattern}: {e:#}");
                self.notice = Some(format!("{pattern}: {e:#}"));
            }
        }
    }

    /// Turns the compare view on (this right side) or off; on failure the view stays as it was
    /// and the overlay says why.
    pub fn set_compare(&mut self, side: Option<CompareSide>) {
        match self.renderer.set_compare(&self.gpu, side) {
            Ok(()) => self.notice = None,
            Err(e) => {
                tracing::warn!("compare view: {e:#}");
                self.notice = Some(format!("compare view: {e:#}"));
            }
        }
    }

    /// V: the compare view off, or on with the first right side that can be shown.
    pub fn toggle_compare(&mut self) {
        let side = match self.renderer.compare_side() {
            Some(_) => None,
            None => self
                .compare_sides()
                .into_iter()
                .find(|(_, ok)| ok.is_ok())
                .map(|(side, _)| side),
        };
        self.set_compare(side);
    }

    /// The compare view's right-side choices next to the current pattern, with the reason for
    /// each one that cannot be shown.
    pub fn compare_sides(&self) -> Vec<(CompareSide, Result<(), String>)> {
        let current = self.renderer.pattern();
        CompareSide::ALL
            .into_iter()
            .map(|side| {
                let ok = side.support(current).and_then(|()| match side {
                    CompareSide::Pattern(p) => self
                        .patterns
                        .iter()
                        .find(|(q, _)| *q == p)
                        .map_or(Ok(()), |(_, ok)| ok.clone()),
                    CompareSide::Native => Ok(()),
                });
                (side, ok)
            })
            .collect()
    }

    /// The next available pattern after the current one.
    pub fn next_pattern(&self) -> Pattern {
        let current = self.renderer.pattern();
        let start = self
            .patterns
            .iter()
            .position(|p| p.0 == current)
            .unwrap_or(0);
        (1..=self.patterns.len())
            .map(|i| &self.patterns[(start + i) % self.patterns.len()])
            .find(|p| p.1.is_ok())
            .map_or(current, |p| p.0)
    }

    /// Draws HUD and overlay, and acts on what the player clicked.
    pub fn overlay(&mut self, ctx: &egui::Context, show: bool, scripted: bool) {
        let model = OverlayModel {
            stats: &self.renderer.stats,
            pattern: self.renderer.pattern(),
            patterns: &self.patterns,
            sizes: self.renderer.sizes(),
            model: &self.config.upscale.model.display().to_string(),
            device: &self.gpu.info,
            validation_errors: self.gpu.validation_errors(),
            host_copy_bytes: self.renderer.host_copy_bytes(),
            bus_bytes: self.renderer.bus_bytes(),
            pattern_note: self.renderer.describe(),
            notice: self.notice.as_deref(),
            hud: Hud {
                score: self.world.score,
                total: self.world.orb_count,
                elapsed: if scripted {
                    self.world.time
                } else {
                    self.world.elapsed
                },
                finished: self.world.finished_at,
                scripted,
            },
            compare_sides: self.compare_sides(),
            compare: self.renderer.compare_side().map(|side| CompareView {
                side,
                divider: self.renderer.divider(),
                psnr: self.renderer.compare_psnr(),
            }),
        };
        match overlay::draw(ctx, show, &model) {
            Some(Action::SwitchPattern(p)) => self.switch(p),
            Some(Action::SetCompare(side)) => self.set_compare(side),
            Some(Action::SetDivider(d)) => self.renderer.set_divider(d),
            None => {}
        }
    }

    /// Recreates the swapchain for a new window size (not per frame: on resize or out-of-date).
    pub fn recreate_swapchain(&mut self, extent: vk::Extent2D) -> anyhow::Result<()> {
        self.renderer.wait_all(&self.gpu)?;
        // Frame fences do not cover the presents queued after them: the old swapchain's
        // present-ready semaphores may still be waited on by the presentation engine. Resizes
        // are rare (not per frame), so draining the queue here is the simple, safe answer.
        unsafe { self.gpu.device.queue_wait_idle(self.gpu.queue)? };
        let Some(surface) = &mut self.surface else {
            return Ok(());
        };
        let old = surface.swapchain.take();
        let new = Swapchain::new(
            &self.gpu,
            &surface.loader,
            surface.raw,
            extent,
            self.config.window.vsync,
            old.as_ref(),
        );
        if let Some(old) = old {
            // SAFETY: the queue is idle: no frame or present uses the old images or semaphores.
            unsafe { old.destroy(&self.gpu) };
        }
        surface.swapchain = Some(new?);
        Ok(())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: taken once, here; the renderer waits for its frames before destroying.
        let renderer = unsafe { ManuallyDrop::take(&mut self.renderer) };
        renderer.destroy(&self.gpu);
        if let Some(surface) = self.surface.take() {
            unsafe {
                // As on resize: the last presents may still hold their semaphores.
                let _ = self.gpu.device.queue_wait_idle(self.gpu.queue);
                if let Some(swapchain) = surface.swapchain {
                    swapchain.destroy(&self.gpu);
                }
                surface.loader.destroy_surface(surface.raw, None);
            }
        }
    }
}

fn create_gpu(
    config: &Config,
    window: Option<&winit::window::Window>,
) -> anyhow::Result<(Gpu, Option<Surface>)> {
    let validation = Validation::from_env();
    let Some(window) = window else {
        let (gpu, _) = Gpu::new(validation, &[], &config.gpu.device, None)?;
        return Ok((gpu, None));
    };
    let display = window.display_handle()?.as_raw();
    let handle = window.window_handle()?.as_raw();
    let extensions = ash_window::enumerate_required_extensions(display)?;
    let make_surface = |instance: &crate::gpu::instance::Instance| {
        // SAFETY: the window outlives the surface (Session is dropped before the window).
        unsafe { ash_window::create_surface(&instance.entry, &instance.raw, display, handle, None) }
            .map_err(crate::gpu::Error::from)
    };
    let (gpu, raw) = Gpu::new(
        validation,
        extensions,
        &config.gpu.device,
        Some(&make_surface),
    )?;
    let raw = raw.context("no surface")?;
    let loader = khr::surface::Instance::new(&gpu.instance.entry, &gpu.instance.raw);
    let size = window.inner_size();
    let extent = vk::Extent2D {
        width: size.width.max(1),
        height: size.height.max(1),
    };
    let swapchain = Swapchain::new(&gpu, &loader, raw, extent, config.window.vsync, None)?;
    Ok((
        gpu,
        Some(Surface {
            loader,
            raw,
            swapchain: Some(swapchain),
        }),
    ))
}

/// The ML settings from the config, with paths resolved against the project.
pub fn ml_settings(config: &Config) -> anyhow::Result<MlSettings> {
    let ort = &config.onnxruntime;
    Ok(MlSettings {
        model: paths::resolve(&config.upscale.model),
        library: (!ort.library.as_os_str().is_empty()).then(|| paths::resolve(&ort.library)),
        provider: ort.execution_provider.parse()?,
        intra_threads: (ort.intra_threads > 0).then_some(ort.intra_threads),
    })
}
