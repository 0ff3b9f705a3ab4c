#!/usr/bin/env bash
# The main job on a fresh Debian machine: installs dependencies, builds hxrt, lists the devices and runs the
# runtime demo (two streams, a cross-stream event, the caching pool, a clean teardown).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
BUILD_TYPE=Release scripts/build.sh build-release -DHXRT_BUILD_TESTS=OFF -DHXRT_BUILD_BENCHMARKS=OFF
./build-release/tools/hxrt devices
./build-release/tools/hxrt demo "$@"
