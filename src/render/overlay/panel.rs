//! The overlay panel's container and its messages' fade. The panel keeps inside the window at
//! any window size: narrower on a small window (more of the picture shows), never taller than
//! the window (its contents scroll instead), and its text wraps at its width. Growing past the
//! window's bottom used to make egui push the panel up, where it stayed after it shrank again.

use egui::{vec2, Vec2};

/// Where the panel starts (points from the window's top-left corner).
const START: Vec2 = vec2(12.0, 12.0);
/// Space kept free between the panel and each edge of the window.
const EDGE: f32 = 8.0;
/// The panel's width on a large window.
const WIDTH: f32 = 330.0;
/// Narrower than this and the tables' columns no longer fit side by side.
const MIN_WIDTH: f32 = 210.0;
/// On a small window the panel takes at most this share of its width.
const WIDTH_SHARE: f32 = 0.4;

/// The panel's outer width and greatest outer height on a window of `screen` points: what fits
/// between where it starts and the far edges.
pub fn limits(screen: Vec2) -> Vec2 {
    let room = (screen - START - Vec2::splat(EDGE)).max(Vec2::splat(1.0));
    let width = (screen.x * WIDTH_SHARE).clamp(MIN_WIDTH, WIDTH).min(room.x);
    vec2(width, room.y)
}

/// Shows the panel with `add` as its contents (in a vertical scroll area); None while it is
/// collapsed.
pub fn show<R>(
    ctx: &egui::Context,
    title: &str,
    add: impl FnOnce(&mut egui::Ui) -> R,
) -> Option<R> {
    let screen = ctx.content_rect();
    let size = limits(screen.size());
    egui::Window::new(title)
        .default_pos(screen.min + START)
        .constrain_to(screen.shrink(EDGE))
        .resizable(false)
        // Before its first frame egui takes the panel for this size (a larger guess pushes the
        // panel up to fit, where it stays), and lays the contents out within it.
        .default_size(size)
        .min_width(size.x)
        .max_width(size.x)
        .max_height(size.y)
        .show(ctx, |ui| {
            // The contents' width is the panel's: labels wrap there instead of widening it.
            let width = ui.available_width();
            // Scrolled above the window's bottom edge, from wherever the panel was dragged to.
            let frame = ui.spacing().window_margin.bottom as f32 + 1.0;
            let room = screen.max.y - EDGE - frame - ui.cursor().top();
            egui::ScrollArea::vertical()
                .max_height(room.max(0.0))
                .auto_shrink([false, true])
                // egui's default keeps 64 points of a scrolled area, more than a tiny window
                // has below the title bar.
                .min_scrolled_height(0.0)
                .show(ui, |ui| {
                    ui.set_max_width(width);
                    add(ui)
                })
                .inner
        })
        .and_then(|r| r.inner)
}

/// How long a message stays fully visible, counted from the first frame that shows it.
pub const HOLD_S: f64 = 4.0;
/// It stays for at least this many frames too: a software rasteriser may show the ML patterns
/// at one frame every two seconds, and a message seen in one frame is a flash.
pub const HOLD_FRAMES: u64 = 3;
/// Then it fades out over this long.
pub const FADE_S: f64 = 1.5;

/// The opacity (0 = gone) of a message first shown `age_s` seconds and `frames` frames ago
/// (1 in the frame that first shows it).
pub fn opacity(age_s: f64, frames: u64) -> f32 {
    if frames <= HOLD_FRAMES {
        return 1.0;
    }
    (1.0 - (age_s - HOLD_S) / FADE_S).clamp(0.0, 1.0) as f32
}

/// When the message with this serial was first shown.
#[derive(Clone, Copy)]
struct Shown {
    serial: u64,
    time: f64,
    frame: u64,
}

/// The opacity to draw message `serial` with this frame. Messages are told apart by serial, so
/// the same text said again (a second refusal) shows again; the age counts from the first frame
/// that draws it, so a message set during a slow switch is not half gone when it first appears.
pub fn fade(ctx: &egui::Context, serial: u64) -> f32 {
    let (time, frame) = (ctx.input(|i| i.time), ctx.cumulative_frame_nr());
    let id = egui::Id::new("overlay message shown");
    let first = ctx.data_mut(|d| {
        let shown = d.get_temp_mut_or(
            id,
            Shown {
                serial,
                time,
                frame,
            },
        );
        if shown.serial != serial {
            *shown = Shown {
                serial,
                time,
                frame,
            };
        }
        *shown
    });
    opacity(time - first.time, frame - first.frame + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_panel_fits_every_window() {
        for (screen, width, height) in [
            (vec2(1280.0, 720.0), WIDTH, 700.0),
            (vec2(640.0, 360.0), 256.0, 340.0),
            (vec2(300.0, 600.0), MIN_WIDTH, 580.0),
            (vec2(200.0, 120.0), 180.0, 100.0),
            (vec2(4.0, 4.0), 1.0, 1.0),
        ] {
            assert_eq!(limits(screen), vec2(width, height), "{screen:?}");
        }
    }

    /// Three frames of a panel holding `long` and `rows` short rows on a window of `screen`
    /// points; returns the panel's outer rect and the number of rows `long` was laid out on.
    fn panel_frames(
        ctx: &egui::Context,
        screen: Vec2,
        long: &str,
        rows: usize,
    ) -> (egui::Rect, usize) {
        let mut wrapped = 0;
        for _ in 0..3 {
            let input = egui::RawInput {
                screen_rect: Some(egui::Rect::from_min_size(egui::Pos2::ZERO, screen)),
                ..Default::default()
            };
            let mut out = ctx.run_ui(input, |ui| {
                show(ui.ctx(), "panel", |ui| {
                    ui.label(long);
                    for i in 0..rows {
                        ui.label(format!("row {i}"));
                    }
                });
            });
            out.textures_delta.clear();
            wrapped = out
                .shapes
                .iter()
                .find_map(|c| match &c.shape {
                    egui::Shape::Text(t) if t.galley.text() == long => Some(t.galley.rows.len()),
                    _ => None,
                })
                .unwrap_or(0);
        }
        let rect = ctx.memory(|m| {
            let layer = m.layer_ids().find(|l| l.order == egui::Order::Middle);
            m.area_rect(layer.unwrap().id)
        });
        (rect.unwrap(), wrapped)
    }

    #[test]
    fn a_tall_panel_scrolls_inside_the_window_and_long_text_wraps() {
        let long = "models/test/one_channel.onnx: the model has 1 channel(s) where 3 are \
                    needed; still running models/quality_x2.onnx";
        for screen in [vec2(640.0, 360.0), vec2(200.0, 120.0), vec2(1280.0, 720.0)] {
            let ctx = egui::Context::default();
            let (rect, wrapped) = panel_frames(&ctx, screen, long, 60);
            let window = egui::Rect::from_min_size(egui::Pos2::ZERO, screen);
            assert!(
                window.shrink(EDGE - 0.5).contains_rect(rect),
                "{screen:?}: the panel {rect:?} leaves the window"
            );
            assert!(
                rect.width() <= limits(screen).x + 0.5,
                "{screen:?}: {rect:?}"
            );
            assert!(
                wrapped > 1,
                "{screen:?}: the long message is on {wrapped} row(s)"
            );
            assert_eq!(
                rect.min,
                START.to_pos2(),
                "{screen:?}: the panel was pushed: {rect:?} {:?}",
                rect.size()
            );
            // The table folded again: the panel is where it was, shorter.
            let (short, _) = panel_frames(&ctx, screen, long, 2);
            assert_eq!(short.min, rect.min, "{screen:?}");
            if screen.y >= 360.0 {
                assert!(short.height() < rect.height(), "{screen:?}: {short:?}");
            }
        }
    }

    #[test]
    fn messages_hold_then_fade_out() {
        for (age, frames, expected) in [
            (0.0, 1, 1.0),
            (3.9, 100, 1.0),
            (4.75, 100, 0.5),
            (5.5, 100, 0.0),
            (60.0, 100, 0.0),
            // Two seconds a frame: the third frame still shows it whole.
            (4.8, 3, 1.0),
            (7.2, 4, 0.0),
        ] {
            assert!(
                (opacity(age, frames) - expected).abs() < 1e-6,
                "{age} s, {frames} frames: {} not {expected}",
                opacity(age, frames)
            );
        }
    }
}
