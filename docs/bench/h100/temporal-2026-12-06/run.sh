#!/usr/bin/env bash
# One device call (2026-12-06): the temporal model run by the in-stream pattern. Written for the
# H200; no H200 could be started, so it ran on an H100 (gpu.csv). Kept as it ran.
# `quality --sequence` of taau and every shipped model in-stream on the 8 held-out sequences x
# 64 frames (config.toml: 640x360 -> 1280x720, upscale.precision auto = fp16), then `bench` of
# quality_x2 and temporal_x2 in-stream at 960x540 -> 1920x1080 (both precisions, 1000 frames).
# Run from the repository root after `. tools/device/env.sh`, with .devrun/ carried.
set -uo pipefail
R=/tmp/temporal-h200 && rm -rf "$R" && mkdir -p "$R/res"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/res/gpu.csv" 2>&1
cd .devrun || exit 1
echo "== quality --sequence"
timeout 400 ./upscale-demo --config config.toml quality --sequence --patterns taau,in-stream \
    --out "$R/seq" --no-progress > "$R/res/quality-seq.log" 2>&1; echo "exit $?"
tail -n 12 "$R/res/quality-seq.log"
cp "$R/seq/quality.json" "$R/res/quality-seq.json"
echo "== bench"
timeout 150 ./upscale-demo --config config.toml bench --patterns in-stream \
    --models models/quality_x2.onnx,models/temporal_x2.onnx --res 960x540:1920x1080 \
    --warmup 200 --frames 1000 --psnr-frames 1 --no-progress --out "$R/bench" 2>&1 | tail -n 2
cp "$R/bench/report.md" "$R/bench/report.json" "$R/res/" 2>/dev/null
grep -E '^\| in-stream' "$R/res/report.md" | cut -d'|' -f3,4,6,10,11,16
tar czf "$OUT/temporal-h200.tgz" -C "$R" res
