#!/usr/bin/env bash
# The shared-memory pattern's CUDA domain on the GPU machine: one headless run per configuration
# at 960x540 -> 1920x1080 with the same model, and the equality check against cpu-roundtrip.
#
#   P1-cpu   cpu-roundtrip, ONNX Runtime CPU EP
#   P1-cuda  cpu-roundtrip, ONNX Runtime CUDA EP (ORT's own context, copies through host memory)
#   P2-host  shared-memory, host domain (VK_EXT_external_memory_host, CPU EP)
#   P2-cuda  shared-memory, cuda domain (exported Vulkan memory + timeline semaphore, CUDA EP)
#   P3       in-stream (our Vulkan compute engine)
#
# Needs the GPU build of ONNX Runtime unpacked by `.ortc/ort-cuda-unpack.sh finish` with its
# export line saved in /tmp/ortc/env.sh (shared/device.md), .devrun/ (tools/device/bundle.sh)
# and .gl/. Writes $OUT/cuda.tgz (summaries, logs, images) and $OUT/cuda-table.md.
set -uo pipefail
. /tmp/ortc/env.sh
. tools/device/env.sh
R=/tmp/cuda && rm -rf "$R" && mkdir -p "$R"
start=$SECONDS
stamp() { echo "== [$((SECONDS - start)) s] $*"; }
FRAMES=${FRAMES:-300}
MODEL=${MODEL:-models/quality_x2.onnx}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$R/gpu.csv" 2>&1
cd .devrun
# config-1080.toml: output 1920x1080, render.scale 2 -> render 960x540.
variant() { # name ep domain
    sed -e "s/^execution_provider = \"cpu\"/execution_provider = \"$2\"/" \
        -e "s/^shared_domain = \"auto\"/shared_domain = \"$3\"/" \
        -e "s#^model = \".*\"#model = \"$MODEL\"#" config-1080.toml > "$R/$1.toml"
    grep -q "^execution_provider = \"$2\"" "$R/$1.toml" && grep -q "^shared_domain = \"$3\"" "$R/$1.toml"
}
variant cpu cpu auto && variant cuda-ep cuda auto && variant host cpu host && variant cuda cpu cuda ||
    { echo "config variants failed"; exit 1; }

stamp "equality: shared-memory (cuda domain) vs cpu-roundtrip (CPU EP), same frames, validation on"
for run in "cuda shared-memory" "cpu cpu-roundtrip"; do
    set -- $run
    UPSCALE_VALIDATION=1 timeout 120 ./upscale-demo --config "$R/$1.toml" headless --frames 8 \
        --pattern "$2" --out "$R/eq-$2" > "$R/eq-$2.log" 2>&1
    echo "$2 ($1): exit $?"; tail -n 4 "$R/eq-$2.log"
done
./upscale-demo image-diff "$R/eq-shared-memory/last.png" "$R/eq-cpu-roundtrip/last.png" --max 1 \
    2>&1 | tee "$R/equality.txt"

for run in "P1-cpu cpu cpu-roundtrip" "P1-cuda cuda-ep cpu-roundtrip" "P2-host host shared-memory" \
    "P2-cuda cuda shared-memory" "P3 cpu in-stream"; do
    set -- $run
    stamp "$1: $3, $FRAMES frames, validation off"
    UPSCALE_VALIDATION=0 timeout 150 ./upscale-demo --config "$R/$2.toml" headless --frames "$FRAMES" \
        --pattern "$3" --out "$R/$1" > "$R/$1.log" 2>&1
    echo "$1: exit $?"; tail -n 3 "$R/$1.log"
done

stamp "table"
python3 - "$R" > "$R/cuda-table.md" <<'PY'
import json, os, sys
R = sys.argv[1]
runs = ["P1-cpu", "P1-cuda", "P2-host", "P2-cuda", "P3"]
S = {}
for r in runs:
    p = os.path.join(R, r, "summary.json")
    if os.path.exists(p):
        S[r] = json.load(open(p))
stages = []
for r in runs:
    for k in S.get(r, {}).get("stages", {}):
        if ":" not in k and k not in stages:
            stages.append(k)
order = ["scene", "upscale", "readback", "to_tensor", "enqueue", "inference", "from_tensor", "upload", "composite", "ui"]
stages.sort(key=lambda k: order.index(k) if k in order else 99)
def cell(r, k):
    st = S.get(r, {}).get("stages", {}).get(k)
    return f"{st['p50_ms']:.3f}" if st else "–"
print("| stage p50 (ms) | " + " | ".join(runs) + " |")
print("|---|" + "---|" * len(runs))
def get(r, *path):
    v = S.get(r, {})
    for p in path:
        v = v.get(p, {}) if isinstance(v, dict) else {}
    return v
print("| frame | " + " | ".join(f"{get(r, 'frame_ms', 'p50_ms'):.3f}" if get(r, 'frame_ms', 'p50_ms') else "–" for r in runs) + " |")
for k in stages:
    print(f"| {k} | " + " | ".join(cell(r, k) for r in runs) + " |")
print("| host copy bytes / frame | " + " | ".join(str(S.get(r, {}).get("host_copy_bytes", "–")) for r in runs) + " |")
print("| bus bytes / frame | " + " | ".join(str(S.get(r, {}).get("bus_bytes", "–")) for r in runs) + " |")
print()
for r in runs:
    s = S.get(r, {})
    print(f"- {r}: {s.get('pattern', '?')} · {s.get('pattern_note', 'no summary')} · notice: {s.get('notice')} · validation errors {s.get('validation_errors')}")
PY
cat "$R/cuda-table.md"
cp "$R/cuda-table.md" "$OUT/"
tar czf "$OUT/cuda.tgz" -C "$R" --exclude='*/frames' . 2>/dev/null
stamp "done"
