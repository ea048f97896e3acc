//! What a loaded session is: one image input and one image output, and the scale between them
//! (from the model's metadata, from static shapes, or from one probe run on zeros).

use std::path::Path;

use ort::session::Session;
use ort::value::TensorRef;

use super::info::{self, ModelInfo, ScaleSource, IMAGE_CHANNELS, SCALE_KEY};
use super::{ModelError, PROBE_SIZE};

/// Validates the session's signature and determines the scale.
pub(super) fn inspect(path: &Path, session: &mut Session) -> Result<ModelInfo, ModelError> {
    let not_image = |found: String| ModelError::NotImage {
        path: path.to_path_buf(),
        found,
    };
    let names = |outlets: &[ort::value::Outlet]| {
        outlets
            .iter()
            .map(|o| format!("'{}'", o.name()))
            .collect::<Vec<_>>()
    };
    let (ins, outs) = (session.inputs(), session.outputs());
    if ins.len() != 1 || outs.len() != 1 {
        return Err(not_image(format!(
            "it has {} input(s) [{}] and {} output(s) [{}]",
            ins.len(),
            names(ins).join(", "),
            outs.len(),
            names(outs).join(", ")
        )));
    }
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
    let (scale, scale_source) = match (metadata_scale, static_scale) {
        (Some(value), static_scale) => {
            let scale = info::parse_scale(path, &value)?;
            if let Some(shape_scale) = static_scale.filter(|&s| s != scale) {
                return Err(ModelError::Scale {
                    path: path.to_path_buf(),
                    reason: format!(
                        "metadata '{SCALE_KEY}' says {scale} but the tensor shapes give {shape_scale}; fix the metadata"
                    ),
                });
            }
            (scale, ScaleSource::Metadata)
        }
        (None, Some(scale)) => (scale, ScaleSource::ShapeProbe),
        (None, None) => (
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
