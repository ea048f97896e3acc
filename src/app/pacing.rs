//! The window loop's frame cap (`window.fps_cap`): the loop sleeps in the event loop
//! (`ControlFlow::WaitUntil`) until the next frame's start time instead of spinning. Never used
//! by headless, bench or the other offscreen runs, which render as fast as they can.

use std::time::{Duration, Instant};

/// Start times for frames at most `fps` a second.
pub struct Pacer {
    interval: Duration,
    /// When the next frame may start; None before the first frame.
    next: Option<Instant>,
}

impl Pacer {
    /// None for `fps` 0 (no cap).
    pub fn new(fps: f64) -> Option<Self> {
        (fps > 0.0).then(|| Self {
            interval: Duration::from_secs_f64(1.0 / fps),
            next: None,
        })
    }

    /// A frame started at `start`.
    pub fn started(&mut self, start: Instant) {
        self.next = Some(next_deadline(self.next, start, self.interval));
    }

    /// When to wake for the next frame, or None when it may start now.
    pub fn wait(&self, now: Instant) -> Option<Instant> {
        self.next.filter(|&next| next > now)
    }
}

/// The start time of the frame after one that started at `start`, whose own start time was
/// `deadline`: one interval after that start time, so that late wake-ups (the OS sleeps a little
/// longer than asked) do not slow the rate; but one interval after `start` when the frame began
/// later than its successor's time, so a slow frame is not followed by a burst of catch-up frames.
pub fn next_deadline(deadline: Option<Instant>, start: Instant, interval: Duration) -> Instant {
    match deadline {
        Some(d) if d + interval > start => d + interval,
        _ => start + interval,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_keep_the_rate_and_do_not_catch_up() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let interval = ms(10);
        // First frame: one interval on.
        assert_eq!(next_deadline(None, t0, interval), t0 + ms(10));
        // Woken 1 ms late: the next is still on the 10 ms grid.
        assert_eq!(
            next_deadline(Some(t0 + ms(10)), t0 + ms(11), interval),
            t0 + ms(20)
        );
        // A frame that started 35 ms late: the next is 10 ms after it, not at once.
        assert_eq!(
            next_deadline(Some(t0 + ms(10)), t0 + ms(45), interval),
            t0 + ms(55)
        );
    }

    #[test]
    fn the_pacer_waits_until_the_deadline_and_zero_is_no_cap() {
        assert!(Pacer::new(0.0).is_none());
        let mut pacer = Pacer::new(50.0).unwrap();
        let t0 = Instant::now();
        assert_eq!(pacer.wait(t0), None, "the first frame starts at once");
        pacer.started(t0);
        let ms = Duration::from_millis;
        assert_eq!(pacer.wait(t0 + ms(5)), Some(t0 + ms(20)));
        assert_eq!(pacer.wait(t0 + ms(20)), None);
    }
}
