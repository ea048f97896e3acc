# Sourced by the GPU-machine scripts (run from the repository root there): unpacks the Vulkan
# loader and validation layer carried in .gl/ (tools/device/fetch_gl.sh), gives Vulkan a runtime dir and
# points ONNX Runtime at the image's CPU build unless ORT_DYLIB_PATH is set; defines `results` and
# `stamp` for the scripts that bring results back.
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
# Debian 12's layer (1.3.239) predates VK_KHR_cooperative_matrix: with it every test that makes
# a device fails on the GPU machine's feature chain (seen 2026-12-07). fetch_gl.sh brings 1.4.309.
if ls .gl/vulkan-validationlayers_1.3.* >/dev/null 2>&1; then
    echo "warning: .gl/ holds validation layer $(ls .gl/vulkan-validationlayers_1.3.* | sed 's/.*layers_//; s/_.*//'), which reports VK_KHR_cooperative_matrix as an error; run tools/device/fetch_gl.sh here" >&2
fi
export XDG_RUNTIME_DIR=/tmp/xdg && mkdir -p -m700 "$XDG_RUNTIME_DIR"
: "${ORT_DYLIB_PATH:=/opt/torch/.venv/lib/python3.12/site-packages/onnxruntime/capi/libonnxruntime.so.1.30.0}"
export ORT_DYLIB_PATH

# `results NAME`: a fresh results folder R=/tmp/NAME/res, the GPU's name, driver and clock in
# R/res/gpu.csv, and `stamp MESSAGE`, which packs R/res into $OUT/NAME.tgz (a call cut off at
# its limit still brings back what each stage left) and prints the seconds since `results`.
results() {
    R=/tmp/$1 && rm -rf "$R" && mkdir -p "$R/res"
    RESULTS_TGZ="$OUT/$1.tgz"
    start=$SECONDS
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$R/res/gpu.csv" 2>&1
    cat "$R/res/gpu.csv"
}
stamp() { tar czf "$RESULTS_TGZ" -C "$R" res 2>/dev/null; echo "== [$((SECONDS - start)) s] $*"; }
