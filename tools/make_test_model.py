#!/usr/bin/env python3
"""Build the tiny ONNX fixtures used by the Rust model-loading tests.

Writes into models/test/ (relative to the repository root):
  tiny_x2.onnx        3-channel x2 upscaler with `scale` metadata
  no_scale_meta.onnx  identical network without `scale` (scale found by shape probe)
  one_channel.onnx    1-channel variant, must be rejected by the loader
  espcn_x2_160x90.onnx
                      ESPCN-shaped x2 model (conv5x5 3->32 Tanh, conv3x3 32->16 Tanh, conv3x3
                      16->12, pixel shuffle as Reshape->Transpose->Reshape) for a fixed
                      160x90 input: the in-stream engine's lowering and tiling on real shapes
  skip_x2.onnx        dynamic-size x2 model with a skip connection: LeakyRelu, depthwise conv,
                      PRelu, DepthToSpace DCR, Resize linear/nearest, Concat, Sigmoid, Clip,
                      Identity, Add/Sub/Mul/Div with broadcast constants
  softplus_x2.onnx    tiny_x2 with Softplus for ReLU: ONNX Runtime runs it, the in-stream engine
                      has no Softplus (the picker shows in-stream greyed with that reason)
  custom_op_x2.onnx   tiny_x2 followed by an op of an unknown domain (com.example.Sharpen): no
                      runtime can load it
  dynamic_channels.onnx
                      tiny_x2 whose input declares its channel count as a symbol, which the ONNX
                      Runtime loader refuses (it cannot check the 3 channels)
  tiny_x2.in.f32 / tiny_x2.out.f32
                      reference pair (1x3x7x5 -> 1x3x14x10, raw little-endian f32)
                      computed with onnxruntime, so the Rust test needs no Python.

The weights are fixed (RandomState(7)). The network is built so that its output is
roughly the nearest-neighbour upsampled input plus a little learned-looking detail:
conv1 passes the input channels through unchanged (they survive the ReLU because
inputs are in [0, 1]) next to a few random feature channels, and conv2 routes each
pass-through channel to all four sub-pixels of DepthToSpace, plus small noise.

Usage: python3 tools/make_test_model.py [--out models/test]
"""

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 7
OPSET = 17
FEATURES = 8
BLOCK = 2


def build_weights(channels: int, rng: np.random.RandomState):
    w1 = rng.normal(0.0, 0.1, size=(FEATURES, channels, 3, 3)).astype(np.float32)
    b1 = rng.normal(0.0, 0.02, size=(FEATURES,)).astype(np.float32)
    for c in range(channels):
        w1[c] = 0.0
        w1[c, c, 1, 1] = 1.0
        b1[c] = 0.0

    out_ch = channels * BLOCK * BLOCK
    w2 = rng.normal(0.0, 0.02, size=(out_ch, FEATURES, 3, 3)).astype(np.float32)
    b2 = rng.normal(0.0, 0.01, size=(out_ch,)).astype(np.float32)
    # DepthToSpace CRD: output channel c, sub-pixel k comes from input channel c*4 + k.
    for c in range(channels):
        for k in range(BLOCK * BLOCK):
            w2[c * BLOCK * BLOCK + k, c, 1, 1] += 1.0
    return w1, b1, w2, b2


def build_model(
    channels: int,
    with_scale_meta: bool,
    activation: str = "Relu",
    channel_dim="",
    custom_op: bool = False,
) -> onnx.ModelProto:
    rng = np.random.RandomState(seed=SEED)
    w1, b1, w2, b2 = build_weights(channels, rng)

    in_channels = channel_dim or channels
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, in_channels, "height", "width"])
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, channels, "out_height", "out_width"])
    last = "d2s" if custom_op else "output"
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node(activation, ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("DepthToSpace", ["c2"], [last], name="depth_to_space", blocksize=BLOCK, mode="CRD"),
    ]
    opsets = [helper.make_opsetid("", OPSET)]
    if custom_op:
        nodes.append(helper.make_node("Sharpen", [last], ["output"], name="sharpen", domain="com.example"))
        opsets.append(helper.make_opsetid("com.example", 1))
    inits = [numpy_helper.from_array(a, n) for n, a in (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2))]
    graph = helper.make_graph(nodes, "tiny_x2", [inp], [out], initializer=inits)
    model = helper.make_model(graph, opset_imports=opsets, producer_name="make_test_model.py")
    # Keep the IR version loadable by older runtimes too.
    model.ir_version = 8
    meta = {"upscale.input_layout": "NCHW", "upscale.range": "0..1"}
    if with_scale_meta:
        meta["scale"] = str(BLOCK)
    helper.set_model_props(model, meta)
    # The checker knows no com.example ops: the custom-op model is valid protobuf and graph,
    # just not runnable, which is its point.
    onnx.checker.check_model(model, full_check=not custom_op)
    return model


def conv(name, x, w, b, out, **attrs):
    return helper.make_node("Conv", [x, w, b] if b else [x, w], [out], name=name, **attrs)


def build_espcn() -> onnx.ModelProto:
    """ESPCN-shaped: the network the in-stream engine is sized for, at 160x90."""
    rng = np.random.RandomState(seed=21)
    h, w, r = 90, 160, 2
    shapes = {"w1": (32, 3, 5, 5), "w2": (16, 32, 3, 3), "w3": (12, 16, 3, 3)}
    inits = []
    for name, shape in shapes.items():
        fan_in = shape[1] * shape[2] * shape[3]
        inits.append(numpy_helper.from_array(rng.normal(0, 1.0 / np.sqrt(fan_in), shape).astype(np.float32), name))
        inits.append(numpy_helper.from_array(rng.normal(0, 0.05, shape[0]).astype(np.float32), "b" + name[1:]))
    inits.append(numpy_helper.from_array(np.array([1, 3, r, r, h, w], np.int64), "shape6"))
    inits.append(numpy_helper.from_array(np.array([1, 3, h * r, w * r], np.int64), "shape4"))
    nodes = [
        conv("conv1", "input", "w1", "b1", "c1", kernel_shape=[5, 5], pads=[2, 2, 2, 2]),
        helper.make_node("Tanh", ["c1"], ["t1"], name="tanh1"),
        conv("conv2", "t1", "w2", "b2", "c2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Tanh", ["c2"], ["t2"], name="tanh2"),
        conv("conv3", "t2", "w3", "b3", "c3", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Reshape", ["c3", "shape6"], ["r6"], name="ps_reshape1"),
        helper.make_node("Transpose", ["r6"], ["t6"], name="ps_transpose", perm=[0, 1, 4, 2, 5, 3]),
        helper.make_node("Reshape", ["t6", "shape4"], ["output"], name="ps_reshape2"),
    ]
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, h, w])
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, h * r, w * r])
    return finish(helper.make_graph(nodes, "espcn_x2", [inp], [out], initializer=inits))


def build_skip() -> onnx.ModelProto:
    """Dynamic size, a skip connection, and every elementwise op the engine supports."""
    rng = np.random.RandomState(seed=22)
    f = lambda *shape: rng.normal(0, 0.3, shape).astype(np.float32)
    arrays = {
        "w1": f(8, 3, 3, 3), "b1": f(8), "wd": f(8, 1, 3, 3), "bd": f(8), "slope": np.abs(f(8, 1, 1)),
        "w3": f(12, 8, 1, 1), "b3": f(12), "w4": f(3, 6, 1, 1), "b4": f(3),
        "scales": np.array([1, 1, 2, 2], np.float32), "roi": np.zeros(0, np.float32),
        "shift": np.array([0.1, -0.05, 0.0], np.float32).reshape(3, 1, 1),
        "two": np.array(2.0, np.float32), "half": np.array(0.5, np.float32),
        "lo": np.array(0.0, np.float32), "hi": np.array(1.0, np.float32),
    }
    inits = [numpy_helper.from_array(a, n) for n, a in arrays.items()]
    resize = lambda name, x, out, **a: helper.make_node("Resize", [x, "roi", "scales"], [out], name=name, **a)
    nodes = [
        helper.make_node("Identity", ["input"], ["x"], name="identity"),
        conv("conv1", "x", "w1", "b1", "c1", kernel_shape=[3, 3], auto_pad="SAME_UPPER"),
        helper.make_node("LeakyRelu", ["c1"], ["l1"], name="leaky1", alpha=0.1),
        conv("depthwise", "l1", "wd", "bd", "d1", kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=8),
        helper.make_node("PRelu", ["d1", "slope"], ["p1"], name="prelu1"),
        conv("conv3", "p1", "w3", "b3", "c3", kernel_shape=[1, 1]),
        helper.make_node("DepthToSpace", ["c3"], ["y1"], name="d2s", blocksize=2, mode="DCR"),
        resize("up_linear", "x", "y2", mode="linear"),
        helper.make_node("Concat", ["y1", "y2"], ["cat"], name="concat", axis=1),
        conv("conv4", "cat", "w4", "b4", "c4", kernel_shape=[1, 1]),
        helper.make_node("Sigmoid", ["c4"], ["s4"], name="sigmoid"),
        helper.make_node("Sub", ["s4", "shift"], ["s5"], name="sub"),
        helper.make_node("Div", ["s5", "two"], ["s6"], name="div"),
        resize("up_nearest", "x", "n1", mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Mul", ["n1", "half"], ["n2"], name="mul"),
        helper.make_node("Add", ["s6", "n2"], ["sum"], name="add"),
        helper.make_node("Clip", ["sum", "lo", "hi"], ["output"], name="clip"),
    ]
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, "height", "width"])
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, "out_height", "out_width"])
    return finish(helper.make_graph(nodes, "skip_x2", [inp], [out], initializer=inits))


def finish(graph) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="make_test_model.py")
    model.ir_version = 8
    helper.set_model_props(model, {"scale": str(BLOCK)})
    onnx.checker.check_model(model, full_check=True)
    return model


def write_reference(model_path: str, out_dir: str):
    import onnxruntime as ort

    rng = np.random.RandomState(seed=11)
    x = rng.uniform(0.0, 1.0, size=(1, 3, 7, 5)).astype(np.float32)
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    (y,) = sess.run(["output"], {"input": x})
    assert y.shape == (1, 3, 14, 10), y.shape
    x.astype("<f4").tofile(os.path.join(out_dir, "tiny_x2.in.f32"))
    y.astype("<f4").tofile(os.path.join(out_dir, "tiny_x2.out.f32"))
    print(f"reference output range [{y.min():.3f}, {y.max():.3f}]")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(root, "models", "test"))
    ap.add_argument("--no-reference", action="store_true", help="skip the onnxruntime reference pair")
    ap.add_argument("--only", nargs="*", help="write only these fixtures (file names)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    fixtures = {
        "tiny_x2.onnx": build_model(3, True),
        "no_scale_meta.onnx": build_model(3, False),
        "one_channel.onnx": build_model(1, True),
        "espcn_x2_160x90.onnx": build_espcn(),
        "skip_x2.onnx": build_skip(),
        "softplus_x2.onnx": build_model(3, True, activation="Softplus"),
        "custom_op_x2.onnx": build_model(3, True, custom_op=True),
        "dynamic_channels.onnx": build_model(3, True, channel_dim="channels"),
    }
    if args.only:
        fixtures = {k: v for k, v in fixtures.items() if k in args.only}
    for name, model in fixtures.items():
        path = os.path.join(args.out, name)
        onnx.save(model, path)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    if not args.no_reference and "tiny_x2.onnx" in fixtures:
        write_reference(os.path.join(args.out, "tiny_x2.onnx"), args.out)


if __name__ == "__main__":
    main()
