#!/usr/bin/env bash
# One device call: the temporal models in .devrun/models/ measured as the README's tables are,
# plus the GPU-only tests:
#   1. quality --sequence: taau and every model in .devrun/models/ in-stream on the 8 held-out
#      sequences x 64 frames (config.toml: 640x360 -> 1280x720, precision auto = fp16 here);
#   2. bench in-stream at 960x540 -> 1920x1080, quality_x2, fast_x2 and every temporal model
#      (BENCH_MODELS overrides), both precisions, 200 warm-up + 1000 frames;
#   3. tests/temporal_model.rs with the held-camera test (validation on);
#   4. the engine's tests (the cooperative-matrix ones included), validation on.
# Needs .devrun/ (ENGINE_TESTS=1 tools/device/bundle.sh, which bundles the temporal_model test
# binary too) and .gl/. Run from the repository root; results in $OUT/temporal-verify.tgz.
# SKIP_QUALITY=1 skips step 1 (a call that measured it already); GPU_TESTS=0 skips 3 and 4.
set -uo pipefail
. tools/device/env.sh
results temporal-verify
cd .devrun || exit 1
if [ "${SKIP_QUALITY:-0}" != 1 ]; then
    stamp "quality --sequence"
    timeout "${QUALITY_LIMIT_S:-240}" ./upscale-demo --config config.toml quality --sequence --patterns taau,in-stream \
        --out "$R/seq" --no-progress > "$R/res/quality-seq.log" 2>&1; echo "exit $?"
    tail -n 14 "$R/res/quality-seq.log"
    cp "$R/seq/quality.json" "$R/res/quality-seq.json" 2>/dev/null
fi
stamp "bench"
temporal=$(ls models/temporal*.onnx | tr '\n' ',')
models="${BENCH_MODELS:-models/quality_x2.onnx,models/fast_x2.onnx,${temporal%,}}"
timeout "${BENCH_LIMIT_S:-200}" ./upscale-demo --config config.toml bench --patterns in-stream \
    --models "$models" --res 960x540:1920x1080 \
    --warmup 200 --frames 1000 --psnr-frames 1 --no-progress --out "$R/bench" 2>&1 | tail -n 2
cp "$R/bench/report.md" "$R/bench/report.json" "$R/res/" 2>/dev/null
grep -E '^\| in-stream' "$R/res/report.md" | cut -d'|' -f3,4,6,7,10,17
if [ "${GPU_TESTS:-1}" != 0 ]; then
    stamp "temporal_model tests (the held camera included), validation on"
    UPSCALE_DEMO_EXE="$PWD/upscale-demo" UPSCALE_VALIDATION=1 timeout "${TEMPORAL_TESTS_LIMIT_S:-150}" tests/temporal_model --include-ignored --test-threads 1 \
        --nocapture > "$R/res/temporal-tests.log" 2>&1; echo "exit $?"
    grep -E "PSNR-Y|vs cpu-roundtrip|^test |test result" "$R/res/temporal-tests.log" | tail -n 24
    stamp "engine tests"
    for t in tests/infer_*; do
        echo "---- $t"
        UPSCALE_VALIDATION=1 timeout "${ENGINE_TESTS_LIMIT_S:-60}" "$t" --include-ignored --test-threads 1 2>&1 | tail -n 3
    done > "$R/res/engine-tests.log" 2>&1
    grep -E "^----|test result|FAILED|panicked" "$R/res/engine-tests.log"
fi
stamp "done"
