#!/usr/bin/env bash
# Installs what hxrt needs to build and test on Debian 12. Idempotent: does nothing when everything is present.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libfmt-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libicu-dev
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  libcpp-httplib-dev
  openmpi-bin libopenmpi-dev nginx
  libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata
  python3 python3-pip python3-venv python3-dev
)

missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
