//! What the in-stream engine says about models it cannot run: the message names the file, the
//! node and its op type, and for an unsupported op the supported list. No GPU needed.

mod infer_support;

use std::path::Path;

use infer_support::{floats, ints, model, node, A};
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
            "needs 4 non-negative values",
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
