#!/usr/bin/env bash
# One device call: the tail epilogue over the whole subgroup (tail) against 76b1baf (cols), the
# engine tests with it, and the scene pass keeping motion/depth only for a reader (taau row).
set -uo pipefail
. tools/device/env.sh
R=/tmp/xp2 && mkdir -p "$R/res"
start=$SECONDS
stamp() { echo "== [$((SECONDS - start)) s] $*"; }
pack() { tar czf "$OUT/xp2.tgz" -C "$R" res; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/res/gpu.csv" 2>&1
bench() { # name binary
    local name=$1 bin=$2
    stamp "bench $name"
    (cd .devrun && timeout 120 "$bin" --config config.toml bench --patterns in-stream \
        --models models/quality_x2.onnx,models/fast_x2.onnx --res 960x540:1920x1080 \
        --warmup 200 --frames 1000 --psnr-frames 1 --no-progress --out "$R/$name" 2>&1 | tail -n 2)
    cp "$R/$name/report.md" "$R/res/$name.md" 2>/dev/null
    grep -E '^\| in-stream' "$R/res/$name.md" | cut -d'|' -f3,4,6,10,11,16
    awk '/fp16 at 960x540/{p=1} p&&/^\| Conv/{split($0,a,"|"); split(a[3],b,"/"); printf "%s", b[1]} /fast_x2 fp32/{p=0} END{print ""}' "$R/res/$name.md"
    pack
}
stamp "engine tests with the tail change (validation on)"
for t in .devrun/tests/*; do
    echo "---- $(basename "$t")"
    (cd .devrun && UPSCALE_VALIDATION=1 timeout 100 "../$t" --include-ignored --test-threads 1 2>&1) \
        | grep -v '^\s*$' | tail -n 25
    echo "exit ${PIPESTATUS[0]}"
done 2>&1 | tee "$R/res/engine-tests.log" | grep -E '^(----|exit|test result)|FAILED|panicked' | head -n 40
pack
bench tail ./upscale-demo
bench cols ./base/upscale-demo
stamp "all patterns but the ONNX Runtime ones, quality_x2: the scene pass without motion/depth for spatial patterns"
(cd .devrun && timeout 150 ./upscale-demo --config config.toml bench --patterns bilinear,taau,in-stream \
    --models models/quality_x2.onnx --res 960x540:1920x1080 --warmup 200 --frames 1000 --psnr-frames 3 \
    --no-progress --out "$R/rows" 2>&1 | tail -n 2)
cp "$R/rows/report.md" "$R/res/rows.md"; cp "$R/rows/report.json" "$R/res/rows.json"
grep -E '^\| (bilinear|taau|in-stream)' "$R/res/rows.md" | cut -d'|' -f2-3,6,8,9,10,17-20; pack
stamp "the same on cols (scene keeps motion/depth always)"
(cd .devrun && timeout 150 ./base/upscale-demo --config config.toml bench --patterns bilinear,in-stream \
    --models models/quality_x2.onnx --res 960x540:1920x1080 --warmup 200 --frames 1000 --psnr-frames 0 \
    --no-progress --out "$R/rows-cols" 2>&1 | tail -n 2)
cp "$R/rows-cols/report.md" "$R/res/rows-cols.md"
grep -E '^\| (bilinear|in-stream)' "$R/res/rows-cols.md" | cut -d'|' -f2-3,6,8,9,10; pack
bench tail2 ./upscale-demo
stamp done
