//! What a running game holds, windowed or headless: the Vulkan context, the optional window
//! surface and swapchain, the renderer and the game world. Owns teardown order.

use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use ash::{khr, vk};
use raw_window_handle::{HasDisplayHandle, HasWindowHandle};

use super::config::Config;
use super::{models, paths};
use crate::game::{textures, world::World};
use crate::gpu::swapchain::Swapchain;
use crate::gpu::{Gpu, Validation};
use crate::infer::PrecisionChoice;
use crate::render::compare::CompareSide;
use crate::render::overlay::{self, Action, CompareView, Hud, OverlayModel};
use crate::render::{Renderer, Sizes};
use crate::upscale::shared::DomainChoice;
use crate::upscale::{self, MlSettings, Pattern};

pub struct Surface {
    pub loader: khr::surface::Instance,
    pub raw: vk::SurfaceKHR,
    pub swapchain: Option<Swapchain>,
}

/// Switches asked for at run time (UI, keys, soak), and how many were refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SwitchCounts {
    pub patterns: u64,
    pub patterns_refused: u64,
    pub models: u64,
    pub models_refused: u64,
}

pub struct Session {
    pub config: Config,
    pub renderer: ManuallyDrop<Renderer>,
    pub world: World,
    pub surface: Option<Surface>,
    patterns: Vec<(Pattern, Result<(), String>)>,
    /// What the model picker offers (resolved paths, listed at start-up), their short names,
    /// and which one the ML patterns run.
    models: Vec<PathBuf>,
    model_labels: Vec<String>,
    model_index: usize,
    /// The model last asked for (refused or not), where the M key continues.
    model_cursor: usize,
    /// The last thing to tell the player (a pattern that failed to start, a screenshot saved):
    /// set with [`Session::tell`], which starts its fade in the overlay again.
    pub notice: Option<String>,
    notice_serial: u64,
    pub switches: SwitchCounts,
    /// Declared last: dropped after everything above was destroyed in `Drop`.
    pub gpu: Gpu,
}

/// The configured render and output sizes, checked against the device's image size limit and
/// MSAA sample counts.
fn checked_sizes(config: &Config, gpu: &Gpu) -> anyhow::Result<Sizes> {
    let ((rw, rh), (ow, oh)) = config.sizes();
    check_device_limit((ow, oh), gpu.info.max_image_dimension_2d, &gpu.info.name)?;
    check_msaa(
        config.render.msaa,
        &gpu.info.msaa_sample_counts,
        &gpu.info.name,
    )?;
    Ok(Sizes {
        render: vk::Extent2D {
            width: rw,
            height: rh,
        },
        output: vk::Extent2D {
            width: ow,
            height: oh,
        },
        msaa: config.render.msaa,
        mip_bias: config.render.upscale_mip_bias,
    })
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
        let format = match &surface {
            Some(s) => s.swapchain.as_ref().unwrap().format,
            None => headless_format,
        };
        let started = match Started::new(config, &gpu, format, pattern) {
            Ok(s) => s,
            Err(e) => {
                // Release what was made: the swapchain and surface outlive nothing else here,
                // and the device and instance go with `gpu`.
                if let Some(surface) = surface {
                    // SAFETY: nothing was submitted that uses them.
                    unsafe { surface.destroy(&gpu) };
                }
                return Err(e);
            }
        };
        Ok(Self {
            config: config.clone(),
            renderer: ManuallyDrop::new(started.renderer),
            world: started.world,
            surface,
            patterns: started.patterns,
            models: started.models,
            model_labels: started.model_labels,
            model_index: started.model_index,
            model_cursor: started.model_index,
            notice: started.notice,
            notice_serial: 0,
            switches: SwitchCounts::default(),
            gpu,
        })
    }

    /// Puts `notice` in the overlay (None: clears it); said again, the same text shows again.
    pub fn tell(&mut self, notice: Option<String>) {
        self.notice_serial += 1;
        self.notice = notice;
    }

    pub fn patterns(&self) -> &[(Pattern, Result<(), String>)] {
        &self.patterns
    }

    /// The running model's short name (`models/quality_x2.onnx`), as the picker shows it.
    pub fn model_label(&self) -> String {
        self.model_labels[self.model_index].clone()
    }

    /// The models the picker offers, and the index of the current one.
    pub fn models(&self) -> (&[PathBuf], usize) {
        (&self.models, self.model_index)
    }

    /// The model after the one last asked for in the picker's list (the M key), so repeated
    /// presses walk past models that were refused.
    pub fn next_model(&self) -> PathBuf {
        self.models[(self.model_cursor + 1) % self.models.len()].clone()
    }

    /// R: all orbs back, timer to zero. The picture jumps, so the upscalers start over.
    pub fn restart(&mut self) {
        self.world.restart();
        self.renderer.reset_history();
    }

    /// Switches pattern, keeping the current one (and saying why) when the new one fails.
    pub fn switch(&mut self, pattern: Pattern) {
        match self.renderer.switch_pattern(&self.gpu, pattern) {
            Ok(()) => {
                self.switches.patterns += 1;
                self.tell(None);
            }
            Err(e) => {
                tracing::warn!("cannot switch to {pattern}: {e:#}");
                self.switches.patterns_refused += 1;
                self.tell(Some(format!("{pattern}: {e:#}")));
            }
        }
    }

    /// Turns the compare view on (this right side) or off; on failure the view stays as it was
    /// and the overlay says why.
    pub fn set_compare(&mut self, side: Option<CompareSide>) {
        // Success leaves the notice alone: it may be about something else (a refused model).
        if let Err(e) = self.renderer.set_compare(&self.gpu, side) {
            tracing::warn!("compare view: {e:#}");
            self.tell(Some(format!("compare view: {e:#}")));
        }
    }

    /// H: the error heatmap on the compare view's right side on or off; turning it on also
    /// turns the compare view on.
    pub fn toggle_heatmap(&mut self) {
        let on = !self.renderer.heatmap();
        self.renderer.set_heatmap(on);
        if on && self.renderer.compare_side().is_none() {
            self.toggle_compare();
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

    /// Switches the model the ML patterns run. Refused, with the reason in the notice and the
    /// previous model still running, when no ML pattern can run the new one or the current
    /// pattern cannot. On success the patterns' availability is that of the new model.
    pub fn switch_model(&mut self, model: &Path) -> Result<(), String> {
        if let Some(i) = self.models.iter().position(|m| models::same_file(m, model)) {
            self.model_cursor = i;
        }
        let result = self.try_switch_model(model);
        match &result {
            Ok(()) => {
                self.switches.models += 1;
                self.tell(None);
            }
            Err(why) => {
                tracing::warn!("model switch refused: {why}");
                self.switches.models_refused += 1;
                self.tell(Some(why.clone()));
            }
        }
        result
    }

    fn try_switch_model(&mut self, model: &Path) -> Result<(), String> {
        let root = paths::root();
        let mut config = self.config.clone();
        config.upscale.model = model.to_path_buf();
        let ml = ml_settings(&config).map_err(|e| format!("{e:#}"))?;
        let new_label = models::label(&root, &ml.model);
        let old_label = &self.model_labels[self.model_index];
        let refuse = |why: String| format!("{new_label}: {why}; still running {old_label}");
        let patterns = probe_patterns(&self.gpu, &ml, self.renderer.sizes());
        let ml_patterns = || patterns.iter().filter(|p| p.0.caps().needs_model);
        if ml_patterns().all(|p| p.1.is_err()) {
            return Err(refuse(format!(
                "no pattern can run it ({})",
                grouped_reasons(ml_patterns())
            )));
        }
        let current = self.renderer.pattern();
        if let Some((_, Err(why))) = patterns.iter().find(|p| p.0 == current) {
            return Err(refuse(format!("{current} cannot run it: {why}")));
        }
        self.renderer
            .switch_model(&self.gpu, ml)
            .map_err(|e| refuse(format!("{current} failed to start it: {e:#}")))?;
        self.model_index = match self.models.iter().position(|m| models::same_file(m, model)) {
            Some(i) => i,
            None => {
                self.models.push(model.to_path_buf());
                self.model_labels.push(models::label(&root, model));
                self.models.len() - 1
            }
        };
        self.model_cursor = self.model_index;
        self.config.upscale.model = model.to_path_buf();
        self.patterns = patterns;
        Ok(())
    }

    /// Sets the in-stream engine's precision (`upscale.precision`): the upscaler is rebuilt
    /// with it; on failure the previous one keeps running and the notice says why.
    pub fn switch_precision(&mut self, choice: PrecisionChoice) -> Result<(), String> {
        let mut config = self.config.clone();
        config.upscale.precision = choice.name().into();
        let result = ml_settings(&config)
            .map_err(|e| format!("{e:#}"))
            .and_then(|ml| {
                self.renderer
                    .switch_model(&self.gpu, ml)
                    .map_err(|e| format!("precision {}: {e:#}", choice.name()))
            });
        match &result {
            Ok(()) => {
                tracing::info!("precision: {}", choice.name());
                self.config = config;
                self.tell(None);
            }
            Err(why) => {
                tracing::warn!("{why}");
                self.tell(Some(why.clone()));
            }
        }
        result
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
            model: &self.model_labels[self.model_index],
            models: &self.model_labels,
            model_index: Some(self.model_index),
            precision: PrecisionChoice::parse(&self.config.upscale.precision)
                .expect("validated with the config"),
            device: &self.gpu.info,
            validation_errors: self.gpu.validation_errors(),
            host_copy_bytes: self.renderer.host_copy_bytes(),
            bus_bytes: self.renderer.bus_bytes(),
            pattern_note: self.renderer.describe(),
            split: self.renderer.split(),
            notice: self.notice.as_deref(),
            notice_serial: self.notice_serial,
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
            debug_view: self.renderer.debug_view(),
            compare: self.renderer.compare_side().map(|side| CompareView {
                side,
                divider: self.renderer.divider(),
                psnr: self.renderer.compare_psnr(),
                heatmap: self.renderer.heatmap(),
            }),
            pacing: self.pacing_line(),
            fps_cap: if self.surface.is_some() {
                self.config.window.fps_cap
            } else {
                0.0
            },
        };
        match overlay::draw(ctx, show, &model) {
            Some(Action::SwitchPattern(p)) => self.switch(p),
            Some(Action::SetCompare(side)) => self.set_compare(side),
            Some(Action::SetDivider(d)) => self.renderer.set_divider(d),
            Some(Action::SetHeatmap(on)) => self.renderer.set_heatmap(on),
            Some(Action::SetDebugView(v)) => self.renderer.set_debug_view(v),
            Some(Action::SwitchModel(i)) => {
                let model = self.models[i].clone();
                // The outcome is in the notice; the overlay shows it.
                let _ = self.switch_model(&model);
            }
            Some(Action::SetPrecision(p)) => {
                let _ = self.switch_precision(p);
            }
            None => {}
        }
    }

    /// The present mode running and the frame cap, as the overlay says them; offscreen runs
    /// present nothing and render as fast as they can.
    fn pacing_line(&self) -> String {
        let Some(swapchain) = self.surface.as_ref().and_then(|s| s.swapchain.as_ref()) else {
            return "offscreen: no present mode, no fps cap".into();
        };
        let cap = match self.config.window.fps_cap {
            0.0 => "off".to_string(),
            fps => format!("{fps} FPS"),
        };
        let line = format!(
            "present {} · fps cap {cap} (window.present_mode, window.fps_cap)",
            swapchain.present_mode.name()
        );
        match &swapchain.present_fallback {
            Some(why) => format!("{line}; {why}"),
            None => line,
        }
    }

    /// Recreates the swapchain for a new window size (not per frame: on resize or out-of-date).
    /// The upscalers' history starts over: the output keeps its size (the composite letterboxes
    /// it), but a resize is one of the changes after which a temporal upscaler is expected to
    /// start clean, and the frames around it are skipped or delayed.
    pub fn recreate_swapchain(&mut self, extent: vk::Extent2D) -> anyhow::Result<()> {
        self.renderer.reset_history();
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
            self.config.present_mode(),
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

/// What a session builds on its device: everything that can fail once the device is open.
struct Started {
    renderer: Renderer,
    world: World,
    patterns: Vec<(Pattern, Result<(), String>)>,
    models: Vec<PathBuf>,
    model_labels: Vec<String>,
    model_index: usize,
    notice: Option<String>,
}

impl Started {
    fn new(
        config: &Config,
        gpu: &Gpu,
        format: vk::Format,
        pattern: Pattern,
    ) -> anyhow::Result<Self> {
        let sizes = checked_sizes(config, gpu)?;
        let layers = textures::load_all(&paths::root().join("assets"))?;
        let mut world = World::new(config.game.seed);
        world.mouse_sensitivity = config.game.mouse_sensitivity;
        let ml = ml_settings(config)?;
        let patterns = probe_patterns(gpu, &ml, sizes);
        let models = models::list(&paths::root(), &ml.model);
        let model_labels = models
            .iter()
            .map(|m| models::label(&paths::root(), m))
            .collect();
        let model_index = models
            .iter()
            .position(|m| models::same_file(m, &ml.model))
            .unwrap_or(0);
        let start = |p: Pattern| Renderer::new(gpu, &world, &layers, sizes, format, p, ml.clone());
        let (mut renderer, notice) = match start(pattern) {
            Ok(r) => (r, None),
            Err(e) if pattern != Pattern::Bilinear => {
                tracing::warn!("{pattern} failed to start ({e:#}); falling back to bilinear");
                let notice = format!("{pattern} is not available: {e:#}; using bilinear");
                (start(Pattern::Bilinear)?, Some(notice))
            }
            Err(e) => return Err(e),
        };
        renderer.set_jitter_mode(config.jitter());
        Ok(Self {
            renderer,
            world,
            patterns,
            models,
            model_labels,
            model_index,
            notice,
        })
    }
}

impl Surface {
    /// # Safety
    /// No pending work or present uses the swapchain (the queue is idle).
    unsafe fn destroy(self, gpu: &Gpu) {
        if let Some(swapchain) = self.swapchain {
            swapchain.destroy(gpu);
        }
        self.loader.destroy_surface(self.raw, None);
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
                surface.destroy(&self.gpu);
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
    let swapchain = Swapchain::new(&gpu, &loader, raw, extent, config.present_mode(), None)?;
    Ok((
        gpu,
        Some(Surface {
            loader,
            raw,
            swapchain: Some(swapchain),
        }),
    ))
}

/// Each pattern with whether it can run here with `ml` at these sizes (Err: the reason, which
/// the overlay shows next to the greyed pattern). Loads the model, so not per frame.
fn probe_patterns(gpu: &Gpu, ml: &MlSettings, sizes: Sizes) -> Vec<(Pattern, Result<(), String>)> {
    let render = (sizes.render.width, sizes.render.height);
    let output = (sizes.output.width, sizes.output.height);
    // The ONNX Runtime patterns load the same model into the same runtime: probe it once.
    let mut ort_probe: Option<Result<(), String>> = None;
    let mut patterns = Vec::with_capacity(Pattern::ALL.len());
    for p in Pattern::ALL {
        let probe = |p| upscale::probe(p, ml, render, output);
        let ok = upscale::device_support(gpu, p, ml).and_then(|()| {
            if p.caps().onnx_runtime {
                ort_probe.get_or_insert_with(|| probe(p)).clone()
            } else {
                probe(p)
            }
        });
        if let Err(why) = &ok {
            tracing::info!("{p} unavailable with {}: {why}", ml.model.display());
        }
        patterns.push((p, ok));
    }
    patterns
}

/// "a, b: reason; c: other reason": patterns that failed for the same reason named together.
fn grouped_reasons<'a>(
    patterns: impl Iterator<Item = &'a (Pattern, Result<(), String>)>,
) -> String {
    let mut groups: Vec<(Vec<&str>, &str)> = Vec::new();
    for (p, why) in patterns {
        let Err(why) = why else { continue };
        match groups.iter_mut().find(|g| g.1 == why) {
            Some(g) => g.0.push(p.name()),
            None => groups.push((vec![p.name()], why)),
        }
    }
    groups
        .iter()
        .map(|(names, why)| format!("{}: {why}", names.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The output image must fit the device (the config allows up to `config::MAX_SIZE`).
pub fn check_device_limit(output: (u32, u32), limit: u32, device: &str) -> anyhow::Result<()> {
    let (w, h) = output;
    if w.max(h) > limit {
        anyhow::bail!(
            "render.output_width/output_height = {w}x{h}: larger than {device} allows \
             ({limit} pixels per side); lower the output size in the config"
        );
    }
    Ok(())
}

/// The device must support `render.msaa` samples per pixel for colour and depth attachments
/// (`supported`: those counts; the config allows 1, 2, 4 and 8).
pub fn check_msaa(msaa: u32, supported: &[u32], device: &str) -> anyhow::Result<()> {
    if !supported.contains(&msaa) {
        let list = supported
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        anyhow::bail!(
            "render.msaa = {msaa}: {device} supports {list} samples per pixel for colour and \
             depth attachments; set render.msaa to one of those in the config"
        );
    }
    Ok(())
}

/// The ML settings from the config, with paths resolved against the project.
pub fn ml_settings(config: &Config) -> anyhow::Result<MlSettings> {
    let ort = &config.onnxruntime;
    Ok(MlSettings {
        model: paths::resolve(&config.upscale.model),
        library: (!ort.library.as_os_str().is_empty()).then(|| paths::resolve(&ort.library)),
        provider: ort.execution_provider.parse()?,
        intra_threads: (ort.intra_threads > 0).then_some(ort.intra_threads),
        shared_domain: DomainChoice::parse(&config.upscale.shared_domain)
            .expect("validated with the config"),
        precision: PrecisionChoice::parse(&config.upscale.precision)
            .expect("validated with the config"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_over_the_device_limit_is_refused() {
        check_device_limit((4096, 2160), 4096, "Small GPU").unwrap();
        let e = check_device_limit((4096, 4097), 4096, "Small GPU")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "render.output_width/output_height = 4096x4097: larger than Small GPU allows \
             (4096 pixels per side); lower the output size in the config"
        );
    }

    #[test]
    fn msaa_the_device_lacks_is_refused_with_what_it_has() {
        check_msaa(4, &[1, 4], "llvmpipe").unwrap();
        check_msaa(1, &[1, 2, 4, 8], "Big GPU").unwrap();
        let e = check_msaa(8, &[1, 4], "llvmpipe").unwrap_err().to_string();
        assert_eq!(
            e,
            "render.msaa = 8: llvmpipe supports 1, 4 samples per pixel for colour and depth \
             attachments; set render.msaa to one of those in the config"
        );
    }

    #[test]
    fn equal_reasons_are_grouped() {
        let patterns = [
            (Pattern::Bilinear, Ok(())),
            (Pattern::CpuRoundtrip, Err("no runtime".to_string())),
            (Pattern::SharedMemory, Err("no runtime".to_string())),
            (Pattern::InStream, Err("bad node".to_string())),
        ];
        assert_eq!(
            grouped_reasons(patterns.iter()),
            "cpu-roundtrip, shared-memory: no runtime; in-stream: bad node"
        );
    }
}
