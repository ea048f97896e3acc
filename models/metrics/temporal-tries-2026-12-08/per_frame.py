import sys, os, torch
sys.path.insert(0, "tools/train")
import temporal, data
ds = temporal.Sequences("/tmp/probe/ds8", "val")
net = temporal.OrtTemporalNet("models/temporal_x2.onnx")
rows = []
for s in range(ds.shape[0]):
    prev = None
    per = []
    for t in range(ds.shape[1]):
        fr = ds.frame(s, t)
        out = temporal.step_frames(net, fr, prev)
        y = temporal.luma(data.to_uint8(out[0])); ref = temporal.luma(data.to_uint8(fr[4][0]))
        per.append(temporal.psnr(torch.mean((y - ref) ** 2).item()))
        prev = out
    rows.append(per)
    print(s, " ".join(f"{v:.2f}" for v in per), flush=True)
