"""The x2 upscaling networks and their hand-written ONNX export.

Both networks learn a residual on top of a bilinear x2 upsample of the input:

    output = Resize_bilinear(input) + DepthToSpace_CRD(convs(input))

Starting from bilinear (the last conv is initialised near zero) makes the first epochs useful
and spends the parameters on detail, not on reproducing the image.

The ONNX graph is written node by node with onnx.helper instead of torch.onnx.export: the op set
is then exactly what the in-stream engine supports (Conv, Relu, LeakyRelu, DepthToSpace, Resize, Add), the
result does not depend on which exporter a given torch version defaults to (2.9+ default to the
dynamo exporter, which needs onnxscript, absent on the GPU machine), and the naming is ours.
train.py checks the graph against the torch module with onnxruntime.

torch.nn.functional.pixel_shuffle(h, r) puts input channel c*r*r + i*r + j at output channel c,
sub-pixel (i, j): that is ONNX DepthToSpace mode "CRD" (the default "DCR" orders the sub-pixel
index first and would scramble colours).
"""

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

SCALE = 2
OPSET = 17

OUT = 3 * SCALE * SCALE

# (in channels, out channels, kernel[, dilation]) per conv; ReLU between convs, none after the
# last. Every conv keeps the spatial size ("same" padding).
ARCHS = {
    # ESPCN/FSRCNN-class, ~18k parameters: wide and shallow (4 convs).
    "quality": [(3, 32, 5), (32, 32, 3), (32, 16, 3), (16, OUT, 3)],
    # Two 3x3 convs, ~1.6k parameters: meant for ORT's CPU path at 640x360 within ~30 ms.
    "fast": [(3, 12, 3), (12, OUT, 3)],
    # Candidates within ~20k parameters: deeper and thinner (more non-linearity, larger
    # receptive field for the same budget). They use LeakyReLU and He initialisation (see
    # LEAKY): with ReLU and torch's default initialisation, a first sweep on the H200 left all
    # three 8-conv nets stuck at exactly the bilinear base (every unit dead), while the 4-conv
    # `quality` trains fine with either.
    "deep18": [(3, 18, 3)] + [(18, 18, 3)] * 6 + [(18, OUT, 3)],
    "deep16": [(3, 16, 5)] + [(16, 16, 3)] * 7 + [(16, OUT, 3)],
    # deep18 with dilated middle convs: receptive field 31 instead of 17 input pixels.
    "dil18": [(3, 18, 3), (18, 18, 3), (18, 18, 3, 2), (18, 18, 3, 4), (18, 18, 3, 2), (18, 18, 3),
              (18, 18, 3), (18, OUT, 3)],
    # FSRCNN-shaped: extract wide, shrink to 16, map with five 3x3, expand, sub-pixel conv.
    "fsr16": [(3, 40, 5), (40, 16, 1)] + [(16, 16, 3)] * 5 + [(16, 40, 1), (40, OUT, 3)],
    # `quality`'s layers with LeakyReLU and He initialisation: on the mip-biased input the ReLU
    # `quality` net died at initialisation (every unit dead, output = the bilinear base).
    "qleaky": [(3, 32, 5), (32, 32, 3), (32, 16, 3), (16, OUT, 3)],
}


# Negative slope of the LeakyReLU between convs, per arch (absent: ReLU, torch's default init).
LEAKY = {"deep18": 0.1, "deep16": 0.1, "dil18": 0.1, "fsr16": 0.1, "qleaky": 0.1}


def layer(spec):
    """(cin, cout, kernel, dilation) of one ARCHS entry."""
    cin, cout, k = spec[:3]
    return cin, cout, k, (spec[3] if len(spec) > 3 else 1)


class UpscaleNet(torch.nn.Module):
    def __init__(self, arch: str):
        super().__init__()
        self.arch = arch
        self.layers = ARCHS[arch]
        self.convs = torch.nn.ModuleList(
            torch.nn.Conv2d(cin, cout, k, padding=d * (k // 2), dilation=d)
            for cin, cout, k, d in map(layer, self.layers)
        )
        self.leaky = LEAKY.get(arch)
        if self.leaky is not None:
            for conv in self.convs:
                torch.nn.init.kaiming_normal_(conv.weight, a=self.leaky, nonlinearity="leaky_relu")
                torch.nn.init.zeros_(conv.bias)
        last = self.convs[-1]
        with torch.no_grad():
            last.weight.mul_(0.1)
            last.bias.zero_()

    def forward(self, x):
        h = x
        for i, conv in enumerate(self.convs):
            h = conv(h)
            if i + 1 < len(self.convs):
                h = F.relu(h) if self.leaky is None else F.leaky_relu(h, self.leaky)
        base = F.interpolate(x, scale_factor=SCALE, mode="bilinear", align_corners=False)
        return base + F.pixel_shuffle(h, SCALE)


def param_count(net: torch.nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())


def macs_per_output_pixel(arch: str) -> float:
    """Multiply-accumulates per output pixel: the convs run at input resolution (divide by
    SCALE^2), the bilinear base costs 4 per output sample and channel."""
    conv = sum(cin * cout * k * k for cin, cout, k, _ in map(layer, ARCHS[arch]))
    return conv / (SCALE * SCALE) + 4 * 3


def to_onnx(net: UpscaleNet, metadata: dict) -> onnx.ModelProto:
    nodes, inits = [], []
    prev = "input"
    for i, conv in enumerate(net.convs):
        name = f"conv{i + 1}"
        k, d = conv.kernel_size[0], conv.dilation[0]
        w = conv.weight.detach().cpu().numpy().astype(np.float32)
        b = conv.bias.detach().cpu().numpy().astype(np.float32)
        inits += [numpy_helper.from_array(w, f"{name}.weight"), numpy_helper.from_array(b, f"{name}.bias")]
        out = f"{name}_out"
        nodes.append(
            helper.make_node(
                "Conv", [prev, f"{name}.weight", f"{name}.bias"], [out], name=name,
                kernel_shape=[k, k], pads=[d * (k // 2)] * 4, dilations=[d, d],
            )
        )
        prev = out
        if i + 1 < len(net.convs):
            if net.leaky is None:
                nodes.append(helper.make_node("Relu", [prev], [f"relu{i + 1}"], name=f"relu{i + 1}"))
                prev = f"relu{i + 1}"
            else:
                nodes.append(helper.make_node("LeakyRelu", [prev], [f"lrelu{i + 1}"], name=f"lrelu{i + 1}",
                                              alpha=net.leaky))
                prev = f"lrelu{i + 1}"
    nodes.append(
        helper.make_node("DepthToSpace", [prev], ["detail"], name="depth_to_space", blocksize=SCALE, mode="CRD")
    )
    inits.append(numpy_helper.from_array(np.array([1, 1, SCALE, SCALE], np.float32), "resize.scales"))
    # half_pixel + linear = torch's bilinear with align_corners=False; both clamp at borders.
    nodes.append(
        helper.make_node(
            "Resize", ["input", "", "resize.scales"], ["base"], name="bilinear_base",
            mode="linear", coordinate_transformation_mode="half_pixel",
        )
    )
    nodes.append(helper.make_node("Add", ["base", "detail"], ["output"], name="residual_add"))
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, "height", "width"])
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, "out_height", "out_width"])
    graph = helper.make_graph(nodes, f"upscale_x2_{net.arch}", [inp], [out], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tools/train")
    # Loadable by older runtimes too (same as the test fixtures).
    model.ir_version = 8
    helper.set_model_props(model, {k: str(v) for k, v in metadata.items()})
    onnx.checker.check_model(model, full_check=True)
    return model


ALLOWED_OPS = {"Conv", "Relu", "LeakyRelu", "PRelu", "Tanh", "Sigmoid", "Clip", "Add", "Sub", "Mul",
               "Div", "Concat", "DepthToSpace", "Resize", "Identity"}


def check_ops(model: onnx.ModelProto):
    used = {n.op_type for n in model.graph.node}
    extra = used - ALLOWED_OPS
    if extra:
        raise SystemExit(f"the exported graph uses {sorted(extra)}, which the in-stream engine lacks")
