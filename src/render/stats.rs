//! Per-frame timings: CPU clocks for host work, GPU timestamps for passes. GPU figures for a frame
//! arrive when its slot's fence is next waited on, so records are matched by frame number.

use std::collections::{BTreeMap, VecDeque};

#[derive(Clone, Debug, Default)]
pub struct FrameRecord {
    pub frame: u64,
    /// Wall time from the previous frame's start to this one's (what the player feels); None
    /// for the first frame.
    pub frame_ms: Option<f64>,
    /// Host time spent building and submitting this frame (incl. any host step).
    pub cpu_ms: f64,
    /// GPU spans (`scene`, `upscale`, `upscale/...`, `composite`, `ui`).
    pub gpu: Vec<(&'static str, f64)>,
    /// Host sub-stages a pattern reported (`inference`, ...).
    pub host: Vec<(&'static str, f64)>,
    pub host_copy_bytes: u64,
    /// The configuration (pattern, model, compare view) the frame ran with, as a counter that
    /// `Stats::new_configuration` advances; set by `Stats::push`.
    pub configuration: u64,
}

#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Percentiles {
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
}

pub struct Stats {
    records: VecDeque<FrameRecord>,
    keep: usize,
    configuration: u64,
}

impl Stats {
    /// Keeps the last `keep` frames (the overlay graph and the headless summary window).
    pub fn new(keep: usize) -> Self {
        Self {
            records: VecDeque::with_capacity(keep),
            keep,
            configuration: 0,
        }
    }

    pub fn push(&mut self, mut record: FrameRecord) {
        if self.records.len() == self.keep {
            self.records.pop_front();
        }
        record.configuration = self.configuration;
        self.records.push_back(record);
    }

    /// The pattern, model or compare view changed: percentiles and the stage list cover only
    /// the frames from now on (a table mixing the previous pattern's stages, or its frame
    /// times, would misstate the running one), while `records` keeps every frame for the graph.
    pub fn new_configuration(&mut self) {
        self.configuration += 1;
    }

    /// The kept frames of the running configuration.
    fn current(&self) -> impl DoubleEndedIterator<Item = &FrameRecord> {
        self.records
            .iter()
            .filter(move |r| r.configuration == self.configuration)
    }

    /// Attaches GPU spans that arrived late to the frame they belong to.
    pub fn add_gpu(&mut self, frame: u64, spans: &[(&'static str, f64)]) {
        if let Some(r) = self.records.iter_mut().rev().find(|r| r.frame == frame) {
            r.gpu.extend_from_slice(spans);
        }
    }

    pub fn records(&self) -> impl DoubleEndedIterator<Item = &FrameRecord> + ExactSizeIterator {
        self.records.iter()
    }

    pub fn clear(&mut self) {
        self.records.clear();
    }

    pub fn frame_ms(&self) -> Option<Percentiles> {
        percentiles(self.current().filter_map(|r| r.frame_ms).collect())
    }

    /// Frame times measured in the running configuration (since the last switch).
    pub fn frames_measured(&self) -> usize {
        self.current().filter(|r| r.frame_ms.is_some()).count()
    }

    /// Whether `name` is a host stage (CPU wall time) in the running configuration, rather than
    /// a GPU span.
    pub fn is_host_stage(&self, name: &str) -> bool {
        self.current()
            .any(|r| r.host.iter().any(|(n, _)| *n == name))
    }

    pub fn cpu_ms(&self) -> Option<Percentiles> {
        percentiles(self.current().map(|r| r.cpu_ms).collect())
    }

    /// Every stage seen, in frame order (`scene`, `upscale` and its sub-stages, `composite`,
    /// `ui`, then host stages), with percentiles over the frames that reported it.
    pub fn stages_in_order(&self) -> Vec<(&'static str, Percentiles)> {
        // Sub-stages without a fixed rank (in-stream layers) keep the order in which the most
        // recent frame that has GPU spans recorded them: execution order.
        let recorded: Vec<&'static str> = self
            .current()
            .rev()
            .find(|r| !r.gpu.is_empty())
            .map(|r| r.gpu.iter().map(|(name, _)| *name).collect())
            .unwrap_or_default();
        let position = |name: &str| {
            recorded
                .iter()
                .position(|n| *n == name)
                .unwrap_or(usize::MAX)
        };
        let mut stages: Vec<_> = self.stages().into_iter().collect();
        stages.sort_by_key(|(name, _)| (stage_rank(name), position(name), *name));
        stages
    }

    /// Every stage seen in the running configuration (GPU spans by name, host stages by
    /// name), with percentiles over the frames that reported it.
    pub fn stages(&self) -> BTreeMap<&'static str, Percentiles> {
        let mut samples: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
        for r in self.current() {
            for (name, ms) in r.gpu.iter().chain(&r.host) {
                samples.entry(name).or_default().push(*ms);
            }
        }
        samples
            .into_iter()
            .filter_map(|(k, v)| percentiles(v).map(|p| (k, p)))
            .collect()
    }
}

/// Per-layer spans of the in-stream engine are named `OpType:node`.
pub fn is_layer(name: &str) -> bool {
    name.contains(':')
}

/// Top-level GPU stages; every other name is a sub-stage of `upscale` that a pattern reports.
pub const TOP_STAGES: [&str; 5] = ["scene", "upscale", "compare", "composite", "ui"];

/// Frame order; sub-stages in the order a pattern runs them.
pub fn stage_rank(name: &str) -> u8 {
    const SUB: [&str; 6] = [
        "readback",
        "to_tensor",
        "enqueue",
        "inference",
        "from_tensor",
        "upload",
    ];
    match name {
        "scene" => 0,
        "upscale" => 1,
        "compare" => 39,
        "composite" => 40,
        "ui" => 41,
        n => SUB.iter().position(|s| *s == n).map_or(30, |i| 2 + i as u8),
    }
}

/// Nearest-rank percentiles; None for no samples.
pub fn percentiles(mut values: Vec<f64>) -> Option<Percentiles> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let at = |p: f64| {
        let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
        values[rank.clamp(1, values.len()) - 1]
    };
    Some(Percentiles {
        p50_ms: at(50.0),
        p95_ms: at(95.0),
        p99_ms: at(99.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let p = percentiles(v).unwrap();
        assert_eq!((p.p50_ms, p.p95_ms, p.p99_ms), (50.0, 95.0, 99.0));
        assert!(percentiles(vec![]).is_none());
        let one = percentiles(vec![3.0]).unwrap();
        assert_eq!((one.p50_ms, one.p99_ms), (3.0, 3.0));
    }

    #[test]
    fn late_gpu_spans_join_their_frame() {
        let mut s = Stats::new(2);
        for frame in 0..3 {
            s.push(FrameRecord {
                frame,
                frame_ms: Some(frame as f64),
                ..Default::default()
            });
        }
        assert_eq!(s.records().len(), 2, "keeps only the last two");
        s.add_gpu(1, &[("scene", 2.0)]);
        s.add_gpu(0, &[("scene", 9.0)]); // dropped: frame 0 left the window
        let stages = s.stages();
        assert_eq!(stages["scene"].p50_ms, 2.0);
        s.add_gpu(
            2,
            &[
                ("ui", 1.0),
                ("upscale/x", 1.0),
                ("composite", 1.0),
                ("upscale", 1.0),
            ],
        );
        let order: Vec<_> = s.stages_in_order().into_iter().map(|(n, _)| n).collect();
        assert_eq!(order, ["scene", "upscale", "upscale/x", "composite", "ui"]);
    }

    #[test]
    fn a_new_configuration_starts_the_table_but_not_the_graph() {
        let mut s = Stats::new(10);
        s.push(FrameRecord {
            frame: 0,
            frame_ms: Some(50.0),
            host: vec![("inference", 40.0)],
            ..Default::default()
        });
        s.new_configuration();
        assert!(s.frame_ms().is_none() && s.stages().is_empty());
        s.push(FrameRecord {
            frame: 1,
            frame_ms: Some(5.0),
            ..Default::default()
        });
        s.add_gpu(1, &[("upscale", 2.0)]);
        // A late span of the previous configuration's frame stays with that frame.
        s.add_gpu(0, &[("upscale", 30.0)]);
        assert_eq!(s.frame_ms().unwrap().p99_ms, 5.0);
        let stages = s.stages();
        assert_eq!(stages.keys().copied().collect::<Vec<_>>(), ["upscale"]);
        assert_eq!(stages["upscale"].p99_ms, 2.0);
        assert_eq!(s.records().len(), 2, "the graph keeps both frames");
    }

    #[test]
    fn host_stages_and_measured_frames_follow_the_configuration() {
        let mut s = Stats::new(10);
        s.push(FrameRecord {
            frame: 0,
            host: vec![("inference", 5.0)],
            ..Default::default()
        });
        s.push(FrameRecord {
            frame: 1,
            frame_ms: Some(3.0),
            ..Default::default()
        });
        s.add_gpu(1, &[("to_tensor", 1.0)]);
        assert_eq!(s.frames_measured(), 1, "the first frame has no frame time");
        assert!(s.is_host_stage("inference") && !s.is_host_stage("to_tensor"));
        s.new_configuration();
        assert_eq!(s.frames_measured(), 0);
        assert!(!s.is_host_stage("inference"), "another pattern's clock");
    }
}
