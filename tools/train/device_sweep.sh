#!/usr/bin/env bash
# Architecture sweep on the GPU machine, one unattended call: render the dataset exactly as
# device_train.sh does, then train every candidate side by side on the one GPU and bring back
# all exported models, their metrics and the logs as $OUT/sweep.tgz. The winner is then measured
# here with `upscale-demo quality` (the figure that counts) and shipped by device_train.sh.
#
# Run from the repository root:  OUT=$OUT bash tools/train/device_sweep.sh
# Or detached, so one call can start it and keep the GPU machine busy with something else while
# it trains, and a later call (while the machine is still warm) collects it:
#   bash tools/train/device_sweep.sh start          # returns at once; log in /tmp/sweep/sweep.log
#   OUT=$OUT bash tools/train/device_sweep.sh collect  # waits (COLLECT_WAIT_S) and packs results
# A long training spans calls the same way: `start`, then `collect` in every following call
# (each packs what is there so far, e.g. --snapshot files) until the log says done.
# CANDIDATES is a space-separated list of NAME:ARCH[:ARG,ARG...] (ARGs go to train.py, commas
# become spaces), e.g. "deep18b:deep18:--batch=256,--lr=1.5e-3".
set -euo pipefail
export PYTHONUNBUFFERED=1

BIN="${BIN:-.devrun/upscale-demo}"
PY="${PYTHON:-python3}"
OUT="${OUT:-}"
DS="${DS:-/tmp/upscale-ds}"
COUNT="${COUNT:-1200}"
SEED="${SEED:-1}"
BUDGET_S="${BUDGET_S:-240}"
# A hard stop per training (loading, epochs, evaluation, export): keep one call within its limit.
# TRAIN_TIMEOUT_S="${TRAIN_TIMEOUT_S:-BUDGET_S + 200}"
# Few at a time: the one GPU time-slices between processes, so six side by side each ran ~4x
# slower per epoch than two (first sweep, 2026-12-02).
CANDIDATES="${CANDIDATES:-deep18:deep18 deep18_again:deep18 fsr16:fsr16}"
W=/tmp/sweep
start=$SECONDS

pack() {
    mkdir -p "$OUT"
    tar czf "$OUT/sweep.tgz" -C "$W" . && ls -l "$OUT"
}
case "${1:-run}" in
    start)
        rm -rf "$W" && mkdir -p "$W"
        setsid nohup bash "$0" run >"$W/sweep.log" 2>&1 </dev/null &
        echo "sweep started in the background (log $W/sweep.log)"
        exit 0 ;;
    collect)
        deadline=$((SECONDS + ${COLLECT_WAIT_S:-300}))
        until [ -f "$W/done" ] || [ $SECONDS -ge $deadline ]; do sleep 5; done
        [ -f "$W/done" ] || echo "warning: the sweep is still running; packing what it wrote so far"
        tail -n 20 "$W/sweep.log" || true
        pack
        exit 0 ;;
    run) ;;
    *) echo "usage: $0 [run|start|collect]"; exit 2 ;;
esac
mkdir -p "$W"
stamp() { echo "== [$((SECONDS - start)) s] $*"; }

[ -x "$BIN" ] || { echo "error: $BIN is not an executable (set BIN=path/to/upscale-demo)"; exit 1; }
stamp "CPU checks of tools/train (every architecture exports and matches onnxruntime)"
"$PY" tools/train/test_train.py 2>&1 | tail -n 12

# SPEED=ARCH: time train.py's speed options for ARCH (tools/train/speed.py, ~1 min) and give
# every candidate the fastest (speed.log says which and why).
chosen=""
if [ -n "${SPEED:-}" ]; then
    stamp "training speed of $SPEED under train.py's speed options"
    # shellcheck disable=SC2086
    chosen="$("$PY" tools/train/speed.py --arch "$SPEED" ${SPEED_ARGS:---patch 96 --steps 200} --choose 2>&1 \
        | tee "$W/speed.log" | sed -n 's/^chosen: //p')" || echo "warning: the speed check failed; no speed options"
    cat "$W/speed.log"
fi

stamp "dataset: $COUNT train pairs (+ val) with seed $SEED into $DS"
rm -rf "$DS"
timeout "${DATASET_LIMIT_S:-170}" "$BIN" dataset --out "$DS" --count "$COUNT" --seed "$SEED" > "$W/dataset.log" 2>&1 \
    || echo "warning: dataset stopped early (exit $?); training on the pairs written so far"
tail -n 3 "$W/dataset.log"; cp "$DS/dataset.json" "$W/" 2>/dev/null || true

stamp "training ${CANDIDATES// /, } side by side (each within ${BUDGET_S} s of epochs)"
pids=()
for c in $CANDIDATES; do
    IFS=: read -r name arch extra <<<"$c"
    # shellcheck disable=SC2086
    ( timeout "${TRAIN_TIMEOUT_S:-$((BUDGET_S + 200))}" "$PY" tools/train/train.py --data "$DS" --arch "$arch" --out "$W/$name.onnx" --epochs 1000 \
        --seed "$SEED" --time-budget "$BUDGET_S" --eval-every 10 ${extra//,/ } $chosen 2>&1 \
        | sed -u "s/^/{$name} /" > "$W/$name.log" ) &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || echo "warning: a candidate failed (see its log)"; done
stamp "results (train-time val PSNR-Y over bicubic)"
grep -h "wrote" "$W"/*.log 2>/dev/null || true  # (not from sweep.log itself, which grep skips when it is stdout)
touch "$W/done"
[ "${1:-run}" = run ] && [ -n "${OUT:-}" ] && pack
stamp "done"
