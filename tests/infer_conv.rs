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

// ---- Conv -> Conv chains (the fast path's one-dispatch pairs) --------------------------------

/// One conv of a chain test: output channels, kernel, pads [top, left, bottom, right] and the
/// activation after it (op type and attributes; None: none).
struct ChainConv {
    m: usize,
    k: [usize; 2],
    pads: [usize; 4],
    act: Option<(&'static str, Vec<(&'static str, A)>)>,
}

/// Two convs in a row (the second reads only the first's activated output; `extra_reader`:
/// an Add reads it too, so the pair must not chain) on a c × h × w input.
fn chain_model(
    c: usize,
    [h, w]: [usize; 2],
    convs: [ChainConv; 2],
    extra_reader: bool,
) -> (onnx_protobuf::ModelProto, Vec<f32>) {
    let mut nodes = Vec::new();
    let mut inits = Vec::new();
    let mut input = "x".to_string();
    let mut channels = c;
    for (i, conv) in convs.into_iter().enumerate() {
        let (wn, bn, cn) = (format!("w{i}"), format!("b{i}"), format!("c{i}"));
        let wshape = [conv.m, channels, conv.k[0], conv.k[1]];
        inits.push(floats(
            &wn,
            &wshape,
            &random(wshape.iter().product(), 10 + i as u64, -0.4, 0.4),
        ));
        inits.push(floats(
            &bn,
            &[conv.m],
            &random(conv.m, 20 + i as u64, -0.3, 0.3),
        ));
        let attrs = vec![
            (
                "kernel_shape",
                A::Is(Box::leak(
                    conv.k.map(|v| v as i64).to_vec().into_boxed_slice(),
                )),
            ),
            ("pads", pads_attr(conv.pads)),
        ];
        let out = format!("y{i}");
        let conv_out = if conv.act.is_some() {
            cn.clone()
        } else {
            out.clone()
        };
        nodes.push(node(
            "Conv",
            &format!("conv{i}"),
            &[input.as_str(), wn.as_str(), bn.as_str()],
            &[conv_out.as_str()],
            attrs,
        ));
        if let Some((op, a)) = conv.act {
            nodes.push(node(
                op,
                &format!("act{i}"),
                &[cn.as_str()],
                &[out.as_str()],
                a,
            ));
        }
        input = out;
        channels = conv.m;
    }
    let output = if extra_reader {
        // y0 + y1 (the pair keeps the first conv's shape: 3x3 with pads 1 both times).
        nodes.push(node("Add", "add", &["y0", "y1"], &["z"], vec![]));
        "z"
    } else {
        "y1"
    };
    let m = model(nodes, &[("x", &[1, c, h, w])], inits, output);
    (m, random(c * h * w, 30, -1.0, 1.0))
}

/// The fast plan's op labels and notes for `m` on this device in `precision` (`coopmat_chains`:
/// chains on the matrix units too).
fn fast_plan(
    m: &onnx_protobuf::ModelProto,
    shape: &[usize],
    precision: upscale_demo::infer::Precision,
    coopmat_chains: bool,
) -> (Vec<String>, Vec<String>) {
    use upscale_demo::infer::{Graph, Plan, PlanOptions};
    let gpu = infer_support::gpu();
    let graph = Graph::from_model(m, "<memory>").unwrap();
    let options = PlanOptions {
        coopmat_chains,
        ..PlanOptions::fast(&gpu.info, precision, false)
    };
    let plan = Plan::with_options(&graph, &[shape.to_vec()], &options).unwrap();
    let labels = plan.ops.iter().map(|op| op.label().to_string()).collect();
    (labels, plan.notes.clone())
}

/// Whether the fast plan runs convs of `precision` on the matrix units here (fp16 on a device
/// with VK_KHR_cooperative_matrix: the GPU machine, never lavapipe).
fn on_matrix_units(precision: upscale_demo::infer::Precision) -> bool {
    let options =
        upscale_demo::infer::PlanOptions::fast(&infer_support::gpu().info, precision, false);
    options.coopmat.is_some()
}

#[test]
fn conv_chains_run_as_one_dispatch_with_the_reference_bits() {
    use upscale_demo::infer::Precision;
    // (input channels, size, the two convs). Every pair fits lavapipe's 32 KB of shared memory
    // in fp32 at 4 rows or more (fused_conv::CHAIN_MIN_ROWS): the fast plan runs each as one
    // dispatch, and `run` checks that its fp32 output has the reference plan's bits (fp16:
    // within 1e-2). Where fp16 runs on the matrix units (a device with
    // VK_KHR_cooperative_matrix), the plan keeps two dispatches and says why (chains are slower
    // there), and with `coopmat_chains` their chain variant runs it as one dispatch (`run`
    // checks its output too).
    let cases = vec![
        // fast_x2's shape: 3x3 3->12 ReLU, 3x3 12->12; odd sizes (partial tiles).
        (
            3,
            [21, 37],
            [
                ChainConv {
                    m: 12,
                    k: [3, 3],
                    pads: [1, 1, 1, 1],
                    act: Some(("Relu", vec![])),
                },
                ChainConv {
                    m: 12,
                    k: [3, 3],
                    pads: [1, 1, 1, 1],
                    act: None,
                },
            ],
        ),
        // 5x5 head, LeakyReLU; a 3x3 reader with asymmetric pads; odd channel counts.
        (
            4,
            [9, 23],
            [
                ChainConv {
                    m: 7,
                    k: [5, 5],
                    pads: [2, 2, 2, 2],
                    act: Some(("LeakyRelu", vec![("alpha", A::F(0.1))])),
                },
                ChainConv {
                    m: 5,
                    k: [3, 3],
                    pads: [1, 0, 0, 1],
                    act: None,
                },
            ],
        ),
        // 1x1 head, an unpadded 3x3 reader (the output shrinks), two tiles across (width
        // 70 > 64).
        (
            8,
            [19, 70],
            [
                ChainConv {
                    m: 8,
                    k: [1, 1],
                    pads: [0, 0, 0, 0],
                    act: None,
                },
                ChainConv {
                    m: 3,
                    k: [3, 3],
                    pads: [0, 0, 0, 0],
                    act: Some(("Clip", vec![("min", A::F(-0.2)), ("max", A::F(0.5))])),
                },
            ],
        ),
        // Rectangular kernels: 3x1 then 1x3, a head that pads only rows, Sigmoid.
        (
            11,
            [5, 9],
            [
                ChainConv {
                    m: 7,
                    k: [3, 1],
                    pads: [1, 0, 1, 0],
                    act: Some(("Sigmoid", vec![])),
                },
                ChainConv {
                    m: 9,
                    k: [1, 3],
                    pads: [0, 1, 0, 1],
                    act: None,
                },
            ],
        ),
    ];
    for (c, size, convs) in cases {
        let what = format!(
            "{c} channels {size:?}, {}x{} -> {}x{}",
            convs[0].k[0], convs[0].k[1], convs[1].k[0], convs[1].k[1]
        );
        let (m, x) = chain_model(c, size, convs, false);
        let shape = [1, c, size[0], size[1]];
        for precision in [Precision::Fp32, Precision::Fp16] {
            if on_matrix_units(precision) {
                // A reader on the matrix units keeps two dispatches and says why; a thin one
                // that runs packed (K < 16: lavapipe's 8x8x8) chains on the packed kernel.
                let (labels, notes) = fast_plan(&m, &shape, precision, false);
                let slower = notes
                    .iter()
                    .any(|n| n.contains("slower than two dispatches"));
                let packed_chain = notes
                    .iter()
                    .any(|n| n.contains("one dispatch for two convs"));
                assert!(
                    (labels.len() == 2 && slower) || (labels.len() == 1 && packed_chain),
                    "{what} {precision}: {labels:?}\n{notes:?}"
                );
            }
            let (labels, notes) = fast_plan(&m, &shape, precision, true);
            if on_matrix_units(precision) {
                println!("{what} {precision}: chained on the matrix units: {labels:?}");
            }
            assert_eq!(labels.len(), 1, "{what} {precision}: {labels:?}\n{notes:?}");
            assert!(labels[0].contains("conv0+conv1"), "{what}: {labels:?}");
            assert!(
                notes
                    .iter()
                    .any(|n| n.contains("one dispatch for two convs")),
                "{what}: {notes:?}"
            );
        }
        // The reference plan (two dispatches) against both fast plans.
        let ran = run(&m, &[(&shape, &x)]);
        assert_eq!(ran.labels.len(), 2, "{what}: {:?}", ran.labels);
    }
}

#[test]
fn conv_pairs_that_cannot_chain_stay_two_dispatches_and_say_why() {
    use upscale_demo::infer::Precision;
    let three = || ChainConv {
        m: 8,
        k: [3, 3],
        pads: [1, 1, 1, 1],
        act: Some(("Relu", vec![])),
    };
    // The first conv's output is read by an Add too (the second conv's residual): it must
    // be stored.
    let (m, x) = chain_model(8, [6, 10], [three(), three()], true);
    let shape = [1, 8, 6, 10];
    let (labels, notes) = fast_plan(&m, &shape, Precision::Fp32, false);
    assert_eq!(
        labels,
        ["Conv+Relu:conv0", "Conv+Relu+Add:conv1"],
        "{notes:?}"
    );
    assert!(!notes.iter().any(|n| n.contains("chain")), "{notes:?}");
    run(&m, &[(&shape, &x)]);
    // 5x5 16->16 twice in fp32: the two tiles need more than lavapipe's 32 KB even one row
    // high; the note says so and gives the bytes.
    let five = || ChainConv {
        m: 16,
        k: [5, 5],
        pads: [2, 2, 2, 2],
        act: None,
    };
    let (m, x) = chain_model(16, [6, 10], [five(), five()], false);
    let shape = [1, 16, 6, 10];
    let (labels, notes) = fast_plan(&m, &shape, Precision::Fp32, false);
    assert_eq!(labels.len(), 2, "{labels:?}\n{notes:?}");
    assert!(
        notes
            .iter()
            .any(|n| n.contains("not chained") && n.contains("bytes of shared memory")),
        "{notes:?}"
    );
    run(&m, &[(&shape, &x)]);
}
