#!/usr/bin/env bash
# The in-stream engine's fast path on the GPU machine: what lavapipe cannot run (cooperative
# matrices) tested there, then timed. Expects .devrun/ from tools/device/bundle.sh with the
# engine's test binaries (ENGINE_TESTS=1) and .gl/ (shared/device.md); carry both.
#
#   bash tools/device/h200_engine.sh tests       # engine tests, coopmat ones included, validation on
#   bash tools/device/h200_engine.sh bench       # in-stream fp32/fp16 + cuDNN/torch.compile reference
#   bash tools/device/h200_engine.sh roundtrip   # cpu-roundtrip's host conversions at 1080p
#   bash tools/device/h200_engine.sh all         # tests, bench, roundtrip
#
# Results in $OUT/results.tgz (the device tool brings back at most 8 files): engine-tests.log,
# headless-summary.json, bench/report.*, roundtrip/report.*, reference.json, gpu.csv.
set -uo pipefail
. tools/device/env.sh
R=/tmp/engine && mkdir -p "$R"
RES="$R/results" && mkdir -p "$RES"
start=$SECONDS
stamp() { echo "== [$((SECONDS - start)) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$RES/gpu.csv" 2>&1

tests() {
    stamp "engine tests (validation on; the cooperative-matrix tests included)"
    for t in .devrun/tests/*; do
        echo "---- $(basename "$t")"
        (cd .devrun && UPSCALE_DEMO_EXE="$PWD/upscale-demo" UPSCALE_VALIDATION=1 timeout "${TEST_TIMEOUT_S:-150}" "../$t" --include-ignored \
            --test-threads 1 2>&1) | grep -v '^\s*$' | tail -n 40
        echo "exit ${PIPESTATUS[0]}"
    done 2>&1 | tee "$RES/engine-tests.log"
    stamp "plan of quality_x2 at 960x540 in fp16"
    (cd .devrun && RUST_LOG=info,upscale_demo::upscale::instream=info timeout 60 ./upscale-demo \
        --config config-1080.toml headless --pattern in-stream --frames 30 --out "$R/headless" 2>&1 \
        | grep -E 'in-stream plan|GPU:|error|warn' | head -n 30) | tee -a "$RES/engine-tests.log"
    cp "$R/headless/summary.json" "$RES/headless-summary.json" 2>/dev/null
}

bench() {
    stamp "bench: in-stream fp32 and fp16, bilinear, 1000 frames after 200 warm-up"
    (cd .devrun && timeout "${BENCH_TIMEOUT_S:-240}" ./upscale-demo --config config.toml bench \
        --patterns bilinear,in-stream --models models/quality_x2.onnx,models/fast_x2.onnx \
        --res 960x540:1920x1080 --warmup 200 --frames 1000 --psnr-frames 3 --out "$R/bench" 2>&1 \
        | tail -n 30)
    mkdir -p "$RES/bench" && cp "$R"/bench/report.* "$RES/bench/" 2>/dev/null
    if [ "${REFERENCE:-1}" = 1 ]; then
        stamp "PyTorch reference (cuDNN fp32/tf32/fp16, CUDA graph, torch.compile max-autotune)"
        timeout "${REFERENCE_TIMEOUT_S:-300}" python3 tools/reference/reference.py \
            --models .devrun/models/quality_x2.onnx,.devrun/models/fast_x2.onnx --res 960x540 \
            --compile "quality_x2:960x540,fast_x2:960x540" --out "$RES/reference.json" 2>&1 \
            | grep -v Warning | tail -n 20
    fi
}

roundtrip() {
    stamp "bench: cpu-roundtrip (ONNX Runtime CPU) at 960x540 -> 1080p, host conversions"
    (cd .devrun && timeout "${ROUNDTRIP_TIMEOUT_S:-150}" ./upscale-demo --config config.toml bench \
        --patterns cpu-roundtrip --models models/fast_x2.onnx,models/quality_x2.onnx \
        --res 960x540:1920x1080 --warmup 30 --frames 300 --psnr-frames 0 --out "$R/roundtrip" 2>&1 \
        | tail -n 12)
    mkdir -p "$RES/roundtrip" && cp "$R"/roundtrip/report.{md,json} "$RES/roundtrip/" 2>/dev/null
}

case "${1:-}" in
tests) tests ;;
bench) bench ;;
roundtrip) roundtrip ;;
all) tests; bench; roundtrip ;;
*) echo "usage: $0 tests | bench | roundtrip | all"; exit 2 ;;
esac
tar czf "$OUT/results.tgz" -C "$R" results
stamp "done"
