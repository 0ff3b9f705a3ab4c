#!/usr/bin/env bash
# Sets up llama.cpp (through the PyPI package llama-cpp-python) as the REFERENCE implementation
# for the LLM goldens (scripts/make_llm_goldens.py) and as the benchmark PEER (bench/llama_cpp_peer.py, and its
# OpenAI-compatible server for bench/serve_load.py).
# It is NOT a dependency of hxrt or of CI: nothing in the build or the test suite needs it.
#
# Creates, idempotently, a virtualenv at ${HXRT_PEER_DIR:-$HOME/.cache/hxrt/peers}/llama-cpp-python,
# installs a pinned llama-cpp-python plus numpy into it, and prints the venv's python path as the last
# line of stdout. Re-running with the pinned version already installed does nothing but print the path.
#
# llama-cpp-python ships only an sdist for Linux on PyPI, so pip compiles llama.cpp from source:
# about 15-25 minutes on 2 cores. It runs under `nice` with CMAKE_BUILD_PARALLEL_LEVEL (default 2)
# so a shared machine stays usable. Run it in the background and log it, e.g.
#   nohup scripts/setup_llama_cpp_peer.sh > /tmp/llama_peer_setup.log 2>&1 &
#
# Build: plain CPU build. BLAS (OpenBLAS) and every GPU backend off, multimodal (mtmd/llava) off,
# GGML_NATIVE left at llama.cpp's default (ON: -march=native), which is what a user who runs
# `pip install llama-cpp-python` on this machine gets, EXCEPT that Intel AMX is compiled out
# (CFLAGS/CXXFLAGS -mno-amx-*): with Debian 12's GCC 12, `_tile_loadconfig` declares an 8-byte
# memory operand, so GCC drops the stores that fill ggml's tile config (rows/colsb) and the first
# AMX matmul dies with SIGILL (tilezero on an unconfigured tile) on CPUs that report AMX.
# ggml then uses its AVX-512 VNNI kernels. Override with LLAMA_CPP_PEER_CMAKE_ARGS / _CFLAGS.
#
# Environment knobs:
#   HXRT_PEER_DIR                  parent dir of the venv (default $HOME/.cache/hxrt/peers)
#   LLAMA_CPP_PYTHON_VERSION       version to install (default: the pinned one below)
#   LLAMA_CPP_PEER_CMAKE_ARGS      extra CMake args appended to the defaults
#   LLAMA_CPP_PEER_CFLAGS          C/C++ flags (default: -mno-amx-tile -mno-amx-int8 -mno-amx-bf16)
#   CMAKE_BUILD_PARALLEL_LEVEL     build jobs (default 2)
#   PYTHON                         interpreter used to create the venv (default python3)
set -euo pipefail

PINNED_VERSION="0.3.36"   # llama.cpp vendored at commit 0c1e570 ("webgpu: fix SSM_SCAN binding aliasing")
VERSION="${LLAMA_CPP_PYTHON_VERSION:-$PINNED_VERSION}"
PEER_DIR="${HXRT_PEER_DIR:-$HOME/.cache/hxrt/peers}"
VENV="$PEER_DIR/llama-cpp-python"
PY="${PYTHON:-python3}"
VPY="$VENV/bin/python"
STAMP="$VENV/.hxrt-build-fingerprint"

CMAKE_ARGS_DEFAULT="-DCMAKE_BUILD_TYPE=Release -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF \
-DGGML_OPENCL=OFF -DGGML_HIP=OFF -DGGML_SYCL=OFF -DGGML_METAL=OFF -DGGML_RPC=OFF -DLLAVA_BUILD=OFF \
-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
CMAKE_ARGS="$CMAKE_ARGS_DEFAULT ${LLAMA_CPP_PEER_CMAKE_ARGS:-}"
BUILD_CFLAGS="${LLAMA_CPP_PEER_CFLAGS:--mno-amx-tile -mno-amx-int8 -mno-amx-bf16}"
# A rebuild happens whenever the version or the build flags differ from the recorded ones.
FINGERPRINT="llama-cpp-python==$VERSION|$CMAKE_ARGS|$BUILD_CFLAGS"

log() { echo "setup_llama_cpp_peer: $*" >&2; }

installed_version() {
  [[ -x "$VPY" ]] || return 1
  [[ -f "$STAMP" && "$(cat "$STAMP")" == "$FINGERPRINT" ]] || return 1
  "$VPY" - <<'EOF' 2>/dev/null
import importlib.metadata as m
print(m.version("llama_cpp_python"))
import numpy  # noqa: F401  (must be importable too)
EOF
}

# llama.cpp's OpenAI-compatible server (the peer of `hxrt serve`, bench/serve_load.py): the [server] extra's
# pure-Python dependencies (FastAPI, uvicorn, ...), installed beside an existing build without rebuilding it.
install_server_extra() {
  "$VPY" -c "import llama_cpp.server, uvicorn" 2>/dev/null && return 0
  log "installing llama-cpp-python[server]==$VERSION's dependencies"
  "$VPY" -m pip install --quiet "llama-cpp-python[server]==$VERSION"
}

if have="$(installed_version)" && [[ "$have" == "$VERSION" ]]; then
  log "llama-cpp-python $have already installed in $VENV"
  install_server_extra
  echo "$VPY"
  exit 0
fi

mkdir -p "$PEER_DIR"
if [[ ! -x "$VPY" ]]; then
  log "creating venv $VENV"
  "$PY" -m venv "$VENV"
  "$VPY" -m pip install --quiet --upgrade pip
fi

export CMAKE_ARGS
export CFLAGS="${CFLAGS:+$CFLAGS }$BUILD_CFLAGS" CXXFLAGS="${CXXFLAGS:+$CXXFLAGS }$BUILD_CFLAGS"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
export FORCE_CMAKE=1

log "building llama-cpp-python==$VERSION from source (jobs=$CMAKE_BUILD_PARALLEL_LEVEL); this takes a while"
log "CMAKE_ARGS=$CMAKE_ARGS"
log "CFLAGS=$CFLAGS"
rm -f "$STAMP"
start=$(date +%s)
nice -n "${NICE_LEVEL:-5}" "$VPY" -m pip install --verbose --no-cache-dir --force-reinstall \
  --no-binary llama-cpp-python "llama-cpp-python==$VERSION" numpy
log "build+install took $(( $(date +%s) - start ))s"

echo "$FINGERPRINT" > "$STAMP"
have="$(installed_version)" || { rm -f "$STAMP"; log "install finished but llama_cpp does not import"; exit 1; }
"$VPY" -c 'import llama_cpp; print("setup_llama_cpp_peer: import ok,", llama_cpp.__version__)' >&2
install_server_extra
echo "$VPY"
