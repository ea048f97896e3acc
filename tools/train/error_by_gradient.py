#!/usr/bin/env python3
"""Where a model's error lies: squared luma error of the model and of bicubic on a dataset split,
grouped by the target's local luma gradient (strong edges, medium detail, flat areas).

    python3 tools/train/error_by_gradient.py --data /tmp/ds --model models/quality_x2.onnx [--split val]

The model runs through onnxruntime on the CPU with its output rounded to 8 bits (as the game's
cpu-roundtrip path does); bicubic is Pillow's. Luma is BT.601 full range, as in data.py. The
gradient of a target pixel is the larger of its absolute luma differences to the right and below
neighbours (0..255). Errors are pooled over all frames of the split (one MSE per group).

With `--geometry-from DIR1` (the same `upscale-demo dataset` command run with `render.msaa = 1`:
same seed and count, so the same poses), it also reports geometric edges: the output pixels of
low-res pixels whose MSAA value differs from the 1-sample value by more than 3/255 in a
channel. MSAA changes only pixels that triangle edges cross (the shading is per pixel), so this
separates silhouettes and creases from texture detail. A second row adds their 4-neighbours.
"""

import argparse
import glob
import math
import os

import numpy as np
import onnxruntime as ort
from PIL import Image

GROUPS = [("strong edges (gradient > 40)", 40, 256), ("detail (10 < gradient <= 40)", 10, 40),
          ("flat (gradient <= 10)", -1, 10)]


def luma(rgb: np.ndarray) -> np.ndarray:
    return 0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2]


def geometric_edges(path: str, data: str, data1: str, scale: int):
    """Output-size masks of the low-res pixels where `path` (MSAA) and its 1-sample twin differ,
    and of those plus their 4-neighbours."""
    twin = os.path.join(data1, os.path.relpath(path, data))
    if not os.path.isfile(twin):
        raise SystemExit(f"{twin}: missing (render DIR1 with the same --count and --seed, render.msaa = 1)")
    a = np.asarray(Image.open(path).convert("RGB"), np.int16)
    b = np.asarray(Image.open(twin).convert("RGB"), np.int16)
    if a.shape != b.shape:
        raise SystemExit(f"{twin}: {b.shape[1]}x{b.shape[0]}, {path} is {a.shape[1]}x{a.shape[0]}")
    edge = np.abs(a - b).max(axis=-1) > 3
    near = edge.copy()
    near[1:] |= edge[:-1]
    near[:-1] |= edge[1:]
    near[:, 1:] |= edge[:, :-1]
    near[:, :-1] |= edge[:, 1:]
    up = lambda m: m.repeat(scale, axis=0).repeat(scale, axis=1)
    return up(edge), up(near)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="`upscale-demo dataset` folder")
    ap.add_argument("--model", required=True)
    ap.add_argument("--split", default="val", choices=["train", "val"])
    ap.add_argument("--geometry-from", metavar="DIR1",
                    help="the same dataset rendered with render.msaa = 1 (adds the geometric-edge row)")
    args = ap.parse_args()
    sess = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    lrs = sorted(glob.glob(os.path.join(args.data, args.split, "*_lr.png")))
    if not lrs:
        raise SystemExit(f"{args.data}/{args.split}: no *_lr.png pairs (run `upscale-demo dataset` first)")
    sse = {name: [0.0, 0.0, 0] for name, _, _ in GROUPS}
    geometry = {"of which geometric edges": [0.0, 0.0, 0], "geometric edges + neighbours": [0.0, 0.0, 0]}
    for path in lrs:
        lr_img = Image.open(path).convert("RGB")
        hr = np.asarray(Image.open(path.replace("_lr.png", "_hr.png")).convert("RGB"), np.float32)
        lr = np.asarray(lr_img, np.float32).transpose(2, 0, 1)[None] / 255.0
        out = sess.run(None, {sess.get_inputs()[0].name: lr})[0][0].transpose(1, 2, 0)
        out = np.clip(np.round(out * 255.0), 0, 255)
        bic = np.asarray(lr_img.resize((hr.shape[1], hr.shape[0]), Image.BICUBIC), np.float32)
        y = luma(hr)
        grad = np.maximum(np.abs(np.diff(y, axis=1, append=y[:, -1:])),
                          np.abs(np.diff(y, axis=0, append=y[-1:])))
        err_model, err_bic = (luma(out) - y) ** 2, (luma(bic) - y) ** 2
        for name, lo, hi in GROUPS:
            mask = (grad > lo) & (grad <= hi)
            sse[name][0] += float(err_model[mask].sum())
            sse[name][1] += float(err_bic[mask].sum())
            sse[name][2] += int(mask.sum())
        if args.geometry_from:
            masks = geometric_edges(path, args.data, args.geometry_from, hr.shape[0] // lr.shape[2])
            for acc, mask in zip(geometry.values(), masks):
                acc[0] += float(err_model[mask].sum())
                acc[1] += float(err_bic[mask].sum())
                acc[2] += int(mask.sum())
    total = [sum(v[i] for v in sse.values()) for i in range(3)]
    psnr = lambda s, n: 10 * math.log10(255 ** 2 * n / s)
    print(f"{len(lrs)} {args.split} frames, {os.path.basename(args.model)}: pooled PSNR-Y model "
          f"{psnr(total[0], total[2]):.2f} dB, bicubic {psnr(total[1], total[2]):.2f} dB")
    print(f"{'group':<30} {'pixels':>7} {'model err':>10} {'bicubic err':>12} {'model/bicubic MSE':>18}")
    for name, (m, b, n) in sse.items():
        print(f"{name:<30} {100 * n / total[2]:6.1f}% {100 * m / total[0]:9.1f}% {100 * b / total[1]:11.1f}% "
              f"{m / b if b else float('nan'):18.3f}")
    for name, (m, b, n) in (geometry.items() if args.geometry_from else []):
        print(f"{name:<30} {100 * n / total[2]:6.1f}% {100 * m / total[0]:9.1f}% "
              f"{100 * b / total[1]:11.1f}% {m / b if b else float('nan'):18.3f}")


if __name__ == "__main__":
    main()
