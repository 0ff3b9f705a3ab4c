#!/usr/bin/env bash
# Makes (or updates) the Python environment the tests use from PyPI — the `openai` client, jsonschema and pytest for
# the server tests, numpy, nanobind and scikit-build-core for the Python package (python/) — and prints its interpreter. It lives at $HXRT_VENV, else ${XDG_CACHE_HOME:-~/.cache}/hxrt/venv,
# where CMake finds it (tests/CMakeLists.txt). Nothing here is a dependency of hxrt itself.
set -euo pipefail
venv=${HXRT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/hxrt/venv}
requirements=(openai==2.* jsonschema==4.* pytest==8.* numpy==2.* nanobind==2.* scikit-build-core==0.11.*)
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv" >&2
fi
if ! "$venv/bin/python" -c "import openai, jsonschema, pytest, numpy, nanobind, scikit_build_core" 2>/dev/null; then
  echo "python_env: installing ${requirements[*]} into $venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${requirements[@]}" >&2
fi
echo "$venv/bin/python"
