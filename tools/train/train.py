#!/usr/bin/env python3
"""Train an x2 upscaling model on `upscale-demo dataset` output and export it to ONNX.

    python3 tools/train/train.py --data /tmp/ds --arch quality --out models/quality_x2.onnx \
        --epochs 60 --seed 1 [--time-budget 240]

Trains on random aligned crops of the train split (L1 loss, Adam, cosine learning rate, fp32,
seeded and deterministic), reports PSNR-Y on the whole val split every few epochs, exports ONNX
(opset 17, input "input" [1,3,H,W] in 0..1, output "output" [1,3,2H,2W], metadata `scale`,
`upscale.arch`, `upscale.params`), checks the export (onnx.checker, allowed op set, onnxruntime
vs torch max abs diff < 1e-4) and writes NAME.metrics.json next to the model.

An "epoch" is (train images × --crops-per-image) random crops. With --time-budget the epoch
count is lowered after the first epoch so training ends within the budget; the cosine schedule
is laid out for the final count and metrics.json records the epochs actually run.
"""

import argparse
import json
import math
import os
import random
import sys
import time

# cuBLAS needs this for deterministic results (set before torch initialises CUDA).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402
import nets  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="dataset folder (has train/ and val/)")
    ap.add_argument("--arch", required=True, choices=sorted(nets.ARCHS))
    ap.add_argument("--out", required=True, help="models/NAME.onnx")
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--patch", type=int, default=48, help="low-resolution crop size")
    ap.add_argument("--crops-per-image", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--time-budget", type=float, default=0, help="seconds of training; 0 = no limit")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    ap.add_argument("--luma-loss", type=float, default=0.0,
                    help="weight of the luma term in the loss (0: L1 on RGB only; 1: L1 on luma only)")
    ap.add_argument("--tf32", action="store_true",
                    help="let CUDA convs use TF32 (faster; the export and checks stay fp32)")
    ap.add_argument("--fast", action="store_true",
                    help="trade bit-for-bit determinism for speed: cuDNN picks its fastest convs "
                         "(benchmark mode), channels-last tensors, fused Adam on CUDA")
    ap.add_argument("--bf16", action="store_true",
                    help="run the convs in bfloat16 (autocast; weights, loss and export stay fp32)")
    ap.add_argument("--cuda-graph", action="store_true",
                    help="with --fast on CUDA: capture the training step in a CUDA graph and replay it")
    ap.add_argument("--plan-epoch", type=int, default=1,
                    help="with --time-budget: the epoch after which the epoch count is set, from the "
                         "mean time of epochs 2..N (1: from the first epoch alone, warm-up included)")
    ap.add_argument("--snapshot", default="",
                    help="at every evaluation, export the current weights to this ONNX file (no checks)")
    return ap.parse_args(argv)


def seed_everything(seed: int, tf32: bool = False, fast: bool = False):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    # --fast lets cuDNN time its algorithms and keep the fastest, which may differ from run to
    # run (and so may the last bits of the weights); otherwise every run is bit-identical.
    torch.backends.cudnn.deterministic = not fast
    torch.backends.cudnn.benchmark = fast
    # fp32 means fp32 unless --tf32 asks for the tensor cores' TF32 (deterministic too).
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.use_deterministic_algorithms(not fast, warn_only=True)


@torch.no_grad()
def evaluate(upscale, val_lr, val_hr, device) -> float:
    """Mean PSNR-Y over the val frames of `upscale` (a module in eval mode, or a function)."""
    scores = []
    for lr, hr in zip(val_lr, val_hr):
        out = upscale(lr[None].to(device).float() / 255.0)[0]
        scores.append(data.psnr_y(data.to_uint8(out), hr.to(device).float()))
    return sum(scores) / len(scores)


def bilinear_only(x):
    """The networks' base without the learned residual (a reference point in the log)."""
    return torch.nn.functional.interpolate(x, scale_factor=nets.SCALE, mode="bilinear", align_corners=False)


def cosine_lr(peak: float, step: int, total: int) -> float:
    floor = peak * 0.01
    return floor + 0.5 * (peak - floor) * (1.0 + math.cos(math.pi * min(step, total) / max(total, 1)))


def loss_fn(out, target, luma_weight: float):
    """L1 on RGB, blended with L1 on BT.601 luma (the metric's channel) by `luma_weight`."""
    rgb = torch.nn.functional.l1_loss(out, target)
    if luma_weight <= 0:
        return rgb
    w = torch.tensor(data.LUMA, dtype=out.dtype, device=out.device).view(1, 3, 1, 1)
    luma = torch.nn.functional.l1_loss((out * w).sum(1), (target * w).sum(1))
    return (1.0 - luma_weight) * rgb + luma_weight * luma


def planned_epochs(epochs: int, times: list, budget: float, plan_epoch: int) -> int:
    """The epoch count that fits `budget` seconds of epochs, once `plan_epoch` epochs have run
    (their times in `times`): with plan_epoch > 1 the first epoch (warm-up, cuDNN's algorithm
    search) is left out of the estimate. Never more than asked for, never fewer than have run."""
    if budget <= 0 or len(times) != max(1, plan_epoch):
        return epochs
    per_epoch = sum(times[1:]) / (len(times) - 1) if len(times) > 1 else times[0]
    fit = len(times) + int((budget - sum(times)) / per_epoch)
    return max(len(times), min(epochs, fit))


def make_optimizer(args, net, device):
    """Adam; fused on CUDA with --fast, and with --cuda-graph also capturable, its learning rate a
    device tensor the captured step reads (set_lr writes it)."""
    if not (args.fast and device.type == "cuda"):
        return torch.optim.Adam(net.parameters(), lr=args.lr)
    if args.cuda_graph:
        return torch.optim.Adam(net.parameters(), lr=torch.tensor(args.lr, device=device),
                                fused=True, capturable=True)
    return torch.optim.Adam(net.parameters(), lr=args.lr, fused=True)


def set_lr(opt, value: float):
    for group in opt.param_groups:
        if torch.is_tensor(group["lr"]):
            group["lr"].fill_(value)
        else:
            group["lr"] = value


def make_step(args, net, opt, device, example):
    """The training step as step(lr_crops, hr_crops). With --cuda-graph the forward pass, the
    backward pass and the optimiser step are captured once into a CUDA graph and replayed on
    fixed input buffers: a step of this small net is otherwise bound by the host issuing a
    thousand small GPU operations, not by the GPU. The capture needs three ordinary steps first
    (on `example`, cuDNN's algorithm search included), which train like any other."""
    memory_format = torch.channels_last if args.fast else torch.contiguous_format

    def forward_loss(lr_p, hr_p):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16, cache_enabled=False):
            out = net(lr_p.contiguous(memory_format=memory_format))
        return loss_fn(out.float(), hr_p, args.luma_loss)

    def plain(lr_p, hr_p):
        loss = forward_loss(lr_p, hr_p)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    if not args.cuda_graph:
        return plain
    if device.type != "cuda" or not args.fast:
        raise SystemExit("--cuda-graph needs a CUDA device and --fast (fused, capturable Adam)")
    static_lr = example[0].contiguous(memory_format=memory_format).clone()
    static_hr = example[1].clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            plain(static_lr, static_hr)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        forward_loss(static_lr, static_hr).backward()
        opt.step()

    def replay(lr_p, hr_p):
        static_lr.copy_(lr_p)
        static_hr.copy_(hr_p)
        graph.replay()

    return replay


def train(args, net, train_lr, train_hr, val_lr, val_hr, device):
    gen = torch.Generator(device=device).manual_seed(args.seed)
    opt = make_optimizer(args, net, device)
    steps_per_epoch = max(1, len(train_lr) * args.crops_per_image // args.batch)
    step_fn = None
    epochs = args.epochs
    history, step, times = [], 0, []
    epoch = 0
    while epoch < epochs:
        start = time.time()
        for _ in range(steps_per_epoch):
            set_lr(opt, cosine_lr(args.lr, step, epochs * steps_per_epoch))
            lr_p, hr_p = data.random_crops(train_lr, train_hr, args.batch, args.patch, gen)
            if step_fn is None:
                step_fn = make_step(args, net, opt, device, (lr_p, hr_p))
            step_fn(lr_p, hr_p)
            step += 1
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.time() - start)
        epoch += 1
        planned = planned_epochs(epochs, times, args.time_budget, args.plan_epoch)
        if planned != epochs:
            epochs = planned
            print(f"[{args.arch}] {times[-1]:.2f} s/epoch: lowering --epochs to {epochs} to fit "
                  f"--time-budget {args.time_budget:.0f} s", flush=True)
        line = f"[{args.arch}] epoch {epoch}/{epochs}: {times[-1]:.2f} s, lr {float(opt.param_groups[0]['lr']):.2e}"
        if epoch % args.eval_every == 0 or epoch == epochs:
            net.eval()
            psnr = evaluate(net, val_lr, val_hr, device)
            net.train()
            history.append({"epoch": epoch, "val_psnr_y": round(psnr, 4)})
            line += f", val PSNR-Y {psnr:.3f} dB"
            if args.snapshot:
                import onnx

                onnx.save(nets.to_onnx(net, {"scale": nets.SCALE, "upscale.arch": args.arch,
                                             "upscale.snapshot_epoch": epoch}), args.snapshot)
        print(line, flush=True)
    return epochs, steps_per_epoch, sum(times), history


def check_with_onnxruntime(model_path, net, val_lr):
    """ORT (CPU) vs torch (CPU) on an odd-sized random input and on a val frame."""
    import onnxruntime as ort

    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    cpu_net = net.to("cpu").eval()
    rng = np.random.RandomState(0)
    inputs = [rng.uniform(0, 1, (1, 3, 37, 53)).astype(np.float32),
              (val_lr[0][None].float() / 255.0).numpy()]
    worst = 0.0
    for x in inputs:
        (y,) = sess.run(["output"], {"input": x})
        with torch.no_grad():
            ref = cpu_net(torch.from_numpy(x)).numpy()
        if y.shape != ref.shape:
            raise SystemExit(f"{model_path}: ONNX output {y.shape} != torch {ref.shape}")
        worst = max(worst, float(np.abs(y - ref).max()))
    if worst >= 1e-4:
        raise SystemExit(f"{model_path}: onnxruntime differs from torch by {worst:.2e} (limit 1e-4)")
    return worst


def export_checked(net, meta: dict, out: str, val_lr) -> float:
    """Writes `net` as ONNX to `out` with `meta`, after the op-set check; returns the
    onnxruntime vs torch max abs difference (check_with_onnxruntime fails above 1e-4)."""
    import onnx

    model = nets.to_onnx(net, meta)
    nets.check_ops(model)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    onnx.save(model, out)
    return check_with_onnxruntime(out, net, val_lr)


def write_metrics(out: str, metrics: dict) -> str:
    """Writes `metrics` to NAME.metrics.json next to the model `out`; returns its path."""
    path = os.path.splitext(out)[0] + ".metrics.json"
    with open(path, "w") as f:
        json.dump(metrics, f, indent=2)
    return path


def time_onnxruntime(model_path, width=640, height=360, threads=2, runs=20) -> float:
    """Median ms of ORT CPU inference at width x height input with `threads` intra-op threads."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    x = np.random.RandomState(1).uniform(0, 1, (1, 3, height, width)).astype(np.float32)
    t = time.perf_counter()
    for _ in range(3):
        sess.run(["output"], {"input": x})
    if time.perf_counter() - t > 3.0:
        runs = 3  # a net far over the CPU budget (a capacity probe): a rough figure will do
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(["output"], {"input": x})
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))


def main():
    args = parse_args()
    seed_everything(args.seed, args.tf32, args.fast)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available()
                          else ("cpu" if args.device == "auto" else args.device))
    t0 = time.time()
    train_lr, train_hr = data.load_split(args.data, "train")
    val_lr, val_hr = data.load_split(args.data, "val")
    if min(train_lr.shape[2:]) < args.patch:
        raise SystemExit(f"--patch {args.patch} is larger than the low-res frames {tuple(train_lr.shape[2:])}")
    print(f"[{args.arch}] {len(train_lr)} train / {len(val_lr)} val pairs "
          f"{train_lr.shape[3]}x{train_lr.shape[2]} -> {train_hr.shape[3]}x{train_hr.shape[2]}, "
          f"loaded in {time.time() - t0:.1f} s, device {device}", flush=True)
    train_lr, train_hr = train_lr.to(device), train_hr.to(device)

    net = nets.build(args.arch).to(device)
    if args.fast:
        net = net.to(memory_format=torch.channels_last)
    params = nets.param_count(net)
    macs = nets.macs_per_output_pixel(args.arch)
    print(f"[{args.arch}] {params} parameters, {macs:.0f} MACs per output pixel", flush=True)
    epochs, steps, trained_s, history = train(args, net, train_lr, train_hr, val_lr, val_hr, device)

    meta = {"scale": nets.SCALE, "upscale.arch": args.arch, "upscale.params": params,
            "upscale.macs_per_output_pixel": round(macs), "upscale.input_layout": "NCHW",
            "upscale.range": "0..1", "upscale.residual": "bilinear"}
    max_diff = export_checked(net, meta, args.out, val_lr)
    ort_ms = time_onnxruntime(args.out)
    final = history[-1]["val_psnr_y"]
    bicubic = data.bicubic_psnr_y(val_lr, val_hr, device)
    bilinear = evaluate(bilinear_only, val_lr, val_hr, device)
    metrics = {
        "arch": args.arch, "model": os.path.basename(args.out), "params": params,
        "macs_per_output_pixel": round(macs, 1), "epochs": epochs, "steps_per_epoch": steps,
        "batch": args.batch, "patch": args.patch, "seed": args.seed, "lr": args.lr,
        "luma_loss": args.luma_loss, "tf32": args.tf32, "fast": args.fast, "bf16": args.bf16,
        "cuda_graph": args.cuda_graph,
        "train_pairs": len(train_lr), "val_pairs": len(val_lr),
        "val_psnr_y": final, "val_psnr_y_bicubic": round(bicubic, 4),
        "val_psnr_y_bilinear": round(bilinear, 4),
        "val_gain_over_bicubic_db": round(final - bicubic, 4), "history": history,
        "train_seconds": round(trained_s, 1), "seconds_per_epoch": round(trained_s / epochs, 3),
        "total_seconds": round(time.time() - t0, 1), "device": str(device),
        "torch": torch.__version__, "onnx_vs_torch_max_abs_diff": max_diff,
        "ort_cpu_ms_640x360_2threads_median20": round(ort_ms, 2),
    }
    metrics_path = write_metrics(args.out, metrics)
    print(f"[{args.arch}] val PSNR-Y {final:.3f} dB (bicubic {bicubic:.3f}, {final - bicubic:+.3f} dB); "
          f"ORT CPU 640x360 {ort_ms:.1f} ms; wrote {args.out} and {metrics_path}", flush=True)


if __name__ == "__main__":
    main()
