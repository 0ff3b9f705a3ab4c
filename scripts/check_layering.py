#!/usr/bin/env python3
"""Checks hxrt's layering from the #include lines of every source under src/, include/, tools/ and tests/, and
the documents cited by those files and by the CMake files (CMakeLists.txt, cmake/).

Rules (docs/design/architecture.md, "Who may include whom"):
  layer      a file of layer L includes only headers of L and of the layers L links (the LAYER_DEPS table below, the
             transitive closure of the DEPS in src/*/CMakeLists.txt). Test and benchmark code (*_test.cc,
             *_bench.cc, src/*/testing/, tests/) is an executable above the layers and may include any of them.
  private    a private header (src/<layer>/...) is included only from its own layer (or from test code).
  backend    code of one backend (hal/cpu, hal/opencl, hal/cuda, kernels/cpu, kernels/opencl, kernels/cuda, including the public
             include/hxrt/kernels/<backend>_kernels.h) never includes another backend's headers. Test code may
             include another backend's public registration header (an OpenCL = CPU test registers both), never
             its private ones.
  docs       a comment never cites a design document that is not in the repository (a .md named in a source must
             exist: by its path from the repository root, or as a file of that name somewhere in the repository).
             A path qualified by another project ("ggml's docs/gguf.md") cites that project and is not checked.

Known violations that another change removes are listed in scripts/layering_exceptions.txt, one
"file:rule:included-header" per line; an exception that no longer matches anything is itself an error, so the list
only shrinks. Exit status: 0 when clean, 1 with one "file:line: rule: why" line per violation.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCAN_DIRS = ("src", "include", "tools", "tests")
SOURCE_EXTENSIONS = (".h", ".hpp", ".cc", ".cpp", ".c", ".inc")
EXCEPTIONS_FILE = os.path.join(ROOT, "scripts", "layering_exceptions.txt")

# What each layer may include, besides itself: the closure of its CMake DEPS (src/<layer>/CMakeLists.txt).
LAYER_DEPS = {
    "base": set(),
    "hal": {"base"},
    "memory": {"hal", "base"},
    # Communicators and collectives on streams (MPI through a plugin loaded at run time).
    "comm": {"hal", "base"},
    "graph": {"base"},
    "ops": {"graph", "hal", "base"},
    "kernels": {"ops", "comm", "graph", "hal", "base"},
    # formats/onnx converts ONNX nodes to hxrt ops through the op schemas (shape inference while importing).
    "formats": {"ops", "graph", "hal", "base"},
    "kv": {"memory", "hal", "base"},
    "runtime": {"ops", "memory", "graph", "hal", "base"},
    # runtime::Model (src/runtime/model.cc, include/hxrt/runtime/model.h) is a CMake target of its own, hxrt_model,
    # above formats and kernels: it reads graph files and makes the built-in registries. See SUBLAYERS.
    "model": {"formats", "runtime", "kernels", "comm", "ops", "memory", "graph", "hal", "base"},
    "llm": {"formats", "runtime", "kv", "kernels", "comm", "ops", "memory", "graph", "hal", "base"},
    # The C API (src/capi, include/hxrt/hxrt.h): one shared library over the llm layer and runtime::Model.
    "capi": {"llm", "model", "formats", "runtime", "kv", "kernels", "comm", "ops", "memory", "graph", "hal", "base"},
    # The OpenAI-compatible server (src/serve, include/hxrt/serve): HTTP over the llm layer; used by tools only.
    "serve": {"llm", "formats", "runtime", "kv", "kernels", "comm", "ops", "memory", "graph", "hal", "base"},
    "tools": {"serve", "llm", "model", "formats", "runtime", "kv", "kernels", "comm", "ops", "memory", "graph", "hal", "base"},
}
# Files that live in one layer's folder but form a target of their own above it (src/runtime/CMakeLists.txt).
SUBLAYERS = {
    "src/runtime/model.cc": "model",
    "include/hxrt/runtime/model.h": "model",
}
BACKENDS = ("cpu", "opencl", "cuda")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
EXTERNAL_RE = re.compile(r"\w's\s+$")
DOC_RE = re.compile(r"(?<![\w/.-])((?:\.\./|[\w-]+/)*[\w.-]+\.md)\b")


def is_test_code(rel):
    name = os.path.basename(rel)
    return (rel.startswith("tests/") or "/testing/" in rel or re.search(r"_(test|bench)\.(cc|cpp)$", name) is not None)


def layer_of(rel):
    """The layer a repository path belongs to, or None (tests/ and others)."""
    if rel in SUBLAYERS:
        return SUBLAYERS[rel]
    parts = rel.split("/")
    if parts[0] == "tools":
        return "tools"
    if parts[0] == "src" and len(parts) > 2 and parts[1] in LAYER_DEPS:
        return parts[1]
    if parts[:2] == ["include", "hxrt"] and len(parts) > 3 and parts[2] in LAYER_DEPS:
        return parts[2]
    return None


def backend_of(rel):
    """(layer, backend) for backend-specific code or headers, else None."""
    parts = rel.split("/")
    if parts[0] == "src" and len(parts) > 3 and parts[1] in ("hal", "kernels") and parts[2] in BACKENDS:
        return (parts[1], parts[2])
    if parts[:2] == ["include", "hxrt"] and len(parts) > 3 and parts[2] in ("hal", "kernels"):
        if parts[3] in BACKENDS:
            return (parts[2], parts[3])
        for backend in BACKENDS:
            if parts[3] == f"{backend}_kernels.h":
                return (parts[2], backend)
    return None


def resolve(rel, header):
    """The repository path an #include "header" of file `rel` names, or None for a system/third-party header."""
    candidates = [os.path.join(os.path.dirname(rel), header), os.path.join("include", header),
                  os.path.join("src", header), os.path.join("tests", header)]
    for candidate in candidates:
        candidate = os.path.normpath(candidate)
        if os.path.isfile(os.path.join(ROOT, candidate)):
            return candidate
    return None


def source_files():
    yield "CMakeLists.txt"
    for top in SCAN_DIRS + ("cmake",):
        for directory, _, files in os.walk(os.path.join(ROOT, top)):
            for name in sorted(files):
                if name.endswith(SOURCE_EXTENSIONS) or name == "CMakeLists.txt" or name.endswith((".cmake", ".in")):
                    yield os.path.relpath(os.path.join(directory, name), ROOT)


def repo_md_names():
    names = set()
    for directory, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
        names.update(f for f in files if f.endswith(".md"))
    return names


def check_includes(rel, lines):
    """Yields (line number, rule, included path, why)."""
    layer, backend, test = layer_of(rel), backend_of(rel), is_test_code(rel)
    for number, line in enumerate(lines, 1):
        match = INCLUDE_RE.match(line)
        if not match:
            continue
        target = resolve(rel, match.group(1))
        if target is None:
            continue
        target_layer, target_backend = layer_of(target), backend_of(target)
        if backend and target_backend and backend[1] != target_backend[1] and \
                not (test and target.startswith("include/")):
            yield number, "backend", target, f"{backend[0]}/{backend[1]} code includes {target_backend[1]} backend " \
                                             f"header {target}"
        if target.startswith("src/") and target_layer and target_layer != layer and not test:
            yield number, "private", target, f"{layer or rel} includes {target}, private to layer {target_layer}"
            continue
        if layer and target_layer and not test and target_layer != layer and target_layer not in LAYER_DEPS[layer]:
            yield number, "layer", target, f"layer {layer} includes {target} of layer {target_layer}, which it " \
                                           f"does not link (allowed: {', '.join(sorted(LAYER_DEPS[layer])) or 'none'})"


def check_docs(rel, lines, md_names):
    for number, line in enumerate(lines, 1):
        for match in DOC_RE.finditer(line):
            cited = match.group(1)
            if EXTERNAL_RE.search(line[:match.start()]):
                continue
            path = os.path.normpath(os.path.join(ROOT, cited))
            inside = path.startswith(ROOT + os.sep)
            if "/" in cited:
                exists = inside and os.path.isfile(path)
            else:
                exists = cited in md_names
            if not exists:
                yield number, "docs", cited, f"cites {cited}, which is not in the repository"


def load_exceptions():
    exceptions = {}
    if not os.path.isfile(EXCEPTIONS_FILE):
        return exceptions
    with open(EXCEPTIONS_FILE, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if line:
                exceptions[line] = number
    return exceptions


def main():
    md_names = repo_md_names()
    exceptions = load_exceptions()
    used = set()
    errors = []
    for rel in source_files():
        with open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        found = list(check_includes(rel, lines)) if rel.endswith(SOURCE_EXTENSIONS) else []
        found += list(check_docs(rel, lines, md_names))
        for number, rule, target, why in found:
            key = f"{rel}:{rule}:{target}"
            if key in exceptions:
                used.add(key)
                continue
            errors.append(f"{rel}:{number}: {rule}: {why}")
    for key, number in sorted(exceptions.items(), key=lambda item: item[1]):
        if key not in used:
            errors.append(f"scripts/layering_exceptions.txt:{number}: stale: '{key}' matches no violation; remove it")
    for error in errors:
        print(error)
    if errors:
        print(f"check_layering: {len(errors)} violation(s); rules in scripts/check_layering.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
