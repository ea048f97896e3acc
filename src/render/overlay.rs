//! The egui overlay: latency per stage (GPU and host), the frame-time graph, resolutions, model,
//! device, and the pattern selector; plus the game's HUD (score and timer).

use egui::{Color32, RichText};

use super::compare::{ComparePsnr, CompareSide};
pub use super::composite::DebugView;
use super::stats::Stats;
use super::Sizes;
use crate::gpu::DeviceInfo;
use crate::infer::{Precision, PrecisionChoice};
use crate::upscale::Pattern;

mod frame_plot;
mod panel;

/// The game state the HUD shows.
pub struct Hud {
    pub score: u32,
    pub total: u32,
    pub elapsed: f32,
    pub finished: Option<f32>,
    /// True when a scripted camera drives the view (headless, demo paths).
    pub scripted: bool,
}

/// Everything the overlay reads for one frame.
pub struct OverlayModel<'a> {
    pub stats: &'a Stats,
    pub pattern: Pattern,
    /// Availability per pattern (Err = greyed, with the reason).
    pub patterns: &'a [(Pattern, Result<(), String>)],
    pub sizes: Sizes,
    pub model: &'a str,
    /// The model picker's entries (short names) and the current one's index, if listed.
    pub models: &'a [String],
    pub model_index: Option<usize>,
    /// The in-stream engine's precision setting (`upscale.precision`).
    pub precision: PrecisionChoice,
    pub device: &'a DeviceInfo,
    pub validation_errors: u32,
    pub host_copy_bytes: u64,
    pub bus_bytes: u64,
    /// How the current pattern runs here (e.g. its memory domain), empty if nothing to say.
    pub pattern_note: String,
    /// The pattern splits the frame around a host or device step.
    pub split: bool,
    /// The last thing worth telling the player (a pattern that failed to start, a screenshot
    /// saved); it fades out a few seconds after it first shows.
    pub notice: Option<&'a str>,
    /// Counts the notices said, so that the same text said again shows again.
    pub notice_serial: u64,
    pub hud: Hud,
    /// The compare view's choices for the right side (Err = greyed, with the reason).
    pub compare_sides: Vec<(CompareSide, Result<(), String>)>,
    /// The compare view while it is on.
    pub compare: Option<CompareView>,
    /// How frames reach the screen and the frame cap (`present fifo · fps cap off`), with the
    /// reason where the present mode asked for is not the one running.
    pub pacing: String,
    /// `window.fps_cap` (0: none); the frame-time graph draws its interval.
    pub fps_cap: f64,
    /// What the composite shows: the picture, or the scene pass's motion vectors or depth.
    pub debug_view: DebugView,
}

/// The compare view's state as the overlay shows it.
#[derive(Clone, Copy, Debug)]
pub struct CompareView {
    pub side: CompareSide,
    pub divider: f32,
    pub psnr: Option<ComparePsnr>,
    /// The right side shows the current output's error heatmap.
    pub heatmap: bool,
}

/// What the player asked for through the overlay this frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action {
    SwitchPattern(Pattern),
    /// Compare view on with this right side, or off.
    SetCompare(Option<CompareSide>),
    SetDivider(f32),
    /// The compare view's right side shows the error heatmap (or not).
    SetHeatmap(bool),
    /// An index into [`OverlayModel::models`].
    SwitchModel(usize),
    SetPrecision(PrecisionChoice),
    SetDebugView(DebugView),
}

pub fn draw(ctx: &egui::Context, show_overlay: bool, model: &OverlayModel) -> Option<Action> {
    draw_hud(ctx, &model.hud, show_overlay);
    if let Some(view) = &model.compare {
        draw_divider(ctx, model, view);
    }
    if !show_overlay {
        return None;
    }
    let mut action = None;
    panel::show(ctx, "upscale-demo", |ui| {
        timings(ui, model);
        ui.separator();
        action = pattern_selector(ui, model);
        if !model.pattern_note.is_empty() {
            ui.small(&model.pattern_note);
        }
        ui.separator();
        if let Some(a) = compare_controls(ui, model) {
            action = Some(a);
        }
        if let Some(view) = debug_controls(ui, model.debug_view) {
            action = Some(Action::SetDebugView(view));
        }
        ui.separator();
        ui.small(format!(
            "render {}x{} (msaa {}) -> output {}x{}",
            model.sizes.render.width,
            model.sizes.render.height,
            model.sizes.msaa,
            model.sizes.output.width,
            model.sizes.output.height
        ));
        if let Some(i) = model_picker(ui, model) {
            action = Some(Action::SwitchModel(i));
        }
        if let Some(p) = precision_picker(ui, model) {
            action = Some(Action::SetPrecision(p));
        }
        ui.small(format!(
            "GPU: {} ({})",
            model.device.name, model.device.driver
        ));
        let color = if model.validation_errors == 0 {
            ui.visuals().weak_text_color()
        } else {
            Color32::RED
        };
        ui.label(
            RichText::new(format!("validation errors: {}", model.validation_errors))
                .color(color)
                .small(),
        );
        if let Some(notice) = model.notice {
            let opacity = panel::fade(ui.ctx(), model.notice_serial);
            if opacity > 0.0 {
                let color = Color32::from_rgb(255, 170, 60).gamma_multiply(opacity);
                ui.label(RichText::new(notice).color(color));
            }
        }
        ui.small(
            "F1 overlay · P next pattern · M next model · V compare (drag to move) · \
                 H error heatmap · F12 screenshot · R restart · RMB look",
        );
    });
    action
}

/// Frame times needed since the last switch before FPS and frame percentiles mean something
/// (one or two frames of a software rasteriser's ML pattern give a figure, not a rate).
pub const MIN_FRAMES: usize = 5;

fn timings(ui: &mut egui::Ui, model: &OverlayModel) {
    let stats = model.stats;
    let measured = stats.frames_measured();
    let frame = stats.frame_ms().filter(|_| measured >= MIN_FRAMES);
    // Too few frame times (right after a switch): a dash, not "0 FPS" or one frame's rate.
    ui.heading(
        frame
            .filter(|p| p.p50_ms > 0.0)
            .map_or_else(|| "– FPS".to_string(), |p| fps_label(1000.0 / p.p50_ms)),
    );
    match (frame, stats.cpu_ms()) {
        (Some(f), Some(c)) => {
            ui.label(format!(
                "frame {:.2} ms (p99 {:.2}) · CPU {:.2} ms",
                f.p50_ms, f.p99_ms, c.p50_ms
            ));
        }
        _ => {
            ui.weak(measuring_note(measured));
        }
    }
    let cap_ms = (model.fps_cap > 0.0).then(|| 1000.0 / model.fps_cap);
    frame_plot::show(ui, stats, cap_ms);
    ui.small(&model.pacing);
    stage_table(ui, stats);
    clock_notes(ui, stats, model.split);
    ui.small(format!(
        "per frame: host copies {} · bus {}",
        human_bytes(model.host_copy_bytes),
        human_bytes(model.bus_bytes)
    ));
}

/// p50/p99 per stage in frame order (sub-stages indented), the in-stream layers folded away.
fn stage_table(ui: &mut egui::Ui, stats: &Stats) {
    let (layers, stages): (Vec<_>, Vec<_>) = stats
        .stages_in_order()
        .into_iter()
        .partition(|(name, _)| super::stats::is_layer(name));
    let cells = |name: String, p: &super::stats::Percentiles| {
        [name, format!("{:.3}", p.p50_ms), format!("{:.3}", p.p99_ms)]
    };
    let rows: Vec<_> = stages
        .iter()
        .map(|(name, p)| {
            let top = super::stats::TOP_STAGES.contains(name);
            let clock = if stats.is_host_stage(name) {
                " †"
            } else {
                ""
            };
            cells(format!("{}{name}{clock}", if top { "" } else { "   " }), p)
        })
        .collect();
    table(ui, "stages", Some(["stage", "p50 ms", "p99 ms"]), &rows);
    if rows.is_empty() {
        // GPU timestamps arrive when a frame's slot comes round again: a few frames late,
        // seconds on a software rasteriser after a switch.
        ui.weak("(waiting for the first timestamps)");
    }
    if layers.is_empty() {
        return;
    }
    let rows: Vec<_> = layers
        .iter()
        .map(|(name, p)| cells(name.to_string(), p))
        .collect();
    let sum: f64 = layers.iter().map(|(_, p)| p.p50_ms).sum();
    let upscale = stages
        .iter()
        .find(|(name, _)| *name == "upscale")
        .map(|(_, p)| p.p50_ms);
    egui::CollapsingHeader::new(format!("in-stream layers ({})", rows.len()))
        .default_open(false)
        .show(ui, |ui| {
            table(ui, "layers", None, &rows);
            if let Some(note) = upscale.and_then(|u| layers_note(sum, u)) {
                ui.small(note);
            }
        });
}

/// A line under the layer table when the layers' p50s do not add up to `upscale`'s (within a
/// quarter): the device's timestamps do not bracket each dispatch (lavapipe takes them when it
/// records, not when the work before them is done), so the rows are no breakdown of the span.
fn layers_note(layers_sum_ms: f64, upscale_ms: f64) -> Option<String> {
    let off = (layers_sum_ms - upscale_ms).abs() > 0.25 * upscale_ms;
    (upscale_ms > 0.0 && off).then(|| {
        format!(
            "the layers add up to {layers_sum_ms:.3} ms of upscale's {upscale_ms:.3} ms: this \
             device's timestamps do not bracket each dispatch, so read them as an order, not \
             a breakdown"
        )
    })
}

/// Which clock the stage table's figures come from: sub-stages of one name are host time in one
/// pattern and GPU time in another.
fn clock_notes(ui: &mut egui::Ui, stats: &Stats, split: bool) {
    let host = stats.stages().keys().any(|name| stats.is_host_stage(name));
    if host {
        ui.small("† host clock (CPU wall time); the other rows are GPU timestamps");
    }
    if split {
        ui.small(
            "upscale (GPU clock): from the scene's end to the output being ready, \
             the step between the two submissions included",
        );
    }
}

/// What the overlay says instead of FPS while too few frames have been measured.
fn measuring_note(measured: usize) -> String {
    format!("measuring: {measured} of {MIN_FRAMES} frames since the last switch")
}

/// A striped three-column table. egui sizes a grid's columns from the previous frame, so new
/// rows or wider numbers would be drawn overlapping for one frame, which lasts seconds when the
/// ML patterns run on a software rasteriser. When the cells change shape (names, or the
/// length of a number) this frame is laid out again before it is drawn.
fn table(ui: &mut egui::Ui, id: &str, header: Option<[&str; 3]>, rows: &[[String; 3]]) {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for [name, a, b] in rows {
        (name, a.len(), b.len()).hash(&mut hasher);
    }
    let shape = hasher.finish();
    let key = egui::Id::new(id).with("table shape");
    if ui.ctx().data(|d| d.get_temp::<u64>(key)) != Some(shape) {
        ui.ctx().data_mut(|d| d.insert_temp(key, shape));
        ui.ctx().request_discard("overlay table changed shape");
    }
    let names = name_column_width(ui, header, rows);
    egui::Grid::new(id)
        .striped(true)
        .max_col_width(names)
        .show(ui, |ui| {
            if let Some(header) = header {
                for h in header {
                    ui.strong(h);
                }
                ui.end_row();
            }
            for [name, a, b] in rows {
                // A long layer name (`Conv+DepthToSpace+Add+Resize:conv2`) wraps within the
                // panel rather than widening it past its title bar.
                ui.add(egui::Label::new(name.as_str()).wrap());
                ui.label(a.as_str());
                ui.label(b.as_str());
                ui.end_row();
            }
        });
}

/// What the panel leaves for the table's name column beside the two number columns at their
/// widest (grid columns are at most this wide; the numbers never need more).
fn name_column_width(ui: &egui::Ui, header: Option<[&str; 3]>, rows: &[[String; 3]]) -> f32 {
    let font = egui::TextStyle::Body.resolve(ui.style());
    let width = |text: &str| {
        ui.painter()
            .layout_no_wrap(text.to_string(), font.clone(), Color32::WHITE)
            .size()
            .x
    };
    let widest = |column: usize| {
        let cells = rows.iter().map(|r| r[column].as_str());
        cells
            .chain(header.map(|h| h[column]))
            .map(width)
            .fold(0.0, f32::max)
    };
    let spacing = 2.0 * ui.spacing().item_spacing.x;
    (ui.available_width() - widest(1) - widest(2) - spacing).max(60.0)
}

fn pattern_selector(ui: &mut egui::Ui, model: &OverlayModel) -> Option<Action> {
    let mut action = None;
    ui.label("upscaler pattern");
    for (pattern, available) in model.patterns {
        let selected = *pattern == model.pattern;
        match available {
            Ok(()) => {
                if ui.radio(selected, pattern.name()).clicked() && !selected {
                    action = Some(Action::SwitchPattern(*pattern));
                }
            }
            Err(reason) => {
                ui.add_enabled(false, egui::RadioButton::new(selected, pattern.name()))
                    .on_disabled_hover_text(reason.as_str());
                ui.label(RichText::new(format!("   {reason}")).small().weak());
            }
        }
    }
    action
}

/// The debug view of the scene pass's temporal inputs: on shows the motion vectors first.
fn debug_controls(ui: &mut egui::Ui, current: DebugView) -> Option<DebugView> {
    let mut chosen = None;
    let mut on = current != DebugView::Off;
    if ui
        .checkbox(&mut on, "show motion vectors / depth")
        .changed()
    {
        chosen = Some(if on {
            DebugView::Motion
        } else {
            DebugView::Off
        });
    }
    if on {
        ui.horizontal(|ui| {
            for view in [DebugView::Motion, DebugView::Depth] {
                if ui.radio(current == view, view.name()).clicked() && current != view {
                    chosen = Some(view);
                }
            }
        });
    }
    chosen
}

fn compare_controls(ui: &mut egui::Ui, model: &OverlayModel) -> Option<Action> {
    let mut action = None;
    let mut on = model.compare.is_some();
    if ui.checkbox(&mut on, "compare view (V)").changed() {
        let first = model
            .compare_sides
            .iter()
            .find(|(_, ok)| ok.is_ok())
            .map(|(side, _)| *side);
        action = Some(Action::SetCompare(if on { first } else { None }));
    }
    let Some(view) = &model.compare else {
        return action;
    };
    ui.horizontal_wrapped(|ui| {
        ui.label("right side:");
        for (side, ok) in &model.compare_sides {
            let selected = *side == view.side;
            match ok {
                Ok(()) => {
                    if ui.radio(selected, side.name()).clicked() && !selected {
                        action = Some(Action::SetCompare(Some(*side)));
                    }
                }
                Err(reason) => {
                    ui.add_enabled(false, egui::RadioButton::new(selected, side.name()))
                        .on_disabled_hover_text(reason.as_str());
                }
            }
        }
    });
    let mut heatmap = view.heatmap;
    if ui
        .checkbox(&mut heatmap, "right side: error heatmap (H)")
        .on_hover_text(format!(
            "The current output's |luma - native luma| x {}, false-coloured: black where they \
             are equal, yellow-white from 32 levels up",
            super::compare::HEATMAP_GAIN
        ))
        .changed()
    {
        action = Some(Action::SetHeatmap(heatmap));
    }
    let mut divider = view.divider;
    if ui
        .add(egui::Slider::new(&mut divider, 0.0..=1.0).text("divider"))
        .changed()
    {
        action = Some(Action::SetDivider(divider));
    }
    match view.psnr {
        Some(p) => {
            ui.label(format!(
                "PSNR-Y vs native: {} {:.2} dB",
                model.pattern, p.current_y
            ));
            if let Some(r) = p.right_y {
                ui.label(format!("PSNR-Y vs native: {} {:.2} dB", view.side, r));
            }
        }
        None => {
            ui.small("PSNR: waiting for the first frame");
        }
    }
    ui.small(native_note(model.sizes.msaa));
    action
}

/// The divider line and the two sides' names, over the picture (the composite letterboxes the
/// output into the window the same way).
fn draw_divider(ctx: &egui::Context, model: &OverlayModel, view: &CompareView) {
    let screen = ctx.content_rect();
    let out = model.sizes.output;
    let scale = (screen.width() / out.width as f32).min(screen.height() / out.height as f32);
    let size = egui::vec2(out.width as f32 * scale, out.height as f32 * scale);
    let rect = egui::Rect::from_center_size(screen.center(), size);
    let x = rect.left() + view.divider * rect.width();
    let painter = ctx.layer_painter(egui::LayerId::new(
        egui::Order::Background,
        egui::Id::new("compare divider"),
    ));
    painter.line_segment(
        [egui::pos2(x, rect.top()), egui::pos2(x, rect.bottom())],
        egui::Stroke::new(2.0, Color32::from_white_alpha(220)),
    );
    let font = egui::FontId::proportional(14.0);
    let bg = Color32::from_black_alpha(150);
    let y = rect.bottom() - 24.0;
    for (text, align, dx) in [
        (
            format!("{} ◀", model.pattern),
            egui::Align2::RIGHT_CENTER,
            -6.0,
        ),
        (
            if view.heatmap {
                format!(
                    "▶ {} error x{} vs native",
                    model.pattern,
                    super::compare::HEATMAP_GAIN
                )
            } else {
                format!("▶ {}", view.side)
            },
            egui::Align2::LEFT_CENTER,
            6.0,
        ),
    ] {
        let galley = painter.layout_no_wrap(text, font.clone(), Color32::WHITE);
        let r = align.anchor_size(egui::pos2(x + dx, y), galley.size());
        painter.rect_filled(r.expand(3.0), 3.0, bg);
        painter.galley(r.min, galley, Color32::WHITE);
    }
}

/// A combo of the listed models; picking one that cannot run leaves the current model running
/// and puts the reason in the notice.
fn model_picker(ui: &mut egui::Ui, model: &OverlayModel) -> Option<usize> {
    let mut picked = None;
    ui.horizontal(|ui| {
        ui.small("model");
        egui::ComboBox::from_id_salt("model picker")
            .selected_text(RichText::new(model.model).small())
            .width(ui.available_width().min(260.0))
            .show_ui(ui, |ui| {
                for (i, name) in model.models.iter().enumerate() {
                    let current = model.model_index == Some(i);
                    if ui.selectable_label(current, name).clicked() && !current {
                        picked = Some(i);
                    }
                }
            });
    });
    picked
}

/// The in-stream engine's precision: auto, fp32, fp16 (greyed, with the reason, where the
/// device cannot store fp16).
fn precision_picker(ui: &mut egui::Ui, model: &OverlayModel) -> Option<PrecisionChoice> {
    let mut picked = None;
    let fp16 = Precision::Fp16.unsupported_on(model.device);
    ui.horizontal(|ui| {
        ui.small("precision");
        for choice in [
            PrecisionChoice::Auto,
            PrecisionChoice::Fp32,
            PrecisionChoice::Fp16,
        ] {
            let allowed = choice != PrecisionChoice::Fp16 || fp16.is_none();
            let current = model.precision == choice;
            let label = ui.add_enabled(
                allowed,
                egui::Button::selectable(current, RichText::new(choice.name()).small()),
            );
            let label = match (&fp16, choice) {
                (Some(why), PrecisionChoice::Fp16) => label.on_disabled_hover_text(why),
                _ => label,
            };
            if label.clicked() && !current {
                picked = Some(choice);
            }
        }
    });
    picked
}

/// Below this window width (points) the HUD moves from the top centre to the top right while
/// the panel is shown, which would otherwise cover its left half.
const HUD_BESIDE_PANEL_BELOW: f32 = 900.0;

fn draw_hud(ctx: &egui::Context, hud: &Hud, panel_shown: bool) {
    let (align, offset) = if panel_shown && ctx.content_rect().width() < HUD_BESIDE_PANEL_BELOW {
        (egui::Align2::RIGHT_TOP, [-10.0, 10.0])
    } else {
        (egui::Align2::CENTER_TOP, [0.0, 10.0])
    };
    egui::Area::new(egui::Id::new("hud"))
        .anchor(align, offset)
        .interactable(false)
        .show(ctx, |ui| {
            let text = match hud.finished {
                Some(t) => format!("All {} orbs in {:.1} s! R to play again", hud.total, t),
                None if hud.scripted => format!("scripted camera · t = {:.1} s", hud.elapsed),
                None => format!("orbs {}/{} · {:.1} s", hud.score, hud.total, hud.elapsed),
            };
            ui.add(
                egui::Label::new(
                    RichText::new(text)
                        .size(20.0)
                        .color(Color32::WHITE)
                        .background_color(Color32::from_black_alpha(140)),
                )
                .extend(),
            );
        });
}

fn human_bytes(b: u64) -> String {
    match b {
        0 => "0 B".into(),
        b if b < 1 << 20 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{:.2} MiB", b as f64 / (1u64 << 20) as f64),
    }
}

/// Frames per second, with a decimal below 10 (a software rasteriser runs the ML patterns at
/// well under one frame per second; "0 FPS" would read as a hang).
fn fps_label(fps: f64) -> String {
    if fps < 10.0 {
        format!("{fps:.1} FPS")
    } else {
        format!("{fps:.0} FPS")
    }
}

/// What the compare view's native side is: the same scene pass at output size, so with the
/// game's `render.msaa`.
fn native_note(msaa: u32) -> String {
    let samples = if msaa == 1 { "sample" } else { "samples" };
    format!("native = the scene rendered at output size, {msaa} {samples} per pixel (render.msaa)")
}

#[cfg(test)]
mod tests {
    use super::{fps_label, layers_note, native_note, table};

    #[test]
    fn layers_that_do_not_add_up_to_upscale_are_explained() {
        // The H200's quality_x2 fp16: 0.666 ms of layers in a 0.673 ms span: no note.
        assert_eq!(layers_note(0.666, 0.673), None);
        // lavapipe: a few microseconds of layers in a span of seconds.
        let note = layers_note(0.014, 2400.0).unwrap();
        assert!(
            note.contains("0.014") && note.contains("2400.000"),
            "{note}"
        );
        assert!(layers_note(1.0, 0.0).is_none());
    }

    #[test]
    fn the_native_note_gives_the_pass_sample_count() {
        assert_eq!(
            native_note(4),
            "native = the scene rendered at output size, 4 samples per pixel (render.msaa)"
        );
        assert!(native_note(1).contains(", 1 sample per pixel"));
    }

    #[test]
    fn slow_frame_rates_keep_a_decimal() {
        assert_eq!(fps_label(1000.0 / 2444.5), "0.4 FPS");
        assert_eq!(fps_label(59.6), "60 FPS");
    }

    /// One frame of a window holding `table` with `rows`; returns the x of every text shape
    /// drawn for `needle`.
    fn draw_table(ctx: &egui::Context, rows: &[[String; 3]], needle: &str) -> Vec<f32> {
        let input = egui::RawInput {
            screen_rect: Some(egui::Rect::from_min_size(
                egui::Pos2::ZERO,
                egui::vec2(960.0, 540.0),
            )),
            ..Default::default()
        };
        let mut out = ctx.run_ui(input, |ui| {
            egui::Window::new("w").show(ui.ctx(), |ui| {
                table(ui, "t", Some(["stage", "p50 ms", "p99 ms"]), rows);
            });
        });
        out.textures_delta.clear();
        out.shapes
            .iter()
            .filter_map(|c| match &c.shape {
                egui::Shape::Text(t) if t.galley.text() == needle => Some(t.pos.x),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn rows_that_appear_are_laid_out_in_their_first_frame() {
        let ctx = egui::Context::default();
        assert!(draw_table(&ctx, &[], "2499.798").is_empty());
        let rows = [[
            "   from_tensor".to_string(),
            "2499.798".to_string(),
            "1.000".to_string(),
        ]];
        let first = draw_table(&ctx, &rows, "2499.798");
        let settled = draw_table(&ctx, &rows, "2499.798");
        assert_eq!(first.len(), 1, "{first:?}");
        assert_eq!(
            first, settled,
            "the first frame with the row is drawn as later ones"
        );
        let name = draw_table(&ctx, &rows, "   from_tensor");
        assert!(settled[0] > name[0] + 40.0, "{settled:?} right of {name:?}");
    }
}
