#!/usr/bin/env python3
"""Build the tiny ONNX fixtures used by the Rust model-loading tests.

Writes into models/test/ (relative to the repository root):
  tiny_x2.onnx        3-channel x2 upscaler with `scale` metadata
  no_scale_meta.onnx  identical network without `scale` (scale found by shape probe)
  one_channel.onnx    1-channel variant, must be rejected by the loader
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


def build_model(channels: int, with_scale_meta: bool) -> onnx.ModelProto:
    rng = np.random.RandomState(seed=SEED)
    w1, b1, w2, b2 = build_weights(channels, rng)

    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, channels, "height", "width"])
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, channels, "out_height", "out_width"])
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("DepthToSpace", ["c2"], ["output"], name="depth_to_space", blocksize=BLOCK, mode="CRD"),
    ]
    inits = [numpy_helper.from_array(a, n) for n, a in (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2))]
    graph = helper.make_graph(nodes, "tiny_x2", [inp], [out], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="make_test_model.py")
    # Keep the IR version loadable by older runtimes too.
    model.ir_version = 8
    meta = {"upscale.input_layout": "NCHW", "upscale.range": "0..1"}
    if with_scale_meta:
        meta["scale"] = str(BLOCK)
    helper.set_model_props(model, meta)
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
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    fixtures = {
        "tiny_x2.onnx": build_model(3, True),
        "no_scale_meta.onnx": build_model(3, False),
        "one_channel.onnx": build_model(1, True),
    }
    for name, model in fixtures.items():
        path = os.path.join(args.out, name)
        onnx.save(model, path)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    if not args.no_reference:
        write_reference(os.path.join(args.out, "tiny_x2.onnx"), args.out)


if __name__ == "__main__":
    main()
