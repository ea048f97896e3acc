//! `config.toml`: every key, its default and its checks. A bad value is an error that names the
//! file, the key, the value and what is allowed.

mod keys;

use std::fmt::Display;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::game::jitter::JitterMode;
use crate::gpu::swapchain::PresentMode;
use crate::infer::PrecisionChoice;
use crate::upscale::shared::DomainChoice;
use crate::upscale::Pattern;

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub window: WindowConfig,
    pub render: RenderConfig,
    pub upscale: UpscaleConfig,
    pub onnxruntime: OrtConfig,
    pub gpu: GpuConfig,
    pub game: GameConfig,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct WindowConfig {
    pub width: u32,
    pub height: u32,
    /// fifo | mailbox | immediate; unset: from `vsync`, else fifo.
    pub present_mode: Option<String>,
    /// The old key: true = fifo, false = mailbox. Kept so that old files still run.
    pub vsync: Option<bool>,
    /// Frames per second the window loop waits for (0: no cap).
    pub fps_cap: f64,
}

/// The highest `window.fps_cap` accepted.
pub const MAX_FPS_CAP: f64 = 1000.0;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct RenderConfig {
    pub output_width: u32,
    pub output_height: u32,
    /// Render size = output / scale, unless render_width/height are given.
    pub scale: u32,
    pub render_width: Option<u32>,
    pub render_height: Option<u32>,
    /// Samples per pixel of the scene pass (1: no MSAA), resolved into the image the upscalers read.
    pub msaa: u32,
    /// The render-size frame samples textures with mip LOD bias log2(render / output). Jittered
    /// frames (`jitter`) always get it.
    pub upscale_mip_bias: bool,
    /// auto | off | halton: the sub-pixel camera jitter (`game::jitter::JitterMode`); auto jitters
    /// while the active upscaler is temporal.
    pub jitter: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpscaleConfig {
    pub pattern: String,
    pub model: PathBuf,
    /// The shared-memory pattern's domain: auto, host or cuda.
    pub shared_domain: String,
    /// The in-stream engine's storage precision: auto, fp32 or fp16.
    pub precision: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct OrtConfig {
    /// Empty: env ORT_DYLIB_PATH, then `.deps/onnxruntime/`, then the system library.
    pub library: PathBuf,
    pub execution_provider: String,
    /// 0: one per core.
    pub intra_threads: usize,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct GpuConfig {
    /// Empty: the best device; else an index or part of the device name.
    pub device: String,
    /// false: behave as if the device lacked VK_EXT_external_memory_host.
    pub external_memory_host: bool,
}

impl Default for GpuConfig {
    fn default() -> Self {
        Self {
            device: String::new(),
            external_memory_host: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct GameConfig {
    pub seed: u64,
    /// Degrees of turn per pixel of mouse motion.
    pub mouse_sensitivity: f32,
}

impl Default for WindowConfig {
    fn default() -> Self {
        Self {
            width: 1280,
            height: 720,
            present_mode: None,
            vsync: None,
            fps_cap: 0.0,
        }
    }
}

impl Default for RenderConfig {
    fn default() -> Self {
        Self {
            output_width: 1280,
            output_height: 720,
            scale: 2,
            render_width: None,
            render_height: None,
            msaa: 4,
            upscale_mip_bias: false,
            jitter: "auto".into(),
        }
    }
}

impl Default for UpscaleConfig {
    fn default() -> Self {
        Self {
            pattern: "bilinear".into(),
            model: PathBuf::from("models/quality_x2.onnx"),
            shared_domain: "auto".into(),
            precision: "auto".into(),
        }
    }
}

impl Default for OrtConfig {
    fn default() -> Self {
        Self {
            library: PathBuf::new(),
            execution_provider: "cpu".into(),
            intra_threads: 0,
        }
    }
}

impl Default for GameConfig {
    fn default() -> Self {
        Self {
            seed: 7,
            mouse_sensitivity: crate::game::world::DEFAULT_MOUSE_SENSITIVITY,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: cannot read the config file: {error}. Pass another with --config PATH")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: {key} = {value}: {allowed}")]
    Value {
        path: PathBuf,
        key: &'static str,
        value: String,
        allowed: String,
    },
}

/// Largest image side accepted before the device is known; the device limit is checked later.
pub const MAX_SIZE: u32 = 16384;

/// Samples per pixel `render.msaa` may ask for; whether the device has it is checked later.
pub const MSAA_CHOICES: [u32; 4] = [1, 2, 4, 8];

impl Config {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            error: source,
        })?;
        Self::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: parse_message(&e, text),
        })?;
        config.validate(path)?;
        Ok(config)
    }

    fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        self.validate_sizes(path)?;
        self.validate_choices(path)?;
        self.validate_pacing(path)
    }

    /// `window.present_mode` (or its old name `vsync`, not both) and `window.fps_cap`.
    fn validate_pacing(&self, path: &Path) -> Result<(), ConfigError> {
        let bad = |key, value: &dyn Display, allowed| value_error(path, key, value, allowed);
        let w = &self.window;
        if let Some(mode) = &w.present_mode {
            if PresentMode::parse(mode).is_none() {
                let names: Vec<_> = PresentMode::ALL.map(PresentMode::name).into();
                return Err(bad(
                    "window.present_mode",
                    &format!("\"{mode}\""),
                    format!("one of: {}", names.join(", ")),
                ));
            }
            if let Some(vsync) = w.vsync {
                return Err(bad(
                    "window.vsync",
                    &vsync,
                    "the old name of window.present_mode (true = \"fifo\", false = \"mailbox\"); \
                     give only window.present_mode"
                        .into(),
                ));
            }
        }
        if !(w.fps_cap >= 0.0 && w.fps_cap <= MAX_FPS_CAP) {
            return Err(bad(
                "window.fps_cap",
                &w.fps_cap,
                format!("must be 0 (no cap) or frames per second up to {MAX_FPS_CAP}"),
            ));
        }
        Ok(())
    }

    /// The present mode asked for: `window.present_mode`, else `window.vsync`'s, else fifo.
    pub fn present_mode(&self) -> PresentMode {
        match (&self.window.present_mode, self.window.vsync) {
            (Some(name), _) => PresentMode::parse(name).expect("validated"),
            (None, Some(false)) => PresentMode::Mailbox,
            (None, _) => PresentMode::Fifo,
        }
    }

    /// Window and render sizes, `render.scale` and `render.msaa`.
    fn validate_sizes(&self, path: &Path) -> Result<(), ConfigError> {
        let bad = |key, value: &dyn Display, allowed| value_error(path, key, value, allowed);
        let size = |key, v| check_size(path, key, v);
        size("window.width", self.window.width)?;
        size("window.height", self.window.height)?;
        size("render.output_width", self.render.output_width)?;
        size("render.output_height", self.render.output_height)?;
        let r = &self.render;
        if !(1..=8).contains(&r.scale) {
            return Err(bad(
                "render.scale",
                &r.scale,
                "must be an integer 1..=8".into(),
            ));
        }
        self.validate_render_size(path)?;
        if !MSAA_CHOICES.contains(&r.msaa) {
            return Err(bad(
                "render.msaa",
                &r.msaa,
                "must be one of 1, 2, 4, 8 (samples per pixel; 1 = no MSAA)".into(),
            ));
        }
        Ok(())
    }

    /// An explicit render size (both keys, within the output) or a scale that divides the
    /// output size.
    fn validate_render_size(&self, path: &Path) -> Result<(), ConfigError> {
        let bad = |key, value: &dyn Display, allowed| value_error(path, key, value, allowed);
        let size = |key, v| check_size(path, key, v);
        let r = &self.render;
        match (r.render_width, r.render_height) {
            (Some(w), Some(h)) => {
                size("render.render_width", w)?;
                size("render.render_height", h)?;
                if w > r.output_width || h > r.output_height {
                    return Err(bad(
                        "render.render_width",
                        &format!("{w} (render_height {h})"),
                        format!(
                            "the render size must not exceed the output size {}x{}",
                            r.output_width, r.output_height
                        ),
                    ));
                }
            }
            (None, None) => {
                if !r.output_width.is_multiple_of(r.scale)
                    || !r.output_height.is_multiple_of(r.scale)
                {
                    return Err(bad(
                        "render.scale",
                        &r.scale,
                        format!(
                            "must divide the output size {}x{} exactly (or set render.render_width and render.render_height)",
                            r.output_width, r.output_height
                        ),
                    ));
                }
            }
            _ => {
                return Err(bad(
                    "render.render_width",
                    &format!(
                        "{} / render_height {}",
                        or_unset(r.render_width),
                        or_unset(r.render_height)
                    ),
                    "give both render.render_width and render.render_height, or neither".into(),
                ))
            }
        }
        Ok(())
    }

    /// The keys that name one of a fixed set of choices, and the mouse sensitivity.
    fn validate_choices(&self, path: &Path) -> Result<(), ConfigError> {
        let bad = |key, value: &dyn Display, allowed| value_error(path, key, value, allowed);
        if Pattern::parse(&self.upscale.pattern).is_none() {
            return Err(bad(
                "upscale.pattern",
                &format!("\"{}\"", self.upscale.pattern),
                format!("one of: {}", Pattern::names()),
            ));
        }
        if JitterMode::parse(&self.render.jitter).is_none() {
            return Err(bad(
                "render.jitter",
                &format!("\"{}\"", self.render.jitter),
                format!("one of: {}", JitterMode::NAMES.join(", ")),
            ));
        }
        if DomainChoice::parse(&self.upscale.shared_domain).is_none() {
            return Err(bad(
                "upscale.shared_domain",
                &format!("\"{}\"", self.upscale.shared_domain),
                format!("one of: {}", DomainChoice::ALLOWED),
            ));
        }
        if !PrecisionChoice::NAMES.contains(&self.upscale.precision.as_str()) {
            return Err(bad(
                "upscale.precision",
                &format!("\"{}\"", self.upscale.precision),
                format!("one of: {}", PrecisionChoice::NAMES.join(", ")),
            ));
        }
        if !["cpu", "cuda"].contains(&self.onnxruntime.execution_provider.as_str()) {
            return Err(bad(
                "onnxruntime.execution_provider",
                &format!("\"{}\"", self.onnxruntime.execution_provider),
                "one of: cpu, cuda".into(),
            ));
        }
        if !(self.game.mouse_sensitivity > 0.0 && self.game.mouse_sensitivity <= 10.0) {
            return Err(bad(
                "game.mouse_sensitivity",
                &self.game.mouse_sensitivity,
                "must be in (0, 10]".into(),
            ));
        }
        Ok(())
    }

    /// The config with another output size (the command line's `--output-size`), checked as if
    /// the file had said it; an explicit render size is dropped for `render.scale`'s.
    pub fn with_output_size(mut self, width: u32, height: u32) -> Result<Self, ConfigError> {
        self.render.output_width = width;
        self.render.output_height = height;
        self.render.render_width = None;
        self.render.render_height = None;
        self.validate(Path::new("--output-size"))?;
        Ok(self)
    }

    pub fn pattern(&self) -> Pattern {
        Pattern::parse(&self.upscale.pattern).expect("validated")
    }

    pub fn jitter(&self) -> JitterMode {
        JitterMode::parse(&self.render.jitter).expect("validated")
    }

    /// (render, output) sizes.
    pub fn sizes(&self) -> ((u32, u32), (u32, u32)) {
        let r = &self.render;
        let output = (r.output_width, r.output_height);
        let render = match (r.render_width, r.render_height) {
            (Some(w), Some(h)) => (w, h),
            _ => (r.output_width / r.scale, r.output_height / r.scale),
        };
        (render, output)
    }
}

/// toml's message as toml lays it out (the line, then a caret under the column on its own
/// line), with serde's "unknown field `x`, expected one of ..." replaced by the nearest known
/// key, so an unknown key is named once.
fn parse_message(e: &toml::de::Error, text: &str) -> String {
    let message = e.to_string().trim_end().to_string();
    match keys::unknown_key_hint(text) {
        Some(hint) if e.message().starts_with("unknown field") => {
            message.replace(e.message().trim_end(), &hint)
        }
        Some(hint) => format!("{message}\n{hint}"),
        None => message,
    }
}

/// A key whose value is not allowed, with what is.
fn value_error(
    path: &Path,
    key: &'static str,
    value: &dyn Display,
    allowed: String,
) -> ConfigError {
    ConfigError::Value {
        path: path.to_owned(),
        key,
        value: value.to_string(),
        allowed,
    }
}

/// A size in pixels: 1..=MAX_SIZE.
fn check_size(path: &Path, key: &'static str, v: u32) -> Result<(), ConfigError> {
    if v == 0 || v > MAX_SIZE {
        Err(value_error(
            path,
            key,
            &v,
            format!("must be 1..={MAX_SIZE} pixels"),
        ))
    } else {
        Ok(())
    }
}

fn or_unset(v: Option<u32>) -> String {
    v.map_or("unset".into(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, String> {
        Config::parse(text, Path::new("test.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn empty_file_gives_defaults() {
        let c = parse("").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.sizes(), ((640, 360), (1280, 720)));
        assert_eq!(c.pattern(), Pattern::Bilinear);
    }

    #[test]
    fn the_shipped_config_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.toml");
        Config::load(&path).unwrap();
    }

    #[test]
    fn explicit_render_size() {
        let c = parse("[render]\nrender_width = 400\nrender_height = 300\noutput_width = 800\noutput_height = 600").unwrap();
        assert_eq!(c.sizes(), ((400, 300), (800, 600)));
    }

    /// The column toml names in "at line L, column C", and where its caret is under the
    /// quoted source line (both 1-based, counted from the quoted text's start).
    fn caret(e: &str, source: &str) -> (usize, usize) {
        let column = e
            .split("column ")
            .nth(1)
            .unwrap()
            .split(|c: char| !c.is_ascii_digit());
        let column = column.into_iter().next().unwrap().parse().unwrap();
        let lines: Vec<&str> = e.lines().collect();
        let at = lines.iter().position(|l| l.ends_with(source)).unwrap();
        let text_start = lines[at].len() - source.len();
        (column, lines[at + 1].find('^').unwrap() + 1 - text_start)
    }

    #[test]
    fn malformed_toml_is_laid_out_as_toml_lays_it_out() {
        let e = parse("[window\nwidth = 3").unwrap_err();
        assert!(
            e.starts_with("test.toml: TOML parse error at line 1, column 8\n"),
            "{e}"
        );
        let (column, caret) = caret(&e, "| [window");
        assert_eq!(
            caret - 2,
            column,
            "the caret points at the column named:\n{e}"
        );
    }

    #[test]
    fn unknown_key_is_named_once_with_the_nearest_known_key() {
        let e = parse("[window]\nwidht = 800").unwrap_err();
        assert!(e.starts_with("test.toml: ") && e.contains("line 2"), "{e}");
        assert_eq!(caret(&e, "| widht = 800"), (1, 3), "{e}");
        assert!(
            e.ends_with("\nunknown key `window.widht`: did you mean `window.width`?"),
            "{e}"
        );
        assert_eq!(e.matches("unknown").count(), 1, "named once: {e}");
        let e = parse("[upscale]\nmodle = \"m.onnx\"").unwrap_err();
        assert!(e.ends_with("did you mean `upscale.model`?"), "{e}");
        let e = parse("[rendering]\nscale = 2").unwrap_err();
        assert!(
            e.ends_with("unknown section [rendering]: did you mean [render]?"),
            "{e}"
        );
    }

    #[test]
    fn wrong_types_are_named() {
        for (text, line, expected) in [
            ("[render]\nscale = 2.5", "scale = 2.5", "expected u32"),
            (
                "[window]\nvsync = \"yes\"",
                "vsync = \"yes\"",
                "expected a boolean",
            ),
            ("[render]\noutput_width = -4", "output_width = -4", "u32"),
            ("[game]\nseed = [1]", "seed = [1]", "expected u64"),
            ("window = 3", "window = 3", "expected struct WindowConfig"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(line) && e.contains(expected), "{text}: {e}");
        }
    }

    #[test]
    fn sizes_of_zero_and_over_the_limit_are_refused() {
        for (text, key) in [
            ("[window]\nwidth = 0", "window.width = 0"),
            ("[render]\noutput_height = 0", "render.output_height = 0"),
            ("[render]\nscale = 0", "render.scale = 0"),
            (
                "[render]\noutput_width = 16385",
                "render.output_width = 16385",
            ),
            (
                "[render]\nrender_width = 0\nrender_height = 90",
                "render.render_width = 0",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with(&format!("test.toml: {key}: ")), "{e}");
        }
    }

    #[test]
    fn an_odd_output_size_cannot_be_halved() {
        let e = parse("[render]\noutput_width = 129\noutput_height = 72").unwrap_err();
        assert_eq!(
            e,
            "test.toml: render.scale = 2: must divide the output size 129x72 exactly \
             (or set render.render_width and render.render_height)"
        );
    }

    #[test]
    fn output_size_override_is_checked_like_the_file() {
        let c = parse("").unwrap().with_output_size(128, 72).unwrap();
        assert_eq!(c.sizes(), ((64, 36), (128, 72)));
        let e = parse("").unwrap().with_output_size(127, 72).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--output-size: render.scale = 2: must divide the output size 127x72"),
            "{e}"
        );
    }

    #[test]
    fn wrong_type_is_named() {
        let e = parse("[window]\nwidth = \"wide\"").unwrap_err();
        assert!(
            e.contains("line 2") && e.contains("width = \"wide\""),
            "{e}"
        );
        assert!(e.contains("expected u32"), "{e}");
    }

    #[test]
    fn zero_size_is_refused_with_key_and_range() {
        let e = parse("[render]\noutput_width = 0").unwrap_err();
        assert_eq!(
            e,
            "test.toml: render.output_width = 0: must be 1..=16384 pixels"
        );
    }

    #[test]
    fn scale_must_divide_output() {
        let e = parse("[render]\noutput_width = 1281").unwrap_err();
        assert!(
            e.contains("render.scale = 2") && e.contains("1281x720"),
            "{e}"
        );
    }

    #[test]
    fn jitter_is_auto_off_or_halton() {
        assert_eq!(parse("").unwrap().jitter(), JitterMode::Auto);
        for (name, mode) in
            JitterMode::NAMES
                .iter()
                .zip([JitterMode::Auto, JitterMode::Off, JitterMode::Halton])
        {
            let c = parse(&format!("[render]\njitter = \"{name}\"")).unwrap();
            assert_eq!(c.jitter(), mode);
        }
        let e = parse("[render]\njitter = \"on\"").unwrap_err();
        assert_eq!(
            e,
            "test.toml: render.jitter = \"on\": one of: auto, off, halton"
        );
    }

    #[test]
    fn msaa_takes_the_usual_sample_counts_only() {
        assert_eq!(parse("").unwrap().render.msaa, 4);
        for n in MSAA_CHOICES {
            let c = parse(&format!("[render]\nmsaa = {n}")).unwrap();
            assert_eq!(c.render.msaa, n);
        }
        for n in [0, 3, 16] {
            let e = parse(&format!("[render]\nmsaa = {n}")).unwrap_err();
            assert_eq!(
                e,
                format!(
                    "test.toml: render.msaa = {n}: must be one of 1, 2, 4, 8 \
                     (samples per pixel; 1 = no MSAA)"
                )
            );
        }
        let e = parse("[render]\nmsaa = true").unwrap_err();
        assert!(
            e.contains("msaa = true") && e.contains("expected u32"),
            "{e}"
        );
    }

    #[test]
    fn unknown_pattern_lists_the_patterns() {
        let e = parse("[upscale]\npattern = \"bicubic\"").unwrap_err();
        assert!(e.contains("upscale.pattern = \"bicubic\""), "{e}");
        assert!(
            e.contains("cpu-roundtrip") && e.contains("in-stream"),
            "{e}"
        );
    }

    #[test]
    fn half_given_render_size_is_refused() {
        let e = parse("[render]\nrender_width = 100").unwrap_err();
        assert_eq!(
            e,
            "test.toml: render.render_width = 100 / render_height unset: \
             give both render.render_width and render.render_height, or neither"
        );
    }

    #[test]
    fn missing_file_says_how_to_pick_another() {
        let e = Config::load(Path::new("/nonexistent/c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/nonexistent/c.toml") && e.contains("--config"),
            "{e}"
        );
    }

    #[test]
    fn present_mode_is_one_of_the_three_and_vsync_is_its_old_name() {
        assert_eq!(parse("").unwrap().present_mode(), PresentMode::Fifo);
        for mode in PresentMode::ALL {
            let c = parse(&format!("[window]\npresent_mode = \"{}\"", mode.name())).unwrap();
            assert_eq!(c.present_mode(), mode);
        }
        let c = parse("[window]\nvsync = false").unwrap();
        assert_eq!(c.present_mode(), PresentMode::Mailbox);
        let c = parse("[window]\nvsync = true").unwrap();
        assert_eq!(c.present_mode(), PresentMode::Fifo);
        let e = parse("[window]\npresent_mode = \"vsync\"").unwrap_err();
        assert_eq!(
            e,
            "test.toml: window.present_mode = \"vsync\": one of: fifo, mailbox, immediate"
        );
        let e = parse("[window]\npresent_mode = \"fifo\"\nvsync = false").unwrap_err();
        assert!(
            e.starts_with("test.toml: window.vsync = false: the old name of window.present_mode"),
            "{e}"
        );
    }

    #[test]
    fn fps_cap_is_zero_or_a_positive_rate() {
        assert_eq!(parse("").unwrap().window.fps_cap, 0.0);
        assert_eq!(
            parse("[window]\nfps_cap = 60").unwrap().window.fps_cap,
            60.0
        );
        assert_eq!(
            parse("[window]\nfps_cap = 29.97").unwrap().window.fps_cap,
            29.97
        );
        for bad in ["-1", "-0.5", "1001", "nan", "inf"] {
            let e = parse(&format!("[window]\nfps_cap = {bad}")).unwrap_err();
            assert!(
                e.starts_with("test.toml: window.fps_cap = ")
                    && e.ends_with("must be 0 (no cap) or frames per second up to 1000"),
                "{bad}: {e}"
            );
        }
    }
}
