#!/usr/bin/env bash
# Fetches into .gl/ (ignored) what the GPU machine lacks for Vulkan: the loader and GL dispatch
# libraries from Debian 12, and the validation layer from Debian 13 (1.4.309): Debian 12's
# layer (1.3.239) predates VK_KHR_cooperative_matrix and reports the matrix kernels' device
# features and SPIR-V as errors. The machine's Ubuntu 24.04 meets the newer layer's glibc and
# libstdc++. tools/device/env.sh unpacks .gl/ there. Run from the repository root.
set -euo pipefail
mkdir -p .gl /tmp/gl-apt/bookworm/partial /tmp/gl-apt/trixie/partial
arch='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64'
bookworm="$arch -oDir::State::Lists=/tmp/gl-apt/bookworm"
echo "deb http://deb.debian.org/debian trixie main" > /tmp/gl-apt/trixie.list
trixie="$arch -oDir::State::Lists=/tmp/gl-apt/trixie -oDir::Etc::SourceList=/tmp/gl-apt/trixie.list -oDir::Etc::SourceParts=/dev/null"
apt-get $bookworm update >/dev/null
apt-get $trixie update >/dev/null
cd .gl
rm -f ./*.deb
apt-get $bookworm download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2
apt-get $trixie download vulkan-validationlayers
ls
