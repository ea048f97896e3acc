# Sourced by the GPU-machine scripts (run from the repository root there): unpacks the Vulkan
# loader and validation layer carried in .gl/ (tools/device/fetch_gl.sh), gives Vulkan a runtime dir and
# points ONNX Runtime at the image's CPU build unless ORT_DYLIB_PATH is set.
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export XDG_RUNTIME_DIR=/tmp/xdg && mkdir -p -m700 "$XDG_RUNTIME_DIR"
: "${ORT_DYLIB_PATH:=/opt/torch/.venv/lib/python3.12/site-packages/onnxruntime/capi/libonnxruntime.so.1.30.0}"
export ORT_DYLIB_PATH
