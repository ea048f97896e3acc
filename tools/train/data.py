"""Loading `upscale-demo dataset` output, random training crops, and the evaluation metric.

PSNR is measured on BT.601 full-range luma (0.299 R + 0.587 G + 0.114 B, 0..255) of 8-bit
images, exactly as src/app/quality/metrics.rs does, so train-time and `upscale-demo quality`
figures are comparable. The model output is clamped and rounded to 8 bits first, as the game's
cpu-roundtrip path does.
"""

import glob
import math
import os
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import torch.nn.functional as F

LUMA = (0.299, 0.587, 0.114)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _unfilter_row(kind: int, row: np.ndarray, prior: np.ndarray, bpp: int) -> np.ndarray:
    """Reverses one PNG scanline filter (uint8 arithmetic wraps, as the spec wants)."""
    if kind == 0:
        return row
    if kind == 2:
        return row + prior
    if kind == 1:
        # recon[x] = filt[x] + recon[x - bpp]: a running sum per channel.
        return np.cumsum(row.reshape(-1, bpp), axis=0, dtype=np.uint64).astype(np.uint8).reshape(-1)
    out = row.astype(np.int32)
    up = prior.astype(np.int32)
    for x in range(len(out)):  # Avg and Paeth are sequential; our dataset never uses them.
        a = out[x - bpp] if x >= bpp else 0
        c = up[x - bpp] if x >= bpp else 0
        if kind == 3:
            out[x] = (out[x] + (a + up[x]) // 2) & 255
        else:
            p = a + up[x] - c
            pa, pb, pc = abs(p - a), abs(p - up[x]), abs(p - c)
            pred = a if pa <= pb and pa <= pc else (up[x] if pb <= pc else c)
            out[x] = (out[x] + pred) & 255
    return out.astype(np.uint8)


def read_png_rgb(path: str) -> np.ndarray:
    """Decodes an 8-bit RGB/RGBA non-interlaced PNG to [H, W, 3] uint8 with zlib and numpy only:
    the GPU machine's Python has no imaging library. `upscale-demo dataset` writes every row with
    the Up filter, which unfilters as one cumulative sum over rows."""
    with open(path, "rb") as f:
        blob = f.read()
    if blob[:8] != PNG_SIGNATURE:
        raise ValueError(f"{path}: not a PNG file")
    pos, idat, header = 8, [], None
    while pos < len(blob):
        (length,) = struct.unpack(">I", blob[pos:pos + 4])
        kind, body = blob[pos + 4:pos + 8], blob[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    w, h, depth, color, _, _, interlace = header
    if depth != 8 or color not in (2, 6) or interlace:
        raise SystemExit(f"{path}: only 8-bit RGB/RGBA non-interlaced PNGs are supported "
                         f"(depth {depth}, colour type {color}, interlace {interlace})")
    bpp = 3 if color == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(h, 1 + w * bpp)
    kinds, rows = raw[:, 0], raw[:, 1:]
    if (kinds == 2).all():
        pixels = np.cumsum(rows, axis=0, dtype=np.uint64).astype(np.uint8)
    else:
        pixels = np.empty_like(rows)
        prior = np.zeros(w * bpp, np.uint8)
        for y in range(h):
            prior = pixels[y] = _unfilter_row(int(kinds[y]), rows[y], prior, bpp)
    return pixels.reshape(h, w, bpp)[:, :, :3]


def _load_rgb(path: str) -> np.ndarray:
    return read_png_rgb(path)


def load_split(root: str, split: str, threads: int = 8):
    """Returns (lr, hr) uint8 tensors [N, 3, h, w] and [N, 3, 2h, 2w] of DIR/split/*_lr.png."""
    lr_paths = sorted(glob.glob(os.path.join(root, split, "*_lr.png")))
    if not lr_paths:
        raise SystemExit(
            f"no *_lr.png in {os.path.join(root, split)}: run "
            f"`upscale-demo dataset --out {root} --count N` first"
        )
    hr_paths = [p[: -len("_lr.png")] + "_hr.png" for p in lr_paths]

    def load_pair(paths):
        # A dataset run stopped by a time limit can leave a pair half written: skip it.
        try:
            return _load_rgb(paths[0]), _load_rgb(paths[1])
        except (OSError, ValueError, zlib.error, struct.error, TypeError) as e:
            print(f"warning: skipping {paths[0]}: {e}", flush=True)
            return None

    # Decoded pairs go straight into the two preallocated tensors (1200 pairs are 4 GiB: a
    # list of arrays stacked afterwards would need twice that at the peak).
    lr = hr = None
    kept = 0
    with ThreadPoolExecutor(threads) as pool:
        for pair in pool.map(load_pair, zip(lr_paths, hr_paths)):
            if pair is None:
                continue
            if lr is None:
                (h, w), (hh, hw) = pair[0].shape[:2], pair[1].shape[:2]
                if (hh, hw) != (2 * h, 2 * w):
                    raise SystemExit(f"{hr_paths[0]} is {hw}x{hh}, expected twice {lr_paths[0]} ({w}x{h})")
                lr = torch.empty((len(lr_paths), 3, h, w), dtype=torch.uint8)
                hr = torch.empty((len(lr_paths), 3, hh, hw), dtype=torch.uint8)
            if pair[0].shape[:2] != (h, w) or pair[1].shape[:2] != (hh, hw):
                raise SystemExit(f"{split}: pair {kept} is {pair[0].shape[1]}x{pair[0].shape[0]}, "
                                 f"the first {w}x{h}: one dataset run per folder")
            lr[kept] = torch.from_numpy(pair[0]).permute(2, 0, 1)
            hr[kept] = torch.from_numpy(pair[1]).permute(2, 0, 1)
            kept += 1
    if not kept:
        raise SystemExit(f"no readable pairs in {os.path.join(root, split)}")
    return lr[:kept].contiguous(), hr[:kept].contiguous()


def random_crops(lr, hr, batch: int, patch: int, gen: torch.Generator):
    """A batch of aligned (lr patch, hr patch) pairs in 0..1 floats, randomly h-flipped.
    lr/hr are uint8 tensors on the training device; gen lives on the same device."""
    n, _, h, w = lr.shape
    dev = lr.device
    idx = torch.randint(0, n, (batch,), generator=gen, device=dev)
    y0 = torch.randint(0, h - patch + 1, (batch,), generator=gen, device=dev)
    x0 = torch.randint(0, w - patch + 1, (batch,), generator=gen, device=dev)
    flip = torch.rand(batch, generator=gen, device=dev) < 0.5
    ar = torch.arange(patch, device=dev)
    ar2 = torch.arange(2 * patch, device=dev)

    def gather(img, ys, xs):
        # Advanced indices around a slice: result is [B, P, P, C].
        out = img[idx[:, None, None], :, ys[:, :, None], xs[:, None, :]]
        out = out.permute(0, 3, 1, 2).float().div_(255.0)
        return torch.where(flip[:, None, None, None], out.flip(-1), out)

    lr_p = gather(lr, y0[:, None] + ar, x0[:, None] + ar)
    hr_p = gather(hr, 2 * y0[:, None] + ar2, 2 * x0[:, None] + ar2)
    return lr_p, hr_p


def to_uint8(x: torch.Tensor) -> torch.Tensor:
    """Float 0..1 → 8-bit levels as float, clamped and rounded half up like nchw_to_rgba8."""
    return torch.floor(x.clamp(0.0, 1.0) * 255.0 + 0.5)


def psnr_y(result_u8: torch.Tensor, target_u8: torch.Tensor) -> float:
    """PSNR (dB, capped at 100) of luma between two [3, H, W] tensors of 0..255 levels."""
    wts = torch.tensor(LUMA, dtype=torch.float64, device=result_u8.device)[:, None, None]
    ya = (result_u8.double() * wts).sum(0)
    yb = (target_u8.double() * wts).sum(0)
    mse = torch.mean((ya - yb) ** 2).item()
    return 100.0 if mse <= 0 else min(100.0, 10.0 * math.log10(255.0 ** 2 / mse))


# Catmull-Rom (Keys a = -0.5, the image crate's CatmullRom) weights for x2 with pixel-centre
# alignment: the two output samples of input pixel i sit at i - 0.25 and i + 0.25, so their taps
# at i-2..i+1 (even) and i-1..i+2 (odd) are at distances 1.75, 0.75, 0.25, 1.25 (mirrored).
_CR_EVEN = (-0.0234375, 0.2265625, 0.8671875, -0.0703125)


def bicubic_x2(x: torch.Tensor) -> torch.Tensor:
    """Catmull-Rom x2 of [N, C, H, W] floats, edges replicated (a reference figure only: the
    authoritative bicubic numbers come from `upscale-demo quality`)."""
    even = torch.tensor(_CR_EVEN, dtype=x.dtype, device=x.device)
    odd = even.flip(0)

    def along_width(t):
        n, c, h, w = t.shape
        p = F.pad(t.reshape(n * c, 1, h, w), (2, 2, 0, 0), mode="replicate")
        e = F.conv2d(p[..., :-1], even.view(1, 1, 1, 4))
        o = F.conv2d(p[..., 1:], odd.view(1, 1, 1, 4))
        return torch.stack([e, o], dim=-1).reshape(n, c, h, 2 * w)

    y = along_width(x)
    return along_width(y.transpose(2, 3)).transpose(2, 3)


def bicubic_psnr_y(lr_u8: torch.Tensor, hr_u8: torch.Tensor, device="cpu") -> float:
    """Mean PSNR-Y of Catmull-Rom x2 over the frames (computed on `device`)."""
    scores = []
    for lr, hr in zip(lr_u8, hr_u8):
        up = bicubic_x2(lr[None].to(device).double() / 255.0)[0]
        scores.append(psnr_y(to_uint8(up), hr.to(device).double()))
    return sum(scores) / len(scores)
