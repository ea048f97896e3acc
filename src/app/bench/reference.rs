//! PyTorch reference timings (`--reference FILE.json`, written by tools/reference/) placed
//! beside the in-stream figures of the same model and input size.
//!
//! File format: `{"device": .., "torch": .., "entries": [{"model": "quality_x2", "arch": ..,
//! "input": "960x540", "dtype": "fp32" | "fp16", "median_ms": .., "p10_ms": .., "p90_ms": ..}]}`.
//! Unknown keys are ignored, so the tool may add more.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use super::report::RunReport;

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct ReferenceFile {
    pub device: String,
    pub torch: String,
    pub entries: Vec<ReferenceEntry>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct ReferenceEntry {
    pub model: String,
    #[serde(default)]
    pub arch: Option<String>,
    /// Input (render) size, `WxH`.
    pub input: String,
    pub dtype: String,
    pub median_ms: f64,
    pub p10_ms: f64,
    pub p90_ms: f64,
}

/// Our in-stream figures for the same model and input size.
#[derive(Clone, Debug, Serialize)]
pub struct Ours {
    /// GPU time of the whole `upscale` span (tensor conversions included), p50.
    pub upscale_p50_ms: f64,
    /// Sum of the per-layer GPU p50s: the network alone, as PyTorch times it.
    pub layers_p50_ms: f64,
    pub frame_p50_ms: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReferenceRow {
    #[serde(flatten)]
    pub entry: ReferenceEntry,
    /// None when the bench did not run in-stream with this model at this input size, or when
    /// the reference timed another architecture under the same model name (`arch_mismatch`).
    pub in_stream: Option<Ours>,
    /// Why the in-stream run is not set beside this entry although it has the same name: the
    /// entry's `arch` is not the model file's `upscale.arch` (the file was retrained since).
    pub arch_mismatch: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReferenceReport {
    pub file: String,
    pub device: String,
    pub torch: String,
    pub rows: Vec<ReferenceRow>,
}

pub fn load(path: &Path) -> anyhow::Result<ReferenceFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not a reference timing file (expected {{\"device\", \"torch\", \"entries\": \
             [{{\"model\", \"input\", \"dtype\", \"median_ms\", \"p10_ms\", \"p90_ms\"}}]}})",
            path.display()
        )
    })
}

/// Pairs every reference entry with the in-stream run of the same model stem and render size.
/// Each model file is read once for its architecture, however many entries name it.
pub fn compare(path: &Path, file: &ReferenceFile, runs: &[RunReport]) -> ReferenceReport {
    let mut archs: HashMap<&str, Option<String>> = HashMap::new();
    let rows = file
        .entries
        .iter()
        .map(|entry| {
            let run = runs.iter().find(|r| {
                r.pattern == "in-stream"
                    && r.model.as_deref() == Some(entry.model.as_str())
                    && r.resolution.render_label() == entry.input
            });
            let arch_mismatch = run.and_then(|r| {
                let model = r.model_path.as_deref()?;
                let model_arch = archs
                    .entry(model)
                    .or_insert_with(|| model_arch(Path::new(model)));
                arch_mismatch(
                    entry.arch.as_deref(),
                    Path::new(model),
                    model_arch.as_deref(),
                )
            });
            ReferenceRow {
                entry: entry.clone(),
                in_stream: run.filter(|_| arch_mismatch.is_none()).map(|r| Ours {
                    upscale_p50_ms: r.stage("upscale").map_or(f64::NAN, |s| s.p50_ms),
                    layers_p50_ms: r.layers.iter().map(|l| l.stats.p50_ms).sum(),
                    frame_p50_ms: r.frame_ms.p50_ms,
                }),
                arch_mismatch,
            }
        })
        .collect();
    ReferenceReport {
        file: path.display().to_string(),
        device: file.device.clone(),
        torch: file.torch.clone(),
        rows,
    }
}

/// The model file's `upscale.arch` metadata (None without it, or for an unreadable file).
fn model_arch(model: &Path) -> Option<String> {
    let graph = crate::infer::graph::Graph::load(model).ok()?;
    graph.metadata.get("upscale.arch").cloned()
}

/// `Some(reason)` when the reference entry names an architecture and the model file's
/// (`model_arch`, from [`model_arch`]) is a different one: timings of two different networks
/// must not be set side by side. Files without the metadata (or unreadable ones) are not judged.
fn arch_mismatch(
    entry_arch: Option<&str>,
    model: &Path,
    model_arch: Option<&str>,
) -> Option<String> {
    let (entry_arch, model_arch) = (entry_arch?, model_arch?);
    (model_arch != entry_arch).then(|| {
        format!(
            "the reference timed arch {entry_arch}, {} is arch {model_arch}: re-run \
             tools/reference/reference.py",
            model.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_for_another_architecture_is_not_compared() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let fast = root.join("models/fast_x2.onnx");
        let fast_arch = model_arch(&fast);
        assert_eq!(fast_arch.as_deref(), Some("fast"));
        assert_eq!(
            arch_mismatch(Some("fast"), &fast, fast_arch.as_deref()),
            None
        );
        assert_eq!(arch_mismatch(None, &fast, fast_arch.as_deref()), None);
        let why = arch_mismatch(Some("quality"), &fast, fast_arch.as_deref())
            .expect("fast_x2 is arch fast");
        assert!(
            why.contains("arch quality") && why.contains("arch fast"),
            "{why}"
        );
        let none = root.join("models/none.onnx");
        assert_eq!(model_arch(&none), None);
        assert_eq!(
            arch_mismatch(Some("fast"), &none, model_arch(&none).as_deref()),
            None
        );
    }

    #[test]
    fn the_documented_format_parses_and_ignores_extra_keys() {
        let text = r#"{"device": "NVIDIA H200", "torch": "2.5.1", "cuda": "12.4",
            "entries": [{"model": "quality_x2", "arch": "espcn", "input": "960x540",
            "dtype": "fp16", "median_ms": 0.8, "p10_ms": 0.7, "p90_ms": 0.9, "iters": 100}]}"#;
        let f: ReferenceFile = serde_json::from_str(text).unwrap();
        assert_eq!(f.entries.len(), 1);
        assert_eq!(f.entries[0].dtype, "fp16");
        assert_eq!(f.entries[0].arch.as_deref(), Some("espcn"));
    }

    #[test]
    fn a_wrong_file_names_the_expected_keys() {
        let dir = std::env::temp_dir().join(format!("bench-ref-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.json");
        std::fs::write(&path, r#"{"entries": 3}"#).unwrap();
        let e = format!("{:#}", load(&path).unwrap_err());
        assert!(e.contains("median_ms") && e.contains("r.json"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
