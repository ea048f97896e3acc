#!/usr/bin/env python3
"""Quick CPU checks of tools/train/temporal.py (no GPU): python3 tools/train/test_temporal.py

- the warp is the identity without motion, moves by the motion, reads the motion of the render
  pixel the jitter names, and commutes with the training's mirror; its Catmull-Rom filter is
  Keys' cubic convolution (a = -0.5) clamped to the edge;
- space-to-depth is DepthToSpace "CRD"'s inverse;
- the history is the output clamped to 0..1 in fp16, with the identity's gradient;
- the export (five inputs, engine op set) matches the torch net in ONNX Runtime;
- runs side by side share one step count (--plan-file); --init starts from an exported model;
- a short training on a generated sequence dataset runs (in fp32 and under bf16 autocast),
  scores and writes model and metrics; fp16 autocast off CUDA is refused with the reason.
"""

import json
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import temporal  # noqa: E402


def test_warp_identity_and_shift():
    torch.manual_seed(0)
    prev = torch.rand(2, 3, 16, 20)
    still = torch.zeros(2, 2, 8, 10)
    jitter = torch.tensor([[0.3, -0.2], [-0.45, 0.1]])
    assert torch.allclose(temporal.warp(prev, still, jitter), prev, atol=1e-6)
    # Content moved right by 1.5 render pixels = 3 output pixels: this frame's pixel x shows
    # what the previous one showed at x - 3.
    motion = torch.zeros(2, 2, 8, 10)
    motion[:, 0] = 1.5
    got = temporal.warp(prev, motion, jitter)
    assert torch.allclose(got[..., 3:], prev[..., :-3], atol=1e-6)
    # Off the left edge: clamped to the edge column.
    assert torch.allclose(got[..., 0], prev[..., 0], atol=1e-6)
    # Half an output pixel: the mean of two neighbours.
    motion[:, 0] = 0.25
    got = temporal.warp(prev, motion, jitter)
    assert torch.allclose(got[..., 1:], 0.5 * (prev[..., 1:] + prev[..., :-1]), atol=1e-6)


def test_warp_reads_the_motion_of_the_jittered_pixel():
    # Output pixel 5 (centre 5.5) is render position 2.75: render pixel 2 with no jitter,
    # pixel 3 with jitter +0.3; only pixel 3 moves.
    prev = torch.arange(12, dtype=torch.float32).view(1, 1, 1, 12).expand(1, 3, 2, 12).contiguous()
    motion = torch.zeros(1, 2, 1, 6)
    motion[0, 0, 0, 3] = 1.0
    plain = temporal.warp(prev, motion, torch.tensor([[0.0, 0.0]]))
    jittered = temporal.warp(prev, motion, torch.tensor([[0.3, 0.0]]))
    assert plain[0, 0, 0, 5] == 5.0, plain[0, 0, 0]
    assert jittered[0, 0, 0, 5] == 3.0, jittered[0, 0, 0]


def test_warp_commutes_with_the_mirror():
    torch.manual_seed(1)
    prev = torch.rand(1, 3, 12, 16)
    motion = 2.0 * torch.randn(1, 2, 6, 8)
    jitter = torch.tensor([[0.2, -0.3]])
    mirrored = temporal.warp(prev.flip(-1), torch.stack([-motion[:, 0], motion[:, 1]], 1).flip(-1),
                             jitter * torch.tensor([[-1.0, 1.0]]))
    assert torch.allclose(mirrored, temporal.warp(prev, motion, jitter).flip(-1), atol=1e-5)


def keys(x):
    """Keys' cubic convolution kernel with a = -0.5 (the Catmull-Rom spline), from its piecewise
    definition: a second writing of temporal.catmull_rom_weights."""
    x = abs(x)
    if x <= 1:
        return 1.5 * x ** 3 - 2.5 * x ** 2 + 1
    return -0.5 * x ** 3 + 2.5 * x ** 2 - 4 * x + 2 if x < 2 else 0.0


def test_catmull_rom_warp_is_keys_cubic_clamped_to_the_edge():
    torch.manual_seed(2)
    prev = torch.rand(1, 3, 6, 8, dtype=torch.float64).float()
    for qx, qy in [(2.75, 2.0), (0.6, 5.4), (7.25, 0.8), (3.5, 3.5), (4.01, 1.99)]:
        got = temporal.catmull_rom(prev, torch.tensor([[[qx]]]), torch.tensor([[[qy]]]))[0, :, 0, 0]
        sx, sy = qx - 0.5, qy - 0.5
        want = torch.zeros(3, dtype=torch.float64)
        for y in range(int(np.floor(sy)) - 1, int(np.floor(sy)) + 3):
            for x in range(int(np.floor(sx)) - 1, int(np.floor(sx)) + 3):
                k = keys(sx - x) * keys(sy - y)
                want += k * prev[0, :, min(max(y, 0), 5), min(max(x, 0), 7)].double()
        assert torch.allclose(got.double(), want, atol=1e-6), (qx, qy, got, want)
    # The warp with the filter: the identity without motion, a whole-pixel shift exact.
    still = torch.zeros(1, 2, 3, 4)
    jitter = torch.tensor([[0.2, -0.1]])
    assert torch.allclose(temporal.warp(prev, still, jitter, "catmull_rom"), prev, atol=1e-6)
    motion = torch.zeros(1, 2, 3, 4)
    motion[:, 1] = 0.5
    got = temporal.warp(prev, motion, jitter, "catmull_rom")
    assert torch.allclose(got[..., 1:, :], prev[..., :-1, :], atol=1e-6)
    try:
        temporal.warp(prev, motion, jitter, "lanczos3")
        raise AssertionError("an unknown filter was taken")
    except ValueError as e:
        assert "lanczos3" in str(e) and "catmull_rom" in str(e)
    # The metadata the export writes for it, and none for the first model's bilinear.
    meta = temporal.history_metadata(True, "catmull_rom")
    assert meta["upscale.history_filter"] == "catmull_rom" and meta["upscale.history_clamp"] == "color_3x3"
    assert "upscale.history_filter" not in temporal.history_metadata(True)
    assert temporal.history_metadata(True)["upscale.history"] == (
        "space_to_depth_crd(clamp(warp(previous output), 3x3 box of color)); reset: bilinear x2 of color")


def test_history_is_the_clamped_output_in_fp16():
    x = torch.tensor([-0.25, 0.1, 1.0 / 3.0, 1.5], requires_grad=True)
    h = temporal.quantize(x)
    want = torch.tensor([0.0, 0.1, 1.0 / 3.0, 1.0]).half().float()
    assert torch.equal(h.detach(), want), h
    # fp16, not 8 bits: 1/3 is kept within 1/2048, not rounded to 85/255.
    assert abs(h[2].item() - 1.0 / 3.0) < 1.0 / 2048
    h.sum().backward()
    assert torch.equal(x.grad, torch.ones(4))


def test_the_clamped_history_stays_in_the_colour_box_of_its_render_pixel():
    # The definition src/upscale/model/temporal.rs and temporal_pre.comp write: per colour, the
    # min and max over the 3x3 render pixels around the one holding the sub-pixel, edge-clamped.
    torch.manual_seed(1)
    color = torch.rand(1, 3, 5, 7)
    history = 2.0 * torch.rand(1, 12, 5, 7) - 0.5
    got = temporal.clamp_history(history, color)
    for y, x in [(0, 0), (2, 3), (4, 6), (0, 5)]:
        box = color[0, :, max(y - 1, 0):y + 2, max(x - 1, 0):x + 2].reshape(3, -1)
        for c in range(3):
            for sub in range(4):
                want = history[0, c * 4 + sub, y, x].clamp(box[c].min(), box[c].max())
                assert got[0, c * 4 + sub, y, x] == want, (y, x, c, sub)
    # A still picture whose history is its own bilinear x2 stays put: it lies in the box.
    up = temporal.reset_history(color)
    assert torch.equal(temporal.clamp_history(up, color), up)


def test_space_to_depth_inverts_depth_to_space():
    x = torch.rand(1, 3, 6, 8)
    s2d = temporal.space_to_depth(x)
    assert s2d.shape == (1, 12, 3, 4)
    # Channel c*4 + i*2 + j holds pixel (2y + i, 2x + j) of colour c.
    assert s2d[0, 1 * 4 + 1 * 2 + 0, 2, 3] == x[0, 1, 5, 6]
    assert torch.equal(torch.nn.functional.pixel_shuffle(s2d, 2), x)


def test_export_matches_torch():
    torch.manual_seed(0)
    for arch in temporal.ARCHS:
        net = temporal.TemporalNet(arch)
        with torch.no_grad():
            for p in net.parameters():
                p.add_(0.05 * torch.randn_like(p))
        model = temporal.to_onnx(net, {"scale": 2, "upscale.arch": arch})
        assert [i.name for i in model.graph.input] == ["color", "depth", "motion", "history", "jitter"]
        frames = (torch.rand(1, 3, 10, 14), torch.rand(1, 1, 10, 14), 3 * torch.randn(1, 2, 10, 14),
                  torch.tensor([[0.25, -0.4]]), None)
        diff = temporal.check_export(model, net, frames)
        assert diff < 1e-4, (arch, diff)
        print(f"{arch}: {sum(w.size + b.size for w, b, _ in net.export_convs())} params, "
              f"{temporal.macs_per_output_pixel(arch):.0f} MACs/output px, ORT vs torch {diff:.1e}")


def write_sequences(root: str, split: str, count: int, frames: int, w: int, h: int, rng):
    """A sequence dataset in `upscale-demo dataset --sequences`' layout: a textured plane
    sliding right by a constant motion (the target is its 2x version)."""
    from PIL import Image

    seqs = []
    for s in range(count):
        d = os.path.join(root, split, f"s{s:04}")
        os.makedirs(d)
        texture = rng.random((2 * h, 4 * w, 3))
        speed = 0.5 * (s + 1)
        records = []
        for t in range(frames):
            x0 = int(round(2 * speed * t))
            hr = (255 * texture[:, x0:x0 + 2 * w]).astype(np.uint8)
            lr = hr.reshape(h, 2, w, 2, 3).mean((1, 3)).astype(np.uint8)
            Image.fromarray(hr).save(os.path.join(d, f"f{t:03}_hr.png"))
            Image.fromarray(lr).save(os.path.join(d, f"f{t:03}_lr.png"))
            motion = np.zeros((h, w, 2), np.float16)
            motion[..., 0] = -speed if t else 0.0
            np.save(os.path.join(d, f"f{t:03}_motion.npy"), motion)
            np.save(os.path.join(d, f"f{t:03}_depth.npy"), np.full((h, w), 0.9, np.float32))
            records.append({"jitter": [0.0, 0.0]})
        seqs.append({"dir": f"{split}/s{s:04}", "name": f"{split} {s}", "frames": records})
    return seqs


def test_training_runs_and_exports():
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as root:
        meta = {"render_size": [24, 16], "output_size": [48, 32],
                "train": write_sequences(root, "train", 2, 6, 24, 16, rng),
                "val": write_sequences(root, "val", 1, 6, 24, 16, rng)}
        with open(os.path.join(root, "dataset.json"), "w") as f:
            json.dump(meta, f)
        out = os.path.join(root, "m", "t.onnx")
        common = ["--data", root, "--out", out, "--arch", "tsr8", "--steps", "6", "--batch", "2",
                  "--patch", "12", "--unroll", "3", "--warm-max", "2", "--warmup", "2", "--device", "cpu",
                  "--eval-every", "0", "--hold-prob", "0.5", "--hold-warm", "3", "--hold", "5"]
        # bf16 autocast: the steps run under it, the scores and the export stay fp32.
        for amp in ("off", "bf16"):
            log = temporal.train(temporal.parse_args(common + ["--amp", amp]))
            assert os.path.exists(out) and log["steps"] == 6, amp
            assert log["onnx_vs_torch_max_abs"] < 1e-4, amp
            with open(os.path.join(root, "m", "t.metrics.json")) as f:
                metrics = json.load(f)
            final = metrics["final"]
            assert final["steady"]["psnr_y"] > 0 and final["steady"]["tpsnr_y"] > 0, amp
            assert final["hold"]["frames"] == 5 and final["hold"]["last_psnr_y"] > 0, amp
            assert len(metrics["evals"]) >= 2, amp  # periodic (every step) and final
            # The export scores as the net: the held-camera score through ONNX Runtime.
            val = temporal.Sequences(root, "val")
            ort_hold = temporal.evaluate_hold(temporal.OrtTemporalNet(out), val, 5)
            assert abs(ort_hold["last_psnr_y"] - final["hold"]["last_psnr_y"]) < 0.05, (ort_hold, final)
        try:
            temporal.train(temporal.parse_args(common + ["--amp", "fp16"]))
            raise AssertionError("--amp fp16 ran on the CPU")
        except SystemExit as e:
            assert "needs a CUDA device" in str(e), e


def test_init_starts_from_the_exported_model():
    torch.manual_seed(3)
    net = temporal.TemporalNet("tsr8").eval()
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.05 * torch.randn_like(p))  # away from the initialisation's zeros
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "m.onnx")
        import onnx
        onnx.save(temporal.to_onnx(net, {"scale": 2, "upscale.arch": "tsr8"}), path)
        other = temporal.TemporalNet("tsr8").eval()
        other.load_onnx(path)
        for (w, b, _), (w2, b2, _) in zip(net.export_convs(), other.export_convs()):
            assert np.abs(w - w2).max() < 1e-6 and np.abs(b - b2).max() < 1e-6
        inputs = [torch.rand(1, c, 6, 8) for _, c, _ in temporal.INPUTS[:4]] + [torch.rand(1, 2)]
        with torch.no_grad():
            diff = (net(*inputs) - other(*inputs)).abs().max().item()
        assert diff < 1e-5, diff
        try:
            temporal.TemporalNet("tsr16").load_onnx(path)
            raise AssertionError("a tsr8 file loaded into tsr16")
        except SystemExit as e:
            assert "upscale.arch" in str(e), e


def test_side_by_side_runs_share_one_step_count():
    with tempfile.TemporaryDirectory() as root:
        plan = os.path.join(root, "plan.txt")
        assert temporal.shared_total(plan, 12300) == (12300, True)
        # A second run that measured another speed still trains the first run's count.
        assert temporal.shared_total(plan, 11800) == (12300, False)
        # A time-budget run plans at step PLAN_AT and then follows the shared file.
        with open(plan, "w") as f:
            f.write("45\n")
        log_dir = os.path.join(root, "d")
        os.makedirs(log_dir)
        rng = np.random.default_rng(1)
        meta = {"render_size": [24, 16], "output_size": [48, 32],
                "train": write_sequences(log_dir, "train", 1, 5, 24, 16, rng),
                "val": write_sequences(log_dir, "val", 1, 5, 24, 16, rng)}
        with open(os.path.join(log_dir, "dataset.json"), "w") as f:
            json.dump(meta, f)
        log = temporal.train(temporal.parse_args([
            "--data", log_dir, "--out", os.path.join(root, "t.onnx"), "--arch", "tsr8", "--steps", "1000",
            "--time-budget", "1000", "--plan-file", plan, "--batch", "1", "--patch", "8", "--unroll", "2",
            "--warm-max", "1", "--warmup", "1", "--device", "cpu", "--eval-every", "1000", "--hold", "0"]))
        assert log["steps"] == 45, log["steps"]


if __name__ == "__main__":
    for name, fn in list(globals().items()):
        if name.startswith("test_"):
            fn()
            print(f"ok {name}")
