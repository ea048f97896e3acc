#!/usr/bin/env bash
# One device call (2026-12-07): temporal_x2 with its history clamped to the 3x3 box of the
# frame's colour (upscale.history_clamp = color_3x3), measured as the README's tables are, plus
# the GPU-only tests:
#   1. quality --sequence: taau and every shipped model in-stream on the 8 held-out sequences
#      x 64 frames (config.toml: 640x360 -> 1280x720, precision auto = fp16 here);
#   2. bench in-stream at 960x540 -> 1920x1080, quality_x2, fast_x2 and temporal_x2, both
#      precisions, 200 warm-up + 1000 frames;
#   3. tests/temporal_model.rs with the held-camera test (validation on);
#   4. the engine's tests (the cooperative-matrix ones included), validation on.
# Needs .devrun/ (ENGINE_TESTS=1 tools/device/bundle.sh, plus the temporal_model test binary in
# .devrun/tests/) and .gl/. Run from the repository root; results in $OUT/temporal-clamp.tgz.
set -uo pipefail
. tools/device/env.sh
R=/tmp/temporal-clamp && rm -rf "$R" && mkdir -p "$R/res"
start=$SECONDS
# Packs what is there after every stage: a call cut off at its limit still brings results back.
stamp() { tar czf "$OUT/temporal-clamp.tgz" -C "$R" res 2>/dev/null; echo "== [$((SECONDS - start)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/res/gpu.csv" 2>&1
cat "$R/res/gpu.csv"
cd .devrun || exit 1
stamp "quality --sequence"
timeout "${QUALITY_LIMIT_S:-240}" ./upscale-demo --config config.toml quality --sequence --patterns taau,in-stream \
    --out "$R/seq" --no-progress > "$R/res/quality-seq.log" 2>&1; echo "exit $?"
tail -n 11 "$R/res/quality-seq.log"
cp "$R/seq/quality.json" "$R/res/quality-seq.json" 2>/dev/null
stamp "bench"
timeout "${BENCH_LIMIT_S:-150}" ./upscale-demo --config config.toml bench --patterns in-stream \
    --models models/quality_x2.onnx,models/fast_x2.onnx,models/temporal_x2.onnx --res 960x540:1920x1080 \
    --warmup 200 --frames 1000 --psnr-frames 1 --no-progress --out "$R/bench" 2>&1 | tail -n 2
cp "$R/bench/report.md" "$R/bench/report.json" "$R/res/" 2>/dev/null
grep -E '^\| in-stream' "$R/res/report.md" | cut -d'|' -f3,4,6,7,10,17
stamp "temporal_model tests (the held camera included), validation on"
UPSCALE_DEMO_EXE="$PWD/upscale-demo" UPSCALE_VALIDATION=1 timeout "${TEMPORAL_TESTS_LIMIT_S:-120}" tests/temporal_model --include-ignored --test-threads 1 \
    --nocapture > "$R/res/temporal-tests.log" 2>&1; echo "exit $?"
grep -E "PSNR-Y|^test |test result" "$R/res/temporal-tests.log" | tail -n 16
stamp "engine tests"
for t in tests/infer_*; do
    echo "---- $t"
    UPSCALE_VALIDATION=1 timeout "${ENGINE_TESTS_LIMIT_S:-60}" "$t" --include-ignored --test-threads 1 2>&1 | tail -n 3
done > "$R/res/engine-tests.log" 2>&1
grep -E "^----|test result|FAILED|panicked" "$R/res/engine-tests.log"
stamp "done"
