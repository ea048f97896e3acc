#!/usr/bin/env bash
# Re-measures the README's H200 figures for the current game and models: the 10,000-frame soak,
# the benchmark and the shared-memory pattern's CUDA-domain table. Five back-to-back calls (the
# machine stays warm 30 s between calls; /tmp survives, the carried tree does not), because the
# CUDA build of ONNX Runtime travels in parts (shared/device.md):
#
#   call 1  carry .devrun .gl .ortc/core.so.xz .ortc/libonnxruntime_providers_shared.so
#                 .ortc/SHA256SUMS .ortc/ort-cuda-unpack.sh
#           bash tools/device/h200_refresh.sh first   # $OUT/soak.tgz, $OUT/final-b.tgz (bench)
#   2..4    carry .ortc/ort-cuda-unpack.sh .ortc/cuda.so.xz.partNN (00, 01, 02)
#           bash tools/device/h200_refresh.sh stage
#   5       carry .ortc/ort-cuda-unpack.sh .ortc/cuda.so.xz.part03
#           bash tools/device/h200_refresh.sh cuda    # $OUT/cuda.tgz, $OUT/cuda-table.md
#
# Call 1 keeps .devrun/ and .gl/ in /tmp/keep for call 5. Expects .devrun/ from
# tools/device/bundle.sh and .ortc/ from shared/tools/ort-cuda-pack.sh.
set -uo pipefail
K=/tmp/keep
start=$SECONDS
stamp() { echo "== [$((SECONDS - start)) s] $*"; }

case "${1:-}" in
first)
    bash .ortc/ort-cuda-unpack.sh stage
    rm -rf "$K" && mkdir -p "$K" && cp -r .devrun .gl "$K"/
    . tools/device/env.sh
    R=/tmp/soak && rm -rf "$R" && mkdir -p "$R"
    stamp "soak: 10,000 frames, validation on"
    (cd .devrun && UPSCALE_VALIDATION=1 RUST_LOG=warn,upscale_demo::app::soak=info timeout 200 ./upscale-demo \
        --config config.toml headless --soak --frames 10000 --switch-every 30 --model-every 500 \
        --output-size 320x180 --out "$R/soak") > "$R/soak.log" 2>&1
    echo "soak exit $?"; tail -n 25 "$R/soak.log"
    tar czf "$OUT/soak.tgz" -C "$R" --exclude='*/frames' .
    stamp "bench"
    bash tools/device/h200_final.sh bench ;;
stage)
    bash .ortc/ort-cuda-unpack.sh stage ;;
cuda)
    [ -d "$K/.devrun" ] || { echo "no $K/.devrun: the machine was given back since call 1"; exit 3; }
    rm -rf .devrun .gl && cp -r "$K/.devrun" "$K/.gl" .
    bash .ortc/ort-cuda-unpack.sh stage
    bash .ortc/ort-cuda-unpack.sh finish | tee /tmp/ortc/finish.log || exit 4
    grep '^export ORT_DYLIB_PATH=' /tmp/ortc/finish.log > /tmp/ortc/env.sh
    bash tools/device/h200_cuda.sh ;;
*)
    echo "usage: $0 first | stage | cuda"; exit 2 ;;
esac
stamp "done"
