#!/usr/bin/env python3
"""Reference timings: the shipped models' architectures run by PyTorch + cuDNN on the GPU, at
the benchmark's resolutions, so `upscale-demo bench --reference FILE` can set our in-stream
engine's figures beside what a mature GPU stack does with the same network.

    python3 tools/reference/reference.py --models models/quality_x2.onnx,models/fast_x2.onnx \
        --res 960x540,640x360 --out out/reference.json

For each model (architecture and weights read from the ONNX file: the `upscale.arch`
metadata names the torch module in tools/train/nets.py, the Conv initialisers fill it), each
input size and each precision:
- `fp32`: float32 with TF32 off (the same arithmetic as our engine),
- `tf32`: float32 inputs, cuDNN allowed to use TF32 tensor cores,
- `fp16`: half precision, NCHW; `fp16-nhwc`: half precision, channels-last memory format,
- `fp16-nhwc-graph`: the same captured once in a CUDA graph and replayed (no launch cost),
- `fp16-nhwc-compile`: `torch.compile(mode="max-autotune")` of the fp16 channels-last net
  (Triton kernels chosen by autotuning, CUDA graphs; minutes of compilation: only the models
  and sizes in --compile, by default the first of each),
the forward pass (convs, pixel shuffle, bilinear base, add) is timed with CUDA events around
each call after --warmup calls (cuDNN autotuning on), --runs times; the JSON holds the median
and the 10th/90th percentiles of one call, and `loop_ms`: --runs calls back to back between
two events, divided by --runs (what a stream of frames costs when nothing waits between
them). The fp16/tf32 outputs are also compared with fp32 (max abs difference, in the JSON) so
a reader sees what the speed costs in accuracy.
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
import nets  # noqa: E402

DTYPES = ["fp32", "tf32", "fp16", "fp16-nhwc", "fp16-nhwc-graph", "fp16-nhwc-compile"]


def load_model(path: str) -> nets.PlainNet:
    return nets.from_onnx(path).eval()


def parse_res(text: str):
    w, h = text.lower().split("x")
    return int(w), int(h)


def time_forward(net, x, warmup: int, runs: int):
    """Per-call times (ms), the back-to-back mean (ms) and the output."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    with torch.inference_mode():
        for _ in range(warmup):
            y = net(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(runs):
            start.record()
            y = net(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        start.record()
        for _ in range(runs):
            y = net(x)
        end.record()
        end.synchronize()
        loop = start.elapsed_time(end) / runs
    return np.array(times), loop, y


def graphed(net, x):
    """`net` on `x` captured in a CUDA graph: calling the result replays it (same input buffer)."""
    with torch.inference_mode():
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                net(x)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = net(x)

    def replay(_x):
        graph.replay()
        return out

    return replay


def prepare(path, dtype, base, x32, dev):
    """The net and input for one precision/variant."""
    if not dtype.startswith("fp16"):
        return base, x32
    net, x = load_model(path).to(dev).half(), x32.half()
    if "nhwc" in dtype:
        net, x = net.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last)
    if dtype == "fp16-nhwc-graph":
        net = graphed(net, x)
    elif dtype == "fp16-nhwc-compile":
        net = torch.compile(net, mode="max-autotune")
    return net, x


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="models/quality_x2.onnx,models/fast_x2.onnx")
    ap.add_argument("--res", default="960x540,640x360", help="input (render) sizes, comma separated")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--compile", default="first",
                    help="model:WxH pairs to also torch.compile (minutes each), comma separated; "
                         "'first' (default): the first model at the first size; 'none'")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: the reference timings are meant for the GPU machine")
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    entries = []
    if args.compile == "first":
        first = os.path.splitext(os.path.basename(args.models.split(",")[0]))[0]
        compile_set = {(first, args.res.split(",")[0].lower())}
    elif args.compile == "none":
        compile_set = set()
    else:
        compile_set = {tuple(p.split(":")) for p in args.compile.split(",")}
    for path in args.models.split(","):
        name = os.path.splitext(os.path.basename(path))[0]
        base = load_model(path).to(dev)
        for res in args.res.split(","):
            w, h = parse_res(res)
            x32 = torch.rand(1, 3, h, w, device=dev, generator=torch.Generator(device=dev).manual_seed(1))
            ref = None
            for dtype in DTYPES:
                if dtype == "fp16-nhwc-compile" and (name, res.lower()) not in compile_set:
                    continue
                torch.backends.cudnn.allow_tf32 = dtype == "tf32"
                torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
                t0 = time.time()
                net, x = prepare(path, dtype, base, x32, dev)
                times, loop, y = time_forward(net, x, args.warmup, args.runs)
                y = y.float()
                if ref is None:
                    ref = y
                entry = {
                    "model": name, "arch": base.arch, "input": f"{w}x{h}", "output": f"{2 * w}x{2 * h}",
                    "dtype": dtype, "median_ms": round(float(np.median(times)), 4),
                    "p10_ms": round(float(np.percentile(times, 10)), 4),
                    "p90_ms": round(float(np.percentile(times, 90)), 4), "runs": args.runs,
                    "loop_ms": round(float(loop), 4), "setup_s": round(time.time() - t0, 1),
                    "max_abs_diff_vs_fp32": round(float((y - ref).abs().max()), 6),
                }
                entries.append(entry)
                print(f"{name} {w}x{h} {dtype:17s} median {entry['median_ms']:.3f} ms "
                      f"(p10 {entry['p10_ms']:.3f}, p90 {entry['p90_ms']:.3f}; "
                      f"back to back {entry['loop_ms']:.3f} ms; "
                      f"vs fp32 {entry['max_abs_diff_vs_fp32']:.1e})", flush=True)
    report = {
        "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "host": platform.node(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "method": "CUDA events around each forward call, after warm-up; loop_ms: --runs calls "
                  "back to back between two events; cudnn.benchmark on; batch 1",
        "entries": entries,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
