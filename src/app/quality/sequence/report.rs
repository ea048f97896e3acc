//! What `quality --sequence` reports: per-frame scores, their warm-up and after-warm-up
//! means, `quality.json`'s shape and the table.

use std::path::Path;

use rayon::prelude::*;

use super::super::metrics;
use crate::game::sequences::Sequence;
use crate::upscale::Pattern;

/// How tPSNR-Y is defined, written into the report.
pub const TPSNR_DEFINITION: &str = "tPSNR-Y of frame t (t >= 1): 10 log10(255^2 / MSE) with \
    MSE = mean over pixels of ((Y(out_t) - Y(out_t-1)) - (Y(ref_t) - Y(ref_t-1)))^2, Y = BT.601 \
    luma on the 8-bit display-encoded values (0..255), capped at 100 dB; frame 0 of a sequence \
    has none (null)";

/// Means over a range of frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Aggregate {
    pub frames: u64,
    pub psnr_y: f64,
    pub ssim_y: f64,
    /// Over the frames of the range that have a predecessor.
    pub tpsnr_y: Option<f64>,
}

/// One method on one sequence: per-frame arrays and their warm-up / after-warm-up means.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SequenceScores {
    pub sequence: String,
    pub psnr_y: Vec<f64>,
    pub ssim_y: Vec<f64>,
    /// Frame 0 has none.
    pub tpsnr_y: Vec<Option<f64>>,
    pub warmup: Aggregate,
    pub steady: Aggregate,
}

/// One method (a pattern with its model, or a reference method) over every sequence.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MethodReport {
    /// "in-stream quality_x2", "bilinear", "bicubic", "native".
    pub method: String,
    /// The pattern (None for the CPU bicubic and the native render).
    pub pattern: Option<String>,
    pub model: Option<String>,
    /// It keeps history: a temporal pattern (`Caps::temporal`), or a pattern running a temporal
    /// model.
    pub temporal: bool,
    /// Its frames were drawn with a jittered projection.
    pub jittered: bool,
    pub sequences: Vec<SequenceScores>,
    /// Frames 0..warm-up of every sequence.
    pub warmup: Aggregate,
    /// Frames warm-up.. of every sequence.
    pub steady: Aggregate,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Unavailable {
    pub pattern: String,
    pub model: Option<String>,
    pub reason: String,
}

#[derive(Debug, serde::Serialize)]
pub struct SequenceReport {
    pub mode: &'static str,
    pub sequences: Vec<Sequence>,
    pub frames: u64,
    pub warmup_frames: u64,
    pub seed: u64,
    pub supersample: u32,
    pub render_size: [u32; 2],
    pub output_size: [u32; 2],
    pub msaa: u32,
    /// `render.jitter`.
    pub jitter: String,
    pub tpsnr: &'static str,
    pub methods: Vec<MethodReport>,
    pub unavailable: Vec<Unavailable>,
    pub device: String,
    pub validation_errors: u32,
    pub elapsed_s: f64,
    /// False while the run is still going (the file is rewritten after every sequence).
    pub complete: bool,
}

pub(super) fn model_stem(path: &Path) -> String {
    path.file_stem().map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into(),
    )
}

/// Scores of one frame: luma planes of this and the previous frame, output and reference.
pub(super) fn score_frames(
    outs: &[image::RgbaImage],
    refs: &[image::RgbaImage],
) -> SequenceScoresRaw {
    let per_frame: Vec<(f64, f64, Option<f64>)> = (0..outs.len())
        .into_par_iter()
        .map(|t| {
            let (o, r) = (metrics::luma(&outs[t]), metrics::luma(&refs[t]));
            let psnr = metrics::psnr_from_mse(metrics::mse(&o, &r));
            let ssim = metrics::ssim(&o, &r);
            let tpsnr = (t > 0).then(|| {
                let (op, rp) = (metrics::luma(&outs[t - 1]), metrics::luma(&refs[t - 1]));
                metrics::tpsnr_y([&op, &o], [&rp, &r])
            });
            (psnr, ssim, tpsnr)
        })
        .collect();
    SequenceScoresRaw {
        psnr_y: per_frame.iter().map(|f| f.0).collect(),
        ssim_y: per_frame.iter().map(|f| f.1).collect(),
        tpsnr_y: per_frame.iter().map(|f| f.2).collect(),
    }
}

pub(super) struct SequenceScoresRaw {
    psnr_y: Vec<f64>,
    ssim_y: Vec<f64>,
    tpsnr_y: Vec<Option<f64>>,
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0u64), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// Means of the frames `range` of every sequence in `seqs`.
fn aggregate<'a>(
    seqs: impl Iterator<Item = &'a SequenceScores>,
    range: std::ops::Range<usize>,
) -> Aggregate {
    let (mut psnr, mut ssim, mut tpsnr) = (Vec::new(), Vec::new(), Vec::new());
    for s in seqs {
        let r = range.start.min(s.psnr_y.len())..range.end.min(s.psnr_y.len());
        psnr.extend_from_slice(&s.psnr_y[r.clone()]);
        ssim.extend_from_slice(&s.ssim_y[r.clone()]);
        tpsnr.extend(s.tpsnr_y[r].iter().flatten());
    }
    Aggregate {
        frames: psnr.len() as u64,
        psnr_y: mean(psnr.into_iter()).unwrap_or(f64::NAN),
        ssim_y: mean(ssim.into_iter()).unwrap_or(f64::NAN),
        tpsnr_y: mean(tpsnr.into_iter()),
    }
}

impl SequenceScores {
    pub(super) fn new(sequence: &str, raw: SequenceScoresRaw, warmup: usize) -> Self {
        let mut s = Self {
            sequence: sequence.to_string(),
            psnr_y: raw.psnr_y,
            ssim_y: raw.ssim_y,
            tpsnr_y: raw.tpsnr_y,
            warmup: Aggregate::default(),
            steady: Aggregate::default(),
        };
        s.warmup = aggregate(std::iter::once(&s), 0..warmup);
        s.steady = aggregate(std::iter::once(&s), warmup..usize::MAX);
        s
    }
}

impl MethodReport {
    pub(super) fn new(method: String, pattern: Option<Pattern>, model: Option<&Path>) -> Self {
        Self {
            method,
            pattern: pattern.map(|p| p.name().to_string()),
            model: model.map(model_stem),
            temporal: pattern.is_some_and(|p| p.caps().temporal),
            jittered: false,
            sequences: Vec::new(),
            warmup: Aggregate::default(),
            steady: Aggregate::default(),
        }
    }

    pub(super) fn push(&mut self, scores: SequenceScores, warmup: usize) {
        self.sequences.push(scores);
        self.warmup = aggregate(self.sequences.iter(), 0..warmup);
        self.steady = aggregate(self.sequences.iter(), warmup..usize::MAX);
    }
}

/// The report as a table for a person.
pub fn table(r: &SequenceReport) -> String {
    let mut s = format!(
        "{} held-out sequences x {} frames (first {} = warm-up), {}x{} (msaa {}) -> {}x{}, \
         jitter {}\n",
        r.sequences.len(),
        r.frames,
        r.warmup_frames,
        r.render_size[0],
        r.render_size[1],
        r.msaa,
        r.output_size[0],
        r.output_size[1],
        r.jitter,
    );
    s += &format!(
        "{:<26} {:>8} {:>8} | {:>8} {:>7} {:>8}\n",
        "method", "warm-up", "", "after warm-up", "", ""
    );
    s += &format!(
        "{:<26} {:>8} {:>8} | {:>8} {:>7} {:>8}\n",
        "", "PSNR-Y", "tPSNR-Y", "PSNR-Y", "SSIM-Y", "tPSNR-Y"
    );
    let t = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    for m in &r.methods {
        let name = if m.jittered {
            format!("{} (jittered)", m.method)
        } else {
            m.method.clone()
        };
        s += &format!(
            "{name:<26} {:>8.2} {:>8} | {:>8.2} {:>7.4} {:>8}\n",
            m.warmup.psnr_y,
            t(m.warmup.tpsnr_y),
            m.steady.psnr_y,
            m.steady.ssim_y,
            t(m.steady.tpsnr_y),
        );
    }
    for u in &r.unavailable {
        let model = u
            .model
            .as_deref()
            .map_or(String::new(), |m| format!(" {m}"));
        s += &format!("{}{model}: not run: {}\n", u.pattern, u.reason);
    }
    s += "PSNR-Y, SSIM-Y against the supersampled unjittered target; tPSNR-Y: PSNR of the \
          frame-to-frame difference against the target's (README)";
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(psnr: &[f64], tpsnr: &[Option<f64>]) -> SequenceScores {
        let raw = SequenceScoresRaw {
            psnr_y: psnr.to_vec(),
            ssim_y: vec![0.5; psnr.len()],
            tpsnr_y: tpsnr.to_vec(),
        };
        SequenceScores::new("s", raw, 2)
    }

    #[test]
    fn warm_up_and_steady_means_split_at_the_warm_up() {
        let s = scores(
            &[10.0, 20.0, 30.0, 50.0],
            &[None, Some(1.0), Some(3.0), Some(5.0)],
        );
        assert_eq!(s.warmup.frames, 2);
        assert_eq!(s.warmup.psnr_y, 15.0);
        assert_eq!(s.warmup.tpsnr_y, Some(1.0));
        assert_eq!(s.steady.frames, 2);
        assert_eq!(s.steady.psnr_y, 40.0);
        assert_eq!(s.steady.tpsnr_y, Some(4.0));
        let mut m = MethodReport::new("m".into(), Some(Pattern::Bilinear), None);
        m.push(s.clone(), 2);
        m.push(scores(&[0.0, 0.0, 0.0, 10.0], &[None; 4]), 2);
        assert_eq!(m.steady.frames, 4);
        assert_eq!(m.steady.psnr_y, 22.5);
        assert_eq!(
            m.steady.tpsnr_y,
            Some(4.0),
            "frames without tPSNR are left out"
        );
    }
}
