//! The in-stream ops other than Conv (tests/infer_conv.rs) on lavapipe (validation with
//! synchronization checks on) against a naive Rust reference, on odd shapes (7×5, 13
//! channels): activations, broadcasting binary ops, Concat, both DepthToSpace modes and the
//! pixel-shuffle pattern, Identity, Resize nearest/linear. Each test builds a small ONNX model
//! in memory with the onnx-protobuf types, so no Python is needed.
//!
//! Tolerances (max abs): 1e-5 for activations, binary ops and Resize (the same f32 formulas;
//! exp and division may differ in the last bits); 0 for Concat and DepthToSpace (copies).

mod infer_support;

use infer_support::{check, floats, ints, model, node, random, run, A};

const EXACT: f32 = 1e-5;

/// An activation: op type, attributes, reference function.
type ActCase = (
    &'static str,
    Vec<(&'static str, A)>,
    Box<dyn Fn(f32) -> f32>,
);
/// A binary op: op type, reference function.
type BinOp = (&'static str, fn(f32, f32) -> f32);

// ---- element-wise -----------------------------------------------------------------------

#[test]
fn unary_activations_on_their_own() {
    let shape = [1, 13, 7, 5];
    let x = random(13 * 35, 4, -6.0, 6.0);
    let cases: Vec<ActCase> = vec![
        ("Relu", vec![], Box::new(|v: f32| v.max(0.0))),
        (
            "LeakyRelu",
            vec![],
            Box::new(|v: f32| if v < 0.0 { 0.01 * v } else { v }),
        ),
        (
            "Clip",
            vec![("min", A::F(-1.0))],
            Box::new(|v: f32| v.max(-1.0)),
        ),
        (
            "Sigmoid",
            vec![],
            Box::new(|v: f32| 1.0 / (1.0 + (-v).exp())),
        ),
        ("Tanh", vec![], Box::new(|v: f32| v.tanh())),
    ];
    for (op, attrs, f) in cases {
        let m = model(
            vec![node(op, "act", &["x"], &["y"], attrs)],
            &[("x", &shape)],
            vec![],
            "y",
        );
        let ran = run(&m, &[(&shape, &x)]);
        let want: Vec<f32> = x.iter().map(|&v| f(v)).collect();
        check(op, &ran.out, &want, EXACT);
    }
    // Clip with its opset-11 min/max inputs.
    let inits = vec![floats("lo", &[], &[-0.5]), floats("hi", &[], &[2.0])];
    let m = model(
        vec![node("Clip", "clip", &["x", "lo", "hi"], &["y"], vec![])],
        &[("x", &shape)],
        inits,
        "y",
    );
    let want: Vec<f32> = x.iter().map(|v| v.clamp(-0.5, 2.0)).collect();
    check("Clip inputs", &run(&m, &[(&shape, &x)]).out, &want, EXACT);
}

fn broadcast_ref(
    a: &[f32],
    sa: &[usize],
    b: &[f32],
    sb: &[usize],
    out: &[usize],
    f: impl Fn(f32, f32) -> f32,
) -> Vec<f32> {
    let n: usize = out.iter().product();
    let index = |s: &[usize], coords: &[usize]| {
        let off = out.len() - s.len();
        s.iter().enumerate().fold(0, |acc, (d, &len)| {
            acc * len + if len == 1 { 0 } else { coords[off + d] }
        })
    };
    (0..n)
        .map(|i| {
            let mut rest = i;
            let mut coords = vec![0; out.len()];
            for d in (0..out.len()).rev() {
                coords[d] = rest % out[d];
                rest /= out[d];
            }
            f(a[index(sa, &coords)], b[index(sb, &coords)])
        })
        .collect()
}

#[test]
fn binary_ops_with_tensors_and_broadcast_constants() {
    let xs: &[usize] = &[1, 13, 7, 5];
    let x = random(13 * 35, 5, -2.0, 2.0);
    let ops: [BinOp; 5] = [
        ("Add", |a, b| a + b),
        ("Sub", |a, b| a - b),
        ("Mul", |a, b| a * b),
        ("Div", |a, b| a / b),
        ("PRelu", |a, b| if a < 0.0 { a * b } else { a }),
    ];
    let constants: [&[usize]; 4] = [&[13, 1, 1], &[], &[1, 1, 7, 5], &[5]];
    for (op, f) in ops {
        for (k, cs) in constants.iter().enumerate() {
            let n: usize = cs.iter().product();
            let c = random(n, 10 + k as u64, 0.5, 2.0);
            let m = model(
                vec![node(op, "op", &["x", "c"], &["y"], vec![])],
                &[("x", xs)],
                vec![floats("c", cs, &c)],
                "y",
            );
            let ran = run(&m, &[(xs, &x)]);
            let want = broadcast_ref(&x, xs, &c, cs, xs, f);
            check(&format!("{op} x{xs:?} c{cs:?}"), &ran.out, &want, EXACT);
        }
    }
    // Two computed tensors, the second broadcast over channels and from the left.
    let ys: &[usize] = &[1, 1, 7, 5];
    let y = random(35, 6, 0.5, 1.5);
    for (op, f) in ops {
        let m = model(
            vec![node(op, "op", &["y", "x"], &["z"], vec![])],
            &[("x", xs), ("y", ys)],
            vec![],
            "z",
        );
        let ran = run(&m, &[(xs, &x), (ys, &y)]);
        assert_eq!(ran.shape, xs.to_vec());
        check(
            &format!("{op} tensor-tensor"),
            &ran.out,
            &broadcast_ref(&y, ys, &x, xs, xs, f),
            EXACT,
        );
    }
}

// ---- layout ops -------------------------------------------------------------------------

#[test]
fn concat_on_the_channel_axis_and_the_last_axis() {
    let shapes: [&[usize]; 3] = [&[1, 3, 7, 5], &[1, 9, 7, 5], &[1, 1, 7, 5]];
    let data: Vec<Vec<f32>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| random(s.iter().product(), 20 + i as u64, -1.0, 1.0))
        .collect();
    let m = model(
        vec![node(
            "Concat",
            "cat",
            &["a", "b", "c"],
            &["y"],
            vec![("axis", A::I(1))],
        )],
        &[("a", shapes[0]), ("b", shapes[1]), ("c", shapes[2])],
        vec![],
        "y",
    );
    let inputs: Vec<(&[usize], &[f32])> = shapes
        .iter()
        .zip(&data)
        .map(|(s, d)| (*s, d.as_slice()))
        .collect();
    let ran = run(&m, &inputs);
    assert_eq!(ran.shape, vec![1, 13, 7, 5]);
    let want: Vec<f32> = data.concat();
    check("Concat axis 1", &ran.out, &want, 0.0);

    let (sa, sb): (&[usize], &[usize]) = (&[1, 2, 7, 5], &[1, 2, 7, 3]);
    let (a, b) = (random(70, 30, -1.0, 1.0), random(42, 31, -1.0, 1.0));
    let m = model(
        vec![node(
            "Concat",
            "cat",
            &["a", "b"],
            &["y"],
            vec![("axis", A::I(-1))],
        )],
        &[("a", sa), ("b", sb)],
        vec![],
        "y",
    );
    let ran = run(&m, &[(sa, &a), (sb, &b)]);
    let want: Vec<f32> = a
        .chunks(5)
        .zip(b.chunks(3))
        .flat_map(|(x, y)| x.iter().chain(y).copied())
        .collect();
    check("Concat axis -1", &ran.out, &want, 0.0);
}

fn depth_to_space_ref(x: &[f32], c: usize, h: usize, w: usize, b: usize, crd: bool) -> Vec<f32> {
    let oc = c / (b * b);
    let mut out = vec![0.0; c * h * w];
    for co in 0..oc {
        for y in 0..h * b {
            for xx in 0..w * b {
                let (i, j) = (y % b, xx % b);
                let ci = if crd {
                    co * b * b + i * b + j
                } else {
                    (i * b + j) * oc + co
                };
                out[(co * h * b + y) * w * b + xx] = x[(ci * h + y / b) * w + xx / b];
            }
        }
    }
    out
}

#[test]
fn depth_to_space_dcr_and_crd() {
    for (block, c) in [(2, 12), (3, 18)] {
        let shape = [1, c, 7, 5];
        let x = random(c * 35, 40, -1.0, 1.0);
        for mode in ["DCR", "CRD"] {
            let attrs = vec![("blocksize", A::I(block as i64)), ("mode", A::S(mode))];
            let m = model(
                vec![node("DepthToSpace", "d2s", &["x"], &["y"], attrs)],
                &[("x", &shape)],
                vec![],
                "y",
            );
            let ran = run(&m, &[(&shape, &x)]);
            assert_eq!(
                ran.shape,
                vec![1, c / (block * block), 7 * block, 5 * block]
            );
            check(
                &format!("DepthToSpace {mode} x{block}"),
                &ran.out,
                &depth_to_space_ref(&x, c, 7, 5, block, mode == "CRD"),
                0.0,
            );
        }
    }
}

#[test]
fn reshape_transpose_reshape_pixel_shuffle_becomes_depth_to_space() {
    let shape = [1, 12, 7, 5];
    let x = random(12 * 35, 41, -1.0, 1.0);
    let forms: [(&[i64], &'static [i64], bool); 2] = [
        (&[1, 3, 2, 2, 7, 5], &[0, 1, 4, 2, 5, 3], true),
        (&[1, 2, 2, 3, 7, 5], &[0, 3, 4, 1, 5, 2], false),
    ];
    for (s6, perm, crd) in forms {
        let nodes = vec![
            node("Reshape", "r1", &["x", "s6"], &["a"], vec![]),
            node(
                "Transpose",
                "t",
                &["a"],
                &["b"],
                vec![("perm", A::Is(perm))],
            ),
            node("Reshape", "r2", &["b", "s4"], &["y"], vec![]),
        ];
        let inits = vec![ints("s6", s6), ints("s4", &[1, 3, 14, -1])];
        let m = model(nodes, &[("x", &shape)], inits, "y");
        let ran = run(&m, &[(&shape, &x)]);
        assert_eq!(ran.labels, vec!["DepthToSpace:r1".to_string()]);
        assert_eq!(ran.shape, vec![1, 3, 14, 10]);
        check(
            "pixel shuffle",
            &ran.out,
            &depth_to_space_ref(&x, 12, 7, 5, 2, crd),
            0.0,
        );
    }
}

#[test]
fn identity_is_removed() {
    let shape = [1, 3, 7, 5];
    let x = random(105, 42, -1.0, 1.0);
    let nodes = vec![
        node("Identity", "id", &["x"], &["i"], vec![]),
        node("Relu", "relu", &["i"], &["y"], vec![]),
    ];
    let ran = run(
        &model(nodes, &[("x", &shape)], vec![], "y"),
        &[(&shape, &x)],
    );
    assert_eq!(ran.labels, vec!["Relu:relu".to_string()]);
    check(
        "Identity+Relu",
        &ran.out,
        &x.iter().map(|v| v.max(0.0)).collect::<Vec<_>>(),
        0.0,
    );
}

fn source(o: usize, scale: f32, in_len: usize, out_len: usize, coord: &str) -> f32 {
    let o = o as f32;
    match coord {
        "half_pixel" => (o + 0.5) / scale - 0.5,
        "pytorch_half_pixel" if out_len > 1 => (o + 0.5) / scale - 0.5,
        "pytorch_half_pixel" => 0.0,
        "align_corners" if out_len > 1 => o * (in_len - 1) as f32 / (out_len - 1) as f32,
        "align_corners" => 0.0,
        "asymmetric" => o / scale,
        _ => (o + 0.5) / scale,
    }
}

fn resize_ref(
    x: &[f32],
    [nc, ih, iw, oh, ow]: [usize; 5],
    linear: bool,
    coord: &str,
    round: &str,
) -> Vec<f32> {
    let (sh, sw) = (oh as f32 / ih as f32, ow as f32 / iw as f32);
    let nearest = |s: f32, len: usize| {
        let r = match round {
            "round_prefer_ceil" => (s + 0.5).floor(),
            "floor" => s.floor(),
            "ceil" => s.ceil(),
            _ if s - s.floor() == 0.5 => s.floor(),
            _ => (s + 0.5).floor(),
        };
        r.clamp(0.0, (len - 1) as f32) as usize
    };
    let mut out = Vec::with_capacity(nc * oh * ow);
    for p in 0..nc {
        let plane = &x[p * ih * iw..][..ih * iw];
        for oy in 0..oh {
            for ox in 0..ow {
                let sy = source(oy, sh, ih, oh, coord);
                let sx = source(ox, sw, iw, ow, coord);
                if !linear {
                    out.push(plane[nearest(sy, ih) * iw + nearest(sx, iw)]);
                    continue;
                }
                let sy = sy.clamp(0.0, (ih - 1) as f32);
                let sx = sx.clamp(0.0, (iw - 1) as f32);
                let (y0, x0) = (sy as usize, sx as usize);
                let (y1, x1) = ((y0 + 1).min(ih - 1), (x0 + 1).min(iw - 1));
                let (ty, tx) = (sy - y0 as f32, sx - x0 as f32);
                let at = |y: usize, x: usize| plane[y * iw + x];
                let top = at(y0, x0) + (at(y0, x1) - at(y0, x0)) * tx;
                let bottom = at(y1, x0) + (at(y1, x1) - at(y1, x0)) * tx;
                out.push(top + (bottom - top) * ty);
            }
        }
    }
    out
}

#[test]
fn resize_nearest_and_linear() {
    let shape = [1, 13, 7, 5];
    let x = random(13 * 35, 43, -1.0, 1.0);
    let cases: [(&str, &str, &str, [usize; 2]); 7] = [
        ("nearest", "half_pixel", "round_prefer_floor", [14, 10]),
        ("nearest", "asymmetric", "floor", [14, 10]),
        ("nearest", "align_corners", "round_prefer_ceil", [14, 10]),
        ("nearest", "tf_half_pixel_for_nearest", "ceil", [28, 20]),
        ("linear", "half_pixel", "round_prefer_floor", [14, 10]),
        ("linear", "align_corners", "round_prefer_floor", [14, 10]),
        (
            "linear",
            "pytorch_half_pixel",
            "round_prefer_floor",
            [28, 20],
        ),
    ];
    for (mode, coord, round, [oh, ow]) in cases {
        let attrs = vec![
            ("mode", A::S(mode)),
            ("coordinate_transformation_mode", A::S(coord)),
            ("nearest_mode", A::S(round)),
        ];
        let scale = (oh / 7) as f32;
        let inits = vec![
            floats("roi", &[0], &[]),
            floats("scales", &[4], &[1.0, 1.0, scale, scale]),
        ];
        let m = model(
            vec![node(
                "Resize",
                "resize",
                &["x", "roi", "scales"],
                &["y"],
                attrs,
            )],
            &[("x", &shape)],
            inits,
            "y",
        );
        let ran = run(&m, &[(&shape, &x)]);
        assert_eq!(ran.shape, vec![1, 13, oh, ow]);
        let want = resize_ref(&x, [13, 7, 5, oh, ow], mode == "linear", coord, round);
        check(
            &format!("Resize {mode} {coord} {round}"),
            &ran.out,
            &want,
            EXACT,
        );
    }
    // `sizes` instead of `scales`, downscaling by 2.
    let inits = vec![
        floats("roi", &[0], &[]),
        floats("scales", &[0], &[]),
        ints("sizes", &[1, 13, 3, 2]),
    ];
    let attrs = vec![("mode", A::S("linear"))];
    let m = model(
        vec![node(
            "Resize",
            "resize",
            &["x", "roi", "scales", "sizes"],
            &["y"],
            attrs,
        )],
        &[("x", &shape)],
        inits,
        "y",
    );
    let ran = run(&m, &[(&shape, &x)]);
    let want = resize_ref(&x, [13, 7, 5, 3, 2], true, "half_pixel", "");
    check("Resize linear sizes 3x2", &ran.out, &want, EXACT);
}
