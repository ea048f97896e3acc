#!/usr/bin/env bash
# One part of a device call (2026-12-06): the in-stream engine of main (aa9672f's code) on the
# H200, the issue's measurement: `bench` of quality_x2 and fast_x2 in-stream at 960x540 ->
# 1920x1080, both precisions, 200 warm-up + 1000 frames, run twice. Results in $OUT/bench.tgz.
# Run from the repository root after `. tools/device/env.sh`, with .devrun/ carried.
set -uo pipefail
R=/tmp/bench-h200 && rm -rf "$R" && mkdir -p "$R/res"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/res/gpu.csv" 2>&1
for run in 1 2; do
    echo "== bench run $run"
    (cd .devrun && timeout 120 ./upscale-demo --config config.toml bench --patterns in-stream \
        --models models/quality_x2.onnx,models/fast_x2.onnx --res 960x540:1920x1080 \
        --warmup 200 --frames 1000 --psnr-frames 1 --no-progress --out "$R/run$run" 2>&1 | tail -n 2)
    cp "$R/run$run/report.md" "$R/res/run$run.md" 2>/dev/null
    cp "$R/run$run/report.json" "$R/res/run$run.json" 2>/dev/null
    grep -E '^\| in-stream' "$R/res/run$run.md" | cut -d'|' -f3,4,6,10,11,16
done
tar czf "$OUT/bench.tgz" -C "$R" res
