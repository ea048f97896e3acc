#!/usr/bin/env bash
# Headless runs on the GPU machine (figures in README): validation runs at 1280x720 output and
# timing runs at 1920x1080 output, every pattern, each model in MODELS. Expects the bundle made by
# tools/device/bundle.sh in .devrun/ and the Vulkan loader + validation layer .debs in .gl/.
# Writes $OUT/runs.tgz (summaries, logs, a few frames) and $OUT/log.
set -uo pipefail
. tools/device/env.sh
MODELS=${MODELS:-models/test/tiny_x2.onnx}
R=/tmp/runs && rm -rf "$R" && mkdir -p "$R"
cd .devrun || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv > "$R/gpu.csv" 2>&1
nproc > "$R/nproc.txt"
run() { # name, then arguments
    local name=$1; shift
    echo "== $name: $*"
    ./upscale-demo "$@" --out "$R/$name" > "$R/$name.log" 2>&1
    echo "   exit $?"; grep -E "frames of|^  " "$R/$name.log" | head -n 40
}
for p in bilinear cpu-roundtrip shared-memory in-stream; do
    UPSCALE_VALIDATION=1 run "val720-$p" headless --pattern "$p" --frames 60
done
UPSCALE_VALIDATION=1 run val720-switching headless --pattern bilinear --switch-every 10 --frames 300
UPSCALE_VALIDATION=0 run perf1080-bilinear --config config-1080.toml headless --pattern bilinear --frames 300
for m in $MODELS; do
    tag=$(basename "$m" .onnx)
    for p in cpu-roundtrip shared-memory; do
        UPSCALE_VALIDATION=0 run "perf1080-$p-$tag" --config config-1080.toml headless --pattern "$p" --model "$m" --frames 100
    done
    UPSCALE_VALIDATION=0 run "perf1080-in-stream-$tag" --config config-1080.toml headless --pattern in-stream --model "$m" --frames 300
done
# Keep the archive small: summaries and logs everywhere, frames from two runs only.
find "$R" -name '*.png' ! -path '*val720-in-stream*' ! -path '*perf1080-bilinear*' -delete
tar -C /tmp -czf "$OUT/runs.tgz" runs
