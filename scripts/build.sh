#!/usr/bin/env bash
# Configures and builds hxrt. Usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
shift || true
LAUNCHER=()
if command -v ccache >/dev/null; then
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Hash paths relative to the checkout, so a fresh clone elsewhere (CI) reuses this machine's cache.
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "${LAUNCHER[@]}" "$@"
# TARGETS (space-separated) limits the build to those targets.
read -r -a targets <<<"${TARGETS:-}"
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" ${targets[@]+--target "${targets[@]}"}
