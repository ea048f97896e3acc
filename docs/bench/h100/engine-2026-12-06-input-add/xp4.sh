#!/usr/bin/env bash
# One device call: the residual Add fused into its reader's staging (input add) against the
# main it starts from (base), the engine tests with it (validation on).
set -uo pipefail
. tools/device/env.sh
R=/tmp/xp4 && mkdir -p "$R/res"
start=$SECONDS
stamp() { echo "== [$((SECONDS - start)) s] $*"; }
pack() { tar czf "$OUT/xp4.tgz" -C "$R" res; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/res/gpu.csv" 2>&1
bench() { # name binary
    local name=$1 bin=$2
    stamp "bench $name"
    (cd .devrun && timeout 120 "$bin" --config config.toml bench --patterns in-stream \
        --models models/quality_x2.onnx,models/fast_x2.onnx --res 960x540:1920x1080 \
        --warmup 200 --frames 1000 --psnr-frames 1 --no-progress --out "$R/$name" 2>&1 | tail -n 2)
    cp "$R/$name/report.md" "$R/res/$name.md" 2>/dev/null
    grep -E '^\| in-stream' "$R/res/$name.md" | cut -d'|' -f3,4,6,10,11,16
    awk '/fp16 at 960x540/{p=1} p&&/^\| (Add\+)?Conv/{split($0,a,"|"); split(a[3],b,"/"); printf "%s", b[1]} /fast_x2 fp32/{p=0} END{print ""}' "$R/res/$name.md"
    pack
}
bench base ./base/upscale-demo
bench input-add ./upscale-demo
stamp "engine tests with the input add (validation on)"
for t in .devrun/tests/*; do
    echo "---- $(basename "$t")"
    (cd .devrun && UPSCALE_VALIDATION=1 timeout 100 "../$t" --include-ignored --test-threads 1 2>&1) \
        | grep -v '^\s*$' | tail -n 25
    echo "exit ${PIPESTATUS[0]}"
done 2>&1 | tee "$R/res/engine-tests.log" | grep -E '^(----|exit|test result)|FAILED|panicked' | head -n 40
pack
bench base2 ./base/upscale-demo
bench input-add2 ./upscale-demo
stamp done
