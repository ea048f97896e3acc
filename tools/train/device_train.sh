#!/usr/bin/env bash
# One unattended call on the GPU machine: render the dataset with the headless binary, train the
# `quality` and `fast` x2 models (in parallel on the one GPU), export and check them, measure them
# with `upscale-demo quality`, and copy the results into $OUT (8 files at most).
#
# Run from the repository root:  bash tools/train/device_train.sh
# Needs: .devrun/upscale-demo (release binary), assets/, python3 with torch, numpy, onnx and
# onnxruntime. Everything can be overridden by environment variables (defaults below); a CPU
# smoke test is  COUNT=16 EPOCHS=1 QUALITY_FRAMES=4 BIN=target/release/upscale-demo bash ...
#
# REPEAT=1 trains `quality` a second time with the same command and seed (into
# $MODELS/repeat/), side by side with the others, to show how far a re-run lands from the first.
#
# Time plan for one 10-minute call on an H200 (worst case ~9 min): dataset <= 3 min (cut off at
# DATASET_LIMIT_S, training then uses the pairs written), training within BUDGET_S
# (both models together, they run side by side), export + checks + quality ~1 min.
set -euo pipefail
export PYTHONUNBUFFERED=1

BIN="${BIN:-.devrun/upscale-demo}"
PY="${PYTHON:-python3}"
OUT="${OUT:-out/train}"
DS="${DS:-/tmp/upscale-ds}"
COUNT="${COUNT:-1200}"
SEED="${SEED:-1}"
EPOCHS="${EPOCHS:-150}"
BUDGET_S="${BUDGET_S:-210}"
QUALITY_FRAMES="${QUALITY_FRAMES:-16}"
# quality_x2's network and options (models/README.md: sesr16, 96x96 crops, TF32 since
# 2026-12-03; QUALITY_ARCH=quality QUALITY_ARGS= gives the earlier ESPCN-class model) and fast_x2's.
# One call trains sesr16 for ~86 epochs; the shipped quality_x2 trained 315 over three calls
# (device_sweep.sh start/collect, as models/README.md shows).
QUALITY_ARCH="${QUALITY_ARCH:-sesr16}"
QUALITY_ARGS="${QUALITY_ARGS:---patch 96 --tf32 --eval-every 10}"
FAST_ARGS="${FAST_ARGS:-}"
# TRAIN_FAST=0 trains only quality_x2 (and its repeat): the GPU is then shared by fewer runs.
TRAIN_FAST="${TRAIN_FAST:-1}"
MODELS="${MODELS_DIR:-models}"
# Empty: the repository's config.toml (640x360 -> 1280x720, what the game runs at).
CONFIG_ARGS=()
[ -n "${CONFIG:-}" ] && CONFIG_ARGS=(--config "$CONFIG")
LOGS="$(mktemp -d)"
start=$SECONDS
stamp() { echo "== [$((SECONDS - start)) s] $*"; }

mkdir -p "$OUT" "$MODELS"
[ -x "$BIN" ] || { echo "error: $BIN is not an executable (set BIN=path/to/upscale-demo)"; exit 1; }
"$PY" -c "import torch, numpy, onnx, onnxruntime; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), \
'| onnx', onnx.__version__, '| onnxruntime', onnxruntime.__version__)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true

stamp "dataset: $COUNT train pairs (+ val) with seed $SEED into $DS"
rm -rf "$DS"
# Val is rendered first, so a run cut by the limit still trains on the pairs it wrote.
timeout "${DATASET_LIMIT_S:-180}" "$BIN" "${CONFIG_ARGS[@]}" dataset --out "$DS" --count "$COUNT" --seed "$SEED" \
    || echo "warning: dataset stopped early (exit $?); training on the pairs written so far"
du -sh "$DS" || true

stamp "training quality ($QUALITY_ARCH)$([ "$TRAIN_FAST" = 1 ] && echo " and fast"), side by side (each within ${BUDGET_S} s of epochs)"
train() { # model name (quality | fast) [dir] [log name]
    local model=$1 dir=${2:-$MODELS} name=${3:-$1} arch args
    if [ "$model" = quality ]; then arch=$QUALITY_ARCH args=$QUALITY_ARGS; else arch=fast args=$FAST_ARGS; fi
    mkdir -p "$dir"
    # shellcheck disable=SC2086
    "$PY" tools/train/train.py --data "$DS" --arch "$arch" --out "$dir/${model}_x2.onnx" \
        --epochs "$EPOCHS" --seed "$SEED" --time-budget "$BUDGET_S" $args 2>&1 | tee "$LOGS/train_$name.log"
    return "${PIPESTATUS[0]}"
}
train quality & pid_quality=$!
pid_fast=""
[ "$TRAIN_FAST" = 1 ] && { train fast & pid_fast=$!; }
pid_repeat=""
[ "${REPEAT:-0}" = 1 ] && { train quality "$MODELS/repeat" quality_repeat & pid_repeat=$!; }
failed=0
wait "$pid_quality" || { echo "error: training quality failed (log above)"; failed=1; }
[ -z "$pid_fast" ] || wait "$pid_fast" || { echo "error: training fast failed (log above)"; failed=1; }
[ -z "$pid_repeat" ] || wait "$pid_repeat" || { echo "error: the repeat training failed"; failed=1; }

# The binary loads ONNX Runtime at run time: .deps/onnxruntime/ when the checkout has it, else
# the library inside the Python onnxruntime package (same 1.30 release, CPU provider).
if [ -z "${ORT_DYLIB_PATH:-}" ] && ! ls .deps/onnxruntime/lib*/libonnxruntime.so* >/dev/null 2>&1 \
        && ! ls .deps/onnxruntime/libonnxruntime.so* >/dev/null 2>&1; then
    capi="$("$PY" -c 'import onnxruntime, os; print(os.path.join(os.path.dirname(onnxruntime.__file__), "capi"))')"
    lib="$(ls "$capi"/libonnxruntime.so* 2>/dev/null | head -n1 || true)"
    [ -n "$lib" ] && export ORT_DYLIB_PATH="$lib" && echo "ONNX Runtime for the binary: $lib"
fi

archs="quality repeat/quality"
[ "$TRAIN_FAST" = 1 ] && archs="quality fast repeat/quality"
for arch in $archs; do
    model="$MODELS/${arch}_x2.onnx"
    [ -f "$model" ] || continue
    name=${arch/\//_}
    stamp "upscale-demo quality: $arch on $QUALITY_FRAMES held-out frames"
    if timeout 60 "$BIN" "${CONFIG_ARGS[@]}" quality --model "$model" --frames "$QUALITY_FRAMES" --seed "$SEED" \
            --out "$LOGS/q_$name" 2>&1 | tee "$LOGS/quality_$name.log"; then
        cp "$LOGS/q_$name/quality.json" "$OUT/${name}_x2.quality.json" || true
    else
        echo "warning: quality for $arch failed; train.py's val PSNR in the metrics stands"
    fi
done

stamp "copying results into $OUT"
for arch in ${archs/repeat\/quality/}; do
    cp "$MODELS/${arch}_x2.onnx" "$MODELS/${arch}_x2.metrics.json" "$OUT/" 2>/dev/null || true
done
for f in "$MODELS"/repeat/quality_x2.*; do
    [ -f "$f" ] && cp "$f" "$OUT/repeat_$(basename "$f")"
done
cp "$DS/dataset.json" "$OUT/dataset.json" 2>/dev/null || true
cat "$LOGS"/train_*.log "$LOGS"/quality_*.log > "$OUT/train.log" 2>/dev/null || true
ls -l "$OUT"
stamp "done (exit $failed)"
exit "$failed"
