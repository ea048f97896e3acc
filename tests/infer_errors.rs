//! What the in-stream engine says about models it cannot run: the message names the file, the
//! node and its op type, and for an unsupported op the supported list. No GPU needed.

mod infer_support;

use std::path::Path;

use infer_support::{floats, ints, model, node, A};
use onnx_protobuf::TensorProto;
use upscale_demo::infer::{self, Graph, InferError, Plan};

fn plan_error(m: &onnx_protobuf::ModelProto, shape: &[usize]) -> String {
    let graph = Graph::from_model(m, "bad.onnx").unwrap();
    match Plan::new(&graph, &[shape.to_vec()]) {
        Ok(_) => panic!("planned a model that should fail"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn unsupported_op_names_the_node_its_type_and_the_supported_list() {
    let m = model(
        vec![
            node("Relu", "relu1", &["x"], &["r"], vec![]),
            node(
                "Softmax",
                "softmax_7",
                &["r"],
                &["y"],
                vec![("axis", A::I(1))],
            ),
        ],
        &[("x", &[1, 3, 7, 5])],
        vec![],
        "y",
    );
    let msg = plan_error(&m, &[1, 3, 7, 5]);
    for part in [
        "bad.onnx",
        "\"softmax_7\"",
        "Softmax",
        "supported:",
        "Conv",
        "DepthToSpace",
        "Resize",
    ] {
        assert!(msg.contains(part), "{part} missing from: {msg}");
    }
}

#[test]
fn a_reshape_that_is_no_pixel_shuffle_is_unsupported() {
    let m = model(
        vec![node("Reshape", "flatten", &["x", "s"], &["y"], vec![])],
        &[("x", &[1, 3, 7, 5])],
        vec![ints("s", &[1, -1])],
        "y",
    );
    let msg = plan_error(&m, &[1, 3, 7, 5]);
    assert!(
        msg.contains("\"flatten\"") && msg.contains("Reshape") && msg.contains("pixel shuffle"),
        "{msg}"
    );
}

#[test]
fn bad_attributes_and_shapes_name_the_node() {
    let w = floats("w", &[4, 3, 3, 3], &[0.1; 108]);
    let cases: Vec<(Vec<(&str, A)>, &str)> = vec![
        (
            vec![("pads", A::Is(&[1, 1, 1]))],
            "needs 4 values in 0..=2^28",
        ),
        (
            vec![("auto_pad", A::S("SAME_MIDDLE"))],
            "auto_pad SAME_MIDDLE",
        ),
        (vec![("group", A::I(2))], "group=2"),
        (
            vec![("strides", A::Is(&[0, 1]))],
            "strides must be positive",
        ),
        (
            vec![("storage_order", A::I(1))],
            "attribute storage_order is not supported",
        ),
    ];
    for (attrs, expected) in cases {
        let m = model(
            vec![node("Conv", "conv_bad", &["x", "w"], &["y"], attrs)],
            &[("x", &[1, 3, 7, 5])],
            vec![w.clone()],
            "y",
        );
        let msg = plan_error(&m, &[1, 3, 7, 5]);
        assert!(
            msg.contains("\"conv_bad\" (Conv)") && msg.contains(expected),
            "{expected}: {msg}"
        );
    }
    let m = model(
        vec![node("Add", "add_bad", &["x", "c"], &["y"], vec![])],
        &[("x", &[1, 3, 7, 5])],
        vec![floats("c", &[4, 1, 1], &[1.0; 4])],
        "y",
    );
    let msg = plan_error(&m, &[1, 3, 7, 5]);
    assert!(
        msg.contains("\"add_bad\" (Add)") && msg.contains("do not broadcast"),
        "{msg}"
    );
    let m = model(
        vec![node(
            "DepthToSpace",
            "d2s",
            &["x"],
            &["y"],
            vec![("blocksize", A::I(2)), ("mode", A::S("XYZ"))],
        )],
        &[("x", &[1, 12, 7, 5])],
        vec![],
        "y",
    );
    assert!(plan_error(&m, &[1, 12, 7, 5]).contains("mode XYZ is not DCR or CRD"));
}

#[test]
fn dangling_inputs_are_reported_with_the_node() {
    let m = model(
        vec![node("Relu", "lonely", &["nowhere"], &["y"], vec![])],
        &[("x", &[1, 3, 7, 5])],
        vec![],
        "y",
    );
    let msg = plan_error(&m, &[1, 3, 7, 5]);
    assert!(
        msg.contains("\"lonely\"") && msg.contains("\"nowhere\""),
        "{msg}"
    );
}

#[test]
fn malformed_and_missing_files_are_reported_with_the_file() {
    let dir = std::env::temp_dir().join(format!("instream_errors_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let garbage = dir.join("garbage.onnx");
    std::fs::write(
        &garbage,
        (0..4096u32)
            .map(|i| (i * 7919 % 251) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let err = Graph::load(&garbage).err().unwrap();
    assert!(matches!(err, InferError::Parse { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("garbage.onnx") && msg.contains("not a valid ONNX protobuf"),
        "{msg}"
    );

    let missing = dir.join("missing.onnx");
    let msg = Graph::load(&missing).err().unwrap().to_string();
    assert!(
        msg.contains("missing.onnx") && msg.contains("cannot read"),
        "{msg}"
    );

    // A valid protobuf that is no model: no graph.
    std::fs::write(&garbage, []).unwrap();
    let msg = Graph::load(&garbage).err().unwrap().to_string();
    assert!(msg.contains("no graph"), "{msg}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn upscaler_planning_checks_the_image_input() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/test");
    let msg = infer::plan_upscaler(&root.join("one_channel.onnx"), 160, 90)
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("one_channel.onnx") && msg.contains("dimension 1 fixed to 1"),
        "{msg}"
    );
    let msg = infer::plan_upscaler(&root.join("espcn_x2_160x90.onnx"), 100, 90)
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("dimension 3 fixed to 160"), "{msg}");
    let plan = infer::plan_upscaler(&root.join("tiny_x2.onnx"), 160, 90).unwrap();
    assert_eq!(plan.tensors[plan.outputs[0]].shape, vec![1, 3, 180, 320]);
}

/// A file cut short (a failed download or copy) is a parse error naming the file; so is every
/// shorter prefix of a real model, and none of them panics.
#[test]
fn truncated_models_are_parse_errors() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let bytes = std::fs::read(root.join("fast_x2.onnx")).unwrap();
    let msg = infer::plan_from_bytes(&bytes[..bytes.len() / 2], "fast_half.onnx", 8, 6)
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.starts_with("model fast_half.onnx: not a valid ONNX protobuf (")
            && msg.ends_with("check that the file is a complete .onnx model"),
        "{msg}"
    );
    let mut parse_errors = 0;
    for len in (0..bytes.len()).step_by(97) {
        if let Err(InferError::Parse { .. }) =
            infer::plan_from_bytes(&bytes[..len], "cut.onnx", 8, 6)
        {
            parse_errors += 1;
        }
    }
    assert!(
        parse_errors > 10,
        "most prefixes cut a field: {parse_errors}"
    );
    assert!(infer::plan_from_bytes(&bytes, "fast_x2.onnx", 8, 6).is_ok());
}

/// The in-stream engine plans a model with a symbolic channel count for the 3 channels it
/// feeds (the weights decide whether that fits), and names the node when they do not.
#[test]
fn a_dynamic_channel_count_is_bound_to_three() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/test");
    let plan = infer::plan_upscaler(&root.join("dynamic_channels.onnx"), 8, 6).unwrap();
    assert_eq!(plan.tensors[plan.inputs[0]].shape, vec![1, 3, 6, 8]);
    assert_eq!(plan.tensors[plan.outputs[0]].shape, vec![1, 3, 12, 16]);
}

// ---- sizes the fuzzer (fuzz/, docs/reliability.md) found overflowing: now errors -------------

/// A Resize whose `sizes` or `scales` ask for an absurd output: an error naming the node, not a
/// multiply overflow (fuzz finding 1) or a float cast that saturates.
#[test]
fn resize_to_an_absurd_size_is_refused() {
    let resize = |inits: Vec<TensorProto>, inputs: &[&str]| {
        model(
            vec![node("Resize", "r", inputs, &["y"], vec![])],
            &[("x", &[1, 3, 6, 8])],
            inits,
            "y",
        )
    };
    let roi = floats("roi", &[0], &[]);
    let m = resize(
        vec![
            roi.clone(),
            floats("scales", &[0], &[]),
            ints("sizes", &[1, 3, 1 << 40, 1 << 40]),
        ],
        &["x", "roi", "scales", "sizes"],
    );
    let msg = plan_error(&m, &[1, 3, 6, 8]);
    assert!(
        msg.contains("\"r\" (Resize): sizes [1, 3, 1099511627776, 1099511627776] are not usable output sizes"),
        "{msg}"
    );
    let m = resize(
        vec![
            ints("sizes", &[1, 3, 1 << 14, 1 << 15]),
            roi.clone(),
            floats("scales", &[0], &[]),
        ],
        &["x", "roi", "scales", "sizes"],
    );
    let msg = plan_error(&m, &[1, 3, 6, 8]);
    assert!(
        msg.contains(
            "shape [1, 3, 16384, 32768] is larger than the engine's limit of 2^28 elements"
        ),
        "{msg}"
    );
    for bad in [f32::NAN, f32::INFINITY, -2.0, 1e30] {
        let m = resize(
            vec![roi.clone(), floats("scales", &[4], &[1.0, 1.0, bad, 2.0])],
            &["x", "roi", "scales"],
        );
        let msg = plan_error(&m, &[1, 3, 6, 8]);
        assert!(msg.contains("give no usable output size"), "{bad}: {msg}");
    }
}

/// Conv attributes and weights that would overflow or underflow the output-size arithmetic.
#[test]
fn conv_geometry_that_would_overflow_is_refused() {
    let conv = |attrs: Vec<(&str, A)>, w: TensorProto| {
        model(
            vec![node("Conv", "c", &["x", "w"], &["y"], attrs)],
            &[("x", &[1, 3, 6, 8])],
            vec![w],
            "y",
        )
    };
    let w = floats("w", &[1, 3, 3, 3], &[0.1; 27]);
    type Case = (Vec<(&'static str, A)>, TensorProto, &'static str);
    let cases: Vec<Case> =
        vec![
        (
            vec![("dilations", A::Is(&[1 << 62, 1]))],
            w.clone(),
            "dilations must be positive (at most 2^28), got 4611686018427387904",
        ),
        (
            vec![("pads", A::Is(&[0, 0, i64::MAX, 0]))],
            w.clone(),
            "pads [0, 0, 9223372036854775807, 0] needs 4 values in 0..=2^28",
        ),
        (
            vec![("pads", A::Is(&[0, 0, 200_000, 200_000]))],
            floats("w", &[1, 3, 1, 1], &[0.5; 3]),
            "Conv:c: output \"y\": shape [1, 1, 200006, 200008] is larger than the engine's limit",
        ),
        (vec![], floats("w", &[1, 3, 0, 3], &[]), "weight [1, 3, 0, 3] is empty"),
        (
            vec![("group", A::I(1 << 40))],
            w.clone(),
            "group must be positive (at most 2^28)",
        ),
    ];
    for (attrs, w, expected) in cases {
        let msg = plan_error(&conv(attrs, w), &[1, 3, 6, 8]);
        assert!(msg.contains(expected), "{expected}: {msg}");
    }
}

/// DepthToSpace with a blocksize whose square overflows.
#[test]
fn a_huge_blocksize_is_refused() {
    let m = model(
        vec![node(
            "DepthToSpace",
            "d",
            &["x"],
            &["y"],
            vec![("blocksize", A::I(1 << 33))],
        )],
        &[("x", &[1, 12, 6, 8])],
        vec![],
        "y",
    );
    let msg = plan_error(&m, &[1, 12, 6, 8]);
    assert!(
        msg.contains("12 channels are not a multiple of blocksize²"),
        "{msg}"
    );
}

/// An initialiser declaring a shape whose size overflows, over no data.
#[test]
fn a_constant_with_an_overflowing_shape_is_refused() {
    let mut w = TensorProto::new();
    w.name = "w".into();
    w.dims = vec![1 << 40, 1 << 40];
    w.data_type = 1;
    let m = model(
        vec![node("Add", "a", &["x", "w"], &["y"], vec![])],
        &[("x", &[1, 3, 6, 8])],
        vec![w],
        "y",
    );
    let msg = match Graph::from_model(&m, "bad.onnx") {
        Ok(_) => panic!("loaded a constant of 2^80 elements"),
        Err(e) => e.to_string(),
    };
    assert!(
        msg.starts_with(
            "model bad.onnx: tensor \"w\": shape [1099511627776, 1099511627776] is larger than"
        ),
        "{msg}"
    );
}

/// An empty input shape is refused before any op divides by it.
#[test]
fn an_empty_input_shape_is_refused() {
    let m = model(
        vec![node("Relu", "r", &["x"], &["y"], vec![])],
        &[("x", &[1, 3, 6, 8])],
        vec![],
        "y",
    );
    let graph = Graph::from_model(&m, "bad.onnx").unwrap();
    let msg = Plan::new(&graph, &[vec![1, 3, 0, 8]])
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("input \"x\": shape [1, 3, 0, 8] is empty"),
        "{msg}"
    );
}

/// A Reshape → Transpose → Reshape whose targets overflow when multiplied (fuzz finding 2): no
/// pixel shuffle, reported as the unsupported Reshape, not a panic.
#[test]
fn a_reshape_target_that_overflows_is_no_pixel_shuffle() {
    let m = model(
        vec![
            node("Reshape", "r1", &["x", "s1"], &["a"], vec![]),
            node(
                "Transpose",
                "t",
                &["a"],
                &["b"],
                vec![("perm", A::Is(&[0, 1, 4, 2, 5, 3]))],
            ),
            node("Reshape", "r2", &["b", "s2"], &["y"], vec![]),
        ],
        &[("x", &[1, 12, 6, 8])],
        vec![
            ints("s1", &[1, 3, 1 << 40, 1 << 40, 6, -1]),
            ints("s2", &[1, 3, 12, 16]),
        ],
        "y",
    );
    let msg = plan_error(&m, &[1, 12, 6, 8]);
    assert!(msg.contains("\"r1\" has op type Reshape"), "{msg}");
}

/// The committed fuzz seeds (fuzz/seeds/plan_from_bytes: inputs the fuzzer found interesting,
/// minimised) plan or fail with a message; none panics. Plus every prefix of a real model.
#[test]
fn fuzz_seeds_and_model_prefixes_plan_or_fail_cleanly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let seeds: Vec<_> = std::fs::read_dir(root.join("fuzz/seeds/plan_from_bytes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(seeds.len() >= 5, "{seeds:?}");
    let mut outcomes = (0, 0);
    for seed in &seeds {
        let bytes = std::fs::read(seed).unwrap();
        for (w, h) in [(8, 6), (160, 90)] {
            match infer::plan_from_bytes(&bytes, "seed.onnx", w, h) {
                Ok(_) => outcomes.0 += 1,
                Err(e) => {
                    assert!(e.to_string().starts_with("model seed.onnx"), "{e}");
                    outcomes.1 += 1;
                }
            }
        }
    }
    println!("fuzz seeds: {} planned, {} refused", outcomes.0, outcomes.1);
    let skip = std::fs::read(root.join("models/test/skip_x2.onnx")).unwrap();
    for len in 0..skip.len() {
        let _ = infer::plan_from_bytes(&skip[..len], "cut.onnx", 8, 6);
    }
}
