import sys, torch, statistics as st
sys.path.insert(0, "tools/train")
import temporal, data
ds = temporal.Sequences("/tmp/probe/ds8", "val")
net = temporal.OrtTemporalNet(sys.argv[1] if len(sys.argv) > 1 else "models/temporal_x2.onnx")
RESET = 24
for s in range(ds.shape[0]):
    prev = None
    per = []
    for t in range(RESET, ds.shape[1]):
        fr = ds.frame(s, t)
        out = temporal.step_frames(net, fr, prev)
        y = temporal.luma(data.to_uint8(out[0])); ref = temporal.luma(data.to_uint8(fr[4][0]))
        per.append(temporal.psnr(torch.mean((y - ref) ** 2).item()))
        prev = out
    print(s, "reset at", RESET, " ".join(f"{v:.2f}" for v in per))
    print(s, "frames 32-47 mean %.2f" % st.mean(per[8:24]), flush=True)
