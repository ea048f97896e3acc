//! The progress bar and its ETA.
//!
//! A frame's cost differs by orders of magnitude between runs (on lavapipe bilinear takes 0.04 s,
//! in-stream quality_x2 30 s), so indicatif's rate-based ETA swings from seconds to days. This
//! one knows the runs still to come: it prices each remaining frame at the seconds per output
//! pixel already measured for the same pattern and model (at any resolution), else at the mean
//! of every frame so far.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::upscale::Pattern;

/// A run the bench means to make, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    pub pattern: Pattern,
    pub model: Option<String>,
    pub output_pixels: u64,
    pub frames: u64,
}

#[derive(Clone, Copy, Default)]
struct Spent {
    seconds: f64,
    /// Frames × output pixels.
    pixel_frames: f64,
}

impl Spent {
    fn rate(&self) -> Option<f64> {
        (self.pixel_frames > 0.0).then(|| self.seconds / self.pixel_frames)
    }
}

pub struct Progress {
    pub bar: ProgressBar,
    plan: Vec<Planned>,
    /// Seconds spent per planned run.
    spent: Vec<Spent>,
    frames_done: Vec<u64>,
    current: usize,
    last_tick: Instant,
}

impl Progress {
    pub fn new(plan: Vec<Planned>, visible: bool) -> Self {
        let total = plan.iter().map(|p| p.frames).sum();
        let bar = if visible {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} frames · {msg}",
                )
                .expect("valid template"),
            );
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        } else {
            ProgressBar::hidden()
        };
        Self {
            bar,
            spent: vec![Spent::default(); plan.len()],
            frames_done: vec![0; plan.len()],
            plan,
            current: 0,
            last_tick: Instant::now(),
        }
    }

    /// The next planned run starts (or is skipped); time spent before it is not charged to it.
    pub fn start_run(&mut self, index: usize) {
        self.current = index.min(self.plan.len().saturating_sub(1));
        self.last_tick = Instant::now();
    }

    /// A planned run will not happen: its frames leave the bar and the ETA.
    pub fn skip_run(&mut self, index: usize) {
        if let Some(p) = self.plan.get_mut(index) {
            let len = self.bar.length().unwrap_or(0);
            self.bar.set_length(len.saturating_sub(p.frames));
            p.frames = 0;
        }
    }

    /// One frame of the current run is done.
    pub fn frame_done(&mut self, what: &str) {
        let now = Instant::now();
        if let Some(p) = self.plan.get(self.current) {
            let s = &mut self.spent[self.current];
            s.seconds += (now - self.last_tick).as_secs_f64();
            s.pixel_frames += p.output_pixels as f64;
            self.frames_done[self.current] += 1;
        }
        self.last_tick = now;
        self.bar.inc(1);
        self.message(what);
    }

    pub fn message(&self, what: &str) {
        let eta = self
            .eta_s()
            .map_or("ETA …".into(), |s| format!("ETA {}", duration(s)));
        self.bar.set_message(format!("{what} · {eta}"));
    }

    /// Seconds still to go, None before anything was measured.
    pub fn eta_s(&self) -> Option<f64> {
        let overall = self
            .spent
            .iter()
            .fold(Spent::default(), |a, s| Spent {
                seconds: a.seconds + s.seconds,
                pixel_frames: a.pixel_frames + s.pixel_frames,
            })
            .rate()?;
        let rate = |p: &Planned| {
            let same = self
                .plan
                .iter()
                .zip(&self.spent)
                .filter(|(q, _)| q.pattern == p.pattern && q.model == p.model)
                .fold(Spent::default(), |a, (_, s)| Spent {
                    seconds: a.seconds + s.seconds,
                    pixel_frames: a.pixel_frames + s.pixel_frames,
                });
            same.rate().unwrap_or(overall)
        };
        let left = self
            .plan
            .iter()
            .enumerate()
            .skip(self.current)
            .map(|(i, p)| {
                let frames = p.frames.saturating_sub(self.frames_done[i]);
                frames as f64 * p.output_pixels as f64 * rate(p)
            })
            .sum();
        Some(left)
    }
}

/// `3h 05m`, `4m 10s`, `12s`.
pub fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s / 60 % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(pattern: Pattern, pixels: u64) -> Planned {
        Planned {
            pattern,
            model: Some("m".into()),
            output_pixels: pixels,
            frames: 10,
        }
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(duration(12.4), "12s");
        assert_eq!(duration(250.0), "4m 10s");
        assert_eq!(duration(11_100.0), "3h 05m");
    }

    #[test]
    fn eta_prices_frames_by_pattern_and_pixels() {
        let plan = vec![
            planned(Pattern::InStream, 100),
            planned(Pattern::Bilinear, 100),
            planned(Pattern::InStream, 400),
        ];
        let mut p = Progress::new(plan, false);
        assert_eq!(p.eta_s(), None);
        // Pretend in-stream took 2 s per frame at 100 pixels, bilinear 0.1 s.
        p.spent[0] = Spent {
            seconds: 20.0,
            pixel_frames: 1000.0,
        };
        p.frames_done[0] = 10;
        p.spent[1] = Spent {
            seconds: 0.5,
            pixel_frames: 500.0,
        };
        p.frames_done[1] = 5;
        p.current = 1;
        // 5 bilinear frames at 0.001 s/pixel·100 + 10 in-stream frames at 0.02 s/pixel·400.
        let eta = p.eta_s().unwrap();
        assert!((eta - (0.5 + 80.0)).abs() < 1e-9, "{eta}");
        p.skip_run(2);
        assert!((p.eta_s().unwrap() - 0.5).abs() < 1e-9);
    }
}
