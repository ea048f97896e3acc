#!/usr/bin/env python3
"""Continue training an exported model (an ONNX file written by train.py) and export it again.

    python3 tools/train/finetune.py --data /tmp/ds --init models/quality_x2.onnx \
        --out /tmp/q_ft.onnx --steps 1200 --loss mse --lr 2e-5 --seed 1

The second stage of the shipped quality_x2's training (models/README.md): train.py's L1 loss
leaves PSNR on the table, and PSNR is mean squared error, so a short stage with the squared
error at a low learning rate moves the weights to where the metric is best. It works on the
exported graph's own convs (a PlainNet read from the ONNX initializers: a collapsible net's
training form is gone after export, and its collapsed convs are the same function), on the
same random crops as train.py, with Adam and a cosine learning rate from --lr down to 1 % of it.
It runs on a CPU in reasonable time (the exported net is small): every run with the same
arguments and thread count is bit-identical.

The val split is scored before and after, and every --eval-every steps on --val-frames of its
frames after the first --val-from (the views `upscale-demo quality --frames 16` scores, which
no choice of this stage looks at) as a progress line; the model written is the one after
--steps, never picked by a val score. The export is checked as train.py checks it (op set, onnxruntime vs
torch) and NAME.metrics.json records the arguments, both val scores and the time taken.
"""

import argparse
import os
import sys
import time

import onnx
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402
import nets  # noqa: E402
import train  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="dataset folder (has train/ and val/)")
    ap.add_argument("--init", required=True, help="the ONNX model to start from (a train.py export)")
    ap.add_argument("--out", required=True, help="where to write the fine-tuned ONNX model")
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--patch", type=int, default=96, help="low-resolution crop size")
    ap.add_argument("--lr", type=float, default=2e-5, help="peak learning rate")
    ap.add_argument("--loss", choices=["mse", "l1"], default="mse")
    ap.add_argument("--eval-every", type=int, default=100, help="steps between progress scores")
    ap.add_argument("--val-from", type=int, default=16,
                    help="the progress score leaves out the val split's first N frames (the views "
                         "`upscale-demo quality --frames 16` scores)")
    ap.add_argument("--val-frames", type=int, default=24, help="val frames in the progress score")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    return ap.parse_args(argv)


def loss_fn(kind: str, out, target):
    if kind == "mse":
        return torch.nn.functional.mse_loss(out, target)
    return torch.nn.functional.l1_loss(out, target)


def finetune(args, net, train_lr, train_hr, val_lr, val_hr, device, log=print):
    """Runs args.steps steps on `net` in place; returns the progress history."""
    gen = torch.Generator(device=device).manual_seed(args.seed)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    history, start = [], time.time()
    first = min(args.val_from, max(len(val_lr) - 1, 0))
    progress_lr, progress_hr = val_lr[first:first + args.val_frames], val_hr[first:first + args.val_frames]
    net.train()
    for step in range(1, args.steps + 1):
        train.set_lr(opt, train.cosine_lr(args.lr, step - 1, args.steps))
        lr_p, hr_p = data.random_crops(train_lr, train_hr, args.batch, args.patch, gen)
        loss = loss_fn(args.loss, net(lr_p), hr_p)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % args.eval_every == 0 or step == args.steps:
            net.eval()
            psnr = train.evaluate(net, progress_lr, progress_hr, device)
            net.train()
            elapsed = time.time() - start
            history.append({"step": step, "val_psnr_y_progress_frames": round(psnr, 4),
                            "seconds": round(elapsed, 1)})
            log(f"[finetune] step {step}/{args.steps}: loss {loss.item():.3e}, val PSNR-Y "
                f"(val frames {first}..{first + len(progress_lr) - 1}) {psnr:.3f} dB, "
                f"{elapsed / step:.2f} s/step, ~{elapsed / step * (args.steps - step) / 60:.0f} min left")
    net.eval()
    return history


def main():
    args = parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    train.seed_everything(args.seed)
    device = torch.device(args.device)
    t0 = time.time()
    net = nets.from_onnx(args.init).to(device)
    init_meta = {p.key: p.value for p in onnx.load(args.init).metadata_props}
    train_lr, train_hr = data.load_split(args.data, "train")
    val_lr, val_hr = data.load_split(args.data, "val")
    if min(train_lr.shape[2:]) < args.patch:
        raise SystemExit(f"--patch {args.patch} is larger than the low-res frames {tuple(train_lr.shape[2:])}")
    train_lr, train_hr = train_lr.to(device), train_hr.to(device)
    print(f"[finetune] {args.init} ({net.arch}, {nets.param_count(net)} parameters): {len(train_lr)} train / "
          f"{len(val_lr)} val pairs, {args.steps} steps of batch {args.batch}, {args.patch}x{args.patch} crops, "
          f"{args.loss}, peak lr {args.lr:g}, {torch.get_num_threads()} threads", flush=True)

    net.eval()
    before = train.evaluate(net, val_lr, val_hr, device)
    print(f"[finetune] val PSNR-Y before: {before:.4f} dB ({len(val_lr)} frames)", flush=True)
    trained_start = time.time()
    history = finetune(args, net, train_lr, train_hr, val_lr, val_hr, device,
                       log=lambda line: print(line, flush=True))
    trained_s = time.time() - trained_start
    after = train.evaluate(net, val_lr, val_hr, device)
    bicubic = data.bicubic_psnr_y(val_lr, val_hr, device)

    meta = dict(init_meta)
    meta.update({"upscale.finetune": f"{args.steps} steps {args.loss} lr {args.lr:g} from "
                                      f"{os.path.basename(args.init)}"})
    max_diff = train.export_checked(net, meta, args.out, val_lr)
    metrics = {
        "model": os.path.basename(args.out), "init": os.path.basename(args.init), "arch": net.arch,
        "params": nets.param_count(net), "steps": args.steps, "batch": args.batch, "patch": args.patch,
        "loss": args.loss, "lr": args.lr, "seed": args.seed, "threads": torch.get_num_threads(),
        "train_pairs": len(train_lr), "val_pairs": len(val_lr),
        "val_psnr_y_before": round(before, 4), "val_psnr_y": round(after, 4),
        "val_psnr_y_bicubic": round(bicubic, 4), "val_gain_over_bicubic_db": round(after - bicubic, 4),
        "history": history, "train_seconds": round(trained_s, 1),
        "seconds_per_step": round(trained_s / max(args.steps, 1), 3),
        "total_seconds": round(time.time() - t0, 1), "device": str(device), "torch": torch.__version__,
        "onnx_vs_torch_max_abs_diff": max_diff,
    }
    metrics_path = train.write_metrics(args.out, metrics)
    print(f"[finetune] val PSNR-Y {before:.4f} -> {after:.4f} dB ({after - before:+.4f}; bicubic {bicubic:.4f}, "
          f"{after - bicubic:+.3f} dB); wrote {args.out} and {metrics_path}", flush=True)


if __name__ == "__main__":
    main()
