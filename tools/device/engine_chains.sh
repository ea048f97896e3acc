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
. tools/device/gpu_tests.sh
results chains
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
gpu_tests "$R/res"
stamp "done"
