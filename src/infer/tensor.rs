//! Constant tensors (initialisers, Constant nodes) and ONNX `TensorProto` conversion, also used
//! by the `run-model` command for its .pb inputs and outputs.

use onnx_protobuf::tensor_proto::DataType;
use onnx_protobuf::TensorProto;
use protobuf::Enum as _;

/// The most elements a tensor (runtime or constant) and a dimension may have: 2^28, 1 GiB of
/// float32, far above any upscaler's activations (quality_x2's widest at 1920x1080 is 66 M).
/// Shapes within it keep every size, count and index the shaders get inside u32, and the
/// planner's shape arithmetic (a product of two sizes, a size plus pads) inside usize.
pub const MAX_ELEMENTS: usize = 1 << 28;

/// The element count of `shape`, or why the engine will not plan it: a dimension or the
/// product over [`MAX_ELEMENTS`] (a model asking for that much is broken or hostile).
pub fn element_count(shape: &[usize]) -> Result<usize, String> {
    let too_big = || format!("shape {shape:?} is larger than the engine's limit of 2^28 elements");
    shape.iter().try_fold(1usize, |n, &d| {
        (d <= MAX_ELEMENTS)
            .then(|| n.checked_mul(d))
            .flatten()
            .filter(|&n| n <= MAX_ELEMENTS)
            .ok_or_else(too_big)
    })
}

/// [`element_count`] for push constants.
pub fn element_count_u32(shape: &[usize]) -> Result<u32, String> {
    // MAX_ELEMENTS < u32::MAX, so the conversion cannot fail once the count is in range.
    element_count(shape).map(|n| n as u32)
}

/// A constant folded at load time. Float tensors keep `f32` values; integer tensors (shapes,
/// sizes, axes) also keep their exact `i64` values.
#[derive(Clone, Debug, PartialEq)]
pub struct Const {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
    pub ints: Option<Vec<i64>>,
}

impl Const {
    pub fn floats(shape: Vec<usize>, data: Vec<f32>) -> Self {
        Self {
            shape,
            data,
            ints: None,
        }
    }

    /// Integer values (shapes, sizes); float tensors are truncated.
    pub fn as_ints(&self) -> Vec<i64> {
        match &self.ints {
            Some(v) => v.clone(),
            None => self.data.iter().map(|&v| v as i64).collect(),
        }
    }
}

/// Decodes a tensor of the types a model's constants use: float, double, int32, int64 (and the
/// small integer types stored in int32_data). Raw little-endian data or the typed fields.
pub fn from_proto(t: &TensorProto) -> Result<Const, String> {
    let shape = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
        .collect::<Result<Vec<_>, _>>()?;
    let count = element_count(&shape).map_err(|e| format!("tensor \"{}\": {e}", t.name))?;
    if !t.external_data.is_empty() {
        return Err(format!(
            "tensor \"{}\" uses external data, which the engine does not load; save the model with weights inside",
            t.name
        ));
    }
    let raw = &t.raw_data;
    let ty = DataType::from_i32(t.data_type);
    let (data, ints): (Vec<f32>, Option<Vec<i64>>) = match ty {
        Some(DataType::FLOAT) if !raw.is_empty() => (le_chunks(raw, f32::from_le_bytes), None),
        Some(DataType::FLOAT) => (t.float_data.clone(), None),
        Some(DataType::DOUBLE) if !raw.is_empty() => (
            le_chunks(raw, |b: [u8; 8]| f64::from_le_bytes(b) as f32),
            None,
        ),
        Some(DataType::DOUBLE) => (t.double_data.iter().map(|&v| v as f32).collect(), None),
        Some(DataType::INT64) => {
            let v = if raw.is_empty() {
                t.int64_data.clone()
            } else {
                le_chunks(raw, i64::from_le_bytes)
            };
            (v.iter().map(|&x| x as f32).collect(), Some(v))
        }
        Some(DataType::INT32) => {
            let v: Vec<i64> = if raw.is_empty() {
                t.int32_data.iter().map(|&x| x as i64).collect()
            } else {
                le_chunks(raw, |b| i32::from_le_bytes(b) as i64)
            };
            (v.iter().map(|&x| x as f32).collect(), Some(v))
        }
        _ => {
            return Err(format!(
                "tensor \"{}\" has data type {} ; the engine reads float, double, int32 and int64",
                t.name, t.data_type
            ))
        }
    };
    if data.len() != count {
        return Err(format!(
            "tensor \"{}\" has {} values for shape {shape:?} ({count} expected)",
            t.name,
            data.len()
        ));
    }
    Ok(Const { shape, data, ints })
}

fn le_chunks<const N: usize, T>(raw: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
    raw.chunks_exact(N)
        .map(|c| f(c.try_into().expect("chunk of N bytes")))
        .collect()
}

/// A float32 `TensorProto` with raw little-endian data (what `onnx.numpy_helper` writes).
pub fn to_proto(name: &str, shape: &[usize], data: &[f32]) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.to_string();
    t.dims = shape.iter().map(|&d| d as i64).collect();
    t.data_type = DataType::FLOAT as i32;
    t.raw_data = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_and_typed_float_data_decode_alike() {
        let t = to_proto("x", &[2, 3], &[1.0, -2.0, 3.5, 0.0, 5.0, 6.0]);
        let c = from_proto(&t).unwrap();
        assert_eq!(c.shape, vec![2, 3]);
        assert_eq!(c.data, vec![1.0, -2.0, 3.5, 0.0, 5.0, 6.0]);
        let mut typed = TensorProto::new();
        typed.dims = vec![2];
        typed.data_type = DataType::FLOAT as i32;
        typed.float_data = vec![1.5, 2.5];
        assert_eq!(from_proto(&typed).unwrap().data, vec![1.5, 2.5]);
    }

    #[test]
    fn sizes_over_the_limit_are_errors_not_overflows() {
        assert_eq!(element_count(&[1, 3, 90, 160]), Ok(3 * 90 * 160));
        assert_eq!(element_count(&[]), Ok(1));
        assert_eq!(element_count(&[0, 5]), Ok(0));
        for shape in [
            &[MAX_ELEMENTS + 1][..],
            &[0, usize::MAX],
            &[1 << 20, 1 << 20],
            &[1 << 40, 1 << 40, 1 << 40],
        ] {
            let e = element_count(shape).unwrap_err();
            assert!(
                e.ends_with("larger than the engine's limit of 2^28 elements"),
                "{e}"
            );
        }
        // A header declaring a huge shape over no data: an error, not a multiply overflow.
        let mut t = TensorProto::new();
        t.name = "w".into();
        t.dims = vec![1 << 40, 1 << 40];
        t.data_type = DataType::FLOAT as i32;
        let e = from_proto(&t).unwrap_err();
        assert!(
            e.starts_with("tensor \"w\": shape [1099511627776, 1099511627776]"),
            "{e}"
        );
    }

    #[test]
    fn int64_keeps_exact_values_and_wrong_counts_fail() {
        let mut t = TensorProto::new();
        t.dims = vec![3];
        t.data_type = DataType::INT64 as i32;
        t.int64_data = vec![1, -1, 1 << 40];
        assert_eq!(from_proto(&t).unwrap().as_ints(), vec![1, -1, 1 << 40]);
        t.dims = vec![4];
        assert!(from_proto(&t).unwrap_err().contains("3 values"));
    }
}
