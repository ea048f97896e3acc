//! What a temporal upscaler needs from the scene pass besides colour: the frame's sub-pixel
//! jitter (`render.jitter`, `game::jitter`), the texture mip bias that goes with it, and the
//! motion vectors and depth the scene targets keep (`SceneTargets::motion`, `depth`).

use glam::Vec2;

use super::composite::DebugView;
use super::scene::SceneTargets;
use super::{Renderer, Sizes};
use crate::game::jitter::{self, Jitter, JitterMode};
use crate::gpu::Image;
use crate::upscale::Pattern;

/// The renderer's jitter sequence and mip-bias setting.
pub(super) struct TemporalInputs {
    mode: JitterMode,
    sequence: Jitter,
    /// `render.upscale_mip_bias`: biased even when not jittered.
    mip_bias: bool,
    /// The pattern of the last frame: a new upscaler starts a new history, and the sequence
    /// starts again with it.
    pattern: Option<Pattern>,
}

impl TemporalInputs {
    /// Jitter off until [`Renderer::set_jitter_mode`]; one period is 8 × scale² frames.
    pub fn new(sizes: &Sizes) -> Self {
        let scale = sizes.output.width as f32 / sizes.render.width as f32;
        Self {
            mode: JitterMode::Off,
            sequence: Jitter::new(jitter::sequence_len(scale)),
            mip_bias: sizes.mip_bias,
            pattern: None,
        }
    }

    pub fn mip_bias(&self) -> bool {
        self.mip_bias
    }

    /// Before the scene pass: the jitter and mip bias of this frame's upscaler input. Jittered
    /// frames always sample textures with the bias log2(render / output), so the detail the
    /// upscaler accumulates is the output's.
    /// `temporal`: an upscaler of this frame (the pattern, or the compare view's right side)
    /// keeps history.
    pub fn prepare(&mut self, targets: &mut SceneTargets, pattern: Pattern, temporal: bool) {
        let on = self.mode.active(temporal);
        if self.pattern.replace(pattern) != Some(pattern) {
            self.sequence.reset();
        }
        let offset = if on {
            self.sequence.next()
        } else {
            self.sequence.reset();
            Vec2::ZERO
        };
        targets.set_jitter(offset);
        targets.mip_biased = self.mip_bias || on;
    }
}

impl Renderer {
    /// `render.jitter`; takes effect from the next frame.
    pub fn set_jitter_mode(&mut self, mode: JitterMode) {
        self.temporal.mode = mode;
    }

    /// The render-size targets of the frame the upscalers read: colour, motion vectors, depth,
    /// and the jitter the last frame was drawn with.
    pub fn scene_targets(&self) -> &SceneTargets {
        &self.targets
    }

    /// A camera cut (restart, teleport): the next frame has zero motion and starts the jitter
    /// sequence again (part of [`Renderer::reset_history`]).
    pub(super) fn reset_temporal(&mut self) {
        self.temporal.sequence.reset();
        self.targets.reset_history();
    }

    /// Sets this frame's jitter, mip bias and kept inputs on the scene targets: jittered (and
    /// motion and depth kept) while the pattern
    /// or the compare view's right side is temporal (`render.jitter = "auto"`), and from the
    /// sequence's start on a frame that resets the history, so that frame is drawn as a fresh
    /// start's first frame is.
    pub(super) fn prepare_temporal(&mut self) {
        let pattern = self.upscaler.pattern();
        let right_temporal = self.compare.as_ref().is_some_and(|c| c.right_temporal());
        if self.frame_reset {
            self.temporal.sequence.reset();
        }
        let temporal = self.upscaler.temporal() || right_temporal;
        self.temporal.prepare(&mut self.targets, pattern, temporal);
        // Motion vectors and depth only while something reads them.
        let keep = temporal || self.debug_view != DebugView::Off;
        self.targets.set_keep_temporal(keep);
    }
}

impl Renderer {
    /// Shows the motion vectors or the depth instead of the picture (the overlay's debug view);
    /// no resources change, the composite samples another image.
    pub fn set_debug_view(&mut self, view: DebugView) {
        self.debug_view = view;
    }

    pub fn debug_view(&self) -> DebugView {
        self.debug_view
    }
}

/// The image the composite shows and the compare view's split: the upscaled `output`, or in a
/// debug view the scene pass's motion or depth image, whole.
pub(super) fn composite_source<'a>(
    view: DebugView,
    output: &'a Image,
    targets: &'a SceneTargets,
    split: Option<(&'a Image, f32)>,
) -> (&'a Image, Option<(&'a Image, f32)>) {
    match view {
        DebugView::Off => (output, split),
        DebugView::Motion => (targets.motion(), None),
        DebugView::Depth => (targets.depth(), None),
    }
}
