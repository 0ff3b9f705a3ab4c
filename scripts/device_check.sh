#!/usr/bin/env bash
# The CUDA device checks (issue #15), run on a machine with an NVIDIA GPU: the lent H200 through the device tool, or
# any CUDA machine with a build of hxrt. Prints one PASS/FAIL line per check and exits non-zero if any failed.
#   1. the driver sees the GPU (hxrt devices)
#   2. the HAL conformance suite on cuda (every backend test, the cuda instances must run, not skip)
#   3. the CUDA kernels: NVRTC builds for this GPU's arch and each kernel against the CPU kernel
#   4. the parity sweep on cuda (every CUDA kernel against the double-precision reference)
#   5. the golden test: CUDA tokens = CPU tokens on the goldens' prompts, logits within 1e-3
#   6. hxrt generate --device cuda on the default model, and decode tokens/s (hxrt bench) against the HBM roofline
# Binaries come from .device/bin (scripts/device_bundle.sh) when present, else from BUILD_DIR (default build).
# With --receive-model PART the script only stores a model part that this call carried (see device_bundle.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/hxrt-device-check}
mkdir -p "$out"
if [[ "${1:-}" == "--receive-model" ]]; then
  mkdir -p /tmp/hxrt-model && cp ".device/model.part-$2" /tmp/hxrt-model/ && ls -la /tmp/hxrt-model
  exit 0
fi
if [[ -d .device/bin ]]; then
  bin=.device/bin
  export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}"
else
  build=${BUILD_DIR:-build}
  bin=$(mktemp -d)
  for t in hxrt hal_test hal_conformance_test kernels_cuda_test parity_sweep_test llm_golden_test; do
    f=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
    [[ -n "$f" ]] && ln -s "$PWD/$f" "$bin/$t"
  done
fi
# The golden test reads its JSON from the source tree it was built in (device_bundle.sh records where that was).
if [[ -f .device/source_dir ]]; then
  src=$(cat .device/source_dir)
  if [[ -n "$src" && ! -e "$src" ]]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi
fi
model=${HXRT_TEST_MODEL:-}
if [[ -z "$model" && -f /tmp/hxrt-model/model.part-aa ]]; then
  cat /tmp/hxrt-model/model.part-* > /tmp/hxrt-model/model.gguf && model=/tmp/hxrt-model/model.gguf
fi
[[ -z "$model" ]] && model=$(scripts/fetch_model.sh 2>/dev/null | tail -1)
export HXRT_TEST_MODEL=$model
export HXRT_CACHE_DIR=/tmp/hxrt-cache

failed=0
check() {  # check NAME COMMAND...: runs it, keeps its log, and fails it when it fails or any cuda test skipped
  local name=$1
  shift
  local log="$out/$name.log"
  local start=$SECONDS
  "$@" >"$log" 2>&1
  local rc=$?
  if [[ $rc -eq 0 ]] && grep -qE 'SKIPPED \] .*(cuda|Cuda)' "$log"; then rc=77; fi
  if [[ $rc -eq 0 ]]; then
    echo "PASS $name ($((SECONDS - start)) s)"
  else
    echo "FAIL $name (rc $rc, $((SECONDS - start)) s): last lines of $log"
    tail -25 "$log" | sed 's/^/    /'
    failed=1
  fi
}

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
check devices bash -o pipefail -c "'$bin/hxrt' devices | tee /dev/stderr | grep -q cuda:0"
check hal_cuda "$bin/hal_test" --gtest_filter='Cuda*'
check conformance "$bin/hal_conformance_test" --gtest_filter='*/cuda:CudaConformanceKernels.*'
check kernels "$bin/kernels_cuda_test"
check parity "$bin/parity_sweep_test" --gtest_filter='*/cuda'
check golden "$bin/llm_golden_test" --gtest_filter='GoldenTest.CudaGivesTheCpuTokensAndLogits'
check generate "$bin/hxrt" generate --device cuda --model "$model" -n 32 --chat --prompt "What is the capital of France?"
# Decode speed at batch 1 (128-token prompt, 128 new tokens), the CPU beside it; docs/cuda.md puts it against the roofline.
for device in cuda cpu; do
  check "speed_$device" bash -o pipefail -c "'$bin/hxrt' generate --device $device --model '$model' --prompt-tokens 128 -n 128 \
      --ignore-eos --json -q --prompt 'Once upon a time' | tee '$out/speed_$device.json'"
done
cat "$out"/speed_*.json 2>/dev/null
exit $failed
