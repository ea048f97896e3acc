#!/usr/bin/env python3
"""The temporal x2 upscaler: its network, the history warp, recurrent training on
`upscale-demo dataset --sequences` output, evaluation in motion, and the ONNX export.

    python3 tools/train/temporal.py --data /tmp/seq-ds --out models/temporal_x2.onnx \
        --seed 1 --time-budget 600 [--arch tsr16] [--tf32]

The model (`models/README.md` has the card). Per frame, at render resolution h x w:

    color   [1, 3, h, w]   the jittered frame, 0..1, display-encoded (what the spatial models get)
    depth   [1, 1, h, w]   the depth-buffer value of that frame (0 near .. 1 far, sky 1)
    motion  [1, 2, h, w]   motion vectors in render pixels, current - previous, unjittered
    history [1, 12, h, w]  the previous output warped to this frame (`warp` below), brought to
                           render resolution without loss: SpaceToDepth 2, channel c*4 + i*2 + j
                           holds output pixel (2y + i, 2x + j) of colour c (the inverse of
                           DepthToSpace "CRD"); on a reset: the bilinear x2 of `color`
                           (and `motion` zero)
    jitter  [1, 2, h, w]   this frame's jitter in render pixels (x, y), the same in every pixel

    output  [1, 3, 2h, 2w] = DepthToSpace_CRD(history + convs(Concat(inputs)))

The network corrects the warped history: where the history is good it keeps it, where it is
stale (disocclusion, lighting, the first frame) it replaces it from this frame's samples. The
warp is not in the model: the frame does it in a shader before the model runs, as every
pattern must feed the same inputs. `warp` here is its definition, written so that a shader can
compute the same thing:

    for output pixel o (centre o + 0.5), ratio = render size / output size:
        p = (o + 0.5) * ratio                      this pixel's unjittered render position
        k = clamp(floor(p + jitter), 0, size - 1)  the render pixel that shows it
        q = (o + 0.5) - motion[k] / ratio          where it was in the previous output
        history[o] = bilinear(previous output, q)  clamp to edge, fp32 weights

The previous output is the model's output clamped to 0..1 and rounded to fp16 (the history
buffer the patterns keep; the upscaled image itself is 8-bit), so training rounds it the same
way (straight-through gradient). A float history keeps the patterns' tiny float differences
from flipping 8-bit levels that the recurrence would then carry from frame to frame.

Training runs the network recurrently on random crops of the train sequences: a few frames
without gradient from a reset (so the history is already warm), then --unroll frames whose
loss (L1 on RGB plus --temporal-weight x L1 on the frame-to-frame change against the target's,
the change tPSNR measures) is back-propagated through every frame's history. The val split is
`quality --sequence`'s held-out sequences, scored as it scores them: PSNR-Y and tPSNR-Y of
8-bit outputs, frames 0..--warmup apart; and a held camera (`evaluate_hold`: each val
sequence's first frame given --hold times), which a model trained on walks alone fails (the
shipped temporal_x2: 21.9 -> 8.2 dB PSNR-Y over 64 held frames at 160x90). --hold-prob makes
that share of the steps held cameras (one frame again and again, --hold-warm frames without
gradient first), and the sequence dataset's train walks stand still for a while too.
"""

import argparse
import glob
import json
import math
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402
import nets  # noqa: E402

SCALE = nets.SCALE
OUT = nets.OUT
# The model's inputs in Concat order: (name, channels, the scale the first conv sees them at).
# The scales only bring the inputs to similar ranges while training; the export folds them into
# the first conv's weights (exact: a scale commutes with the zero padding).
INPUTS = [("color", 3, 1.0), ("depth", 1, 1.0), ("motion", 2, 0.25), ("history", OUT, 1.0),
          ("jitter", 2, 2.0)]
IN = sum(c for _, c, _ in INPUTS)

# (in channels, out channels, kernel) per conv, LeakyReLU 0.1 between convs, a long residual
# from the first conv's activation to the last conv's input; trained collapsible (nets.py).
ARCHS = {
    # 3x3 20->16, six 3x3 16->16, 3x3 16->12: 4,608 MACs per output pixel (quality_x2: 4,968).
    "tsr16": [(IN, 16, 3)] + [(16, 16, 3)] * 6 + [(16, OUT, 3)],
    # A small one for tests and quick runs.
    "tsr8": [(IN, 8, 3)] + [(8, 8, 3)] * 2 + [(8, OUT, 3)],
}
LEAKY = 0.1
EXPAND = 64


def input_scales() -> list:
    return [s for _, c, s in INPUTS for _ in range(c)]


class TemporalNet(nets.CollapsibleNet):
    """The temporal network (see the module documentation) in its collapsible training form."""

    long_skip = True

    def __init__(self, arch: str, history_clamp: bool = True, history_filter: str = "bilinear"):
        super().__init__(arch, layers=ARCHS[arch], leaky=LEAKY, expand=EXPAND)
        if history_filter not in HISTORY_FILTERS:
            raise ValueError(f"history filter {history_filter!r} is not one of {HISTORY_FILTERS}")
        self.history_clamp = history_clamp
        self.history_filter = history_filter
        self.register_buffer("scales", torch.tensor(input_scales()).view(1, IN, 1, 1), persistent=False)

    def forward(self, color, depth, motion, history, jitter):
        planes = jitter[:, :, None, None].expand(-1, -1, *color.shape[-2:])
        h = torch.cat([color, depth, motion, history, planes], 1) * self.scales
        h = self.convs(h, range(len(self.layers)))
        return F.pixel_shuffle(history + h, SCALE)

    @torch.no_grad()
    def load_onnx(self, path: str):
        """Starts from an exported model (`--init`): the expanded parameters are set so that
        every collapsed conv is the file's (the first conv's weight divided by the input scales,
        which the export multiplies in): W1 = [W minus the centre identity of a square conv; 0],
        b1 = [b; 0], W2 = [I 0], b2 = 0. The net then computes exactly the file's model."""
        model = onnx.load(path)
        meta = {p.key: p.value for p in model.metadata_props}
        if meta.get("upscale.arch") != self.arch:
            raise SystemExit(f"--init {path}: its upscale.arch is {meta.get('upscale.arch')!r}, "
                             f"this training's --arch is {self.arch!r}")
        inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        scales = torch.tensor(input_scales(), dtype=torch.float64)
        for i, first in enumerate(self.expand):
            second = self.project[i]
            names = (f"conv{i + 1}.weight", f"conv{i + 1}.bias")
            if any(n not in inits for n in names):
                raise SystemExit(f"--init {path}: no initializer {names[0]} (is it a temporal.py export?)")
            w = torch.from_numpy(inits[names[0]].astype(np.float64))
            b = torch.from_numpy(inits[names[1]].astype(np.float64))
            cout, e = w.shape[0], first.weight.shape[0]
            if tuple(w.shape[1:]) != tuple(first.weight.shape[1:]) or cout != second.weight.shape[0] or e < cout:
                raise SystemExit(f"--init {path}: {names[0]} is {tuple(w.shape)}, not conv {i + 1} of {self.arch}")
            if i == 0:
                w = w / scales[None, :, None, None]
            if w.shape[0] == w.shape[1]:
                w = w - self.centre_identity(w)
            w1 = torch.zeros(first.weight.shape, dtype=torch.float64)
            w1[:cout] = w
            b1 = torch.zeros(e, dtype=torch.float64)
            b1[:cout] = b
            w2 = torch.zeros(second.weight.shape, dtype=torch.float64)
            w2[:, :cout, 0, 0] = torch.eye(cout, dtype=torch.float64)
            first.weight.copy_(w1)
            first.bias.copy_(b1)
            second.weight.copy_(w2)
            second.bias.zero_()

    @torch.no_grad()
    def export_convs(self):
        convs = super().export_convs()
        w, b, d = convs[0]
        convs[0] = ((w * np.array(input_scales(), np.float32)[None, :, None, None]).astype(np.float32), b, d)
        return convs


def macs_per_output_pixel(arch: str) -> float:
    """The convs run at render resolution: divided by SCALE^2 (the warp is not in the model)."""
    return sum(cin * cout * k * k for cin, cout, k in ARCHS[arch]) / (SCALE * SCALE)


def space_to_depth(x: torch.Tensor) -> torch.Tensor:
    """[B, C, 2h, 2w] -> [B, 4C, h, w], channel c*4 + i*2 + j = pixel (2y + i, 2x + j) of c."""
    return F.pixel_unshuffle(x, SCALE)


def reset_history(color: torch.Tensor) -> torch.Tensor:
    """The history of a frame without one: the bilinear x2 of its colour (ONNX Resize linear,
    half_pixel), as space-to-depth."""
    up = F.interpolate(color, scale_factor=SCALE, mode="bilinear", align_corners=False)
    return space_to_depth(up)


def warp(prev: torch.Tensor, motion: torch.Tensor, jitter: torch.Tensor, filter: str = "bilinear") -> torch.Tensor:
    """The previous output [B, 3, H, W] warped to this frame (the module documentation defines
    it); motion [B, 2, h, w] and jitter [B, 2] are this frame's. `filter`: how the previous
    output is resampled at q, "bilinear" or "catmull_rom" (HISTORY_FILTERS)."""
    b, _, oh, ow = prev.shape
    h, w = motion.shape[-2:]
    dev = prev.device
    rx, ry = w / ow, h / oh
    ox = torch.arange(ow, device=dev, dtype=torch.float32) + 0.5
    oy = torch.arange(oh, device=dev, dtype=torch.float32) + 0.5
    kx = torch.floor(ox[None, :] * rx + jitter[:, 0, None]).clamp(0, w - 1).long()
    ky = torch.floor(oy[None, :] * ry + jitter[:, 1, None]).clamp(0, h - 1).long()
    idx = (ky[:, :, None] * w + kx[:, None, :]).reshape(b, 1, oh * ow).expand(b, 2, oh * ow)
    m = motion.float().reshape(b, 2, h * w).gather(2, idx).reshape(b, 2, oh, ow)
    qx = ox[None, None, :] - m[:, 0] / rx
    qy = oy[None, :, None] - m[:, 1] / ry
    if filter == "catmull_rom":
        return catmull_rom(prev, qx, qy)
    if filter != "bilinear":
        raise ValueError(f"history filter {filter!r} is not one of {HISTORY_FILTERS}")
    grid = torch.stack([2.0 * qx / ow - 1.0, 2.0 * qy / oh - 1.0], -1)
    return F.grid_sample(prev, grid, mode="bilinear", padding_mode="border", align_corners=False)


def catmull_rom_weights(t: torch.Tensor) -> list:
    """The four Catmull-Rom weights (taps at -1, 0, 1, 2 from the texel at or left of the
    position) for the fraction t in [0, 1), written as the shader and the host path write them."""
    return [t * (-0.5 + t * (1.0 - 0.5 * t)), 1.0 + t * t * (-2.5 + 1.5 * t),
            t * (0.5 + t * (2.0 - 1.5 * t)), t * t * (-0.5 + 0.5 * t)]


def catmull_rom(img: torch.Tensor, qx: torch.Tensor, qy: torch.Tensor) -> torch.Tensor:
    """img [B, C, H, W] resampled at (qx, qy) [B, H', W'] (pixel units, texel centres at +0.5)
    with the separable Catmull-Rom spline over 4 x 4 texels, clamped to the edge: each row's
    four taps summed in x first, then the four rows in y, in fp32. Sharper than bilinear, whose
    blur a history resampled every frame would compound."""
    b, c, hh, ww = img.shape
    sx, sy = qx - 0.5, qy - 0.5
    fx, fy = torch.floor(sx), torch.floor(sy)
    wx, wy = catmull_rom_weights(sx - fx), catmull_rom_weights(sy - fy)
    ix0, iy0 = fx.long(), fy.long()
    flat = img.reshape(b, c, hh * ww)
    out = None
    for j in range(4):
        iy = (iy0 + (j - 1)).clamp(0, hh - 1)
        row = None
        for i in range(4):
            ix = (ix0 + (i - 1)).clamp(0, ww - 1)
            idx = (iy * ww + ix).reshape(b, 1, -1).expand(b, c, -1)
            tap = wx[i][:, None] * flat.gather(2, idx).reshape(b, c, *qx.shape[1:])
            row = tap if row is None else row + tap
        out = wy[j][:, None] * row if out is None else out + wy[j][:, None] * row
    return out


def clamp_history(history: torch.Tensor, color: torch.Tensor) -> torch.Tensor:
    """The warped history (space-to-depth, [B, 12, h, w]) clamped, per colour channel, to the
    box of this frame's colour over the 3x3 render pixels around the render pixel that holds it
    (clamped to the edge; min and max in fp32). What the previous output may bring into this
    frame is then never further from this frame's samples than that box, so a correction the
    network makes again and again cannot pile up over a still camera (it was: the first model,
    trained without the box, drifted to noise over a few hundred held frames)."""
    lo = -F.max_pool2d(-color, 3, 1, 1)
    hi = F.max_pool2d(color, 3, 1, 1)
    # Channel c*4 + sub of the history holds colour c.
    lo, hi = lo.repeat_interleave(SCALE * SCALE, 1), hi.repeat_interleave(SCALE * SCALE, 1)
    return torch.minimum(torch.maximum(history, lo), hi)


# The metadata `upscale.history` of an export, with and without the box; the patterns read the
# keys `upscale.history_clamp` (HISTORY_CLAMP_3X3, or no key: the history warped only) and
# `upscale.history_filter` (HISTORY_FILTERS: how the warp resamples; no key: bilinear).
HISTORY_CLAMP_3X3 = "color_3x3"
HISTORY_FILTERS = ("bilinear", "catmull_rom")


def history_metadata(clamped: bool, filter: str = "bilinear") -> dict:
    warped = "warp(previous output)" if filter == "bilinear" else f"warp_{filter}(previous output)"
    if clamped:
        warped = f"clamp({warped}, 3x3 box of color)"
    meta = {"upscale.history": f"space_to_depth_crd({warped}); reset: bilinear x2 of color"}
    if clamped:
        meta["upscale.history_clamp"] = HISTORY_CLAMP_3X3
    if filter != "bilinear":
        meta["upscale.history_filter"] = filter
    return meta


def quantize(x: torch.Tensor) -> torch.Tensor:
    """The history as the patterns keep it: clamped to 0..1, rounded to fp16 (nearest even),
    with the identity's gradient."""
    return x + (x.clamp(0.0, 1.0).half().float() - x).detach()


# ---------------------------------------------------------------------------------------------
# Data


class Sequences:
    """One split of a sequence dataset as tensors [S, K, ...] (S sequences of K frames): lr and
    hr uint8, motion float16, depth float32, jitter float32 [S, K, 2]."""

    def __init__(self, root: str, split: str, threads: int = 8, limit: int = 0):
        meta_path = os.path.join(root, "dataset.json")
        if not os.path.exists(meta_path):
            raise SystemExit(f"{meta_path} is missing: run `upscale-demo dataset --out {root} "
                             f"--sequences N --length K` first")
        with open(meta_path) as f:
            meta = json.load(f)
        if split not in meta or not meta[split]:
            raise SystemExit(f"{meta_path} has no {split!r} sequences (is it a --sequences dataset?)")
        seqs = meta[split][:limit] if limit else meta[split]
        self.names = [s["name"] for s in seqs]
        k = min(len(s["frames"]) for s in seqs)
        w, h = meta["render_size"]
        ow, oh = meta["output_size"]
        if (ow, oh) != (SCALE * w, SCALE * h):
            raise SystemExit(f"{meta_path}: output {ow}x{oh} is not {SCALE}x the render size {w}x{h}")
        n = len(seqs)
        self.lr = torch.empty((n, k, 3, h, w), dtype=torch.uint8)
        self.hr = torch.empty((n, k, 3, oh, ow), dtype=torch.uint8)
        self.motion = torch.empty((n, k, 2, h, w), dtype=torch.float16)
        self.depth = torch.empty((n, k, 1, h, w), dtype=torch.float32)
        self.jitter = torch.tensor([[f["jitter"] for f in s["frames"][:k]] for s in seqs], dtype=torch.float32)

        def load(job):
            i, t = job
            base = os.path.join(root, seqs[i]["dir"], f"f{t:03}")
            lr, hr = data.read_png_rgb(base + "_lr.png"), data.read_png_rgb(base + "_hr.png")
            motion, depth = np.load(base + "_motion.npy"), np.load(base + "_depth.npy")
            if lr.shape[:2] != (h, w) or hr.shape[:2] != (oh, ow) or motion.shape != (h, w, 2) \
                    or depth.shape != (h, w):
                raise SystemExit(f"{base}_*: shapes {lr.shape} {hr.shape} {motion.shape} {depth.shape} "
                                 f"do not match dataset.json's {w}x{h} -> {ow}x{oh}")
            self.lr[i, t] = torch.from_numpy(lr).permute(2, 0, 1)
            self.hr[i, t] = torch.from_numpy(hr).permute(2, 0, 1)
            self.motion[i, t] = torch.from_numpy(motion.astype(np.float16)).permute(2, 0, 1)
            self.depth[i, t, 0] = torch.from_numpy(depth.astype(np.float32))

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(load, [(i, t) for i in range(n) for t in range(k)]))

    @property
    def shape(self):
        """(sequences, frames, h, w)."""
        s, k, _, h, w = self.lr.shape
        return s, k, h, w

    def to(self, device):
        for name in ("lr", "hr", "motion", "depth", "jitter"):
            setattr(self, name, getattr(self, name).to(device))
        return self

    def frame(self, s, t):
        """Full frame t of sequence s as a batch of one: (color, depth, motion, jitter, target),
        floats on the tensors' device."""
        return (self.lr[s, t][None].float() / 255.0, self.depth[s, t][None], self.motion[s, t][None].float(),
                self.jitter[s, t][None], self.hr[s, t][None].float() / 255.0)


class Crops:
    """Random aligned crops of several sequences at once, the same window in every frame, some
    of them mirrored (a mirror negates the x of motion and jitter)."""

    def __init__(self, ds: Sequences, batch: int, patch: int, gen: torch.Generator):
        s, k, h, w = ds.shape
        if patch > min(h, w):
            raise SystemExit(f"--patch {patch} is larger than the render size {w}x{h}")
        dev = ds.lr.device
        self.ds = ds
        self.seq = torch.randint(0, s, (batch,), generator=gen, device=dev)
        y0 = torch.randint(0, h - patch + 1, (batch,), generator=gen, device=dev)
        x0 = torch.randint(0, w - patch + 1, (batch,), generator=gen, device=dev)
        self.flip = torch.rand(batch, generator=gen, device=dev) < 0.5
        ar, ar2 = torch.arange(patch, device=dev), torch.arange(SCALE * patch, device=dev)
        self.ys, self.xs = y0[:, None] + ar, x0[:, None] + ar
        self.ys2, self.xs2 = SCALE * y0[:, None] + ar2, SCALE * x0[:, None] + ar2
        self.sign = torch.where(self.flip, -1.0, 1.0)

    def _gather(self, img, t, ys, xs):
        out = img[self.seq[:, None, None], t, :, ys[:, :, None], xs[:, None, :]].permute(0, 3, 1, 2)
        return torch.where(self.flip[:, None, None, None], out.flip(-1), out)

    def frame(self, t: int):
        """(color, depth, motion, jitter, target) of frame t of every crop."""
        ds = self.ds
        color = self._gather(ds.lr, t, self.ys, self.xs).float() / 255.0
        target = self._gather(ds.hr, t, self.ys2, self.xs2).float() / 255.0
        depth = self._gather(ds.depth, t, self.ys, self.xs)
        motion = self._gather(ds.motion, t, self.ys, self.xs).float()
        motion = torch.stack([motion[:, 0] * self.sign[:, None, None], motion[:, 1]], 1)
        jitter = ds.jitter[self.seq, t]
        jitter = torch.stack([jitter[:, 0] * self.sign, jitter[:, 1]], 1)
        return color, depth, motion, jitter, target


def step_frames(net, frames, prev):
    """Runs the net on one frame's inputs given the previous output (None: a reset); returns
    the output."""
    color, depth, motion, jitter, _ = frames
    if prev is None:
        # A frame without history is a sequence's first: no motion (as the patterns feed it).
        motion = torch.zeros_like(motion)
    if prev is None:
        history = reset_history(color)
    else:
        history = space_to_depth(warp(quantize(prev), motion, jitter, getattr(net, "history_filter", "bilinear")))
        if getattr(net, "history_clamp", False):
            history = clamp_history(history, color)
    return net(color, depth, motion, history, jitter)


# ---------------------------------------------------------------------------------------------
# Evaluation


def luma(x_u8: torch.Tensor) -> torch.Tensor:
    wts = torch.tensor(data.LUMA, dtype=torch.float64, device=x_u8.device)[:, None, None]
    return (x_u8.double() * wts).sum(0)


def psnr(mse: float) -> float:
    return 100.0 if mse <= 0 else min(100.0, 10.0 * math.log10(255.0 ** 2 / mse))


@torch.no_grad()
def evaluate(upscale, ds: Sequences, warmup: int, temporal: bool = True) -> dict:
    """PSNR-Y and tPSNR-Y (src/metrics.rs's definitions) of 8-bit outputs over every frame of
    every sequence, means over frames 0..warmup and warmup.. apart. `upscale` is the net (run
    recurrently from a reset at each sequence's first frame) or, with temporal=False, a
    function of the colour alone."""
    scores = {"warmup": {"psnr_y": [], "tpsnr_y": []}, "steady": {"psnr_y": [], "tpsnr_y": []}}
    s_count, k = ds.shape[:2]
    for s in range(s_count):
        prev = prev_y = prev_ref = None
        for t in range(k):
            frames = ds.frame(s, t)
            out = step_frames(upscale, frames, prev) if temporal else upscale(frames[0])
            out_u8 = data.to_uint8(out[0])
            ref_u8 = data.to_uint8(frames[4][0])
            y, ref = luma(out_u8), luma(ref_u8)
            part = scores["warmup" if t < warmup else "steady"]
            part["psnr_y"].append(psnr(torch.mean((y - ref) ** 2).item()))
            if t > 0:
                part["tpsnr_y"].append(psnr(torch.mean(((y - prev_y) - (ref - prev_ref)) ** 2).item()))
            prev, prev_y, prev_ref = out, y, ref
    return {part: {m: (sum(v) / len(v) if v else None) for m, v in ms.items()} for part, ms in scores.items()}


@torch.no_grad()
def evaluate_hold(upscale, ds: Sequences, frames: int) -> dict:
    """A held camera: each val sequence's first frame given `frames` times (zero motion, the
    same jitter), its own output as the history. PSNR-Y of the first and of the last output
    against that frame's target, means over the sequences. A model that holds a still picture
    keeps (or improves) the first score; one that drifts loses it."""
    first, last = [], []
    for s in range(ds.shape[0]):
        frame = ds.frame(s, 0)
        ref = luma(data.to_uint8(frame[4][0]))
        prev = None
        for t in range(frames):
            out = step_frames(upscale, frame, prev)
            prev = out
            if t in (0, frames - 1):
                y = luma(data.to_uint8(out[0]))
                score = psnr(torch.mean((y - ref) ** 2).item())
                if t == 0:
                    first.append(score)
                if t == frames - 1:
                    last.append(score)
    return {"frames": frames, "first_psnr_y": sum(first) / len(first), "last_psnr_y": sum(last) / len(last)}


class OrtTemporalNet:
    """An exported temporal model in ONNX Runtime, called as the torch net is (to score a
    shipped model with `evaluate` and `evaluate_hold`)."""

    def __init__(self, path: str):
        import onnxruntime as ort

        self.sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        clamp = self.sess.get_modelmeta().custom_metadata_map.get("upscale.history_clamp")
        if clamp not in (None, HISTORY_CLAMP_3X3):
            raise SystemExit(f"{path}: metadata upscale.history_clamp is {clamp!r}; known: {HISTORY_CLAMP_3X3!r} or none")
        self.history_clamp = clamp == HISTORY_CLAMP_3X3
        self.history_filter = self.sess.get_modelmeta().custom_metadata_map.get("upscale.history_filter", "bilinear")
        if self.history_filter not in HISTORY_FILTERS:
            raise SystemExit(f"{path}: metadata upscale.history_filter is {self.history_filter!r}; known: {HISTORY_FILTERS}")

    def __call__(self, color, depth, motion, history, jitter):
        planes = jitter[:, :, None, None].expand(-1, -1, *color.shape[-2:])
        feeds = {"color": color, "depth": depth, "motion": motion, "history": history, "jitter": planes}
        out = self.sess.run(None, {k: v.cpu().contiguous().numpy().astype(np.float32) for k, v in feeds.items()})[0]
        return torch.from_numpy(out).to(color.device)


def bilinear(color):
    return F.interpolate(color, scale_factor=SCALE, mode="bilinear", align_corners=False)


# ---------------------------------------------------------------------------------------------
# Export


def to_onnx(net: TemporalNet, metadata: dict) -> onnx.ModelProto:
    convs = net.export_convs()
    nodes, inits = [], []
    for i, (w, b, _) in enumerate(convs):
        inits += [numpy_helper.from_array(w, f"conv{i + 1}.weight"), numpy_helper.from_array(b, f"conv{i + 1}.bias")]
    names = [n for n, _, _ in INPUTS]
    nodes.append(helper.make_node("Concat", names, ["inputs"], name="concat_inputs", axis=1))
    prev, skip, last = "inputs", None, len(convs) - 1
    for i, (w, _, _) in enumerate(convs):
        if i == last:
            nodes.append(helper.make_node("Add", [prev, skip], ["long_skip"], name="long_skip"))
            prev = "long_skip"
        k = w.shape[-1]
        nodes.append(helper.make_node("Conv", [prev, f"conv{i + 1}.weight", f"conv{i + 1}.bias"], [f"conv{i + 1}_out"],
                                      name=f"conv{i + 1}", kernel_shape=[k, k], pads=[k // 2] * 4))
        prev = f"conv{i + 1}_out"
        if i < last:
            nodes.append(helper.make_node("LeakyRelu", [prev], [f"lrelu{i + 1}"], name=f"lrelu{i + 1}", alpha=LEAKY))
            prev = f"lrelu{i + 1}"
        if i == 0:
            skip = prev
    nodes.append(helper.make_node("Add", ["history", prev], ["corrected"], name="history_add"))
    nodes.append(helper.make_node("DepthToSpace", ["corrected"], ["output"], name="depth_to_space",
                                  blocksize=SCALE, mode="CRD"))
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, c, "height", "width"]) for n, c, _ in INPUTS]
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, "out_height", "out_width"])
    graph = helper.make_graph(nodes, f"upscale_x2_{net.arch}", ins, [out], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", nets.OPSET)], producer_name="tools/train")
    model.ir_version = 8
    helper.set_model_props(model, {k: str(v) for k, v in metadata.items()})
    onnx.checker.check_model(model, full_check=True)
    nets.check_ops(model)
    return model


def check_export(model: onnx.ModelProto, net: TemporalNet, frames) -> float:
    """Max abs difference between onnxruntime on the export and the torch net on `frames`."""
    import onnxruntime as ort

    color, depth, motion, jitter, _ = frames
    history = reset_history(color)
    with torch.no_grad():
        want = net.to("cpu").float()(color.cpu(), depth.cpu(), motion.cpu(), history.cpu(), jitter.cpu())
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    planes = jitter[:, :, None, None].expand(-1, -1, *color.shape[-2:])
    feeds = {"color": color, "depth": depth, "motion": motion, "history": history, "jitter": planes}
    got = sess.run(None, {k: v.cpu().contiguous().numpy().astype(np.float32) for k, v in feeds.items()})[0]
    return float(np.abs(got - want.numpy()).max())


# ---------------------------------------------------------------------------------------------
# Training


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="a `dataset --sequences` folder (dataset.json, train/, val/)")
    ap.add_argument("--out", required=True, help="models/NAME.onnx (NAME.metrics.json is written beside it)")
    ap.add_argument("--arch", default="tsr16", choices=sorted(ARCHS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=100000, help="at most this many steps")
    ap.add_argument("--time-budget", type=float, default=0, help="seconds of training; 0 = --steps")
    ap.add_argument("--plan-file", default="",
                    help="with --time-budget: runs trained side by side share one step count (the first "
                         "to plan writes it to this file, the others read it), so their seeds compare")
    ap.add_argument("--init", default="",
                    help="start from this exported model (same --arch) instead of a random net: a fine-tune")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--patch", type=int, default=64, help="low-resolution crop size")
    ap.add_argument("--unroll", type=int, default=6, help="frames per step with gradient")
    ap.add_argument("--warm-max", type=int, default=8,
                    help="up to this many frames (random per step) run without gradient first")
    ap.add_argument("--temporal-weight", type=float, default=0.5)
    ap.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (cosine to 1 %%)")
    ap.add_argument("--warmup", type=int, default=8, help="frames of each val sequence scored apart")
    ap.add_argument("--eval-every", type=float, default=120, help="seconds between val scores")
    ap.add_argument("--val-limit", type=int, default=0, help="score only the first N val sequences")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--tf32", action="store_true", help="CUDA convs in TF32 (export and scores stay fp32)")
    ap.add_argument("--amp", default="off", choices=["off", "fp16", "bf16"],
                    help="training steps under autocast (fp16: CUDA only, with a gradient scaler); "
                         "the val scores and the export stay fp32")
    ap.add_argument("--compare", default="", help="a spatial model (ONNX) to score on the same val frames")
    ap.add_argument("--snapshot", default="", help="export to this file at every val score (no checks)")
    ap.add_argument("--hold-prob", type=float, default=0.0,
                    help="share of steps whose crops are a held camera: one frame given again and again "
                         "(zero motion, the same jitter), so the net learns to keep a still picture")
    ap.add_argument("--hold-warm", type=int, default=32,
                    help="frames without gradient before a held step's unrolled ones")
    ap.add_argument("--history-filter", default="bilinear", choices=list(HISTORY_FILTERS),
                    help="how the warp resamples the previous output: bilinear (the shipped model's) or "
                         "catmull_rom (sharper: a history resampled every frame keeps more detail; "
                         "the export says it in upscale.history_filter, which the patterns follow)")
    ap.add_argument("--history", default="clamped", choices=["clamped", "plain"],
                    help="clamped: the warped history clamped to the 3x3 box of this frame's colour "
                         "(`clamp_history`; what the patterns feed a model whose metadata says so); "
                         "plain: the first model's history, warped only")
    ap.add_argument("--hold", type=int, default=64,
                    help="frames of the held-camera score at every val score (0: none)")
    return ap.parse_args(argv)


# The step at which a --time-budget run turns its budget into a step count (steps 5..PLAN_AT timed:
# enough to hold several held-camera steps at --hold-prob 0.25).
PLAN_AT = 40


def shared_total(path: str, mine: int) -> tuple:
    """One step count for runs trained side by side (seeds compared at equal steps): the first to
    plan writes its count to `path`, the others read it. Returns (count, whether this run planned)."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        for _ in range(600):
            with open(path) as f:
                text = f.read().strip()
            if text:
                return int(text), False
            time.sleep(0.1)
        raise SystemExit(f"--plan-file {path}: still empty after 60 s (the run that created it died?)")
    with os.fdopen(fd, "w") as f:
        f.write(f"{mine}\n")
    return mine, True


def train(args) -> dict:
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    dev = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)
    t0 = time.time()
    train_ds = Sequences(args.data, "train").to(dev)
    val_ds = Sequences(args.data, "val", limit=args.val_limit).to(dev)
    s, k, h, w = train_ds.shape
    print(f"data: {s} train sequences x {k} frames at {w}x{h}, {val_ds.shape[0]} val x {val_ds.shape[1]}, "
          f"loaded in {time.time() - t0:.1f} s on {dev}", flush=True)
    if args.unroll + 1 > k:
        raise SystemExit(f"--unroll {args.unroll} needs sequences of more than {args.unroll} frames (they have {k})")

    log = {"args": vars(args), "evals": []}
    baselines = {"bilinear": evaluate(bilinear, val_ds, args.warmup, temporal=False)}
    if args.compare:
        spatial = nets.from_onnx(args.compare).to(dev).eval()
        baselines[os.path.basename(args.compare)] = evaluate(spatial, val_ds, args.warmup, temporal=False)
    for name, b in baselines.items():
        print(f"val {name} (jittered frames): PSNR-Y {b['steady']['psnr_y']:.3f} tPSNR-Y {b['steady']['tpsnr_y']:.3f} "
              f"after warm-up, {b['warmup']['psnr_y']:.3f} in it", flush=True)
    log["baselines"] = baselines

    net = TemporalNet(args.arch, history_clamp=args.history == "clamped", history_filter=args.history_filter)
    if args.init:
        net.load_onnx(args.init)
        print(f"initialised from {args.init}", flush=True)
    net = net.to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    if args.amp == "fp16" and dev.type != "cuda":
        raise SystemExit(f"--amp fp16 needs a CUDA device (this run is on {dev}); use --amp bf16 or off")
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.amp)
    scaler = torch.amp.GradScaler(dev.type, enabled=args.amp == "fp16")
    gen = torch.Generator(device=dev).manual_seed(args.seed)
    pick = random.Random(args.seed)
    total = args.steps
    start, last_eval, step, times = time.time(), time.time(), 0, []

    def score(tag):
        net.eval()
        e = evaluate(net, val_ds, args.warmup)
        hold = evaluate_hold(net, val_ds, args.hold) if args.hold > 0 else None
        net.train()
        e.update(step=step, seconds=round(time.time() - start, 1), tag=tag, hold=hold)
        log["evals"].append(e)
        hold_note = (f"; held {hold['frames']} frames: PSNR-Y {hold['first_psnr_y']:.3f} -> "
                     f"{hold['last_psnr_y']:.3f}" if hold else "")
        # Before a --time-budget run plans its steps, the count is not known yet.
        planned = total if args.time_budget <= 0 or step >= PLAN_AT else "?"
        print(f"step {step}/{planned} [{e['seconds']:.0f} s] val PSNR-Y {e['steady']['psnr_y']:.3f} "
              f"tPSNR-Y {e['steady']['tpsnr_y']:.3f} after warm-up, PSNR-Y {e['warmup']['psnr_y']:.3f} "
              f"in it{hold_note}", flush=True)
        if args.snapshot:
            snap = {"scale": SCALE, "upscale.arch": args.arch, **history_metadata(net.history_clamp, net.history_filter)}
            onnx.save(to_onnx(net, snap), args.snapshot)
        return e

    if args.init:
        score("init")  # where the fine-tune starts (the held-camera score included)
        last_eval = time.time()
    while step < total:
        t_step = time.time()
        for g in opt.param_groups:
            floor = args.lr * 0.01
            g["lr"] = floor + 0.5 * (args.lr - floor) * (1.0 + math.cos(math.pi * step / max(total, 1)))
        held = pick.random() < args.hold_prob
        if held:
            # One frame again and again: its inputs with zero motion, its own target.
            warm, first = args.hold_warm, pick.randint(0, k - 1)
        else:
            warm = pick.randint(0, min(args.warm_max, k - args.unroll - 1))
            first = pick.randint(0, k - warm - args.unroll)
        crops = Crops(train_ds, args.batch, args.patch, gen)
        if held:
            still = crops.frame(first)
            still = (still[0], still[1], torch.zeros_like(still[2]), still[3], still[4])
        frame_at = (lambda t: still) if held else crops.frame
        prev = None
        with torch.autocast(dev.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            with torch.no_grad():
                for t in range(first, first + warm):
                    prev = step_frames(net, frame_at(t), prev)
            loss, prev_target = 0.0, None
            for t in range(first + warm, first + warm + args.unroll):
                frames = frame_at(t)
                out = step_frames(net, frames, prev).float()
                target = frames[4]
                loss = loss + F.l1_loss(out, target)
                if prev is not None and prev_target is not None and args.temporal_weight > 0:
                    loss = loss + args.temporal_weight * F.l1_loss(out - prev, target - prev_target)
                prev, prev_target = out, target
            loss = loss / args.unroll
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        step += 1
        times.append(time.time() - t_step)
        if step == PLAN_AT and args.time_budget > 0:
            per_step = sum(times[5:]) / len(times[5:])
            mine = max(step, min(args.steps, int(args.time_budget / per_step) // 100 * 100))
            total, planner = shared_total(args.plan_file, mine) if args.plan_file else (mine, True)
            print(f"{per_step * 1000:.0f} ms per step: {total} steps in {args.time_budget:.0f} s"
                  + ("" if planner else f" (planned by the first run to reach step {PLAN_AT}; this one planned {mine})"),
                  flush=True)
        if step % 100 == 0:
            print(f"step {step}/{total} loss {loss.item():.5f} lr {opt.param_groups[0]['lr']:.2e}", flush=True)
        if time.time() - last_eval >= args.eval_every and step < total:
            score("periodic")
            last_eval = time.time()
    train_s = time.time() - start
    final = score("final")

    net = net.cpu().eval()
    meta = {
        "scale": SCALE, "upscale.arch": args.arch, "upscale.kind": "temporal",
        "upscale.inputs": ",".join(n for n, _, _ in INPUTS),
        **history_metadata(net.history_clamp, net.history_filter),
        "upscale.params": nets.param_count(net),
        "upscale.macs_per_output_pixel": macs_per_output_pixel(args.arch),
    }
    model = to_onnx(net, meta)
    diff = check_export(model, net, val_ds.frame(0, 0))
    if diff > 1e-4:
        raise SystemExit(f"the export differs from the torch net by {diff:.2e} (limit 1e-4)")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    onnx.save(model, args.out)
    log.update(final=final, steps=step, train_seconds=round(train_s, 1),
               ms_per_step=round(1000 * sum(times[5:]) / max(1, len(times[5:])), 2),
               onnx_vs_torch_max_abs=diff, params=meta["upscale.params"],
               macs_per_output_pixel=meta["upscale.macs_per_output_pixel"], device=str(dev),
               torch=torch.__version__, data={"train": train_ds.shape, "val": val_ds.shape})
    with open(os.path.splitext(args.out)[0] + ".metrics.json", "w") as f:
        json.dump(log, f, indent=1)
    print(f"wrote {args.out} ({meta['upscale.params']} parameters, {meta['upscale.macs_per_output_pixel']:.0f} "
          f"MACs per output pixel; ONNX Runtime vs torch max abs {diff:.2e}); {step} steps in {train_s:.0f} s",
          flush=True)
    return log


if __name__ == "__main__":
    train(parse_args())
