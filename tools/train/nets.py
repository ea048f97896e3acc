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

import copy

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
    # Collapsible (see CollapsibleNet): 5x5 3->16, six 3x3 16->16 with short residuals, a long
    # residual from the first conv's output to the last conv's input, 5x5 16->12. 19,948
    # parameters once collapsed; receptive field 21 input pixels.
    "sesr16": [(3, 16, 5)] + [(16, 16, 3)] * 6 + [(16, OUT, 5)],
    # The same shape, 20 wide and four 3x3 blocks (22,012 parameters: just over the budget).
    "sesr20": [(3, 20, 5)] + [(20, 20, 3)] * 4 + [(20, OUT, 5)],
    # Thinner and deeper: twelve 3x3 blocks 12 wide (20,208 parameters, receptive field 33).
    "sesr12": [(3, 12, 5)] + [(12, 12, 3)] * 12 + [(12, OUT, 5)],
    # Recursive (weight-shared): the middle conv is one set of weights applied REPEAT["rec36"]
    # times, each application a residual block, so depth costs MACs but no parameters
    # (18,336 parameters, receptive field 23, ~24k MACs per output pixel).
    "rec36": [(3, 36, 5), (36, 36, 3), (36, OUT, 3)],
    # Depthwise-separable: width 40 for the budget of width 16 — six depthwise 3x3 (group 40)
    # + pointwise 1x1 pairs between a 5x5 3->40 and a 3x3 40->12 (19,612 parameters, 4,782
    # MACs per output pixel); the middle convs start near the identity (NEAR_IDENTITY).
    "sep40": [(3, 40, 5)] + [(40, 40, 3, 1, 40), (40, 40, 1)] * 6 + [(40, OUT, 3)],
    # A capacity probe, not a candidate: the same shape 64 wide with eight blocks (~307k
    # parameters, 15x the budget) shows how much of the gap to the goal the budget explains.
    "probe64": [(3, 64, 5)] + [(64, 64, 3)] * 8 + [(64, OUT, 5)],
}


# Negative slope of the LeakyReLU between convs, per arch (absent: ReLU, torch's default init).
LEAKY = {"deep18": 0.1, "deep16": 0.1, "dil18": 0.1, "fsr16": 0.1, "qleaky": 0.1, "sesr16": 0.1,
         "sesr20": 0.1, "sesr12": 0.1, "probe64": 0.1, "rec36": 0.1, "sep40": 0.1}

# Plain archs whose middle convs (square: depthwise, or cin == cout) start as the identity plus
# a tenth of their He initialisation, so a deep stack starts near the bilinear base instead of
# dying (the failure seen with deep ReLU nets).
NEAR_IDENTITY = {"sep40"}


@torch.no_grad()
def near_identity_(conv: torch.nn.Conv2d):
    w = conv.weight
    if w.shape[0] != w.shape[1] * conv.groups:
        return
    w.mul_(0.1)
    k = w.shape[-1] // 2
    if conv.groups == 1:
        w[:, :, k, k] += torch.eye(w.shape[0], dtype=w.dtype)
    else:
        w[:, 0, k, k] += 1.0

# Architectures trained as CollapsibleNet: the width each conv expands to while training.
COLLAPSIBLE = {"sesr16": 64, "sesr20": 64, "sesr12": 64, "probe64": 64, "rec36": 64}

# Collapsible architectures whose middle convs (every conv but the first and the last) are applied
# this many times in a row with the same weights.
REPEAT = {"rec36": 8}


def conv_sequence(arch: str) -> list:
    """Indices into ARCHS[arch] in the order the convs run (a shared conv appears repeatedly)."""
    n = len(ARCHS[arch])
    return [0] + list(range(1, n - 1)) * REPEAT.get(arch, 1) + [n - 1]


def layer(spec):
    """(cin, cout, kernel, dilation, groups) of one ARCHS entry."""
    cin, cout, k = spec[:3]
    return cin, cout, k, (spec[3] if len(spec) > 3 else 1), (spec[4] if len(spec) > 4 else 1)


class PlainNet(torch.nn.Module):
    """The exported graph of any `arch` as a torch module, for inference on weights read back
    from an ONNX file (tools/reference/): plain convs in conv_sequence order, the long residual
    of collapsible archs, the bilinear base."""

    def __init__(self, arch: str):
        super().__init__()
        self.arch = arch
        self.leaky = LEAKY.get(arch)
        self.long_skip = arch in COLLAPSIBLE
        self.convs = torch.nn.ModuleList(
            torch.nn.Conv2d(cin, cout, k, padding=d * (k // 2), dilation=d, groups=g)
            for cin, cout, k, d, g in map(layer, ARCHS[arch])
        )

    def forward(self, x):
        h, skip = x, None
        sequence = conv_sequence(self.arch)
        for i, c in enumerate(sequence):
            if self.long_skip and i + 1 == len(sequence):
                h = h + skip
            h = self.convs[c](h)
            if i + 1 < len(sequence):
                h = F.relu(h) if self.leaky is None else F.leaky_relu(h, self.leaky)
            if i == 0:
                skip = h
        base = F.interpolate(x, scale_factor=SCALE, mode="bilinear", align_corners=False)
        return base + F.pixel_shuffle(h, SCALE)

    def export_convs(self):
        """(weight, bias, dilation) of every conv of the exported graph, as float32 arrays."""
        return [(c.weight.detach().cpu().numpy().astype(np.float32),
                 c.bias.detach().cpu().numpy().astype(np.float32), c.dilation[0]) for c in self.convs]


def from_onnx(path: str) -> PlainNet:
    """The exported graph of an ONNX file written by to_onnx, as a PlainNet holding its weights
    (its arch from the metadata `upscale.arch`)."""
    model = onnx.load(path)
    meta = {p.key: p.value for p in model.metadata_props}
    arch = meta.get("upscale.arch")
    if arch not in ARCHS:
        raise SystemExit(f"{path}: metadata upscale.arch={arch!r} is not one of {sorted(ARCHS)}")
    net = PlainNet(arch)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    with torch.no_grad():
        for i, conv in enumerate(net.convs):
            for part in ("weight", "bias"):
                name = f"conv{i + 1}.{part}"
                if name not in inits:
                    raise SystemExit(f"{path}: no initializer {name} (is it a tools/train export?)")
                value = torch.from_numpy(inits[name].copy())
                if value.shape != getattr(conv, part).shape:
                    raise SystemExit(f"{path}: {name} is {tuple(value.shape)}, {arch} wants "
                                     f"{tuple(getattr(conv, part).shape)}")
                getattr(conv, part).copy_(value)
    return net


class UpscaleNet(PlainNet):
    """The training module of a plain arch: PlainNet with the initialisation training wants."""

    def __init__(self, arch: str):
        super().__init__(arch)
        if self.leaky is not None:
            for conv in self.convs:
                torch.nn.init.kaiming_normal_(conv.weight, a=self.leaky, nonlinearity="leaky_relu")
                torch.nn.init.zeros_(conv.bias)
        if arch in NEAR_IDENTITY:
            for conv in self.convs[1:-1]:
                near_identity_(conv)
        last = self.convs[-1]
        with torch.no_grad():
            last.weight.mul_(0.1)
            last.bias.zero_()


class CollapsibleNet(torch.nn.Module):
    """Trains an over-parameterised net that exports as plain convs (the SESR idea).

    Each conv of ARCHS[arch] is, while training, a linear block: a kxk conv from cin to E
    channels (E = COLLAPSIBLE[arch]) followed by a 1x1 conv from E to cout, plus the identity
    where cin == cout (a short residual, inside the activation). The block is linear, so it
    collapses into one kxk conv: weight W2·W1 with the identity added at the kernel centre,
    bias W2·b1 + b2. The forward pass runs the collapsed conv, so a training step costs what
    the exported net costs while the optimiser works on the expanded parameters. A long residual
    adds the first conv's activation to the last conv's input; the output is, as in UpscaleNet,
    the bilinear base plus the sub-pixel residual.
    """

    long_skip = True
    _identities = {}

    def __init__(self, arch: str, layers=None, leaky=None, expand=None):
        """`layers`, `leaky` and `expand` default to ARCHS, LEAKY and COLLAPSIBLE of `arch`
        (the temporal nets of temporal.py give their own)."""
        super().__init__()
        self.arch = arch
        self.layers = ARCHS[arch] if layers is None else layers
        self.leaky = LEAKY[arch] if leaky is None else leaky
        expand = COLLAPSIBLE[arch] if expand is None else expand
        self.expand = torch.nn.ModuleList()
        self.project = torch.nn.ModuleList()
        for i, (cin, cout, k, d, g) in enumerate(map(layer, self.layers)):
            if d != 1 or g != 1:
                raise ValueError(f"{arch}: collapsible convs are neither dilated nor grouped")
            first = torch.nn.Conv2d(cin, expand, k, padding=k // 2)
            second = torch.nn.Conv2d(expand, cout, 1)
            torch.nn.init.kaiming_normal_(first.weight, a=self.leaky, nonlinearity="leaky_relu")
            torch.nn.init.kaiming_normal_(second.weight, nonlinearity="linear")
            torch.nn.init.zeros_(first.bias)
            torch.nn.init.zeros_(second.bias)
            with torch.no_grad():
                # Residual blocks start near the identity, the last conv near zero (bilinear).
                if cin == cout or i + 1 == len(self.layers):
                    second.weight.mul_(0.1)
            self.expand.append(first)
            self.project.append(second)

    def collapsed(self, i: int):
        """Weight and bias of linear block i as one kxk conv: one matrix product for the weight,
        one for the bias, and the identity at the kernel centre for a residual block (a few
        operations, since a training step's time on a GPU is mostly their count)."""
        first, second = self.expand[i], self.project[i]
        w2 = second.weight.flatten(1)
        w1 = first.weight
        w = (w2 @ w1.flatten(1)).view(w2.shape[0], *w1.shape[1:])
        b = torch.addmv(second.bias, w2, first.bias)
        if w.shape[0] == w.shape[1]:
            w = w + self.centre_identity(w)
        return w, b

    @staticmethod
    def centre_identity(w: torch.Tensor) -> torch.Tensor:
        """The identity as a kxk conv weight shaped like w (cout == cin), cached per shape,
        dtype and device."""
        key = (tuple(w.shape), w.dtype, w.device)
        eye = CollapsibleNet._identities.get(key)
        if eye is None:
            k = w.shape[-1]
            eye = torch.zeros(w.shape, dtype=w.dtype, device=w.device)
            eye[:, :, k // 2, k // 2] = torch.eye(w.shape[0], dtype=w.dtype, device=w.device)
            CollapsibleNet._identities[key] = eye
        return eye

    def convs(self, h, sequence=None):
        """The collapsed convs over `h` in `sequence` order (default conv_sequence(arch)), with
        the activations and the long residual: the sub-pixel residual before DepthToSpace."""
        skip = None
        last = len(self.layers) - 1
        # The collapse (a product of weights) stays fp32 under a bf16 autocast; the convs follow it.
        with torch.autocast(h.device.type, enabled=False):
            collapsed = [self.collapsed(i) for i in range(len(self.layers))]
        for i in conv_sequence(self.arch) if sequence is None else sequence:
            w, b = collapsed[i]
            if i == last:
                h = h + skip
            h = F.conv2d(h, w, b, padding=w.shape[-1] // 2)
            if i < last:
                h = F.leaky_relu(h, self.leaky)
            if i == 0:
                skip = h
        return h

    def forward(self, x):
        base = F.interpolate(x, scale_factor=SCALE, mode="bilinear", align_corners=False)
        return base + F.pixel_shuffle(self.convs(x), SCALE)

    @torch.no_grad()
    def export_convs(self):
        # Collapsed in float64 on the CPU: on a GPU the product could run in TF32.
        exact = copy.deepcopy(self).to("cpu", torch.float64)
        out = []
        for i in range(len(self.layers)):
            w, b = exact.collapsed(i)
            out.append((w.numpy().astype(np.float32), b.numpy().astype(np.float32), 1))
        return out


def build(arch: str) -> torch.nn.Module:
    """The training module of `arch`."""
    return CollapsibleNet(arch) if arch in COLLAPSIBLE else UpscaleNet(arch)


def param_count(net: torch.nn.Module) -> int:
    """Parameters of the exported graph (a CollapsibleNet trains many more)."""
    return sum(w.size + b.size for w, b, _ in net.export_convs())


def macs_per_output_pixel(arch: str) -> float:
    """Multiply-accumulates per output pixel: the convs run at input resolution (divide by
    SCALE^2), the bilinear base costs 4 per output sample and channel."""
    specs = [layer(ARCHS[arch][i]) for i in conv_sequence(arch)]
    conv = sum(cin // g * cout * k * k for cin, cout, k, _, g in specs)
    return conv / (SCALE * SCALE) + 4 * 3


def to_onnx(net: torch.nn.Module, metadata: dict) -> onnx.ModelProto:
    nodes, inits = [], []
    prev, skip = "input", None
    convs = net.export_convs()
    # A conv shared by several applications (REPEAT) is one initializer used by several nodes.
    for j, w_name in enumerate(f"conv{c + 1}" for c in range(len(convs))):
        w, b, _ = convs[j]
        inits += [numpy_helper.from_array(w, f"{w_name}.weight"), numpy_helper.from_array(b, f"{w_name}.bias")]
    sequence = conv_sequence(net.arch)
    for i, c in enumerate(sequence):
        w, _, d = convs[c]
        group = layer(ARCHS[net.arch][c])[4]
        name = f"conv{i + 1}"
        k = w.shape[-1]
        if net.long_skip and i + 1 == len(sequence):
            nodes.append(helper.make_node("Add", [prev, skip], ["long_skip"], name="long_skip"))
            prev = "long_skip"
        out = f"{name}_out"
        nodes.append(
            helper.make_node(
                "Conv", [prev, f"conv{c + 1}.weight", f"conv{c + 1}.bias"], [out], name=name,
                kernel_shape=[k, k], pads=[d * (k // 2)] * 4, dilations=[d, d],
                **({"group": group} if group != 1 else {}),
            )
        )
        prev = out
        if i + 1 < len(sequence):
            if net.leaky is None:
                nodes.append(helper.make_node("Relu", [prev], [f"relu{i + 1}"], name=f"relu{i + 1}"))
                prev = f"relu{i + 1}"
            else:
                nodes.append(helper.make_node("LeakyRelu", [prev], [f"lrelu{i + 1}"], name=f"lrelu{i + 1}",
                                              alpha=net.leaky))
                prev = f"lrelu{i + 1}"
        if i == 0:
            skip = prev
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
