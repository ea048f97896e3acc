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
# ENGINE_TESTS=1: the in-stream engine's test binaries and the temporal model's too (release,
# stripped), for tools/device/h200_engine.sh (the cooperative-matrix tests cannot run here). Run
# them with UPSCALE_DEMO_EXE naming .devrun/upscale-demo: their build path is not there.
if [ "${ENGINE_TESTS:-0}" = 1 ]; then
    mkdir -p .devrun/tests
    cargo test --release --no-run --test infer_fast --test infer_conv --test infer_ops --test temporal_model \
        --message-format=json 2>/dev/null \
        | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["executable"])' \
        | while read -r exe; do cp "$exe" ".devrun/tests/$(basename "$exe" | sed 's/-[0-9a-f]*$//')"; done
    strip .devrun/tests/*
    ls .devrun/tests
fi
du -sh .devrun
