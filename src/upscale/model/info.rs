//! What the loader learns about a model, and the pure checks behind it.

use std::path::{Path, PathBuf};

use ort::value::{TensorElementType, ValueType};

use super::temporal::HistoryFilter;
use super::ModelError;

/// Channels the renderer feeds and expects back (RGB, NCHW).
pub const IMAGE_CHANNELS: u32 = 3;
pub const MAX_SCALE: u32 = 8;
/// Metadata key holding the integer upscale factor.
pub const SCALE_KEY: &str = "scale";
/// Metadata key naming what a model is; `temporal` (the value [`TEMPORAL_KIND`]) marks a model
/// that takes the frame's depth, motion vectors, jitter and its own warped history besides the
/// colour (`tools/train/temporal.py`, `models/README.md`).
pub const KIND_KEY: &str = "upscale.kind";
pub const TEMPORAL_KIND: &str = "temporal";
/// A temporal model's inputs, in order: name and channels (each [1, C, h, w] at render size).
pub const TEMPORAL_INPUTS: [(&str, usize); 5] = [
    ("color", 3),
    ("depth", 1),
    ("motion", 2),
    ("history", 12),
    ("jitter", 2),
];
/// Metadata key of a temporal model whose warped history is clamped to the box of the frame's
/// colour ([`HISTORY_CLAMP_COLOR_3X3`], `model::temporal`'s definition); a model without it takes
/// the history warped only (the first `temporal_x2`).
pub const HISTORY_CLAMP_KEY: &str = "upscale.history_clamp";
pub const HISTORY_CLAMP_COLOR_3X3: &str = "color_3x3";

/// Whether a temporal model's history is clamped, from its [`HISTORY_CLAMP_KEY`] value; a
/// value this build does not know is an error that says what it knows.
pub fn history_clamp(value: Option<&str>) -> Result<bool, String> {
    match value {
        None => Ok(false),
        Some(HISTORY_CLAMP_COLOR_3X3) => Ok(true),
        Some(other) => Err(format!(
            "metadata '{HISTORY_CLAMP_KEY}' is {other:?}; this build feeds '{HISTORY_CLAMP_COLOR_3X3}' \
             (the warped history clamped to the 3x3 box of the frame's colour) or, without the key, \
             the warped history as it is (re-export the model with one of them)"
        )),
    }
}

/// Metadata key of a temporal model whose warp resamples the previous output with a filter
/// other than bilinear ([`HISTORY_FILTER_CATMULL_ROM`]); a model without it takes bilinear.
pub const HISTORY_FILTER_KEY: &str = "upscale.history_filter";
pub const HISTORY_FILTER_BILINEAR: &str = "bilinear";
pub const HISTORY_FILTER_CATMULL_ROM: &str = "catmull_rom";

/// How a temporal model's warp resamples its previous output, from its [`HISTORY_FILTER_KEY`]
/// value; a value this build does not know is an error that says what it knows.
pub fn history_filter(value: Option<&str>) -> Result<HistoryFilter, String> {
    match value {
        None | Some(HISTORY_FILTER_BILINEAR) => Ok(HistoryFilter::Bilinear),
        Some(HISTORY_FILTER_CATMULL_ROM) => Ok(HistoryFilter::CatmullRom),
        Some(other) => Err(format!(
            "metadata '{HISTORY_FILTER_KEY}' is {other:?}; this build resamples the history with \
             '{HISTORY_FILTER_BILINEAR}' (also without the key) or '{HISTORY_FILTER_CATMULL_ROM}' \
             (re-export the model with one of them)"
        )),
    }
}

/// Why a single-frame path refuses a temporal model.
pub const TEMPORAL_REFUSAL: &str = "it is a temporal model (metadata upscale.kind = temporal: it \
     also takes depth, motion vectors, jitter and its own warped history), which this path \
     does not feed; the in-stream, cpu-roundtrip and shared-memory patterns run it, or pick a \
     single-frame model such as models/quality_x2.onnx";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleSource {
    Metadata,
    ShapeProbe,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    pub path: PathBuf,
    pub input_name: String,
    pub output_name: String,
    pub scale: u32,
    pub channels: u32,
    pub scale_source: ScaleSource,
    /// Fixed input height/width if the model declares them; `None` = dynamic.
    pub input_height: Option<u32>,
    pub input_width: Option<u32>,
}

/// Shape of one image tensor as declared by the model; `None` = dynamic dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ImageDims {
    pub channels: Option<u32>,
    pub height: Option<u32>,
    pub width: Option<u32>,
}

/// Checks that a model input/output is a rank-4 float32 NCHW tensor with 3 channels.
/// `role` is "input" or "output", used in the message.
pub(super) fn image_dims(
    path: &Path,
    role: &str,
    name: &str,
    ty: &ValueType,
) -> Result<ImageDims, ModelError> {
    let not_image = |found: String| ModelError::NotImage {
        path: path.to_path_buf(),
        found,
    };
    let ValueType::Tensor { ty, shape, .. } = ty else {
        return Err(not_image(format!("{role} '{name}' is not a tensor ({ty})")));
    };
    if *ty != TensorElementType::Float32 {
        return Err(not_image(format!("{role} '{name}' has element type {ty}")));
    }
    if shape.len() != 4 {
        return Err(not_image(format!(
            "{role} '{name}' has rank {} (shape {shape:?})",
            shape.len()
        )));
    }
    let dim = |d: i64| u32::try_from(d).ok().filter(|&d| d > 0);
    let dims = ImageDims {
        channels: dim(shape[1]),
        height: dim(shape[2]),
        width: dim(shape[3]),
    };
    match dims.channels {
        Some(IMAGE_CHANNELS) => Ok(dims),
        Some(c) => Err(not_image(format!("{role} '{name}' has {c} channel(s)"))),
        None => Err(not_image(format!(
            "{role} '{name}' has a dynamic channel dimension"
        ))),
    }
}

/// Parses the `scale` metadata value.
pub(super) fn parse_scale(path: &Path, value: &str) -> Result<u32, ModelError> {
    match value.trim().parse::<u32>() {
        Ok(s) if (1..=MAX_SCALE).contains(&s) => Ok(s),
        _ => Err(ModelError::Scale {
            path: path.to_path_buf(),
            reason: format!(
                "metadata '{SCALE_KEY}' is {value:?}; it must be an integer from 1 to {MAX_SCALE} \
                 (fix the model's metadata_props or remove the key to let the loader probe the shapes)"
            ),
        }),
    }
}

/// Scale from an input/output size pair: equal integer factor in both dimensions.
pub(super) fn scale_from_sizes(
    path: &Path,
    input: (u32, u32),
    output: (u32, u32),
) -> Result<u32, ModelError> {
    let (ih, iw) = input;
    let (oh, ow) = output;
    let ok = ih > 0 && iw > 0 && oh % ih == 0 && ow % iw == 0 && oh / ih == ow / iw;
    match ok.then(|| oh / ih) {
        Some(s) if (1..=MAX_SCALE).contains(&s) => Ok(s),
        _ => Err(ModelError::Scale {
            path: path.to_path_buf(),
            reason: format!(
                "input {iw}x{ih} gives output {ow}x{oh}, which is not one integer scale from 1 to {MAX_SCALE} \
                 in both dimensions; add metadata '{SCALE_KEY}' or use an integer-scale upscaler"
            ),
        }),
    }
}

pub(super) fn both(h: Option<u32>, w: Option<u32>) -> Option<(u32, u32)> {
    Some((h?, w?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_filter_key_is_known_or_refused_with_what_is() {
        assert_eq!(history_filter(None), Ok(HistoryFilter::Bilinear));
        assert_eq!(
            history_filter(Some("bilinear")),
            Ok(HistoryFilter::Bilinear)
        );
        assert_eq!(
            history_filter(Some("catmull_rom")),
            Ok(HistoryFilter::CatmullRom)
        );
        let why = history_filter(Some("lanczos3")).unwrap_err();
        assert!(
            why.contains("upscale.history_filter")
                && why.contains("lanczos3")
                && why.contains("catmull_rom")
                && why.contains("bilinear"),
            "{why}"
        );
    }

    #[test]
    fn the_history_clamp_key_is_known_or_refused_with_what_is() {
        assert_eq!(history_clamp(None), Ok(false));
        assert_eq!(history_clamp(Some("color_3x3")), Ok(true));
        let why = history_clamp(Some("ycocg_5x5")).unwrap_err();
        assert!(
            why.contains("upscale.history_clamp")
                && why.contains("ycocg_5x5")
                && why.contains("color_3x3"),
            "{why}"
        );
    }

    #[test]
    fn scale_metadata_bounds() {
        let p = Path::new("m.onnx");
        assert_eq!(parse_scale(p, "2").unwrap(), 2);
        assert_eq!(parse_scale(p, " 8 ").unwrap(), 8);
        for bad in ["0", "9", "2.0", "x2", ""] {
            let err = parse_scale(p, bad).unwrap_err();
            assert!(matches!(err, ModelError::Scale { .. }), "{bad}");
            assert!(err.to_string().contains("m.onnx"), "{err}");
        }
    }

    #[test]
    fn scale_from_shapes() {
        let p = Path::new("m.onnx");
        assert_eq!(scale_from_sizes(p, (8, 8), (16, 16)).unwrap(), 2);
        assert_eq!(scale_from_sizes(p, (180, 320), (720, 1280)).unwrap(), 4);
        assert!(scale_from_sizes(p, (8, 8), (16, 24)).is_err());
        assert!(scale_from_sizes(p, (8, 8), (12, 12)).is_err());
        assert!(scale_from_sizes(p, (8, 8), (8 * 9, 8 * 9)).is_err());
    }
}
