# Sourced by the GPU-machine scripts, in .devrun/ (tools/device/bundle.sh with ENGINE_TESTS=1):
# `gpu_tests RES` runs the engine's test binaries (the cooperative-matrix tests included) and
# tests/temporal_model with the validation layer on, logs in RES/engine-tests.log and
# RES/temporal-tests.log, and prints their summaries; `stamp` (the caller's) marks each stage.
gpu_tests() {
    local res=$1
    stamp "engine tests, validation on"
    for t in tests/infer_*; do
        echo "---- $t"
        UPSCALE_DEMO_EXE="$PWD/upscale-demo" UPSCALE_VALIDATION=1 timeout "${ENGINE_TESTS_LIMIT_S:-120}" "$t" \
            --include-ignored --test-threads 1 --nocapture 2>&1 | grep -vE "^test .* ok$" | tail -n 40
        echo "exit ${PIPESTATUS[0]}"
    done > "$res/engine-tests.log" 2>&1
    grep -E "^----|^exit|test result|FAILED|panicked|coopmat shape|matrix units" "$res/engine-tests.log"
    stamp "temporal_model tests (the held camera included), validation on"
    UPSCALE_DEMO_EXE="$PWD/upscale-demo" UPSCALE_VALIDATION=1 timeout "${TEMPORAL_TESTS_LIMIT_S:-200}" \
        tests/temporal_model --include-ignored --test-threads 1 --nocapture > "$res/temporal-tests.log" 2>&1
    echo "exit $?"
    grep -E "PSNR-Y|^test |test result" "$res/temporal-tests.log" | tail -n 16
}
