//! What a loaded session is: one image input and one image output, and the scale between them
//! (from the model's metadata, from static shapes, or from one probe run on zeros).

use std::path::Path;

use ort::session::Session;
use ort::value::TensorRef;

use super::info::{
    self, ModelInfo, ScaleSource, IMAGE_CHANNELS, KIND_KEY, SCALE_KEY, TEMPORAL_KIND,
};
use super::{ModelError, PROBE_SIZE};

/// Validates the session's signature and determines the scale.
pub(super) fn inspect(path: &Path, session: &mut Session) -> Result<ModelInfo, ModelError> {
    one_input_one_output(path, session)?;
    let (ins, outs) = (session.inputs(), session.outputs());
    let (input_name, output_name) = (ins[0].name().to_string(), outs[0].name().to_string());
    let in_dims = info::image_dims(path, "input", &input_name, ins[0].dtype())?;
    let out_dims = info::image_dims(path, "output", &output_name, outs[0].dtype())?;
    let static_scale = match (
        info::both(in_dims.height, in_dims.width),
        info::both(out_dims.height, out_dims.width),
    ) {
        (Some(i), Some(o)) => Some(info::scale_from_sizes(path, i, o)?),
        _ => None,
    };
    let metadata_scale = session
        .metadata()
        .map_err(|e| ModelError::Invalid {
            path: path.to_path_buf(),
            reason: format!("cannot read metadata: {e}"),
        })?
        .custom(SCALE_KEY);
    let (scale, scale_source) = match known_scale(path, metadata_scale, static_scale)? {
        Some(known) => known,
        None => (
            probe_scale(path, session, &input_name, in_dims)?,
            ScaleSource::ShapeProbe,
        ),
    };
    Ok(ModelInfo {
        path: path.to_path_buf(),
        input_name,
        output_name,
        scale,
        channels: IMAGE_CHANNELS,
        scale_source,
        input_height: in_dims.height,
        input_width: in_dims.width,
    })
}

/// An upscaler has exactly one input and one output; the error lists what the model has.
fn one_input_one_output(path: &Path, session: &Session) -> Result<(), ModelError> {
    let names = |outlets: &[ort::value::Outlet]| {
        outlets
            .iter()
            .map(|o| format!("'{}'", o.name()))
            .collect::<Vec<_>>()
    };
    let (ins, outs) = (session.inputs(), session.outputs());
    if ins.len() == 1 && outs.len() == 1 {
        return Ok(());
    }
    let temporal = session
        .metadata()
        .ok()
        .and_then(|m| m.custom(KIND_KEY))
        .is_some_and(|kind| kind == TEMPORAL_KIND);
    if temporal {
        return Err(ModelError::Temporal {
            path: path.to_path_buf(),
        });
    }
    Err(ModelError::NotImage {
        path: path.to_path_buf(),
        found: format!(
            "it has {} input(s) [{}] and {} output(s) [{}]",
            ins.len(),
            names(ins).join(", "),
            outs.len(),
            names(outs).join(", ")
        ),
    })
}

/// The scale from the metadata (checked against static shapes where both exist) or from the
/// static shapes; None when neither gives it and the model must be probed.
fn known_scale(
    path: &Path,
    metadata: Option<String>,
    static_scale: Option<u32>,
) -> Result<Option<(u32, ScaleSource)>, ModelError> {
    let Some(value) = metadata else {
        return Ok(static_scale.map(|s| (s, ScaleSource::ShapeProbe)));
    };
    let scale = info::parse_scale(path, &value)?;
    if let Some(shape_scale) = static_scale.filter(|&s| s != scale) {
        return Err(ModelError::Scale {
            path: path.to_path_buf(),
            reason: format!(
                "metadata '{SCALE_KEY}' says {scale} but the tensor shapes give {shape_scale}; fix the metadata"
            ),
        });
    }
    Ok(Some((scale, ScaleSource::Metadata)))
}

/// Runs the model once on zeros and compares the output size with the input size.
fn probe_scale(
    path: &Path,
    session: &mut Session,
    input_name: &str,
    dims: info::ImageDims,
) -> Result<u32, ModelError> {
    let h = dims.height.unwrap_or(PROBE_SIZE);
    let w = dims.width.unwrap_or(PROBE_SIZE);
    let shape = [1, IMAGE_CHANNELS as usize, h as usize, w as usize];
    let zeros = vec![0.0f32; shape.iter().product()];
    let probe_err = |e: ort::Error| ModelError::Scale {
        path: path.to_path_buf(),
        reason: format!(
            "the shape probe (running input '{input_name}' on a {w}x{h} zero image) failed: {e}; \
             add metadata '{SCALE_KEY}' to the model"
        ),
    };
    let input = TensorRef::from_array_view((shape, zeros.as_slice())).map_err(probe_err)?;
    let outputs = session.run(ort::inputs![input]).map_err(probe_err)?;
    let (out_shape, _) = outputs[0].try_extract_tensor::<f32>().map_err(probe_err)?;
    let out_hw = (out_shape.len() == 4)
        .then(|| {
            (
                u32::try_from(out_shape[2]).ok(),
                u32::try_from(out_shape[3]).ok(),
            )
        })
        .and_then(|(oh, ow)| info::both(oh, ow));
    match out_hw {
        Some(o) => info::scale_from_sizes(path, (h, w), o),
        None => Err(ModelError::Scale {
            path: path.to_path_buf(),
            reason: format!("the shape probe produced output shape {out_shape:?}, expected rank 4"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_scale_wins_and_must_agree_with_static_shapes() {
        let p = Path::new("m.onnx");
        let meta = || Some("2".to_string());
        assert_eq!(
            known_scale(p, meta(), None).unwrap(),
            Some((2, ScaleSource::Metadata))
        );
        assert_eq!(
            known_scale(p, meta(), Some(2)).unwrap(),
            Some((2, ScaleSource::Metadata))
        );
        let err = known_scale(p, meta(), Some(3)).unwrap_err().to_string();
        assert!(err.contains("says 2") && err.contains("give 3"), "{err}");
        assert!(known_scale(p, Some("two".into()), None).is_err());
    }

    #[test]
    fn without_metadata_static_shapes_give_the_scale_or_a_probe_is_needed() {
        let p = Path::new("m.onnx");
        assert_eq!(
            known_scale(p, None, Some(4)).unwrap(),
            Some((4, ScaleSource::ShapeProbe))
        );
        assert_eq!(known_scale(p, None, None).unwrap(), None);
    }
}
