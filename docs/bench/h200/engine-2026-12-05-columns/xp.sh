#!/usr/bin/env bash
# One device call: merged main (base) vs coopmat-columns (cols), the taau bench row, the
# engine tests with the columns patch, and forced tile-row variants of cols. Results go into
# $OUT/xp.tgz after every step, so a timeout still brings back what was measured.
set -uo pipefail
. tools/device/env.sh
R=/tmp/xp && mkdir -p "$R/res"
start=$SECONDS
stamp() { echo "== [$((SECONDS - start)) s] $*"; }
pack() { tar czf "$OUT/xp.tgz" -C "$R" res; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/res/gpu.csv" 2>&1
bench() { # name binary [env...]
    local name=$1 bin=$2; shift 2
    stamp "bench $name $*"
    (cd .devrun && env "$@" timeout 120 "$bin" --config config.toml bench --patterns in-stream \
        --models models/quality_x2.onnx,models/fast_x2.onnx --res 960x540:1920x1080 \
        --warmup 200 --frames 1000 --psnr-frames 1 --no-progress --out "$R/$name" 2>&1 | tail -n 4)
    cp "$R/$name/report.md" "$R/res/$name.md" 2>/dev/null
    grep -E '^\| in-stream' "$R/res/$name.md" | cut -d'|' -f3,4,10,16
    pack
}
bench base ./base/upscale-demo
bench cols ./upscale-demo
stamp "taau row: bilinear, taau, in-stream quality_x2 (base binary)"
(cd .devrun && timeout 150 ./base/upscale-demo --config config.toml bench --patterns bilinear,taau,in-stream \
    --models models/quality_x2.onnx --res 960x540:1920x1080 --warmup 200 --frames 1000 --psnr-frames 3 \
    --no-progress --out "$R/taau" 2>&1 | tail -n 4)
cp "$R"/taau/report.{md,json} "$R/res/" 2>/dev/null; mv "$R/res/report.md" "$R/res/taau.md"; mv "$R/res/report.json" "$R/res/taau.json"
grep -E '^\| (bilinear|taau|in-stream)' "$R/res/taau.md" | cut -d'|' -f2-4,6,10,16,17; pack
stamp "engine tests with the columns patch (validation on)"
for t in .devrun/tests/*; do
    echo "---- $(basename "$t")"
    (cd .devrun && UPSCALE_VALIDATION=1 timeout 100 "../$t" --include-ignored --test-threads 1 2>&1) \
        | grep -v '^\s*$' | tail -n 25
    echo "exit ${PIPESTATUS[0]}"
done 2>&1 | tee "$R/res/engine-tests.log" | grep -E '^(----|exit|test result)|FAILED|panicked' | head -n 40
pack
for v in N2 N8 T1 T2 T4 T8 THIN2 THIN8; do
    k=${v%%[0-9]*}; n=${v#"$k"}
    bench "cols-$v" ./upscale-demo "UPSCALE_XP_TILE_$k=$n"
done
bench base2 ./base/upscale-demo
bench cols2 ./upscale-demo
stamp done
