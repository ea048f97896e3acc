//! When the upscalers' history stops describing the picture: the renderer requests a reset on
//! every change that invalidates it, and the next recorded frame carries it as
//! `FrameInputs::reset`. A camera cut (the view or the animation clock jumping between two
//! frames: a teleport, a jump along the scripted path, re-rendering earlier frames) is noticed
//! from the world itself ([`CutWatch`]).

use glam::Vec3;

/// The animation clock may advance at most this much between two frames of one shot: the game
/// clamps a frame's step to 0.1 s; the scripted path takes 1/60 s.
const MAX_CLOCK_STEP: f32 = 0.25;
/// The camera may move at most this far between two frames of one shot (sprinting and climbing
/// through the game's longest frame move it about 1.05 m).
const MAX_CAMERA_STEP: f32 = 2.0;

/// A reset requested for the next recorded frame.
#[derive(Debug)]
pub(super) struct HistoryReset {
    pending: bool,
}

impl HistoryReset {
    /// A new renderer's first frame has no history to continue.
    pub fn new() -> Self {
        Self { pending: true }
    }

    /// Something the history depends on changed (pattern, model, precision, compare view,
    /// the game restarted).
    pub fn request(&mut self) {
        self.pending = true;
    }

    /// The flag for the frame being recorded; the frames after it continue its history.
    pub fn take(&mut self) -> bool {
        std::mem::take(&mut self.pending)
    }
}

/// The camera position and animation clock of the last recorded frame.
#[derive(Debug, Default)]
pub(super) struct CutWatch {
    last: Option<(Vec3, f32)>,
}

impl CutWatch {
    /// Whether the frame at `camera` and `time` is a cut from the last one: the clock went
    /// back or jumped forward, or the camera jumped. The first frame is not a cut (a new
    /// renderer starts over anyway).
    pub fn cut(&mut self, camera: Vec3, time: f32) -> bool {
        match self.last.replace((camera, time)) {
            None => false,
            Some((pos, t)) => {
                let step = time - t;
                !(0.0..=MAX_CLOCK_STEP).contains(&step) || camera.distance(pos) > MAX_CAMERA_STEP
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{CutWatch, HistoryReset};
    use glam::Vec3;

    #[test]
    fn a_jump_of_the_clock_or_the_camera_is_a_cut() {
        let mut w = CutWatch::default();
        let at = |x: f32| Vec3::new(x, 1.7, 0.0);
        assert!(!w.cut(at(0.0), 1.0), "first frame");
        assert!(!w.cut(at(0.0), 1.0), "a still frame");
        assert!(!w.cut(at(0.05), 1.0 + 1.0 / 60.0), "the next frame");
        assert!(!w.cut(at(1.0), 1.1), "the game's longest step");
        assert!(
            w.cut(at(1.0), 0.5),
            "the clock went back (restart, earlier frame)"
        );
        assert!(w.cut(at(1.0), 2.0), "the clock jumped ahead");
        assert!(!w.cut(at(1.0), 2.01));
        assert!(w.cut(at(9.0), 2.02), "teleport");
    }

    #[test]
    fn the_first_frame_after_a_change_resets_and_the_next_does_not() {
        let mut h = HistoryReset::new();
        assert!(h.take(), "a new renderer's first frame");
        assert!(!h.take());
        assert!(!h.take());
        h.request();
        assert!(h.take(), "the first frame after a switch");
        assert!(!h.take(), "the frame after it");
        // Several changes before one frame: one reset.
        h.request();
        h.request();
        assert!(h.take());
        assert!(!h.take());
    }
}
