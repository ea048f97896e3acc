//! What `upscale-demo bench` measured, as written to `report.json`: the header (machine, GPU,
//! runtime, build, configuration), one [`RunReport`] per pattern × model × resolution, the
//! combinations that could not run and why, and the optional PyTorch reference.

use serde::{Deserialize, Serialize};

use super::reference::ReferenceReport;
use crate::render::stats::Percentiles;

/// A render size and the output size it is upscaled to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    pub render: [u32; 2],
    pub output: [u32; 2],
}

impl Resolution {
    /// `960x540:1920x1080` (render:output).
    pub fn parse(s: &str) -> Result<Self, String> {
        let size = |t: &str| -> Option<[u32; 2]> {
            let (w, h) = t.trim().split_once('x')?;
            let (w, h) = (w.parse().ok()?, h.parse().ok()?);
            (w > 0 && h > 0).then_some([w, h])
        };
        let bad =
            || format!("\"{s}\": expected RENDERxRENDER:OUTPUTxOUTPUT, e.g. 960x540:1920x1080");
        let (r, o) = s.split_once(':').ok_or_else(bad)?;
        let (render, output) = (size(r).ok_or_else(bad)?, size(o).ok_or_else(bad)?);
        if render[0] > output[0] || render[1] > output[1] {
            return Err(format!(
                "\"{s}\": the render size must not exceed the output size"
            ));
        }
        Ok(Self { render, output })
    }

    pub fn render_label(&self) -> String {
        format!("{}x{}", self.render[0], self.render[1])
    }

    /// `960x540→1920x1080`.
    pub fn label(&self) -> String {
        format!(
            "{}x{}→{}x{}",
            self.render[0], self.render[1], self.output[0], self.output[1]
        )
    }
}

impl std::fmt::Display for Resolution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}x{}:{}x{}",
            self.render[0], self.render[1], self.output[0], self.output[1]
        )
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub hostname: String,
    pub cpu_model: String,
    /// Logical CPUs this process may use.
    pub cores: usize,
    pub ram_bytes: Option<u64>,
    pub os: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct GpuHeader {
    pub name: String,
    pub device_type: String,
    pub driver: String,
    /// The Vulkan API version the device reports.
    pub api_version: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Header {
    pub tool: String,
    /// UTC, RFC 3339.
    pub date: String,
    pub machine: Machine,
    /// None until a Vulkan device was created.
    pub gpu: Option<GpuHeader>,
    /// ONNX Runtime's version; None when it could not be loaded (`onnxruntime_error` says why).
    pub onnxruntime: Option<String>,
    pub onnxruntime_error: Option<String>,
    pub onnxruntime_provider: String,
    pub git_commit: Option<String>,
    /// Tracked files differ from the commit.
    pub git_dirty: Option<bool>,
    pub build_profile: String,
    pub validation_enabled: bool,
    pub command_line: String,
}

/// The configuration the bench ran with (after `--quick` and defaults were applied).
#[derive(Clone, Debug, Serialize)]
pub struct ConfigReport {
    pub patterns: Vec<String>,
    pub models: Vec<String>,
    pub resolutions: Vec<Resolution>,
    pub warmup: u64,
    pub frames: u64,
    /// Frames of the scripted path whose PSNR was measured (the same for every run).
    pub psnr_frames: Vec<u64>,
    /// The native reference is rendered at this many times the output size, box-filtered.
    pub supersample: u32,
    /// Samples per pixel of the scene pass (`render.msaa`), in the game and the reference.
    pub msaa: u32,
    pub overlay: bool,
    pub config_file: String,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct StageStats {
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
}

impl From<Percentiles> for StageStats {
    fn from(p: Percentiles) -> Self {
        Self {
            p50_ms: p.p50_ms,
            p95_ms: p.p95_ms,
            p99_ms: p.p99_ms,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct NamedStage {
    /// `scene`, `upscale`, a sub-stage (`inference`, ...), `composite`, `ui`; or for
    /// [`RunReport::layers`] an in-stream layer `OpType:node`.
    pub name: String,
    /// `gpu` (timestamp queries) or `host` (CPU clock).
    pub clock: &'static str,
    #[serde(flatten)]
    pub stats: StageStats,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct FramePsnr {
    pub frame: u64,
    pub psnr_y: f64,
    pub psnr_rgb: f64,
    /// tPSNR-Y of this frame against the one before it (`metrics`), dB.
    pub tpsnr_y: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PsnrReport {
    /// Mean over the sampled frames, dB (BT.601 luma; R, G and B together).
    pub psnr_y: f64,
    pub psnr_rgb: f64,
    /// Mean tPSNR-Y over the sampled frames, each against the frame before it.
    pub tpsnr_y: f64,
    pub frames: Vec<FramePsnr>,
}

#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub pattern: String,
    /// The in-stream engine's storage precision (in-stream runs only).
    pub precision: Option<String>,
    /// What the in-stream engine chose (in-stream runs only).
    pub engine: Option<crate::infer::EngineSummary>,
    /// The model's file stem; None for bilinear.
    pub model: Option<String>,
    pub model_path: Option<String>,
    pub resolution: Resolution,
    pub warmup: u64,
    pub frames: u64,
    /// Start-to-start wall time of the measured frames (what a player feels).
    pub frame_ms: StageStats,
    /// Host time spent building and submitting a frame, host step included.
    pub cpu_ms: StageStats,
    /// Per frame, the sum of its top-level GPU spans (`scene`, `upscale`, `composite`, `ui`;
    /// for split patterns `upscale` includes the host step); None without timestamps.
    pub gpu_frame_ms: Option<StageStats>,
    /// Every measured stage but the in-stream layers, in frame order.
    pub stages: Vec<NamedStage>,
    /// In-stream layers in execution order (empty for the other patterns).
    pub layers: Vec<NamedStage>,
    /// Host bytes the upscale path copied or converted in the last measured frame.
    pub host_copy_bytes: u64,
    /// Bytes moved between device and host memory per frame.
    pub bus_bytes: u64,
    /// None when no PSNR frames were asked for (`--psnr-frames 0`).
    pub psnr: Option<PsnrReport>,
    pub pattern_note: String,
    /// The measured frames' start-to-start times in order, ms (for distributions).
    pub frame_samples_ms: Vec<f64>,
    pub elapsed_s: f64,
}

impl RunReport {
    pub fn stage(&self, name: &str) -> Option<&StageStats> {
        self.stages
            .iter()
            .find(|s| s.name == name)
            .map(|s| &s.stats)
    }

    /// The model label for tables: the stem, or `–` for bilinear.
    pub fn model_label(&self) -> &str {
        self.model.as_deref().unwrap_or("–")
    }
}

/// A pattern × model × resolution that was not run, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Unavailable {
    pub pattern: String,
    pub precision: Option<String>,
    pub model: Option<String>,
    pub resolution: Resolution,
    pub reason: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub header: Header,
    pub config: ConfigReport,
    pub runs: Vec<RunReport>,
    pub unavailable: Vec<Unavailable>,
    pub reference: Option<ReferenceReport>,
    /// Validation errors over every Vulkan device the bench created, teardown included.
    pub validation_errors: u32,
    /// What the teardown of those devices left, summed (leaked allocations, validation errors
    /// raised while destroying them).
    pub teardown: crate::gpu::Teardown,
    pub elapsed_s: f64,
    /// False while the bench is still running (the files are rewritten after every run).
    pub complete: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolutions_parse_and_print_back() {
        let r = Resolution::parse("960x540:1920x1080").unwrap();
        assert_eq!(r.render, [960, 540]);
        assert_eq!(r.output, [1920, 1080]);
        assert_eq!(r.to_string(), "960x540:1920x1080");
        assert_eq!(r.render_label(), "960x540");
        assert_eq!(r.label(), "960x540→1920x1080");
    }

    #[test]
    fn bad_resolutions_say_what_is_expected() {
        for bad in ["960x540", "960x540:1920", "0x540:1920x1080", "ax5:2x2", ""] {
            let e = Resolution::parse(bad).unwrap_err();
            assert!(e.contains("RENDERxRENDER:OUTPUTxOUTPUT"), "{bad}: {e}");
        }
        let e = Resolution::parse("200x100:100x50").unwrap_err();
        assert!(e.contains("must not exceed"), "{e}");
    }
}
