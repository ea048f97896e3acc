//! `summary.json`: what a run measured, for tests, benchmarks and people.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use serde::Serialize;

use super::session::{Session, SwitchCounts};
use super::soak::SoakReport;
use crate::gpu::{Teardown, TeardownWatch};
use crate::infer::EngineSummary;
use crate::render::stats::{Percentiles, Stats};
use crate::render::Renderer;

#[derive(Serialize)]
pub struct Device {
    pub name: String,
    pub driver: String,
    pub api_version: String,
}

#[derive(Serialize)]
pub struct StageSummary {
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
}

#[derive(Serialize)]
pub struct LayerSummary {
    /// `OpType:node` (`+Activation` when an activation is fused into the op).
    pub name: String,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

#[derive(Serialize)]
pub struct Summary {
    pub frames: u64,
    /// The pattern at the end of the run.
    pub pattern: String,
    pub patterns_used: Vec<String>,
    pub model: String,
    pub device: Device,
    pub render_size: [u32; 2],
    pub output_size: [u32; 2],
    /// Samples per pixel of the scene pass (`render.msaa`).
    pub msaa: u32,
    /// Through teardown once [`Summary::after_teardown`] ran (the rewritten summary.json).
    pub validation_errors: u32,
    pub validation_enabled: bool,
    /// What the device's destruction left: leaked allocations, validation errors reported
    /// during teardown. None in the summary.json written before teardown.
    pub teardown: Option<Teardown>,
    /// Over the measured window (the last frames kept by the stats).
    pub frame_ms: Option<Percentiles>,
    pub cpu_ms: Option<Percentiles>,
    /// GPU spans and host sub-stages by name (per-layer spans included).
    pub stages: BTreeMap<String, StageSummary>,
    /// The in-stream engine's per-layer GPU spans, in execution order (empty for other patterns).
    pub layers: Vec<LayerSummary>,
    /// Host bytes the upscale path copied in the last frame (conversions and staging).
    pub host_copy_bytes: u64,
    /// Bytes moved between device and host memory per frame by the upscale path.
    pub bus_bytes: u64,
    /// How the pattern ran (e.g. the shared-memory domain), empty when nothing to say.
    pub pattern_note: String,
    /// What the in-stream engine chose (in-stream only): precision, conv kernels, dispatches
    /// per frame and how many of them run several graph nodes.
    pub engine: Option<EngineSummary>,
    /// Pattern and model switches asked for during the run, and how many were refused.
    pub switches: SwitchCounts,
    /// The last problem shown to the player (a refused switch, ...), if any.
    pub notice: Option<String>,
    /// `headless --soak` only: memory, validation and frame-time figures of the long run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soak: Option<SoakReport>,
    /// The compare view at the end of the run, when it was on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare: Option<CompareSummary>,
}

/// The compare view's state and its last live PSNR (luma, dB, vs the native frame).
#[derive(Serialize)]
pub struct CompareSummary {
    pub right: String,
    pub divider: f32,
    /// The frame the PSNR figures belong to.
    pub frame: Option<u64>,
    pub psnr_y: Option<f64>,
    /// The right side vs native, when the right side is an upscaler.
    pub psnr_y_right: Option<f64>,
}

fn stage_summaries(stats: &Stats) -> BTreeMap<String, StageSummary> {
    stats
        .stages()
        .into_iter()
        .map(|(k, p)| {
            let summary = StageSummary {
                p50_ms: p.p50_ms,
                p95_ms: p.p95_ms,
                p99_ms: p.p99_ms,
            };
            (k.to_string(), summary)
        })
        .collect()
}

/// The in-stream engine's per-layer timings, in execution order.
fn layer_summaries(stats: &Stats) -> Vec<LayerSummary> {
    stats
        .stages_in_order()
        .into_iter()
        .filter(|(name, _)| crate::render::stats::is_layer(name))
        .map(|(name, p)| LayerSummary {
            name: name.to_string(),
            p50_ms: p.p50_ms,
            p99_ms: p.p99_ms,
        })
        .collect()
}

fn compare_summary(renderer: &Renderer) -> Option<CompareSummary> {
    let side = renderer.compare_side()?;
    let psnr = renderer.compare_psnr();
    Some(CompareSummary {
        right: side.name().into(),
        divider: renderer.divider(),
        frame: psnr.map(|p| p.frame),
        psnr_y: psnr.map(|p| p.current_y),
        psnr_y_right: psnr.and_then(|p| p.right_y),
    })
}

impl Summary {
    pub fn new(session: &Session, patterns_used: Vec<String>) -> Self {
        let (gpu, renderer) = (&session.gpu, &*session.renderer);
        let sizes = renderer.sizes();
        Self {
            frames: renderer.frame_number(),
            pattern: renderer.pattern().name().into(),
            patterns_used,
            model: session.model_label(),
            device: Device {
                name: gpu.info.name.clone(),
                driver: gpu.info.driver.clone(),
                api_version: gpu.info.api_version.clone(),
            },
            render_size: [sizes.render.width, sizes.render.height],
            output_size: [sizes.output.width, sizes.output.height],
            msaa: sizes.msaa,
            validation_errors: gpu.validation_errors(),
            validation_enabled: gpu.instance.validation_enabled,
            teardown: None,
            frame_ms: renderer.stats.frame_ms(),
            cpu_ms: renderer.stats.cpu_ms(),
            stages: stage_summaries(&renderer.stats),
            layers: layer_summaries(&renderer.stats),
            host_copy_bytes: renderer.host_copy_bytes(),
            bus_bytes: renderer.bus_bytes(),
            pattern_note: renderer.describe(),
            engine: renderer.engine(),
            compare: compare_summary(renderer),
            switches: session.switches,
            notice: session.notice.clone(),
            soak: None,
        }
    }

    /// Adds what teardown left (call once the session's `Gpu` is dropped): the teardown
    /// figures, and the validation total through the device's destruction.
    pub fn after_teardown(&mut self, watch: &TeardownWatch) {
        self.teardown = watch.report();
        self.validation_errors = watch.total_validation_errors();
        // The soak's verdict covers teardown too.
        let failure = self.teardown_failure();
        if let Some(soak) = &mut self.soak {
            soak.validation_errors = self.validation_errors;
            soak.failures.extend(failure);
        }
    }

    /// Why the run must fail, when teardown leaked or raised validation errors (a failed
    /// constructor that dropped what it made, an object nobody destroyed).
    pub fn teardown_failure(&self) -> Option<String> {
        self.teardown?.problem()
    }

    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let json = serde_json::to_string_pretty(self)?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))
    }
}
