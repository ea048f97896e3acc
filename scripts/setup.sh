#!/usr/bin/env bash
# Set up everything upscale-demo needs to build, run and test.
#
# Idempotent: installs only what is missing and prints one line per check.
# When everything is present it finishes in well under two seconds.
#
#   - Debian packages (Vulkan loader, lavapipe, validation layers, glslc,
#     Xvfb and friends for the windowed smoke test, python3-pip, unzip)
#   - Rust toolchain (checked only; install it yourself with rustup)
#   - ONNX Runtime shared library (CPU build), taken from the official
#     onnxruntime Python wheel and verified against pinned sha256 sums,
#     placed at .deps/onnxruntime/libonnxruntime.so.$ORT_VERSION with a
#     symlink .deps/onnxruntime/libonnxruntime.so pointing at it.
#
# Environment:
#   ORT_VERSION       ONNX Runtime version to fetch (default 1.30.0). Versions
#                     that are not in the checksum table below also need
#                     ORT_WHEEL_SHA256 and ORT_SO_SHA256.
#   ORT_WHEEL_SHA256  expected sha256 of the wheel (overrides the table)
#   ORT_SO_SHA256     expected sha256 of libonnxruntime.so.$ORT_VERSION
#   ORT               cpu (default) or gpu. gpu also installs the GPU build of ONNX
#                     Runtime (onnxruntime-gpu $ORT_GPU_VERSION for CUDA 13: the CUDA
#                     execution provider) into .deps/onnxruntime-gpu/, checksums pinned,
#                     and reports the CUDA libraries it needs that the loader cannot find
#                     (`make run ORT=gpu` then runs with it).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

ORT_VERSION=${ORT_VERSION:-1.30.0}
ORT=${ORT:-cpu}
ORT_GPU_VERSION=1.31.1
# onnxruntime-gpu 1.31.1, cp312 manylinux_2_28 x86_64 wheel, and the three libraries taken from it.
ORT_GPU_WHEEL_SHA256=05d548956197b9d01f59b625de740e0d6be3593f874e241a12dc0362650ecdf7
declare -A ORT_GPU_SO_SHA256=(
    [libonnxruntime.so.1.31.1]=5104254339ecadae808da771bd0b63b240f0dbd466514234905e54372435c303
    [libonnxruntime_providers_cuda.so]=8387867e857499e045caff5d13ac6a5de29571c801562fa2dde0e45f1f31de52
    [libonnxruntime_providers_shared.so]=086ec1d5388f64153d9c63470d126693db9a182c8ce236d3a1119068471b8a0d
)

# Minimum Rust: the locked egui 0.36 / egui-winit / epaint / egui_plot crates
# declare rust-version = "1.95" (ort 2.0.0-rc.15 needs 1.92).
MIN_RUST=1.95

APT_PACKAGES=(
    libvulkan1 mesa-vulkan-drivers vulkan-tools vulkan-validationlayers glslc
    xvfb xauth imagemagick xdotool python3 python3-pip unzip ca-certificates
)

# Pinned checksums, keyed by ONNX Runtime version, for the CPU x86_64 Linux
# wheel that `pip download` (below) selects -- the cp311 manylinux_2_28 build
# -- and for the libonnxruntime.so.<version> member extracted from it.
declare -A ORT_WHEEL_SHA256_TABLE=(
    [1.30.0]=fd54b314ea385bcecac69ab431f020ba503e3878dad4ebb645fec5a24b041242
)
declare -A ORT_SO_SHA256_TABLE=(
    [1.30.0]=c902c70b3003c0e99fada202f37478c515ae9bba7944c2b2abd0017bae0c82ed
)

# The wheel is chosen by these tags, not by the local Python, so the pinned
# checksums hold whatever python3 is on PATH.
ORT_WHEEL_PYTHON=3.11
ORT_WHEEL_PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64)

DEPS_DIR=$ROOT/.deps
ORT_DIR=$DEPS_DIR/onnxruntime
WHEEL_DIR=$DEPS_DIR/wheels

die() {
    echo "error: $*" >&2
    exit 1
}

sha256_of() {
    sha256sum "$1" | cut -d' ' -f1
}

# ---------------------------------------------------------------- apt ------

check_apt() {
    local -A status=()
    local pkg st missing=()
    # One dpkg-query call for all packages; unknown packages print nothing.
    while IFS=$'\t' read -r pkg st; do
        [[ $st == "install ok installed" ]] && status[$pkg]=1
    done < <(dpkg-query -W -f='${Package}\t${Status}\n' "${APT_PACKAGES[@]}" 2>/dev/null || true)

    for pkg in "${APT_PACKAGES[@]}"; do
        if [[ -n ${status[$pkg]:-} ]]; then
            echo "ok: $pkg"
        else
            missing+=("$pkg")
        fi
    done
    ((${#missing[@]} == 0)) && return 0

    local sudo=()
    if ((EUID != 0)); then
        if command -v sudo >/dev/null 2>&1; then
            sudo=(sudo)
        else
            die "missing Debian packages: ${missing[*]}
       Not root and sudo is not available; install them as root with:
       apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
        fi
    fi
    echo "installing: ${missing[*]} (apt-get)"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update ||
        die "apt-get update failed (needed to install: ${missing[*]})"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends "${missing[@]}" ||
        die "apt-get install failed for: ${missing[*]}"
}

# --------------------------------------------------------------- rust ------

version_ge() { # version_ge A B: is A >= B ?
    [[ $(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1) == "$2" ]]
}

check_rust() {
    local hint="install Rust $MIN_RUST or newer with rustup, then open a new shell or 'source ~/.cargo/env'"
    command -v cargo >/dev/null 2>&1 || die "cargo not found: $hint"
    command -v rustc >/dev/null 2>&1 || die "rustc not found: $hint"
    local ver
    ver=$(rustc --version | awk '{print $2}')
    ver=${ver%%-*}
    version_ge "$ver" "$MIN_RUST" ||
        die "rustc $ver is too old (need $MIN_RUST or newer): run 'rustup update stable'"
    echo "ok: rust $ver (cargo $(command -v cargo))"

    # make test needs rustfmt and clippy; these only warn, so run and build work.
    local comp
    for comp in fmt clippy; do
        if cargo "$comp" --version >/dev/null 2>&1; then
            echo "ok: cargo $comp"
        else
            echo "warning: cargo $comp missing (make test needs it): rustup component add ${comp/fmt/rustfmt}" >&2
        fi
    done
}

# ------------------------------------------------------- onnx runtime ------

pick_pip_python() {
    local py
    for py in python3 /usr/bin/python3; do
        if command -v "$py" >/dev/null 2>&1 && "$py" -m pip --version >/dev/null 2>&1; then
            echo "$py"
            return 0
        fi
    done
    return 1
}

check_ort() {
    local os arch
    os=$(uname -s)
    arch=$(uname -m)
    if [[ $os != Linux || $arch != x86_64 ]]; then
        die "ONNX Runtime: only x86_64 Linux is supported by the pinned download (this is $os/$arch).
       Get libonnxruntime.so.$ORT_VERSION for this platform yourself and put it at
       $ORT_DIR/libonnxruntime.so.$ORT_VERSION with a symlink libonnxruntime.so next to it."
    fi

    local want_whl=${ORT_WHEEL_SHA256:-${ORT_WHEEL_SHA256_TABLE[$ORT_VERSION]:-}}
    local want_so=${ORT_SO_SHA256:-${ORT_SO_SHA256_TABLE[$ORT_VERSION]:-}}
    if [[ -z $want_whl || -z $want_so ]]; then
        die "ONNX Runtime $ORT_VERSION has no pinned checksums (pinned: ${!ORT_WHEEL_SHA256_TABLE[*]}).
       Add it to the tables in scripts/setup.sh or set ORT_WHEEL_SHA256 and ORT_SO_SHA256."
    fi

    local so_name=libonnxruntime.so.$ORT_VERSION
    local so=$ORT_DIR/$so_name
    local link=$ORT_DIR/libonnxruntime.so

    if [[ -f $so && $(sha256_of "$so") == "$want_so" ]]; then
        if [[ $(readlink "$link" 2>/dev/null || true) != "$so_name" ]]; then
            ln -sfn "$so_name" "$link"
            echo "fixed: symlink .deps/onnxruntime/libonnxruntime.so -> $so_name"
        fi
        echo "ok: onnxruntime $ORT_VERSION (.deps/onnxruntime/$so_name)"
        return 0
    fi

    if [[ -e $so ]]; then
        echo "installing: onnxruntime $ORT_VERSION (existing $so_name has the wrong checksum, replacing it)"
    else
        echo "installing: onnxruntime $ORT_VERSION"
    fi
    command -v unzip >/dev/null 2>&1 || die "unzip not found (apt-get install unzip)"
    mkdir -p "$ORT_DIR" "$WHEEL_DIR"

    # Reuse a wheel downloaded earlier if it still matches the pin.
    local whl="" f
    for f in "$WHEEL_DIR"/onnxruntime-"$ORT_VERSION"-*.whl; do
        [[ -f $f && $(sha256_of "$f") == "$want_whl" ]] && whl=$f && break
    done

    local tmp
    tmp=$(mktemp -d "$DEPS_DIR/.tmp.XXXXXX")
    # shellcheck disable=SC2064 # expand $tmp now
    trap "rm -rf '$tmp'" EXIT

    if [[ -z $whl ]]; then
        local py
        py=$(pick_pip_python) ||
            die "no working pip: install python3-pip (python3 -m pip must work)"
        local platform_args=() p
        for p in "${ORT_WHEEL_PLATFORMS[@]}"; do platform_args+=(--platform "$p"); done
        echo "downloading: onnxruntime==$ORT_VERSION wheel with $py -m pip download"
        "$py" -m pip download --disable-pip-version-check --no-deps \
            --only-binary=:all: --python-version "$ORT_WHEEL_PYTHON" \
            "${platform_args[@]}" -d "$tmp/dl" "onnxruntime==$ORT_VERSION" ||
            die "pip download of onnxruntime==$ORT_VERSION failed"
        local got=("$tmp"/dl/onnxruntime-"$ORT_VERSION"-*.whl)
        [[ ${#got[@]} -eq 1 && -f ${got[0]} ]] ||
            die "pip download produced no onnxruntime-$ORT_VERSION wheel in $tmp/dl"
        local have_whl
        have_whl=$(sha256_of "${got[0]}")
        if [[ $have_whl != "$want_whl" ]]; then
            die "checksum mismatch for wheel $(basename "${got[0]}")
       expected sha256: $want_whl
       actual   sha256: $have_whl"
        fi
        echo "ok: wheel sha256 $have_whl"
        rm -f "$WHEEL_DIR"/onnxruntime-"$ORT_VERSION"-*.whl
        mv "${got[0]}" "$WHEEL_DIR/"
        whl=$WHEEL_DIR/$(basename "${got[0]}")
    else
        echo "ok: reusing verified wheel .deps/wheels/$(basename "$whl")"
    fi

    unzip -j -o -q "$whl" "onnxruntime/capi/$so_name" -d "$tmp/x" ||
        die "wheel $(basename "$whl") has no member onnxruntime/capi/$so_name"
    local have_so
    have_so=$(sha256_of "$tmp/x/$so_name")
    if [[ $have_so != "$want_so" ]]; then
        die "checksum mismatch for $so_name (from $(basename "$whl"))
       expected sha256: $want_so
       actual   sha256: $have_so"
    fi
    chmod 0755 "$tmp/x/$so_name"
    mv -f "$tmp/x/$so_name" "$so"
    ln -sfn "$so_name" "$link"
    echo "ok: onnxruntime $ORT_VERSION installed (.deps/onnxruntime/$so_name, sha256 $have_so)"
}

# The GPU build (ORT=gpu): libonnxruntime.so with the CUDA execution provider beside it.
check_ort_gpu() {
    local dir=$DEPS_DIR/onnxruntime-gpu name ok=1
    for name in "${!ORT_GPU_SO_SHA256[@]}"; do
        [[ -f $dir/$name && $(sha256_of "$dir/$name") == "${ORT_GPU_SO_SHA256[$name]}" ]] || ok=0
    done
    if ((ok)); then
        echo "ok: onnxruntime-gpu $ORT_GPU_VERSION (.deps/onnxruntime-gpu/)"
    else
        echo "installing: onnxruntime-gpu $ORT_GPU_VERSION (about 300 MB; the CUDA execution provider)"
        mkdir -p "$dir" "$WHEEL_DIR"
        local whl="" f
        for f in "$WHEEL_DIR"/onnxruntime_gpu-"$ORT_GPU_VERSION"-*.whl; do
            [[ -f $f && $(sha256_of "$f") == "$ORT_GPU_WHEEL_SHA256" ]] && whl=$f && break
        done
        local tmp
        tmp=$(mktemp -d "$DEPS_DIR/.tmp.XXXXXX")
        # shellcheck disable=SC2064 # expand $tmp now
        trap "rm -rf '$tmp'" EXIT
        if [[ -z $whl ]]; then
            local py
            py=$(pick_pip_python) || die "no working pip: install python3-pip (python3 -m pip must work)"
            "$py" -m pip download --disable-pip-version-check --no-deps --only-binary=:all: \
                --python-version 3.12 --platform manylinux_2_28_x86_64 -d "$tmp/dl" \
                "onnxruntime-gpu==$ORT_GPU_VERSION" ||
                die "pip download of onnxruntime-gpu==$ORT_GPU_VERSION failed"
            local got=("$tmp"/dl/onnxruntime_gpu-"$ORT_GPU_VERSION"-*.whl)
            [[ -f ${got[0]} && $(sha256_of "${got[0]}") == "$ORT_GPU_WHEEL_SHA256" ]] ||
                die "checksum mismatch for the onnxruntime-gpu wheel (expected sha256 $ORT_GPU_WHEEL_SHA256)"
            mv "${got[0]}" "$WHEEL_DIR/"
            whl=$WHEEL_DIR/$(basename "${got[0]}")
        fi
        for name in "${!ORT_GPU_SO_SHA256[@]}"; do
            unzip -j -o -q "$whl" "onnxruntime/capi/$name" -d "$tmp/x" ||
                die "wheel $(basename "$whl") has no member onnxruntime/capi/$name"
            [[ $(sha256_of "$tmp/x/$name") == "${ORT_GPU_SO_SHA256[$name]}" ]] ||
                die "checksum mismatch for $name from $(basename "$whl")"
            chmod 0755 "$tmp/x/$name"
            mv -f "$tmp/x/$name" "$dir/$name"
        done
        echo "ok: onnxruntime-gpu $ORT_GPU_VERSION installed (.deps/onnxruntime-gpu/)"
    fi
    # The CUDA EP links CUDA 13's runtime, cuBLAS and cuDNN 9 dynamically: name what is missing.
    local missing
    missing=$(LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$dir/libonnxruntime_providers_cuda.so" |
        awk '/not found/ {print $1}' | tr '\n' ' ')
    if [[ -n $missing ]]; then
        echo "warning: the CUDA execution provider cannot load yet; missing: $missing
       Install the NVIDIA driver, the CUDA 13 runtime, cuBLAS, cuRAND and cuDNN 9 (NVIDIA's packages, or pip's nvidia-*-cu13
       wheels) and add their lib directories to LD_LIBRARY_PATH. Until then the game runs and
       greys out the CUDA paths with the reason." >&2
    else
        echo "ok: CUDA libraries for the CUDA execution provider"
    fi
}

check_apt
check_rust
check_ort
case $ORT in
cpu) ;;
gpu) check_ort_gpu ;;
*) die "ORT=$ORT: use ORT=cpu (default) or ORT=gpu" ;;
esac
