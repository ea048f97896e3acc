//! `report.md` (for a person) and `report.csv` (one row per pattern × model × resolution).
//!
//! CSV columns, in order: `pattern, precision` (in-stream runs), `model, model_path, render_w, render_h, output_w, output_h,
//! status` (`ok` or `unavailable`), `reason`, `warmup, frames`, `frame_{p50,p95,p99}_ms`,
//! `cpu_{p50,p95,p99}_ms`, `gpu_frame_{p50,p95,p99}_ms`, `host_copy_bytes, bus_bytes,
//! psnr_y_db, psnr_rgb_db, tpsnr_y_db, psnr_frames` (frame numbers joined by `;`), then for every stage any run reported (frame order; in-stream
//! layers are in report.json only) `<stage>_p50_ms, <stage>_p95_ms, <stage>_p99_ms,
//! <stage>_clock` (`gpu` or `host`). A cell is empty where a run has no such figure.

use std::fmt::Write as _;

use super::machine::gib;
use super::report::{BenchReport, ConfigReport, Header, NamedStage, RunReport, StageStats};
use crate::render::stats::stage_rank;

/// Every non-layer stage name any run reported, in frame order.
fn stage_columns(report: &BenchReport) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for run in &report.runs {
        for s in &run.stages {
            if !names.contains(&s.name) {
                names.push(s.name.clone());
            }
        }
    }
    // Stable: names of equal rank keep the order in which runs first reported them.
    names.sort_by_key(|n| stage_rank(n));
    names
}

/// Milliseconds with a precision that suits the magnitude.
pub fn ms(v: f64) -> String {
    match v.abs() {
        a if a < 1.0 => format!("{v:.3}"),
        a if a < 100.0 => format!("{v:.2}"),
        _ => format!("{v:.1}"),
    }
}

/// `10368000` → `10,368,000`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn p50_p99(s: &StageStats) -> String {
    format!("{} / {}", ms(s.p50_ms), ms(s.p99_ms))
}

fn stage_cell(run: &RunReport, name: &str) -> String {
    match run.stages.iter().find(|s| s.name == name) {
        Some(NamedStage { clock, stats, .. }) => {
            let mark = if *clock == "host" { " †" } else { "" };
            format!("{}{mark}", p50_p99(stats))
        }
        None => String::new(),
    }
}

fn header_lines(r: &BenchReport) -> String {
    let h = &r.header;
    let m = &h.machine;
    let ram = m.ram_bytes.map_or("unknown".into(), gib);
    let validation = if h.validation_enabled {
        format!("on, {} errors", r.validation_errors)
    } else {
        "off".into()
    };
    let took = if r.complete {
        ""
    } else {
        " so far (still running)"
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "- date: {} · {} · {} build",
        h.date, h.tool, h.build_profile
    );
    let _ = writeln!(s, "- commit: {}", commit_label(h));
    let _ = writeln!(
        s,
        "- machine: {} · {} · {} cores · {ram} RAM · {}",
        m.hostname, m.cpu_model, m.cores, m.os
    );
    let _ = writeln!(s, "- GPU: {}", gpu_label(h));
    let _ = writeln!(s, "- ONNX Runtime: {}", ort_label(h));
    let _ = writeln!(s, "- validation layer: {validation}");
    let _ = writeln!(s, "- config: {}", config_label(&r.config));
    let _ = writeln!(s, "- command: `{}`", h.command_line);
    let _ = writeln!(s, "- took {:.0} s{took}", r.elapsed_s);
    s
}

fn commit_label(h: &Header) -> String {
    match (&h.git_commit, h.git_dirty) {
        (Some(c), Some(true)) => format!("{c} (with uncommitted changes)"),
        (Some(c), _) => c.clone(),
        (None, _) => "unknown (no git)".into(),
    }
}

fn gpu_label(h: &Header) -> String {
    h.gpu.as_ref().map_or("none created".into(), |g| {
        format!(
            "{} ({}), driver {}, Vulkan {}",
            g.name, g.device_type, g.driver, g.api_version
        )
    })
}

fn ort_label(h: &Header) -> String {
    match (&h.onnxruntime, &h.onnxruntime_error) {
        (Some(v), _) => format!("{v} ({} execution provider)", h.onnxruntime_provider),
        (None, Some(e)) => e.clone(),
        (None, None) => "unknown".into(),
    }
}

fn config_label(c: &ConfigReport) -> String {
    let resolutions: Vec<String> = c.resolutions.iter().map(|r| r.label()).collect();
    let models = if c.models.is_empty() {
        "none".into()
    } else {
        c.models.join(", ")
    };
    format!(
        "patterns {} · models {models} · resolutions {} · {} warm-up + {} measured frames \
         of the scripted camera path, overlay drawn · config file {}",
        c.patterns.join(", "),
        resolutions.join(", "),
        c.warmup,
        c.frames,
        c.config_file
    )
}

fn psnr_note(r: &BenchReport) -> String {
    let c = &r.config;
    if c.psnr_frames.is_empty() {
        return "PSNR: not measured (`--psnr-frames 0`).".into();
    }
    let frames: Vec<String> = c.psnr_frames.iter().map(u64::to_string).collect();
    let reference = if c.supersample == 1 {
        "the scene rendered at the output size".to_string()
    } else {
        format!(
            "the scene rendered at {}× the output size and box-filtered in linear light (as \
             `upscale-demo quality` makes its target)",
            c.supersample
        )
    };
    format!(
        "PSNR (dB, BT.601 luma and RGB, mean over frames {} of the scripted path) of the \
         upscaled output, overlay excluded, against {reference}. tPSNR-Y: for each of those \
         frames, the PSNR of its difference from the frame before it against the reference's \
         (README: tPSNR); a temporal pattern renders them from a history reset {} frames \
         earlier. Scene pass (game and reference): msaa {}.",
        frames.join(", "),
        super::measure::TEMPORAL_LEAD + 1,
        c.msaa
    )
}

pub fn markdown(r: &BenchReport) -> String {
    let mut s = String::from("# upscale-demo bench\n\n");
    s += &header_lines(r);
    let stages = stage_columns(r);
    s += "\n## Results\n\n";
    s += "Milliseconds, p50 / p99 over the measured frames. `frame`: start-to-start wall time; \
          `cpu`: host time to build and submit a frame, host step included; `GPU Σ`: per frame, \
          the sum of its GPU spans scene + upscale + composite + ui. Stages are GPU \
          timestamps except those marked † (host, CPU clock); for split patterns `upscale` spans \
          the scene's end to the upscaled image, host step included. Bytes are per frame.\n\n";
    let mut head = vec![
        "pattern",
        "precision",
        "model",
        "render → output",
        "frame",
        "cpu",
        "GPU Σ",
    ];
    head.extend(stages.iter().map(String::as_str));
    head.extend(["host bytes", "bus bytes", "PSNR-Y", "PSNR-RGB", "tPSNR-Y"]);
    s += &row(&head);
    s += &row(&vec!["---"; head.len()]);
    for run in &r.runs {
        let mut cells = vec![
            run.pattern.clone(),
            run.precision.clone().unwrap_or_else(|| "–".into()),
            run.model_label().to_string(),
            run.resolution.label(),
            p50_p99(&run.frame_ms),
            p50_p99(&run.cpu_ms),
            run.gpu_frame_ms.as_ref().map_or(String::new(), p50_p99),
        ];
        cells.extend(stages.iter().map(|n| stage_cell(run, n)));
        cells.push(thousands(run.host_copy_bytes));
        cells.push(thousands(run.bus_bytes));
        let psnr = run.psnr.as_ref();
        let cell = |f: fn(&super::report::PsnrReport) -> f64| {
            psnr.map_or(String::new(), |p| format!("{:.2}", f(p)))
        };
        cells.extend([
            cell(|p| p.psnr_y),
            cell(|p| p.psnr_rgb),
            cell(|p| p.tpsnr_y),
        ]);
        s += &row(&cells);
    }
    s += &format!("\n{}\n", psnr_note(r));
    s += &layers_section(r);
    s += &unavailable_section(r);
    s += &reference_section(r);
    s
}

fn row<S: AsRef<str>>(cells: &[S]) -> String {
    let cells: Vec<&str> = cells.iter().map(AsRef::as_ref).collect();
    format!("| {} |\n", cells.join(" | "))
}

fn layers_section(r: &BenchReport) -> String {
    let runs: Vec<&RunReport> = r.runs.iter().filter(|r| !r.layers.is_empty()).collect();
    if runs.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n## In-stream layers\n\nGPU ms, p50 / p99, in execution order; each dispatch's work \
         (FLOPs, a multiply-add counting 2; the bytes it must read and write at least) and the \
         rates they give at p50 (compare with the GPU's peaks: docs/engine.md).\n",
    );
    for run in runs {
        s += &format!(
            "\n{} {} at {}{}:\n\n",
            run.model_label(),
            run.precision.as_deref().unwrap_or(""),
            run.resolution.label(),
            run.engine
                .as_ref()
                .map_or(String::new(), |e| format!(" ({})", e.line()))
        );
        s += "| layer | p50 / p99 | GFLOP | MB | TFLOP/s | GB/s |\n\
              | --- | --- | --- | --- | --- | --- |\n";
        for l in &run.layers {
            let cost = run
                .engine
                .as_ref()
                .and_then(|e| e.layers.iter().find(|c| c.name == l.name))
                .map(|c| c.cost);
            let mut cells = vec![l.name.clone(), p50_p99(&l.stats)];
            cells.extend(match cost {
                Some(c) => roofline_cells(c.flops, c.bytes, l.stats.p50_ms),
                None => vec!["–".into(); 4],
            });
            s += &row(&cells);
        }
    }
    s
}

/// GFLOP, MB, and the TFLOP/s and GB/s they make in `ms`.
fn roofline_cells(flops: u64, bytes: u64, ms: f64) -> Vec<String> {
    let per_s = |x: u64| {
        if ms > 0.0 {
            x as f64 / (ms * 1e-3)
        } else {
            0.0
        }
    };
    vec![
        format!("{:.3}", flops as f64 * 1e-9),
        format!("{:.2}", bytes as f64 * 1e-6),
        format!("{:.2}", per_s(flops) * 1e-12),
        format!("{:.0}", per_s(bytes) * 1e-9),
    ]
}

fn unavailable_section(r: &BenchReport) -> String {
    if r.unavailable.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n## Not run\n\n| pattern | model | render → output | why |\n| --- | --- | --- | --- |\n",
    );
    for u in &r.unavailable {
        let why = u.reason.replace('|', "\\|").replace('\n', " ");
        s += &row(&[
            u.pattern.clone(),
            u.model.clone().unwrap_or_else(|| "–".into()),
            u.resolution.label(),
            why,
        ]);
    }
    s
}

fn reference_section(r: &BenchReport) -> String {
    let Some(reference) = &r.reference else {
        return String::new();
    };
    let mut s = format!(
        "\n## Reference\n\nPyTorch {} on {} ({}), model forward only, ms; beside our in-stream \
         run of the same model and input size: `upscale` (GPU, tensor conversions included) and \
         the sum of the layers' p50s (the network alone).\n\n",
        reference.torch, reference.device, reference.file
    );
    s += "| model | input | dtype | PyTorch median (p10–p90) | in-stream upscale p50 | \
          upscale / PyTorch | in-stream layers Σp50 | layers / PyTorch |\n";
    s += "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
    for row_ in &reference.rows {
        let e = &row_.entry;
        let torch = format!("{} ({}–{})", ms(e.median_ms), ms(e.p10_ms), ms(e.p90_ms));
        let ratio = |ours: f64| format!("{:.2}×", ours / e.median_ms);
        let [up, up_ratio, layers, layers_ratio] = match &row_.in_stream {
            Some(o) => [
                ms(o.upscale_p50_ms),
                ratio(o.upscale_p50_ms),
                ms(o.layers_p50_ms),
                ratio(o.layers_p50_ms),
            ],
            None => [
                row_.arch_mismatch
                    .clone()
                    .unwrap_or_else(|| "not run".into()),
                String::new(),
                String::new(),
                String::new(),
            ],
        };
        s += &row(&[
            e.model.clone(),
            e.input.clone(),
            e.dtype.clone(),
            torch,
            up,
            up_ratio,
            layers,
            layers_ratio,
        ]);
    }
    s
}

/// One CSV field, quoted when it holds a comma, a quote or a line break.
fn field(v: &str) -> String {
    if v.contains([',', '"', '\n']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.to_string()
    }
}

fn stats_fields(s: Option<&StageStats>) -> [String; 3] {
    match s {
        Some(s) => [s.p50_ms, s.p95_ms, s.p99_ms].map(|v| v.to_string()),
        None => Default::default(),
    }
}

/// One CSV row per run and one per unavailable combination (status `unavailable`, with the
/// reason), every run's stages in the same column order.
pub fn csv(r: &BenchReport) -> String {
    let stages = stage_columns(r);
    let head = csv_header(&stages);
    let mut out = line(&head);
    for run in &r.runs {
        out += &line(&csv_run(run, &stages));
    }
    for u in &r.unavailable {
        let res = &u.resolution;
        let mut cells = vec![
            u.pattern.clone(),
            u.precision.clone().unwrap_or_default(),
            u.model.clone().unwrap_or_default(),
            String::new(),
        ];
        cells.extend(
            [res.render[0], res.render[1], res.output[0], res.output[1]].map(|v| v.to_string()),
        );
        cells.extend(["unavailable".into(), u.reason.clone()]);
        cells.resize(head.len(), String::new());
        out += &line(&cells);
    }
    out
}

fn csv_header(stages: &[String]) -> Vec<String> {
    let mut head: Vec<String> = [
        "pattern",
        "precision",
        "model",
        "model_path",
        "render_w",
        "render_h",
        "output_w",
        "output_h",
        "status",
        "reason",
        "warmup",
        "frames",
        "frame_p50_ms",
        "frame_p95_ms",
        "frame_p99_ms",
        "cpu_p50_ms",
        "cpu_p95_ms",
        "cpu_p99_ms",
        "gpu_frame_p50_ms",
        "gpu_frame_p95_ms",
        "gpu_frame_p99_ms",
        "host_copy_bytes",
        "bus_bytes",
        "psnr_y_db",
        "psnr_rgb_db",
        "tpsnr_y_db",
        "psnr_frames",
    ]
    .map(String::from)
    .to_vec();
    for n in stages {
        head.extend(["p50_ms", "p95_ms", "p99_ms", "clock"].map(|k| format!("{n}_{k}")));
    }
    head
}

fn csv_run(run: &RunReport, stages: &[String]) -> Vec<String> {
    let res = &run.resolution;
    let mut cells = vec![
        run.pattern.clone(),
        run.precision.clone().unwrap_or_default(),
        run.model.clone().unwrap_or_default(),
        run.model_path.clone().unwrap_or_default(),
    ];
    cells.extend(
        [res.render[0], res.render[1], res.output[0], res.output[1]].map(|v| v.to_string()),
    );
    cells.extend([
        "ok".into(),
        String::new(),
        run.warmup.to_string(),
        run.frames.to_string(),
    ]);
    cells.extend(stats_fields(Some(&run.frame_ms)));
    cells.extend(stats_fields(Some(&run.cpu_ms)));
    cells.extend(stats_fields(run.gpu_frame_ms.as_ref()));
    cells.extend([run.host_copy_bytes.to_string(), run.bus_bytes.to_string()]);
    match &run.psnr {
        Some(p) => {
            let frames: Vec<String> = p.frames.iter().map(|f| f.frame.to_string()).collect();
            cells.extend([
                p.psnr_y.to_string(),
                p.psnr_rgb.to_string(),
                p.tpsnr_y.to_string(),
                frames.join(";"),
            ]);
        }
        None => cells.extend([String::new(), String::new(), String::new(), String::new()]),
    }
    for n in stages {
        let stage = run.stages.iter().find(|s| &s.name == n);
        cells.extend(stats_fields(stage.map(|s| &s.stats)));
        cells.push(stage.map_or(String::new(), |s| s.clock.to_string()));
    }
    cells
}

fn line(cells: &[String]) -> String {
    let cells: Vec<String> = cells.iter().map(|c| field(c)).collect();
    cells.join(",") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roofline_rates_come_from_the_p50() {
        // 3x3 16->16 at 960x540: 2 * 16 * 518400 * 144 = 2.389 GFLOP; 0.1 ms -> 23.89 TFLOP/s.
        let cells = roofline_cells(2_388_787_200, 33_177_600, 0.1);
        assert_eq!(cells, ["2.389", "33.18", "23.89", "332"]);
        assert_eq!(roofline_cells(10, 10, 0.0)[2], "0.00");
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(thousands(10_368_000), "10,368,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(0), "0");
        assert_eq!(ms(0.0261), "0.026");
        assert_eq!(ms(66.94), "66.94");
        assert_eq!(ms(5248.2), "5248.2");
    }

    fn header() -> Header {
        Header {
            tool: "upscale-demo 0.1.0".into(),
            date: "2026-12-03T08:00:00Z".into(),
            machine: super::super::report::Machine {
                hostname: "vm".into(),
                cpu_model: "cpu".into(),
                cores: 2,
                ram_bytes: None,
                os: "linux".into(),
            },
            gpu: None,
            onnxruntime: None,
            onnxruntime_error: Some("not loaded: no ONNX Runtime pattern in this bench".into()),
            onnxruntime_provider: "cpu".into(),
            git_commit: Some("3cf779e".into()),
            git_dirty: Some(true),
            build_profile: "release".into(),
            validation_enabled: false,
            command_line: "upscale-demo bench".into(),
        }
    }

    #[test]
    fn header_labels_say_what_is_missing_or_modified() {
        let mut h = header();
        assert_eq!(commit_label(&h), "3cf779e (with uncommitted changes)");
        h.git_dirty = Some(false);
        assert_eq!(commit_label(&h), "3cf779e");
        h.git_commit = None;
        assert_eq!(commit_label(&h), "unknown (no git)");
        assert_eq!(gpu_label(&h), "none created");
        assert!(ort_label(&h).starts_with("not loaded"));
        h.onnxruntime = Some("1.30.0".into());
        assert_eq!(ort_label(&h), "1.30.0 (cpu execution provider)");
    }

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        assert_eq!(field("in-stream"), "in-stream");
        assert_eq!(field("a, b"), "\"a, b\"");
        assert_eq!(field("say \"x\""), "\"say \"\"x\"\"\"");
    }
}
