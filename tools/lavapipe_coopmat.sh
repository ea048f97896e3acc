#!/usr/bin/env bash
# The matrix-unit kernel's tests on a machine without a GPU. Debian 12's lavapipe (Mesa 22.3,
# what `make test` runs on) has no VK_KHR_cooperative_matrix, so those tests are ignored there;
# Mesa 26's lavapipe has it (8x8x8 fp16 matrices with fp32 sums, subgroups of 8: a shape the GPU
# machine never offers, which also tests that nothing assumes 16x16x16). This script keeps a
# Debian 13 chroot with lavapipe from Debian unstable in $ROOT (root, debootstrap and the Debian
# mirror; a few minutes the first time) and runs the engine's test binaries in it with
# --include-ignored, validation on. A developer's check, not part of `make test`.
#
#   bash tools/lavapipe_coopmat.sh                      # infer_fast, infer_conv, infer_ops
#   bash tools/lavapipe_coopmat.sh infer_fast temporal_model
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="${ROOT:-/opt/lavapipe-coopmat}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(infer_fast infer_conv infer_ops)

if [ ! -x "$ROOT/usr/bin/vulkaninfo" ]; then
    command -v debootstrap >/dev/null || apt-get install -y debootstrap
    echo "== a Debian 13 chroot in $ROOT"
    debootstrap --variant=minbase --include=libvulkan1,vulkan-validationlayers,libx11-6,libxcb1 \
        trixie "$ROOT" "$MIRROR"
    # Unstable's index may be past its Valid-Until on a mirror snapshot: accept it.
    echo "deb $MIRROR sid main" > "$ROOT/etc/apt/sources.list.d/sid.list"
    chroot "$ROOT" apt-get -o Acquire::Check-Valid-Until=false update -qq
    chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Check-Valid-Until=false \
        install -y -qq -t sid mesa-vulkan-drivers vulkan-tools
fi
chroot "$ROOT" env XDG_RUNTIME_DIR=/tmp vulkaninfo 2>/dev/null | grep -E "driverInfo|cooperativeMatrix " \
    | grep -q "cooperativeMatrix *= true" \
    || { echo "error: the lavapipe in $ROOT has no cooperative matrix (a Mesa older than 26?)"; exit 1; }

# The test binaries, built here as `make test` builds them; the repository is bind-mounted at
# the same path inside the chroot, so they find models/, .deps/ and their build paths.
args=()
for t in "${tests[@]}"; do args+=(--test "$t"); done
exes=$(cargo test --no-run "${args[@]}" --message-format=json 2>/dev/null | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["executable"])')
repo=$PWD
mkdir -p "$ROOT$repo"
mounted=()
for d in /proc /sys /dev "$repo"; do
    if ! mountpoint -q "$ROOT$d"; then mkdir -p "$ROOT$d" && mount --bind "$d" "$ROOT$d" && mounted+=("$ROOT$d"); fi
done
trap 'for m in "${mounted[@]}"; do umount "$m"; done' EXIT
status=0
for exe in $exes; do
    echo "== $(basename "$exe") on $(chroot "$ROOT" env XDG_RUNTIME_DIR=/tmp vulkaninfo 2>/dev/null \
        | grep -m1 driverInfo | sed 's/.*= //')"
    chroot "$ROOT" env -C "$repo" XDG_RUNTIME_DIR=/tmp UPSCALE_VALIDATION=1 "$exe" --include-ignored \
        --test-threads 1 || status=1
done
exit $status
