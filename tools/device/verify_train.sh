#!/usr/bin/env bash
# One device call that checks the tree on the GPU and then starts a temporal training, so the
# machine is not idle while the training's later calls wait (tools/train/device_temporal.sh):
#   1. bench in-stream at 960x540 -> 1920x1080, quality_x2, fast_x2 and temporal_x2, both
#      precisions, 200 warm-up + 1000 frames (the GPU still quiet);
#   2. bench cpu-roundtrip, quality_x2 and temporal_x2, 10 warm-up + 100 frames (the host
#      conversions on this machine's cores);
#   3. device_temporal.sh start (TRAIN_ARGS, BUDGET_S, SEEDS ... from the environment);
#   4. beside the dataset render: tests/temporal_model.rs (the held camera included) and the
#      engine's tests (the cooperative-matrix ones included), validation on.
# Needs .devrun/ (ENGINE_TESTS=1 tools/device/bundle.sh) and .gl/. Run from the repository root;
# results in $OUT/verify.tgz, then `device_temporal.sh collect` in this call or the next ones.
set -uo pipefail
. tools/device/env.sh
results verify
root=$PWD
cd .devrun || exit 1
stamp "bench in-stream"
timeout "${BENCH_LIMIT_S:-150}" ./upscale-demo --config config.toml bench --patterns in-stream \
    --models models/quality_x2.onnx,models/fast_x2.onnx,models/temporal_x2.onnx --res 960x540:1920x1080 \
    --warmup 200 --frames 1000 --psnr-frames 1 --no-progress --out "$R/bench" > "$R/res/bench.log" 2>&1
echo "exit $?"
cp "$R/bench/report.md" "$R/bench/report.json" "$R/res/" 2>/dev/null
grep -E '^\| in-stream' "$R/res/report.md" | cut -d'|' -f3,4,6,7,10,17
stamp "bench cpu-roundtrip"
timeout "${ROUNDTRIP_LIMIT_S:-120}" ./upscale-demo --config config.toml bench --patterns cpu-roundtrip \
    --models models/quality_x2.onnx,models/temporal_x2.onnx --res 960x540:1920x1080 \
    --warmup 10 --frames 100 --psnr-frames 1 --no-progress --out "$R/roundtrip" > "$R/res/roundtrip.log" 2>&1
echo "exit $?"
for f in report.md report.json; do cp "$R/roundtrip/$f" "$R/res/roundtrip-$f" 2>/dev/null; done
grep -E '^\| cpu-roundtrip' "$R/res/roundtrip-report.md" | cut -d'|' -f3,4,6,10,11,12
stamp "training start"
(cd "$root" && bash tools/train/device_temporal.sh start)
stamp "temporal_model tests (the held camera included), validation on"
UPSCALE_DEMO_EXE="$PWD/upscale-demo" UPSCALE_VALIDATION=1 timeout "${TEMPORAL_TESTS_LIMIT_S:-240}" \
    tests/temporal_model --include-ignored --test-threads 1 --nocapture > "$R/res/temporal-tests.log" 2>&1
echo "exit $?"
grep -E "PSNR-Y|^test |test result" "$R/res/temporal-tests.log" | tail -n 16
stamp "engine tests"
for t in tests/infer_*; do
    echo "---- $t"
    UPSCALE_DEMO_EXE="$PWD/upscale-demo" UPSCALE_VALIDATION=1 timeout "${ENGINE_TESTS_LIMIT_S:-120}" "$t" \
        --include-ignored --test-threads 1 2>&1 | grep -vE "^test .* ok$" | tail -n 40
done > "$R/res/engine-tests.log" 2>&1
grep -E "^----|test result|FAILED|panicked" "$R/res/engine-tests.log"
stamp "done"
