#!/usr/bin/env bash
# One device call: the temporal model in-stream against quality_x2. `bench` of quality_x2 and
# temporal_x2 in-stream at 960x540 -> 1920x1080 (both precisions, 200 warm-up + 1000 frames),
# then `quality --sequence` of temporal_x2 in-stream on the 8 held-out sequences (640x360 ->
# 1280x720, fp16) to show the picture. Results in $OUT/temporal-bench.tgz.
# Run from the repository root: . tools/device/env.sh && bash tools/device/temporal_bench.sh
# with .devrun/ (tools/device/bundle.sh) and .gl/ carried.
set -uo pipefail
R=/tmp/temporal-bench && rm -rf "$R" && mkdir -p "$R/res"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/res/gpu.csv" 2>&1
cd .devrun || exit 1
echo "== bench"
timeout 150 ./upscale-demo --config config.toml bench --patterns in-stream \
    --models models/quality_x2.onnx,models/temporal_x2.onnx --res 960x540:1920x1080 \
    --warmup 200 --frames 1000 --psnr-frames 1 --no-progress --out "$R/bench" 2>&1 | tail -n 2
cp "$R/bench/report.md" "$R/res/" 2>/dev/null
grep -E '^\| in-stream' "$R/res/report.md" | cut -d'|' -f3,4,6,10,11,12,13,16
awk '/temporal_x2 fp16 at/{p=1} p&&/^\| /{print} /temporal_x2 fp32 at/{p=0}' "$R/res/report.md" | head -n 14
echo "== quality --sequence"
timeout 200 ./upscale-demo --config config.toml quality --sequence --patterns in-stream \
    --model models/temporal_x2.onnx --out "$R/seq" --no-progress > "$R/res/quality-seq.log" 2>&1; echo "exit $?"
tail -n 6 "$R/res/quality-seq.log"
tar czf "$OUT/temporal-bench.tgz" -C "$R" res
