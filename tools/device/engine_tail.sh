#!/usr/bin/env bash
# One device call: the matrix kernel's tail tiles measured against each other in one binary,
# then the GPU-only tests:
#   1. bench in-stream at 960x540 -> 1920x1080, 200 warm-up + 1000 frames, quality_x2 and
#      fast_x2 (and temporal_x2 in the first run), once per UPSCALE_TAIL_TILE in TILES
#      (ROWS[xSUBGROUPS][p]; "default": unset, the tiling's rule), then per UPSCALE_THIN_TILE in
#      THIN_TILES (the first conv's tile);
#   2. the engine's tests (the cooperative-matrix ones included) and tests/temporal_model.rs,
#      validation on (unless GPU_TESTS=0), and the coopmat test under each tile.
# Needs .devrun/ with the release binary and .devrun/tests/ (ENGINE_TESTS=1 tools/device/bundle.sh)
# and .gl/. Run from the repository root; results in $OUT/tail.tgz (packed after every stage).
set -uo pipefail
. tools/device/env.sh
. tools/device/gpu_tests.sh
results tail
cd .devrun || exit 1
bench() { # name, models; the environment says the variant
    timeout "${BENCH_LIMIT_S:-100}" ./upscale-demo --config config.toml bench \
        --patterns in-stream --models "$2" \
        --res 960x540:1920x1080 --warmup 200 --frames 1000 --psnr-frames 1 --no-progress \
        --out "$R/bench-$1" > "$R/res/bench-$1.log" 2>&1
    echo "exit $?"
    for f in report.md report.json; do cp "$R/bench-$1/$f" "$R/res/$1-$f" 2>/dev/null; done
    grep -E '^\| in-stream' "$R/res/$1-report.md" | cut -d'|' -f3,4,6,10,17
    grep -E '^\| (Conv|Add).*(DepthToSpace|conv1 )' "$R/res/$1-report.md"
}
models=models/quality_x2.onnx,models/fast_x2.onnx
first=1
for tile in ${TILES:-default 4x8 4x16 2x8 1 1x2 default}; do
    stamp "bench in-stream, UPSCALE_TAIL_TILE=$tile"
    m=$models; [ $first = 1 ] && m=$models,models/temporal_x2.onnx; first=0
    if [ "$tile" = default ]; then
        bench "tile-$tile-$SECONDS" "$m"
    else
        UPSCALE_TAIL_TILE=$tile bench "tile-$tile" "$m"
    fi
done
for tile in ${THIN_TILES:-4x8 2 8 4x16}; do
    stamp "bench in-stream, UPSCALE_THIN_TILE=$tile"
    UPSCALE_THIN_TILE=$tile bench "thin-$tile" "$models"
done
# GPU_TESTS=0: no engine and temporal tests (a call that only measures).
[ "${GPU_TESTS:-1}" = 0 ] || gpu_tests "$R/res"
stamp "the coopmat test under each tile"
tile_test() { # VAR=VALUE
    echo "---- $1"
    env "$1" UPSCALE_VALIDATION=1 timeout 60 tests/infer_fast --include-ignored coopmat --test-threads 1 2>&1 \
        | grep -E "test result|panicked|differs|is [0-9]+/255"
}
{
    for v in ${TILES:-default 4x8 4x16 2x8 1 1x2 default}; do
        [ "$v" = default ] || tile_test "UPSCALE_TAIL_TILE=$v"
    done
    for v in ${THIN_TILES:-4x8 2 8 4x16}; do tile_test "UPSCALE_THIN_TILE=$v"; done
} > "$R/res/tile-tests.log" 2>&1
grep -cE "test result: ok" "$R/res/tile-tests.log"; grep -E "panicked" "$R/res/tile-tests.log" | head
stamp "done"
