#!/usr/bin/env python3
"""Quick CPU checks of tools/train (no dataset, no GPU): python3 tools/train/test_train.py

- the numpy PNG decoder matches Pillow on every filter type (skipped without Pillow);
- random crops keep low-res and high-res patches aligned;
- the Catmull-Rom reference is exact on constant images and close to Pillow's bicubic;
- both architectures export to ONNX within the allowed op set and match torch (< 1e-4).
"""

import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402
import nets  # noqa: E402
import train  # noqa: E402


def test_png_decoder():
    try:
        from PIL import Image
    except ImportError:
        print("skip png decoder cross-check: Pillow is not installed")
        return
    rng = np.random.RandomState(0)
    img = (rng.rand(23, 31, 3) * 255).astype(np.uint8)
    img[:, :10] = 77
    with tempfile.TemporaryDirectory() as d:
        for i, opts in enumerate([{}, {"optimize": True}, {"compress_level": 1}]):
            path = os.path.join(d, f"{i}.png")
            Image.fromarray(img).save(path, **opts)
            assert (data.read_png_rgb(path) == img).all(), opts
        path = os.path.join(d, "rgba.png")
        Image.fromarray(np.dstack([img, img[:, :, :1]])).save(path)
        assert (data.read_png_rgb(path) == img).all()


def test_load_split_keeps_order_and_skips_a_broken_pair():
    try:
        from PIL import Image
    except ImportError:
        print("skip load_split check: Pillow is not installed")
        return
    rng = np.random.RandomState(1)
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "train"))
        frames = []
        for i in range(4):
            lr = (rng.rand(6, 8, 3) * 255).astype(np.uint8)
            hr = (rng.rand(12, 16, 3) * 255).astype(np.uint8)
            frames.append((lr, hr))
            Image.fromarray(lr).save(os.path.join(d, "train", f"{i:05}_lr.png"))
            Image.fromarray(hr).save(os.path.join(d, "train", f"{i:05}_hr.png"))
        with open(os.path.join(d, "train", "00002_hr.png"), "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n")  # half written: the pair is skipped
        lr_t, hr_t = data.load_split(d, "train")
        assert lr_t.shape == (3, 3, 6, 8) and hr_t.shape == (3, 3, 12, 16)
        for got, i in zip(range(3), [0, 1, 3]):
            assert torch.equal(lr_t[got], torch.from_numpy(frames[i][0]).permute(2, 0, 1))
            assert torch.equal(hr_t[got], torch.from_numpy(frames[i][1]).permute(2, 0, 1))


def test_crops_are_aligned():
    lr = torch.randint(0, 256, (3, 3, 20, 30), dtype=torch.uint8)
    hr = lr.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)
    gen = torch.Generator().manual_seed(0)
    lr_p, hr_p = data.random_crops(lr, hr, 16, 8, gen)
    assert lr_p.shape == (16, 3, 8, 8) and hr_p.shape == (16, 3, 16, 16)
    assert torch.equal(hr_p, lr_p.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3))


def test_bicubic_reference():
    flat = torch.full((1, 3, 9, 11), 0.4, dtype=torch.float64)
    assert torch.allclose(data.bicubic_x2(flat), torch.full((1, 3, 18, 22), 0.4, dtype=torch.float64))
    ramp = torch.arange(16, dtype=torch.float64).view(1, 1, 1, 16).expand(1, 1, 4, 16)
    up = data.bicubic_x2(ramp)[0, 0, 0, 4:-4]
    # A linear ramp is reproduced exactly away from the edges: x at i -/+ 0.25.
    expected = torch.arange(2, 14, dtype=torch.float64).repeat_interleave(2) + torch.tensor([-0.25, 0.25]).repeat(12)
    assert torch.allclose(up, expected, atol=1e-9), up


def test_export_matches_torch():
    torch.manual_seed(0)
    for arch in nets.ARCHS:
        net = nets.build(arch)
        with torch.no_grad():
            for p in net.parameters():
                p.add_(0.05 * torch.randn_like(p))
        model = nets.to_onnx(net, {"scale": 2, "upscale.arch": arch})
        nets.check_ops(model)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, f"{arch}.onnx")
            import onnx

            onnx.save(model, path)
            val = [torch.randint(0, 256, (3, 12, 20), dtype=torch.uint8)]
            diff = train.check_with_onnxruntime(path, net, val)
            assert diff < 1e-4, (arch, diff)
        plain = nets.PlainNet(arch)
        with torch.no_grad():
            for conv, (w, b, _) in zip(plain.convs, net.export_convs()):
                conv.weight.copy_(torch.from_numpy(w))
                conv.bias.copy_(torch.from_numpy(b))
            x = torch.rand(1, 3, 11, 13)
            plain_diff = float((plain(x) - net.to("cpu")(x)).abs().max())
        assert plain_diff < 1e-4, (arch, "PlainNet", plain_diff)
        meta = {p.key: p.value for p in model.metadata_props}
        assert meta["scale"] == "2" and meta["upscale.arch"] == arch
        print(f"{arch}: {nets.param_count(net)} params, ORT vs torch {diff:.1e}")


def test_planned_epochs():
    # Epoch 1 alone (the old behaviour): 10 s per epoch in a 95 s budget leaves 9 epochs.
    assert train.planned_epochs(1000, [10.0], 95.0, 1) == 9
    # With plan_epoch 3 the warm-up epoch counts as spent but not as the rate: 30 + 2 + 2 s,
    # so 95 - 34 s leaves 30 more epochs of 2 s.
    assert train.planned_epochs(1000, [30.0, 2.0, 2.0], 95.0, 3) == 33
    assert train.planned_epochs(1000, [30.0, 2.0], 95.0, 3) == 1000  # not yet
    assert train.planned_epochs(20, [1.0], 95.0, 1) == 20  # never more than asked
    assert train.planned_epochs(1000, [50.0, 40.0], 60.0, 2) == 2  # never fewer than run
    assert train.planned_epochs(1000, [10.0], 0.0, 1) == 1000  # no budget


def test_fast_bf16_training_runs_and_learns():
    """A few steps of the --fast --bf16 path on the CPU: finite loss that goes down, and the
    export still matches torch in fp32."""
    lr = torch.rand(4, 3, 24, 32)
    lr_u8 = (lr * 255).round().to(torch.uint8)
    hr_u8 = (torch.nn.functional.interpolate(lr, scale_factor=2, mode="bicubic").clamp(0, 1) * 255).round().to(torch.uint8)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "m.onnx")
        args = train.parse_args(["--data", d, "--arch", "sesr16", "--out", out, "--epochs", "3",
                                 "--batch", "4", "--patch", "16", "--crops-per-image", "4",
                                 "--eval-every", "1", "--fast", "--bf16", "--snapshot", out])
        train.seed_everything(1, fast=True)
        net = nets.build("sesr16").to(memory_format=torch.channels_last)
        epochs, _, _, history = train.train(args, net, lr_u8, hr_u8, lr_u8[:1], hr_u8[:1], torch.device("cpu"))
        assert epochs == 3 and len(history) == 3
        assert history[-1]["val_psnr_y"] > history[0]["val_psnr_y"], history
        import onnx

        meta = {p.key: p.value for p in onnx.load(out).metadata_props}
        assert meta["upscale.snapshot_epoch"] == "3", meta
        diff = train.check_with_onnxruntime(out, net, [lr_u8[0]])
        assert diff < 1e-4, diff
    torch.use_deterministic_algorithms(False)


def test_finetune_from_onnx():
    """from_onnx reads back what to_onnx wrote (same outputs); a few MSE steps from it on a
    learnable target lower the val error and export again; the same run twice is bit-identical."""
    import finetune
    import onnx

    torch.manual_seed(0)
    lr = torch.rand(4, 3, 24, 32)
    lr_u8 = (lr * 255).round().to(torch.uint8)
    hr_u8 = (torch.nn.functional.interpolate(lr, scale_factor=2, mode="bicubic").clamp(0, 1) * 255).round().to(torch.uint8)
    with tempfile.TemporaryDirectory() as d:
        init = os.path.join(d, "init.onnx")
        net = nets.build("sesr16")
        onnx.save(nets.to_onnx(net, {"scale": 2, "upscale.arch": "sesr16"}), init)
        x = torch.rand(1, 3, 11, 13)
        with torch.no_grad():
            diff = float((nets.from_onnx(init)(x) - net(x)).abs().max())
        assert diff < 1e-5, diff

        out = os.path.join(d, "ft.onnx")
        args = finetune.parse_args(["--data", d, "--init", init, "--out", out, "--steps", "6",
                                    "--batch", "4", "--patch", "16", "--lr", "1e-3", "--eval-every", "3", "--val-from", "0"])
        weights = []
        for _ in range(2):
            train.seed_everything(args.seed)
            tuned = nets.from_onnx(init)
            history = finetune.finetune(args, tuned, lr_u8, hr_u8, lr_u8[:2], hr_u8[:2], torch.device("cpu"),
                                        log=lambda line: None)
            weights.append(torch.cat([p.detach().flatten() for p in tuned.parameters()]))
        assert torch.equal(weights[0], weights[1])
        before = train.evaluate(nets.from_onnx(init).eval(), lr_u8[:2], hr_u8[:2], torch.device("cpu"))
        assert history[-1]["val_psnr_y_progress_frames"] > before, (before, history)
        onnx.save(nets.to_onnx(tuned, {"scale": 2, "upscale.arch": "sesr16"}), out)
        assert train.check_with_onnxruntime(out, tuned, [lr_u8[0]]) < 1e-4
    torch.use_deterministic_algorithms(False)

    try:
        nets.from_onnx(os.path.join(os.path.dirname(__file__), "..", "..", "models", "test", "missing.onnx"))
    except (SystemExit, FileNotFoundError, OSError):
        pass
    else:
        raise AssertionError("from_onnx accepted a missing file")


def test_speed_choice():
    import speed

    assert speed.choose({"tf32": 10, "fast": 8, "graph": 3, "fast-bf16": 7, "graph-bf16": 2.5}) == "graph"
    assert speed.choose({"tf32": 10, "fast": 8, "graph": 3, "fast-bf16": 7, "graph-bf16": 2.0}) == "graph-bf16"
    assert speed.choose({"tf32": 10, "fast": 8, "fast-bf16": 9}) == "fast"


if __name__ == "__main__":
    for name, fn in list(globals().items()):
        if name.startswith("test_"):
            fn()
            print(f"ok {name}")
