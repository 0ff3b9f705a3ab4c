#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan; tests/fuzz/README.md) and fuzzes each for SECONDS (default 30),
# starting from a working copy of its checked-in corpus. Exits non-zero when a target finds a crash, a leak, a
# timeout or a broken invariant; the input is left in build-fuzz/findings/<target>/.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (targets: npy gguf graph_file tokenizer chat_template serve_request
#                                                  onnx_import model_family grammar
#                                                  json_schema tool_calls step_message)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-30}
shift || true
TARGETS_TO_RUN=("$@")
if [ ${#TARGETS_TO_RUN[@]} -eq 0 ]; then TARGETS_TO_RUN=(npy gguf graph_file tokenizer chat_template serve_request onnx_import model_family grammar json_schema tool_calls step_message); fi

fuzz_targets=()
for t in "${TARGETS_TO_RUN[@]}"; do fuzz_targets+=("fuzz_$t"); done
mkdir -p build-fuzz
CXX=clang++ CC=clang TARGETS="${fuzz_targets[*]}" scripts/build.sh build-fuzz -DHXRT_FUZZ=ON -DHXRT_SANITIZE=address \
  -DHXRT_BUILD_TESTS=OFF -DHXRT_BUILD_BENCHMARKS=OFF -DHXRT_BUILD_TOOLS=OFF -DHXRT_DEBUG_INFO=lines >build-fuzz/build.log 2>&1 \
  || { tail -60 build-fuzz/build.log; exit 1; }

# The tokenizer target also fuzzes the real model's vocabulary when it can find the model.
if [ -z "${HXRT_TEST_MODEL:-}" ]; then HXRT_TEST_MODEL=$(scripts/fetch_model.sh 2>/dev/null || true); fi
export HXRT_TEST_MODEL
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

status=0
for t in "${TARGETS_TO_RUN[@]}"; do
  corpus=build-fuzz/corpus/$t
  findings=build-fuzz/findings/$t
  mkdir -p "$corpus" "$findings"
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  log=build-fuzz/fuzz_$t.log
  if build-fuzz/tests/fuzz/fuzz_"$t" "$corpus" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/" >"$log" 2>&1; then
    result=ok
  else
    result=FAILED
    status=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  echo "fuzz $t: $result — ${SECONDS_EACH}s, $execs execs, $cov coverage edges, corpus $(ls "$corpus" | wc -l) inputs"
  if [ "$result" = FAILED ]; then tail -40 "$log"; fi
done
exit $status
