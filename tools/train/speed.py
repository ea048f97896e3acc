#!/usr/bin/env python3
"""Training speed of one architecture under train.py's speed options, on synthetic frames.

    python3 tools/train/speed.py --arch sesr16 --patch 96 [--choose]

Runs train.py's own training loop for a warm-up epoch and a timed epoch of --steps steps per
variant (plain TF32; --fast; --fast --cuda-graph, on CUDA; each of the last two with --bf16) on random frames of the dataset's size (the step
time does not depend on the pixels), and prints ms per step. With --choose the last line is
`chosen: FLAGS`: the fastest fp32 variant, or bf16 when it is at least BF16_MIN_SPEEDUP times
faster than that (bf16 changes the arithmetic, so it has to buy enough extra steps).
"""

import argparse
import contextlib
import io
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nets  # noqa: E402
import train  # noqa: E402

VARIANTS = {"tf32": ["--tf32"], "fast": ["--tf32", "--fast"], "graph": ["--tf32", "--fast", "--cuda-graph"],
            "fast-bf16": ["--tf32", "--fast", "--bf16"], "graph-bf16": ["--tf32", "--fast", "--cuda-graph", "--bf16"]}
BF16 = {"fast-bf16", "graph-bf16"}
BF16_MIN_SPEEDUP = 1.3


def step_ms(arch, flags, patch, batch, steps, frames, device) -> float:
    """ms per training step: train.py's loop, one warm-up epoch (CUDA start-up, cuDNN's algorithm
    search), then one timed epoch of `steps` steps (train.train times its epochs, evaluation
    excluded)."""
    lr, hr = frames
    with tempfile.TemporaryDirectory() as d:
        args = train.parse_args(["--data", d, "--arch", arch, "--out", os.path.join(d, "m.onnx"),
                                 "--epochs", "1", "--batch", str(batch), "--patch", str(patch),
                                 "--crops-per-image", str(steps * batch // len(lr))] + flags)
    train.seed_everything(1, args.tf32, args.fast)
    net = nets.build(arch).to(device)
    if args.fast:
        net = net.to(memory_format=torch.channels_last)
    val = (lr[:1].cpu(), hr[:1].cpu())
    with contextlib.redirect_stdout(io.StringIO()):
        train.train(args, net, lr, hr, *val, device)
        _, _, seconds, _ = train.train(args, net, lr, hr, *val, device)
    return 1e3 * seconds / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="sesr16", choices=sorted(nets.ARCHS))
    ap.add_argument("--patch", type=int, default=96)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--size", default="640x360", help="frame size at low resolution, WxH")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--choose", action="store_true")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset of " + ", ".join(VARIANTS))
    args = ap.parse_args()
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available()
                          else ("cpu" if args.device == "auto" else args.device))
    w, h = map(int, args.size.split("x"))
    gen = torch.Generator().manual_seed(0)
    lr = torch.randint(0, 256, (args.batch, 3, h, w), dtype=torch.uint8, generator=gen).to(device)
    hr = torch.randint(0, 256, (args.batch, 3, 2 * h, 2 * w), dtype=torch.uint8, generator=gen).to(device)
    times = {}
    for name in args.variants.split(","):
        if name not in VARIANTS:
            raise SystemExit(f"--variants: unknown variant {name!r} (known: {', '.join(VARIANTS)})")
        flags = VARIANTS[name]
        if "--cuda-graph" in flags and device.type != "cuda":
            continue
        try:
            times[name] = step_ms(args.arch, flags, args.patch, args.batch, args.steps, (lr, hr), device)
        except (RuntimeError, SystemExit) as e:  # a variant this torch or device cannot run
            print(f"{args.arch} {name:>10}: failed: {e}", flush=True)
            continue
        print(f"{args.arch} {name:>10}: {times[name]:.2f} ms per step "
              f"(batch {args.batch}, {args.patch}x{args.patch} crops, {device})", flush=True)
    if args.choose:
        print("chosen: " + " ".join(VARIANTS[choose(times)]))


def choose(times: dict) -> str:
    """The fastest fp32 variant, or the fastest bf16 one when BF16_MIN_SPEEDUP times faster."""
    best = min((n for n in times if n not in BF16), key=times.get)
    bf16 = [n for n in times if n in BF16]
    if bf16 and times[best] >= BF16_MIN_SPEEDUP * times[min(bf16, key=times.get)]:
        best = min(bf16, key=times.get)
    return best

if __name__ == "__main__":
    main()
