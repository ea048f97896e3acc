#!/usr/bin/env bash
# One device call: conv -> conv chains on the matrix units (fused_chain_coopmat.glsl) measured
# against the unchained plan in one binary, then the GPU-only tests:
#   1. bench in-stream at 960x540 -> 1920x1080, quality_x2, fast_x2 and temporal_x2, 200 warm-up
#      + 1000 frames, once per UPSCALE_COOPMAT_CHAINS in CHAINS (all: chains on the matrix units
#      too; none, or unset: every conv its own dispatch there, the default);
#   2. the engine's tests (the cooperative-matrix ones included) and tests/temporal_model.rs,
#      validation on.
# Needs .devrun/ with the release binary and .devrun/tests/ (ENGINE_TESTS=1 tools/device/bundle.sh)
# and .gl/. Run from the repository root; results in $OUT/chains.tgz (packed after every stage).
set -uo pipefail
. tools/device/env.sh
R=/tmp/chains && rm -rf "$R" && mkdir -p "$R/res"
start=$SECONDS
stamp() { tar czf "$OUT/chains.tgz" -C "$R" res 2>/dev/null; echo "== [$((SECONDS - start)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/res/gpu.csv" 2>&1
cat "$R/res/gpu.csv"
cd .devrun || exit 1
for chains in ${CHAINS:-all none}; do
    stamp "bench in-stream, UPSCALE_COOPMAT_CHAINS=$chains"
    UPSCALE_COOPMAT_CHAINS=$chains RUST_LOG=info timeout "${BENCH_LIMIT_S:-100}" ./upscale-demo --config config.toml bench \
        --patterns in-stream --models models/quality_x2.onnx,models/fast_x2.onnx,models/temporal_x2.onnx \
        --res 960x540:1920x1080 --warmup 200 --frames 1000 --psnr-frames 1 --no-progress \
        --out "$R/bench-$chains" > "$R/res/bench-$chains.log" 2>&1
    echo "exit $?"
    for f in report.md report.json; do cp "$R/bench-$chains/$f" "$R/res/$chains-$f" 2>/dev/null; done
    grep -E '^\| in-stream' "$R/res/$chains-report.md" | cut -d'|' -f3,4,6,10,17
done
stamp "engine tests, validation on"
for t in tests/infer_*; do
    echo "---- $t"
    UPSCALE_DEMO_EXE="$PWD/upscale-demo" UPSCALE_VALIDATION=1 timeout "${ENGINE_TESTS_LIMIT_S:-120}" "$t" \
        --include-ignored --test-threads 1 --nocapture 2>&1 | grep -vE "^test .* ok$" | tail -n 40
    echo "exit ${PIPESTATUS[0]}"
done > "$R/res/engine-tests.log" 2>&1
grep -E "^----|^exit|test result|FAILED|panicked|coopmat shape|matrix units" "$R/res/engine-tests.log"
stamp "temporal_model tests (the held camera included), validation on"
UPSCALE_DEMO_EXE="$PWD/upscale-demo" UPSCALE_VALIDATION=1 timeout "${TEMPORAL_TESTS_LIMIT_S:-200}" \
    tests/temporal_model --include-ignored --test-threads 1 --nocapture > "$R/res/temporal-tests.log" 2>&1
echo "exit $?"
grep -E "PSNR-Y|^test |test result" "$R/res/temporal-tests.log" | tail -n 16
stamp "done"
