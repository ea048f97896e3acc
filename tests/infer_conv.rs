//! Conv on lavapipe (validation with synchronization checks on) against a naive f64 Rust
//! reference: 13 channels on 7×5 with border padding, stride 2 with dilation 2 and asymmetric
//! pads, groups and depthwise, every auto_pad mode, a kernel too large for the shared-memory
//! tile, and every activation fused as the epilogue.
//!
//! Tolerance: 2e-5 max abs (f32 sums over up to 13×25 taps, in another order than the f64
//! reference).

mod infer_support;

use infer_support::{check, floats, model, node, random, run, Ran, A};

const CONV: f32 = 2e-5;

/// An activation: op type, attributes, reference function.
type ActCase = (
    &'static str,
    Vec<(&'static str, A)>,
    Box<dyn Fn(f32) -> f32>,
);

struct ConvCase {
    c: usize,
    h: usize,
    w: usize,
    m: usize,
    k: [usize; 2],
    stride: [usize; 2],
    dil: [usize; 2],
    pads: [usize; 4],
    group: usize,
    bias: bool,
}

fn conv_ref(case: &ConvCase, x: &[f32], wt: &[f32], b: &[f32]) -> (Vec<f32>, [usize; 2]) {
    let [kh, kw] = case.k;
    let span = |a: usize| (case.k[a] - 1) * case.dil[a] + 1;
    let oh = (case.h + case.pads[0] + case.pads[2] - span(0)) / case.stride[0] + 1;
    let ow = (case.w + case.pads[1] + case.pads[3] - span(1)) / case.stride[1] + 1;
    let (cg, mg) = (case.c / case.group, case.m / case.group);
    let mut out = vec![0.0; case.m * oh * ow];
    for m in 0..case.m {
        let g = m / mg;
        for oy in 0..oh {
            for ox in 0..ow {
                let mut s = if case.bias { b[m] as f64 } else { 0.0 };
                for ci in 0..cg {
                    let c = g * cg + ci;
                    for ky in 0..kh {
                        for kx in 0..kw {
                            let iy = (oy * case.stride[0] + ky * case.dil[0]) as isize
                                - case.pads[0] as isize;
                            let ix = (ox * case.stride[1] + kx * case.dil[1]) as isize
                                - case.pads[1] as isize;
                            if iy < 0 || ix < 0 || iy >= case.h as isize || ix >= case.w as isize {
                                continue;
                            }
                            let xv = x[(c * case.h + iy as usize) * case.w + ix as usize] as f64;
                            let wv = wt[((m * cg + ci) * kh + ky) * kw + kx] as f64;
                            s += xv * wv;
                        }
                    }
                }
                out[(m * oh + oy) * ow + ox] = s as f32;
            }
        }
    }
    (out, [oh, ow])
}

fn run_conv(
    case: &ConvCase,
    extra: Vec<(&str, A)>,
    activation: Option<(&str, Vec<(&str, A)>)>,
) -> (Ran, Vec<f32>, [usize; 2]) {
    let x = random(case.c * case.h * case.w, 1, -1.0, 1.0);
    let wshape = [case.m, case.c / case.group, case.k[0], case.k[1]];
    let wt = random(wshape.iter().product(), 2, -0.5, 0.5);
    let b = random(case.m, 3, -0.5, 0.5);
    let (want, size) = conv_ref(case, &x, &wt, &b);
    let mut attrs = vec![
        (
            "kernel_shape",
            A::Is(Box::leak(
                vec![case.k[0] as i64, case.k[1] as i64].into_boxed_slice(),
            )),
        ),
        (
            "strides",
            A::Is(Box::leak(
                case.stride.map(|v| v as i64).to_vec().into_boxed_slice(),
            )),
        ),
        (
            "dilations",
            A::Is(Box::leak(
                case.dil.map(|v| v as i64).to_vec().into_boxed_slice(),
            )),
        ),
        ("group", A::I(case.group as i64)),
    ];
    attrs.extend(extra);
    let mut inputs = vec!["x", "w"];
    let mut inits = vec![floats("w", &wshape, &wt)];
    if case.bias {
        inputs.push("b");
        inits.push(floats("b", &[case.m], &b));
    }
    let conv_out = if activation.is_some() { "c" } else { "y" };
    let mut nodes = vec![node("Conv", "conv", &inputs, &[conv_out], attrs)];
    if let Some((op, a)) = activation {
        nodes.push(node(op, "act", &["c"], &["y"], a));
    }
    let m = model(nodes, &[("x", &[1, case.c, case.h, case.w])], inits, "y");
    let ran = run(&m, &[(&[1, case.c, case.h, case.w], &x)]);
    (ran, want, size)
}

fn pads_attr(p: [usize; 4]) -> A {
    A::Is(Box::leak(p.map(|v| v as i64).to_vec().into_boxed_slice()))
}

// ---- Conv -----------------------------------------------------------------------------------

#[test]
fn conv_3x3_13_channels_7x5_with_border_padding_and_bias() {
    let case = ConvCase {
        c: 13,
        h: 7,
        w: 5,
        m: 13,
        k: [3, 3],
        stride: [1, 1],
        dil: [1, 1],
        pads: [1, 1, 1, 1],
        group: 1,
        bias: true,
    };
    let (ran, want, size) = run_conv(&case, vec![("pads", pads_attr(case.pads))], None);
    assert_eq!(ran.shape, vec![1, 13, size[0], size[1]]);
    check("conv 3x3 13ch", &ran.out, &want, CONV);
}

#[test]
fn conv_stride_2_dilation_2_asymmetric_pads_no_bias() {
    let case = ConvCase {
        c: 5,
        h: 13,
        w: 11,
        m: 9,
        k: [3, 5],
        stride: [2, 2],
        dil: [2, 2],
        pads: [2, 1, 0, 3],
        group: 1,
        bias: false,
    };
    let (ran, want, size) = run_conv(&case, vec![("pads", pads_attr(case.pads))], None);
    assert_eq!(ran.shape, vec![1, 9, size[0], size[1]]);
    check("conv stride 2 dilation 2", &ran.out, &want, CONV);
}

#[test]
fn conv_groups_and_depthwise() {
    let grouped = ConvCase {
        c: 12,
        h: 7,
        w: 5,
        m: 18,
        k: [3, 3],
        stride: [1, 1],
        dil: [1, 1],
        pads: [1, 1, 1, 1],
        group: 3,
        bias: true,
    };
    let (ran, want, _) = run_conv(&grouped, vec![("pads", pads_attr(grouped.pads))], None);
    check("conv groups=3", &ran.out, &want, CONV);
    let depthwise = ConvCase {
        c: 13,
        h: 7,
        w: 5,
        m: 13,
        k: [3, 3],
        stride: [1, 1],
        dil: [1, 1],
        pads: [1, 1, 1, 1],
        group: 13,
        bias: true,
    };
    let (ran, want, _) = run_conv(&depthwise, vec![("pads", pads_attr(depthwise.pads))], None);
    check("conv depthwise", &ran.out, &want, CONV);
}

#[test]
fn conv_auto_pad_same_upper_same_lower_valid() {
    // 7 wide, kernel 4, stride 2: total padding 3 → SAME_UPPER (1, 2), SAME_LOWER (2, 1).
    for (mode, pads) in [
        ("SAME_UPPER", [1, 1, 2, 2]),
        ("SAME_LOWER", [2, 2, 1, 1]),
        ("VALID", [0; 4]),
    ] {
        let case = ConvCase {
            c: 3,
            h: 7,
            w: 7,
            m: 4,
            k: [4, 4],
            stride: [2, 2],
            dil: [1, 1],
            pads,
            group: 1,
            bias: true,
        };
        let (ran, want, size) = run_conv(&case, vec![("auto_pad", A::S(mode))], None);
        assert_eq!(ran.shape, vec![1, 4, size[0], size[1]], "{mode}");
        check(mode, &ran.out, &want, CONV);
    }
}

#[test]
fn conv_kernel_too_large_for_shared_memory_reads_global_memory() {
    let case = ConvCase {
        c: 2,
        h: 20,
        w: 18,
        m: 3,
        k: [17, 17],
        stride: [1, 1],
        dil: [1, 1],
        pads: [8, 8, 8, 8],
        group: 1,
        bias: true,
    };
    let (ran, want, _) = run_conv(&case, vec![("pads", pads_attr(case.pads))], None);
    check("conv 17x17 direct", &ran.out, &want, CONV);
}

#[test]
fn conv_fuses_every_activation() {
    let acts: Vec<ActCase> = vec![
        ("Relu", vec![], Box::new(|v: f32| v.max(0.0))),
        (
            "LeakyRelu",
            vec![("alpha", A::F(0.2))],
            Box::new(|v: f32| if v < 0.0 { 0.2 * v } else { v }),
        ),
        (
            "Clip",
            vec![("min", A::F(-0.3)), ("max", A::F(0.4))],
            Box::new(|v: f32| v.clamp(-0.3, 0.4)),
        ),
        (
            "Sigmoid",
            vec![],
            Box::new(|v: f32| 1.0 / (1.0 + (-v).exp())),
        ),
        ("Tanh", vec![], Box::new(|v: f32| v.tanh())),
    ];
    for (op, attrs, f) in acts {
        let case = ConvCase {
            c: 3,
            h: 7,
            w: 5,
            m: 13,
            k: [3, 3],
            stride: [1, 1],
            dil: [1, 1],
            pads: [1, 1, 1, 1],
            group: 1,
            bias: true,
        };
        let (ran, want, _) = run_conv(
            &case,
            vec![("pads", pads_attr(case.pads))],
            Some((op, attrs)),
        );
        assert_eq!(
            ran.labels,
            vec![format!("Conv+{op}:conv")],
            "fused into one dispatch"
        );
        let want: Vec<f32> = want.into_iter().map(f).collect();
        check(op, &ran.out, &want, CONV);
    }
}
