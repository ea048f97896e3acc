#!/usr/bin/env bash
# One device call: the temporal model on every ML pattern, and the in-stream frame against the
# shared-memory cuda domain's, on the GPU.
#   1. bench at 960x540 -> 1920x1080, 200 warm-up + 1000 frames: in-stream (both precisions) and
#      shared-memory (cuda domain) with quality_x2 and temporal_x2 — the temporal model's upscale
#      against quality_x2's, and each pattern's frame, in one run.
#   2. agreement, 640x360 -> 1280x720, validation on, 32 frames of the scripted path with history:
#      in-stream (fp32, fp16) and shared-memory (cuda domain) against cpu-roundtrip (CPU EP).
#   3. quality --sequence of temporal_x2 on the 8 held-out sequences: in-stream (fp16) and
#      shared-memory (cuda domain).
# Needs the GPU build of ONNX Runtime unpacked by `.ortc/ort-cuda-unpack.sh finish` (its export
# line saved in /tmp/ortc/env.sh; shared/device.md), .devrun/ (tools/device/bundle.sh) and .gl/.
# Run from the repository root: bash tools/device/temporal_patterns.sh; results in $OUT.
set -uo pipefail
. /tmp/ortc/env.sh
. tools/device/env.sh
R=/tmp/temporal-patterns && rm -rf "$R" && mkdir -p "$R/res"
start=$SECONDS
stamp() { echo "== [$((SECONDS - start)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/res/gpu.csv" 2>&1
cat "$R/res/gpu.csv"
cd .devrun || exit 1
variant() { # name base precision pattern-domain
    sed -e "s#^model = \"[^\"]*\"#model = \"models/temporal_x2.onnx\"#" \
        -e "s/^precision = \"auto\"/precision = \"$3\"/" \
        -e "s/^shared_domain = \"auto\"/shared_domain = \"$4\"/" "$2" > "$R/$1.toml"
    grep -q "temporal_x2" "$R/$1.toml" && grep -q "^precision = \"$3\"" "$R/$1.toml"
}
variant fp32 config.toml fp32 cuda && variant fp16 config.toml fp16 cuda && variant host config.toml fp32 host ||
    { echo "config variants failed"; exit 1; }

stamp "bench: in-stream and shared-memory (cuda), quality_x2 and temporal_x2"
UPSCALE_VALIDATION=0 timeout 240 ./upscale-demo --config config-1080.toml bench \
    --patterns in-stream,shared-memory --models models/quality_x2.onnx,models/temporal_x2.onnx \
    --res 960x540:1920x1080 --warmup 200 --frames 1000 --psnr-frames 1 --no-progress \
    --out "$R/bench" > "$R/res/bench.log" 2>&1; echo "bench exit $?"
cp "$R/bench/report.md" "$R/bench/report.json" "$R/res/" 2>/dev/null
grep -E '^\| (in-stream|shared-memory)' "$R/res/report.md" | head -n 12

stamp "agreement after 32 frames (validation on)"
for run in "cpu-roundtrip fp32" "in-stream fp32" "in-stream fp16" "shared-memory fp32"; do
    set -- $run
    UPSCALE_VALIDATION=1 timeout 120 ./upscale-demo --config "$R/$2.toml" headless --frames 32 \
        --pattern "$1" --out "$R/eq-$1-$2" > "$R/res/eq-$1-$2.log" 2>&1
    echo "$1 $2: exit $?; $(grep -o '"pattern_note": "[^"]*"' "$R/eq-$1-$2/summary.json" | head -n 1)"
    grep -o '"validation_errors": [0-9]*' "$R/eq-$1-$2/summary.json"
done
for run in "in-stream fp32" "in-stream fp16" "shared-memory fp32"; do
    set -- $run
    echo "-- $1 $2 vs cpu-roundtrip:"
    ./upscale-demo image-diff "$R/eq-$1-$2/last.png" "$R/eq-cpu-roundtrip-fp32/last.png" 2>&1 \
        | tee -a "$R/res/agreement.txt"
done

stamp "quality --sequence temporal_x2: in-stream fp16, shared-memory (cuda)"
timeout 300 ./upscale-demo --config "$R/fp16.toml" quality --sequence --patterns in-stream,shared-memory \
    --model models/temporal_x2.onnx --out "$R/seq" --no-progress > "$R/res/quality-seq.log" 2>&1
echo "exit $?"; tail -n 8 "$R/res/quality-seq.log"
cp "$R"/seq/*.json "$R"/seq/*.md "$R/res/" 2>/dev/null
tar czf "$OUT/temporal-patterns.tgz" -C "$R" res
stamp "done"
