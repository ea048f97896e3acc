#!/usr/bin/env bash
# Packs what the GPU machine needs into .devrun/ (ignored): the release binary (stripped),
# assets, models, config.toml and a 1920x1080-output config. Run from the repository root after
# `cargo build --release`.
set -euo pipefail
rm -rf .devrun && mkdir -p .devrun
cp target/release/upscale-demo .devrun/ && strip .devrun/upscale-demo
cp -r assets models config.toml .devrun/
sed -e 's/^output_width = 1280/output_width = 1920/' -e 's/^output_height = 720/output_height = 1080/' \
    config.toml > .devrun/config-1080.toml
grep -q '^output_width = 1920' .devrun/config-1080.toml
du -sh .devrun
