//! Recognises the Reshape → Transpose → Reshape form of pixel shuffle that older PyTorch and
//! TensorFlow exports produce, so it runs as one DepthToSpace dispatch instead of 6D transposes.

use super::ops::depth_to_space::Mode;

/// The product of `dims`, None on overflow (reshape targets are the model's numbers).
fn product(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// A Reshape target with ONNX's 0 (copy the input dim) and -1 (infer) resolved.
pub fn reshape_target(input: &[usize], target: &[i64]) -> Option<Vec<usize>> {
    let total = product(input)?;
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &t) in target.iter().enumerate() {
        match t {
            0 => out.push(*input.get(i)?),
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            t if t > 0 => out.push(t as usize),
            _ => return None,
        }
    }
    let known = product(&out)?;
    if let Some(i) = infer {
        if known == 0 || !total.is_multiple_of(known) {
            return None;
        }
        out[i] = total / known;
    }
    (product(&out)? == total).then_some(out)
}

/// (block size, mode) when `x` → Reshape(`s1`) → Transpose(`perm`) → Reshape(`s2`) equals
/// DepthToSpace on the 4D `x`.
pub fn recognise(x: &[usize], s1: &[i64], perm: &[i64], s2: &[i64]) -> Option<(usize, Mode)> {
    let [n, c, h, w] = *x else { return None };
    let mid = reshape_target(x, s1)?;
    let (block, mode) = match perm {
        [0, 1, 4, 2, 5, 3] if mid[2] == mid[3] => (mid[2], Mode::Crd),
        [0, 3, 4, 1, 5, 2] if mid[1] == mid[2] => (mid[1], Mode::Dcr),
        _ => return None,
    };
    let square = block.checked_mul(block)?;
    let depth = c.checked_div(square)?;
    let expected_mid = match mode {
        Mode::Crd => [n, depth, block, block, h, w],
        Mode::Dcr => [n, block, block, depth, h, w],
    };
    if block < 1 || depth.checked_mul(square)? != c || mid != expected_mid {
        return None;
    }
    let transposed = [n, depth, h, block, w, block];
    let out = reshape_target(&transposed, s2)?;
    (out == [n, depth, h.checked_mul(block)?, w.checked_mul(block)?]).then_some((block, mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_targets_resolve_zero_and_minus_one() {
        assert_eq!(
            reshape_target(&[1, 12, 7, 5], &[0, 3, 2, 2, 7, -1]),
            Some(vec![1, 3, 2, 2, 7, 5])
        );
        assert_eq!(reshape_target(&[1, 12, 7, 5], &[1, -1]), Some(vec![1, 420]));
        assert_eq!(reshape_target(&[1, 12, 7, 5], &[1, 8, -1]), None);
        assert_eq!(reshape_target(&[1, 12, 7, 5], &[1, 5, 5]), None);
        assert_eq!(reshape_target(&[1, 12], &[-1, -1]), None);
        // Targets whose product overflows (fuzz finding 2) are no match, not a panic.
        assert_eq!(reshape_target(&[1, 12], &[1 << 40, 1 << 40, -1]), None);
        assert_eq!(reshape_target(&[1, 12], &[1 << 40, 1 << 40, 1 << 40]), None);
    }

    #[test]
    fn both_pixel_shuffle_layouts_are_recognised() {
        let x = [1, 12, 7, 5];
        let crd = recognise(
            &x,
            &[1, 3, 2, 2, 7, 5],
            &[0, 1, 4, 2, 5, 3],
            &[1, 3, 14, 10],
        );
        assert_eq!(crd, Some((2, Mode::Crd)));
        let dcr = recognise(
            &x,
            &[1, 2, 2, 3, 7, 5],
            &[0, 3, 4, 1, 5, 2],
            &[1, 3, 14, -1],
        );
        assert_eq!(dcr, Some((2, Mode::Dcr)));
        // Same reshapes, another permutation: a real transpose, not a pixel shuffle.
        assert_eq!(
            recognise(
                &x,
                &[1, 3, 2, 2, 7, 5],
                &[0, 1, 2, 4, 3, 5],
                &[1, 3, 14, 10]
            ),
            None
        );
        assert_eq!(
            recognise(
                &x,
                &[1, 3, 2, 2, 7, 5],
                &[0, 1, 4, 2, 5, 3],
                &[1, 3, 10, 14]
            ),
            None
        );
    }
}
