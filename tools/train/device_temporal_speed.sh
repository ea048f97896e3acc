#!/usr/bin/env bash
# One device call: ms per training step of tools/train/temporal.py (the shipped recipe: tsr16,
# batch 32, 96x96 crops, unroll 6, up to 8 warm frames) in TF32 and under fp16 autocast, with up
# to 32 warm frames, and two fp16 runs side by side (as two seeds train), on a small sequence
# dataset (the step time does not depend on the pixels). It plans how many steps a training
# call holds.
# Run from the repository root with .devrun/ (tools/device/bundle.sh) and .gl/ carried:
#   . tools/device/env.sh && bash tools/train/device_temporal_speed.sh     # results in $OUT
set -uo pipefail
W=/tmp/temporal-speed && rm -rf "$W" && mkdir -p "$W/res"
PY="${PYTHON:-python3}"
STEPS="${STEPS:-40}"
(cd .devrun && timeout 120 ./upscale-demo --config config.toml dataset --out "$W/ds" --sequences 4 \
    --length 40 --seed 1 > "$W/res/dataset.log" 2>&1) || { echo "dataset failed"; tail -n 5 "$W/res/dataset.log"; exit 1; }
run() { # name amp warm-max
    timeout 240 "$PY" tools/train/temporal.py --data "$W/ds" --out "$W/$1.onnx" --steps "$STEPS" \
        --arch tsr16 --batch 32 --patch 96 --unroll 6 --warm-max "$3" --tf32 --eval-every 100000 \
        --val-limit 1 --amp "$2" > "$W/res/$1.log" 2>&1
}
ms() { "$PY" -c "import json,sys; m=json.load(open(sys.argv[1])); print(m['ms_per_step'], 'ms/step, final val', round(m['final']['steady']['psnr_y'], 2))" "$W/$1.metrics.json"; }
for amp in off fp16; do
    run "alone-$amp" "$amp" 8; echo "alone, --amp $amp, --warm-max 8: $(ms "alone-$amp")"
done
run alone-fp16-warm32 fp16 32; echo "alone, --amp fp16, --warm-max 32: $(ms alone-fp16-warm32)"
run pair1 fp16 8 & run pair2 fp16 8; wait
echo "two side by side, --amp fp16, --warm-max 8: $(ms pair1) | $(ms pair2)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$W/res/gpu.csv"
tar czf "$OUT/temporal-speed.tgz" -C "$W" res
