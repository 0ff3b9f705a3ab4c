#!/usr/bin/env bash
# The test command: installs dependencies, builds with warnings as errors, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh build -DHXRT_WERROR=ON
ctest --test-dir build --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 600
