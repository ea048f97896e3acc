//! When the upscalers' history stops describing the picture: the renderer requests a reset on
//! every change that invalidates it, and the next recorded frame carries it as
//! `FrameInputs::reset`.

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

#[cfg(test)]
mod tests {
    use super::HistoryReset;

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
