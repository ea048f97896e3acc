"""CPU probe: does an aligned current-frame input help? The jittered colour resampled (bilinear)
at each output pixel's unjittered position, space-to-depth (12 channels), appended to the
model's inputs; its first-conv weights start at zero, so the fine-tune starts at the shipped
model exactly. --control runs the same fine-tune without it."""
import sys, os
sys.path.insert(0, "tools/train")
import torch, torch.nn.functional as F, onnx, numpy as np
from onnx import numpy_helper
import temporal as T

control = "--control" in sys.argv
argv = [a for a in sys.argv[1:] if a != "--control"]

def current_up(color, jitter):
    b, _, h, w = color.shape
    oh, ow = 2 * h, 2 * w
    dev = color.device
    ox = torch.arange(ow, device=dev, dtype=torch.float32) + 0.5
    oy = torch.arange(oh, device=dev, dtype=torch.float32) + 0.5
    ux = ox[None, :] * 0.5 + jitter[:, 0, None]
    uy = oy[None, :] * 0.5 + jitter[:, 1, None]
    gx = (2.0 * ux / w - 1.0)[:, None, :].expand(b, oh, ow)
    gy = (2.0 * uy / h - 1.0)[:, :, None].expand(b, oh, ow)
    up = F.grid_sample(color, torch.stack([gx, gy], -1), mode="bilinear", padding_mode="border", align_corners=False)
    return T.space_to_depth(up)

if not control:
    T.INPUTS.append(("current", 12, 1.0))
    T.IN = sum(c for _, c, _ in T.INPUTS)
    T.ARCHS["tsr16c"] = [(T.IN, 16, 3)] + [(16, 16, 3)] * 6 + [(16, T.OUT, 3)]

    def forward(self, color, depth, motion, history, jitter):
        planes = jitter[:, :, None, None].expand(-1, -1, *color.shape[-2:])
        h = torch.cat([color, depth, motion, history, planes, current_up(color, jitter)], 1) * self.scales
        h = self.convs(h, range(len(self.layers)))
        return F.pixel_shuffle(history + h, T.SCALE)
    T.TemporalNet.forward = forward

    # The shipped weights with zero first-conv weights for the new channels.
    m = onnx.load("models/temporal_x2.onnx")
    for t in m.graph.initializer:
        if t.name == "conv1.weight":
            w = numpy_helper.to_array(t)
            w2 = np.concatenate([w, np.zeros((w.shape[0], 12, 3, 3), w.dtype)], 1)
            t.CopyFrom(numpy_helper.from_array(w2, "conv1.weight"))
    for p in m.metadata_props:
        if p.key == "upscale.arch":
            p.value = "tsr16c"
    onnx.save(m, "/tmp/probe/init_c.onnx")
    argv = [a if a != "models/temporal_x2.onnx" else "/tmp/probe/init_c.onnx" for a in argv]
    argv = [a if a != "tsr16" else "tsr16c" for a in argv]

args = T.parse_args(argv)
try:
    T.train(args)
except Exception as e:  # the export of the probe net does not match the 5-input graph
    print(f"probe: no export ({type(e).__name__})", flush=True)
