//! The windowed game: winit event loop, input, egui-winit, frame pacing and presentation.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use ash::vk;
use winit::application::ApplicationHandler;
use winit::event::{ElementState, MouseButton, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoop};
use winit::keyboard::{KeyCode, PhysicalKey};
use winit::window::{Window, WindowId};

use super::capture;
use super::config::Config;
use super::pacing::Pacer;
use super::session::Session;
use super::summary::Summary;
use crate::game::world::Input;
use crate::gpu::barrier;
use crate::gpu::swapchain::{Acquired, Swapchain};
use crate::gpu::{Buffer, Validation};
use crate::render::composite::letterbox;
use crate::render::{Target, UiFrame};

pub struct WindowArgs {
    /// Quit after this many rendered frames (smoke tests).
    pub exit_after_frames: Option<u64>,
    /// Write summary.json here on exit.
    pub summary: Option<PathBuf>,
    pub screenshot_dir: PathBuf,
}

/// Runs the game in a window until it is closed. Fails when no window can be made (no display).
pub fn run(config: Config, args: WindowArgs) -> anyhow::Result<()> {
    let event_loop = EventLoop::new()?;
    let mut app = App {
        config,
        args,
        running: None,
        error: None,
        destroyed: false,
    };
    event_loop.run_app(&mut app)?;
    match app.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

struct App {
    config: Config,
    args: WindowArgs,
    running: Option<Running>,
    error: Option<anyhow::Error>,
    /// The window was destroyed from outside (not closed through a close request): nothing may
    /// touch it any more (winit's size queries on it panic).
    destroyed: bool,
}

/// Field order is drop order: the session (surface, swapchain, GPU) before the window.
struct Running {
    session: Session,
    egui_ctx: egui::Context,
    egui_state: egui_winit::State,
    input: Input,
    looking: bool,
    last_cursor: Option<(f64, f64)>,
    /// The cursor position in window pixels, and whether it is dragging the compare divider.
    cursor: (f64, f64),
    dragging_divider: bool,
    /// A left press not yet given to the game or egui, and whether the button is still down.
    /// Decided after the next egui frame: egui only knows whether the press is its own once it
    /// has seen where the pointer moved before it.
    pending_press: bool,
    left_down: bool,
    show_overlay: bool,
    recreate: bool,
    minimized: bool,
    screenshot: bool,
    last_update: Instant,
    /// Frame start times under `window.fps_cap`; None without a cap.
    pacer: Option<Pacer>,
    window: Arc<Window>,
}

impl ApplicationHandler for App {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.running.is_some() {
            return;
        }
        match Running::new(&self.config, event_loop) {
            Ok(r) => self.running = Some(r),
            Err(e) => {
                self.error = Some(e);
                event_loop.exit();
            }
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, _id: WindowId, event: WindowEvent) {
        if self.destroyed {
            return;
        }
        if event == WindowEvent::Destroyed {
            // Without a running game the window was ours and went with a failed start-up, whose
            // error is the only thing to say.
            if self.running.is_some() {
                tracing::warn!("the window was destroyed from outside; exiting");
            }
            self.destroyed = true;
            event_loop.exit();
            return;
        }
        let Some(r) = &mut self.running else { return };
        let consumed = r.egui_state.on_window_event(&r.window, &event).consumed;
        match event {
            WindowEvent::CloseRequested => event_loop.exit(),
            WindowEvent::Resized(size) => {
                r.minimized = size.width == 0 || size.height == 0;
                r.recreate = true;
            }
            WindowEvent::KeyboardInput { event, .. } if !consumed => {
                if let PhysicalKey::Code(code) = event.physical_key {
                    r.key(
                        code,
                        event.state == ElementState::Pressed,
                        event.repeat,
                        event_loop,
                    );
                }
            }
            WindowEvent::MouseInput { state, button, .. } => {
                r.mouse_button(button, state == ElementState::Pressed);
            }
            WindowEvent::CursorMoved { position, .. } => r.cursor_moved(position.x, position.y),
            WindowEvent::RedrawRequested => match r.frame(&self.args) {
                // The window went away before its Destroyed event arrived.
                Err(e) if surface_lost(&e) => {
                    tracing::warn!("the window's surface was lost (window destroyed?); exiting");
                    self.destroyed = true;
                    event_loop.exit();
                }
                Err(e) => {
                    self.error = Some(e);
                    event_loop.exit();
                }
                Ok(()) => {
                    let done = self
                        .args
                        .exit_after_frames
                        .is_some_and(|n| r.session.renderer.frame_number() >= n);
                    if done {
                        event_loop.exit();
                    }
                }
            },
            _ => {}
        }
    }

    fn about_to_wait(&mut self, event_loop: &ActiveEventLoop) {
        let Some(r) = self.running.as_ref().filter(|_| !self.destroyed) else {
            return;
        };
        match r.pacer.as_ref().and_then(|p| p.wait(Instant::now())) {
            // `window.fps_cap`: sleep in the event loop (input is still handled) until the
            // next frame's start time, rather than spinning.
            Some(deadline) => event_loop.set_control_flow(ControlFlow::WaitUntil(deadline)),
            None => {
                event_loop.set_control_flow(ControlFlow::Wait);
                r.window.request_redraw();
            }
        }
    }

    fn exiting(&mut self, _event_loop: &ActiveEventLoop) {
        let Some(mut r) = self.running.take() else {
            return;
        };
        let _ = r.session.renderer.wait_all(&r.session.gpu);
        let used = vec![r.session.renderer.pattern().name().to_string()];
        let summary = self.args.summary.as_ref().map(|path| {
            let summary = Summary::new(&r.session, used);
            (path.clone(), summary)
        });
        tracing::info!(
            "exiting after {} frames, {} validation errors",
            r.session.renderer.frame_number(),
            r.session.gpu.validation_errors()
        );
        // Written before teardown (kept if it crashes), rewritten with what teardown left.
        if let Some((path, summary)) = &summary {
            if let Err(e) = summary.write(path) {
                self.error = Some(e);
            }
        }
        let watch = r.session.gpu.teardown_watch();
        // Field order: the session (surface, swapchain, GPU) goes before the window.
        drop(r);
        if let Some(t) = watch.report() {
            tracing::info!(
                "teardown: {} leaked allocations, {} validation errors",
                t.leaked_allocations,
                t.validation_errors
            );
        }
        if let Some((path, mut summary)) = summary {
            summary.after_teardown(&watch);
            if let Err(e) = summary.write(&path) {
                self.error.get_or_insert(e);
            }
        }
        let problem = watch.report().and_then(|t| t.problem());
        if let Some(why) = problem {
            if Validation::from_env() == Validation::Required {
                self.error.get_or_insert(anyhow::anyhow!(why));
            } else {
                tracing::warn!("{why}");
            }
        }
    }
}

/// Whether a frame failed because the window's surface is gone (the window was destroyed).
fn surface_lost(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<crate::gpu::Error>(),
            Some(crate::gpu::Error::Vk(vk::Result::ERROR_SURFACE_LOST_KHR))
        )
    })
}

impl Running {
    fn new(config: &Config, event_loop: &ActiveEventLoop) -> anyhow::Result<Self> {
        let attributes = Window::default_attributes()
            .with_title("upscale-demo")
            .with_inner_size(winit::dpi::PhysicalSize::new(
                config.window.width,
                config.window.height,
            ));
        let window = Arc::new(event_loop.create_window(attributes)?);
        let session = Session::new(
            config,
            Some(&window),
            vk::Format::UNDEFINED,
            config.pattern(),
        )?;
        let egui_ctx = egui::Context::default();
        let egui_state = egui_winit::State::new(
            egui_ctx.clone(),
            egui::ViewportId::ROOT,
            &window,
            Some(window.scale_factor() as f32),
            None,
            None,
        );
        Ok(Self {
            session,
            egui_ctx,
            egui_state,
            input: Input::default(),
            looking: false,
            last_cursor: None,
            cursor: (0.0, 0.0),
            dragging_divider: false,
            pending_press: false,
            left_down: false,
            show_overlay: true,
            recreate: false,
            minimized: false,
            screenshot: false,
            last_update: Instant::now(),
            pacer: Pacer::new(config.window.fps_cap),
            window,
        })
    }

    fn key(&mut self, code: KeyCode, pressed: bool, repeat: bool, event_loop: &ActiveEventLoop) {
        let i = &mut self.input;
        match code {
            KeyCode::KeyW | KeyCode::ArrowUp => i.forward = pressed,
            KeyCode::KeyS | KeyCode::ArrowDown => i.back = pressed,
            KeyCode::KeyA | KeyCode::ArrowLeft => i.left = pressed,
            KeyCode::KeyD | KeyCode::ArrowRight => i.right = pressed,
            KeyCode::Space => i.up = pressed,
            KeyCode::KeyC => i.down = pressed,
            KeyCode::ShiftLeft | KeyCode::ShiftRight => i.sprint = pressed,
            _ if !pressed || repeat => {}
            KeyCode::F1 => self.show_overlay = !self.show_overlay,
            KeyCode::KeyP => {
                let next = self.session.next_pattern();
                self.session.switch(next);
            }
            KeyCode::KeyV => self.session.toggle_compare(),
            KeyCode::KeyH => self.session.toggle_heatmap(),
            KeyCode::KeyM => {
                let next = self.session.next_model();
                // Refused switches keep the current model; the overlay shows why.
                let _ = self.session.switch_model(&next);
            }
            KeyCode::F12 => self.screenshot = true,
            KeyCode::KeyR => self.session.restart(),
            KeyCode::Escape => event_loop.exit(),
            _ => {}
        }
    }

    /// Right button: mouse look while held. Left button: drags the compare divider when the
    /// compare view is on and egui does not take the press (decided in [`Running::frame`]).
    fn mouse_button(&mut self, button: MouseButton, pressed: bool) {
        match button {
            MouseButton::Right => {
                self.looking = pressed;
                self.last_cursor = None;
            }
            MouseButton::Left => {
                self.left_down = pressed;
                self.pending_press |= pressed;
                if !pressed {
                    self.dragging_divider = false;
                }
            }
            _ => {}
        }
    }

    /// After the egui frame that saw the press: the press is the game's only when egui neither
    /// lies under the pointer nor started using it. egui-winit's `consumed` for the press is
    /// decided from the previous frame's pointer position, which a pointer that jumped onto the
    /// overlay since then makes wrong.
    fn take_press(&mut self) {
        if !std::mem::take(&mut self.pending_press) {
            return;
        }
        let egui_took =
            self.egui_ctx.is_pointer_over_egui() || self.egui_ctx.egui_is_using_pointer();
        if !egui_took && self.session.renderer.compare_side().is_some() {
            self.drag_divider();
            self.dragging_divider = self.left_down;
        }
    }

    fn cursor_moved(&mut self, x: f64, y: f64) {
        self.cursor = (x, y);
        if self.dragging_divider {
            self.drag_divider();
        }
        if self.looking {
            if let Some((lx, ly)) = self.last_cursor {
                self.input.look_delta += glam::vec2((x - lx) as f32, (y - ly) as f32);
            }
            self.last_cursor = Some((x, y));
        }
    }

    /// Puts the compare divider under the cursor (within the letterboxed picture).
    fn drag_divider(&mut self) {
        let size = self.window.inner_size();
        let rect = letterbox(
            self.session.renderer.sizes().output,
            vk::Extent2D {
                width: size.width.max(1),
                height: size.height.max(1),
            },
        );
        let x = (self.cursor.0 - rect.offset.x as f64) / rect.extent.width.max(1) as f64;
        self.session.renderer.set_divider(x as f32);
    }

    fn frame(&mut self, args: &WindowArgs) -> anyhow::Result<()> {
        let now = Instant::now();
        let dt = (now - self.last_update).as_secs_f32().min(0.1);
        self.last_update = now;
        if let Some(pacer) = &mut self.pacer {
            pacer.started(now);
        }
        if self.minimized {
            return Ok(());
        }
        if self.recreate {
            let size = self.window.inner_size();
            self.session.recreate_swapchain(vk::Extent2D {
                width: size.width.max(1),
                height: size.height.max(1),
            })?;
            self.recreate = false;
        }
        self.session.world.update(dt, &self.input);
        self.input.look_delta = glam::Vec2::ZERO;

        let raw_input = self.egui_state.take_egui_input(&self.window);
        // The compare view's screenshot is the picture as seen, divider and labels included
        // (they are UI), without the panel that would cover part of it.
        let show = self.show_overlay && !self.compare_screenshot();
        let session = &mut self.session;
        let mut full = self
            .egui_ctx
            .run_ui(raw_input, |ui| session.overlay(ui.ctx(), show, false));
        self.egui_state
            .handle_platform_output(&self.window, full.platform_output);
        self.take_press();
        let primitives = self.egui_ctx.tessellate(full.shapes, full.pixels_per_point);
        let mut ui = UiFrame {
            primitives: &primitives,
            pixels_per_point: full.pixels_per_point,
            textures: &mut full.textures_delta,
        };
        self.render(&mut ui, args)
    }

    /// Whether this frame's screenshot is of the compare view, captured with its UI.
    fn compare_screenshot(&self) -> bool {
        self.screenshot && self.session.renderer.compare_side().is_some()
    }

    fn render(&mut self, ui: &mut UiFrame, args: &WindowArgs) -> anyhow::Result<()> {
        let with_ui = self.compare_screenshot();
        let s = &mut self.session;
        let surface = s.surface.as_ref().expect("windowed session has a surface");
        let swapchain = surface
            .swapchain
            .as_ref()
            .expect("swapchain exists between recreations");
        // A user action (F12), not the hot path: the readback buffer lives for this frame only.
        let shot = if self.screenshot {
            Some(Buffer::readback_rgba8(
                &s.gpu,
                "screenshot",
                swapchain.extent,
            )?)
        } else {
            None
        };
        let mut index = None;
        let mut out_of_date = false;
        let mut acquire = |sem| -> crate::gpu::Result<Option<Target>> {
            match swapchain.acquire(sem)? {
                Acquired::OutOfDate => {
                    out_of_date = true;
                    Ok(None)
                }
                Acquired::Image(i) => {
                    index = Some(i);
                    Ok(Some(Target {
                        image: swapchain.images[i as usize],
                        view: swapchain.views[i as usize],
                        extent: swapchain.extent,
                        initial: barrier::ACQUIRED,
                        final_state: barrier::PRESENT,
                        storage: false,
                        wait: Some(sem),
                        signal: Some(swapchain.present_ready[i as usize]),
                        capture: shot.as_ref().map(|b| b.raw),
                        capture_with_ui: with_ui,
                        capture_input: None,
                    }))
                }
            }
        };
        s.renderer
            .render(&s.gpu, &s.world, Some(ui), &mut acquire)?;
        if let Some(i) = index {
            if swapchain.present(s.gpu.queue, i)? {
                self.recreate = true;
            }
        }
        self.recreate |= out_of_date;
        if let Some(buffer) = shot {
            if index.is_some() {
                // A user action, not the hot path: wait for this frame, then save.
                s.renderer.wait_all(&s.gpu)?;
                let path = args
                    .screenshot_dir
                    .join(format!("shot-{:06}.png", s.renderer.frame_number()));
                let what = match s.renderer.compare_side() {
                    Some(side) if with_ui => format!(
                        "compare view as seen: {} | {side}, with the divider and labels",
                        s.renderer.pattern()
                    ),
                    _ => format!("{} output, without the overlay", s.renderer.pattern()),
                };
                let line = save_screenshot(&path, &buffer, swapchain, &what);
                s.tell(Some(line));
                self.screenshot = false;
            }
            buffer.destroy(&s.gpu);
        }
        Ok(())
    }
}

/// Writes the captured swapchain image to `path`; returns the line the overlay shows, which
/// says `what` the picture holds.
fn save_screenshot(path: &Path, buffer: &Buffer, swapchain: &Swapchain, what: &str) -> String {
    let bgra = matches!(
        swapchain.format,
        vk::Format::B8G8R8A8_UNORM | vk::Format::B8G8R8A8_SRGB
    );
    let e = swapchain.extent;
    match capture::save_png(path, buffer.mapped(), e.width, e.height, bgra) {
        Ok(()) => {
            let line = format!("screenshot saved ({what}): {}", path.display());
            tracing::info!("{line}");
            line
        }
        Err(err) => format!("screenshot failed: {err:#}"),
    }
}
