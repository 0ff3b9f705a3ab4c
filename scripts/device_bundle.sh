#!/usr/bin/env bash
# Prepares what scripts/device_check.sh needs on a lent GPU machine, which has the NVIDIA driver, CUDA 13 (NVRTC,
# cuBLAS), CMake and a compiler, but none of hxrt's Debian dependencies and no network. Run here, in the repository
# root; it writes .device/ (ignored by git through .git/info/exclude), which the device tool carries (`carry`):
#   .device/bin/   stripped Release builds of the CLI and the test programs device_check.sh runs
#   .device/lib/   the shared libraries they need that are not part of a base system (fmt, OpenBLAS, protobuf, ...)
#   .device/model.part-aa, -ab   the default model split in two: one carry holds at most 64 MiB, so the model travels
#                  over two calls on a warm machine (device_check.sh --receive-model PART, then the checks)
# Usage: scripts/device_bundle.sh [BUILD_DIR]   (default build-device)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-device}
grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo '/.device/' >> .git/info/exclude
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHXRT_DEBUG_INFO=none -DHXRT_WERROR=OFF >/dev/null
targets=(hxrt hal_test hal_conformance_test kernels_cuda_test parity_sweep_test llm_golden_test)
cmake --build "$build" --target "${targets[@]}"
rm -rf .device && mkdir -p .device/bin .device/lib
for t in "${targets[@]}"; do
  f=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
  strip -o ".device/bin/$t" "$f"
done
# Libraries outside glibc/libstdc++/libgcc (the device image has its own, newer ones).
for f in .device/bin/*; do
  ldd "$f" | awk '/=> \//{print $3}'
done | sort -u | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" .device/lib/; done
pwd > .device/source_dir  # the golden test finds its JSON under the source tree it was built in
model=$(scripts/fetch_model.sh | tail -1)
split -b 60M "$model" .device/model.part-
du -sh .device/bin .device/lib .device/model.part-*
