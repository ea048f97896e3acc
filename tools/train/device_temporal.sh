#!/usr/bin/env bash
# The temporal model on the GPU machine: render the sequence dataset with the headless binary,
# train tools/train/temporal.py with two seeds side by side, score the spatial quality_x2 and
# taau on the same held-out sequences with `upscale-demo quality --sequence`, and bring back
# models, metrics and logs as $OUT/temporal.tgz.
#
# A training outlives one call, so it runs detached and later calls collect it (the machine
# stays warm only ~30 s between calls, so make them back to back):
#   . tools/device/env.sh; bash tools/train/device_temporal.sh start    # returns at once
#   OUT=$OUT COLLECT_WAIT_S=500 bash tools/train/device_temporal.sh collect   # in this and later calls
# `collect` waits until the run is done or COLLECT_WAIT_S passes, then packs what is there
# (snapshots included). `start` copies the binary, assets, models and tools/train/ into /tmp
# first: what a call carries is gone from the tree in the next call.
# Needs .devrun/ (tools/device/bundle.sh) and python3 with torch, numpy, onnx and onnxruntime.
set -euo pipefail
export PYTHONUNBUFFERED=1

W=/tmp/temporal
PY="${PYTHON:-python3}"
SEQUENCES="${SEQUENCES:-64}"
LENGTH="${LENGTH:-64}"
BUDGET_S="${BUDGET_S:-720}"
# STEPS=N: every seed trains exactly N steps (the time budget then only bounds the timeout).
# Unset: the first seed to time its first steps plans the count from BUDGET_S and the others
# train the same count (temporal.py --plan-file), so the seeds still compare at equal steps.
STEPS="${STEPS:-}"
SEEDS="${SEEDS:-1 2}"
# SKIP_QUALITY=1: no quality --sequence of taau and quality_x2 beside the training (measured before).
SKIP_QUALITY="${SKIP_QUALITY:-0}"
QUALITY_LIMIT_S="${QUALITY_LIMIT_S:-300}"
# A smaller run (a CPU smoke test): CONFIG=/tmp/small.toml SEQUENCES=2 LENGTH=8 BUDGET_S=5
# QUALITY_ARGS="--sequences 1 --frames 6 --warmup 2" TRAIN_ARGS="--arch tsr8 --patch 32 --warmup 2" ...
CONFIG="${CONFIG:-config.toml}"
QUALITY_ARGS="${QUALITY_ARGS:-}"
# The recipe (2026-12-07, second session): a fine-tune of the shipped model (bilinear history,
# clamped) to the Catmull-Rom history (--history-filter catmull_rom), walks only, the two seeds
# side by side from the same weights. A CPU probe on lavapipe's sequences (1,200 steps of batch 8,
# 64 x 64) gained 0.09 dB PSNR-Y over the same fine-tune with the bilinear history. The shipped
# model's own command is in models/README.md.
TRAIN_ARGS="${TRAIN_ARGS:---arch tsr16 --batch 32 --patch 96 --unroll 6 --warm-max 8 --history-filter catmull_rom --init models/temporal_x2.onnx --lr 3e-4 --tf32 --eval-every 200}"
start=$SECONDS
stamp() { echo "== [$((SECONDS - start)) s] $*"; }

pack() {
    mkdir -p "$OUT"
    tar czf "$OUT/temporal.tgz" -C "$W" --exclude=work --exclude=ds res && ls -l "$OUT"
}
case "${1:-}" in
    start)
        rm -rf "$W" && mkdir -p "$W/work/tools" "$W/res"
        cp -r .devrun/. "$W/work/"
        cp -r tools/train "$W/work/tools/"
        cp "$0" "$W/work/device_temporal.sh"
        (cd "$W/work" && export SEQUENCES LENGTH BUDGET_S STEPS SEEDS CONFIG QUALITY_ARGS TRAIN_ARGS SKIP_QUALITY QUALITY_LIMIT_S \
            && setsid nohup bash device_temporal.sh run >"$W/res/run.log" 2>&1 </dev/null &)
        echo "started in the background (log $W/res/run.log)"
        exit 0 ;;
    collect)
        deadline=$((SECONDS + ${COLLECT_WAIT_S:-300}))
        until [ -f "$W/res/done" ] || [ $SECONDS -ge $deadline ]; do sleep 5; done
        [ -f "$W/res/done" ] || echo "warning: still running; packing what is there so far"
        tail -n 30 "$W/res/run.log" || true
        for s in $SEEDS; do tail -n 3 "$W/res/train_s$s.log" 2>/dev/null || true; done
        pack
        exit 0 ;;
    run) ;;
    *) echo "usage: $0 start | collect | run (run: in $W/work, what start launches)"; exit 2 ;;
esac

R="$W/res"
"$PY" -c "import torch, numpy, onnx, onnxruntime; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
stamp "CPU checks of tools/train/temporal.py"
"$PY" tools/train/test_temporal.py 2>&1 | tail -n 10

stamp "dataset: $SEQUENCES sequences x $LENGTH frames (+ the held-out val split)"
timeout "${DATASET_LIMIT_S:-400}" ./upscale-demo --config "$CONFIG" dataset --out "$W/ds" \
    --sequences "$SEQUENCES" --length "$LENGTH" --seed 1 > "$R/dataset.log" 2>&1 \
    || { echo "error: dataset failed (exit $?)"; tail -n 5 "$R/dataset.log"; touch "$R/done"; exit 1; }
tail -n 1 "$R/dataset.log"; cp "$W/ds/dataset.json" "$R/"; du -sh "$W/ds"

stamp "training seeds $SEEDS side by side (each within $BUDGET_S s of steps)"
pids=()
for s in $SEEDS; do
    # shellcheck disable=SC2086
    if [ -n "$STEPS" ]; then length=(--steps "$STEPS"); else length=(--time-budget "$BUDGET_S" --plan-file "$R/plan.txt"); fi
    ( timeout $((BUDGET_S + 400)) "$PY" tools/train/temporal.py --data "$W/ds" --out "$R/temporal_s$s.onnx" \
        --seed "$s" "${length[@]}" --compare models/quality_x2.onnx \
        --snapshot "$R/temporal_s$s.snapshot.onnx" $TRAIN_ARGS > "$R/train_s$s.log" 2>&1 ) &
    pids+=($!)
done
if [ "${SKIP_QUALITY:-0}" = 1 ]; then
    stamp "quality --sequence of taau and quality_x2 skipped (SKIP_QUALITY=1)"
else
    stamp "quality --sequence: taau and quality_x2 (in-stream) on the held-out sequences, beside the training"
    # shellcheck disable=SC2086
    timeout 600 ./upscale-demo --config "$CONFIG" quality --sequence --patterns taau,in-stream \
        --model models/quality_x2.onnx $QUALITY_ARGS --out "$R/quality-seq" --no-progress > "$R/quality-seq.log" 2>&1 \
        || echo "warning: quality --sequence failed (exit $?)"
    tail -n 12 "$R/quality-seq.log"
fi
for p in "${pids[@]}"; do wait "$p" || echo "warning: a training failed (see its log)"; done
grep -h "wrote" "$R"/train_s*.log || true

# The trained models beside every shipped one, measured the way the README's table is:
# quality --sequence, taau and every model in models/ in-stream, on the held-out sequences.
for s in $SEEDS; do
    if [ -f "$R/temporal_s$s.onnx" ]; then cp "$R/temporal_s$s.onnx" "models/temporal_s$s.onnx"
    elif [ -f "$R/temporal_s$s.snapshot.onnx" ]; then cp "$R/temporal_s$s.snapshot.onnx" "models/temporal_s${s}_snapshot.onnx"; fi
done
stamp "quality --sequence: taau and every model (the trained ones too) in-stream"
# shellcheck disable=SC2086
timeout "${QUALITY_LIMIT_S:-300}" ./upscale-demo --config "$CONFIG" quality --sequence --patterns taau,in-stream \
    $QUALITY_ARGS --out "$R/quality-final" --no-progress > "$R/quality-final.log" 2>&1 \
    || echo "warning: quality --sequence failed (exit $?)"
tail -n 14 "$R/quality-final.log"
touch "$R/done"
stamp "done"
