#!/usr/bin/env python3
"""Writes tests/quant/goldens/quant_blocks.gguf: blocks of every GGUF type hxrt computes, and their references.

References (neither is a dependency of hxrt or of CI; the file is generated once and committed):
  - llama.cpp's own quantizer (ggml_quantize_chunk, from the libggml that llama-cpp-python ships) writes the
    "<type>.llama" tensors from the source rows;
  - the PyPI `gguf` package's numpy dequantization (gguf.quants.dequantize) gives "<type>.llama.ref" and
    "<type>.random.ref", the f32 values of those tensors and of random blocks ("<type>.random": random bits with
    finite f16 scales, so every bit pattern of the layout is exercised).

How to run (from the repo root):

    PY=$(scripts/setup_llama_cpp_peer.sh | tail -1)       # llama-cpp-python, built once (~15-25 min)
    $PY -m pip install gguf==0.19.0                        # into the same venv: numpy dequantization
    $PY scripts/make_quant_goldens.py                       # writes the file (seconds)
    $PY scripts/make_quant_goldens.py --check               # regenerates in memory and compares

The source rows ("source", f32 [4, 2048]) are llama.cpp's test-quantize-fns data, 0.1 + 2·cos(i + row), for the
quantization-error check, and random normals with a few outliers. Read by tests/quant/quant_goldens_test.cc.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as T

# The types hxrt computes (include/hxrt/base/dtype.h), by ggml name.
TYPES = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "iq4_nl", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_xs", "bf16", "f16"]
ROWS = 4
COLS = 2048
RANDOM_ROWS = 2
RANDOM_COLS = 512
OUT = Path(__file__).resolve().parent.parent / "tests" / "quant" / "goldens" / "quant_blocks.gguf"


def ggml_type(name: str) -> T:
    return {"bf16": T.BF16, "f16": T.F16}.get(name) or T[name.upper()]


def load_ggml():
    import llama_cpp  # noqa: F401  (only to locate its libraries)

    lib_dir = Path(llama_cpp.__file__).parent / "lib"
    for name in ("libggml-base.so", "libggml.so"):
        path = lib_dir / name
        if path.exists():
            lib = ctypes.CDLL(str(path))
            if hasattr(lib, "ggml_quantize_chunk"):
                lib.ggml_quantize_chunk.restype = ctypes.c_size_t
                lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                                    ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
                lib.ggml_quantize_init.argtypes = [ctypes.c_int]
                return lib
    sys.exit(f"no libggml with ggml_quantize_chunk under {lib_dir}")


def source_rows() -> np.ndarray:
    i = np.arange(COLS, dtype=np.float32)
    rows = [0.1 + 2.0 * np.cos(i + r) for r in range(2)]
    rng = np.random.default_rng(1234)
    for _ in range(2):
        v = rng.standard_normal(COLS).astype(np.float32)
        v[rng.integers(0, COLS, 8)] *= 12.0  # outliers, as real weight rows have
        rows.append(v)
    return np.stack(rows).astype(np.float32)


def quantize(lib, qtype: T, src: np.ndarray) -> np.ndarray:
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    row_bytes = src.shape[1] // block * size
    out = np.zeros((src.shape[0], row_bytes), dtype=np.uint8)
    lib.ggml_quantize_init(int(qtype))
    src = np.ascontiguousarray(src, dtype=np.float32)
    written = lib.ggml_quantize_chunk(int(qtype), src.ctypes.data, out.ctypes.data, 0, src.shape[0], src.shape[1], None)
    assert written == out.size, (qtype, written, out.size)
    return out


# Byte offsets of each block's f16 fields (ggml-common.h), so that random blocks have finite scales.
F16_FIELDS = {"q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0], "iq4_nl": [0],
              "q2_K": [80, 82], "q3_K": [108], "q4_K": [0, 2], "q5_K": [0, 2], "q6_K": [208], "iq4_xs": [0]}


def random_blocks(name: str, qtype: T, rng: np.random.Generator) -> np.ndarray:
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = RANDOM_ROWS * RANDOM_COLS // block
    data = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    for at in F16_FIELDS[name]:
        scales = (rng.uniform(0.001, 0.05, n_blocks) * rng.choice([-1.0, 1.0], n_blocks)).astype(np.float16)
        data[:, at:at + 2] = scales.view(np.uint8).reshape(n_blocks, 2)
    return data.reshape(RANDOM_ROWS, -1)


def build(lib) -> dict[str, tuple[np.ndarray, T | None]]:
    src = source_rows()
    rng = np.random.default_rng(99)
    tensors: dict[str, tuple[np.ndarray, T | None]] = {"source": (src, None)}
    for name in TYPES:
        qtype = ggml_type(name)
        if name in ("bf16", "f16"):
            q = (src.astype(np.float16) if name == "f16" else
                 (src.view(np.uint32) + 0x7FFF + ((src.view(np.uint32) >> 16) & 1) >> 16).astype(np.uint16))
            q = np.ascontiguousarray(q).view(np.uint8).reshape(ROWS, -1)
        else:
            q = quantize(lib, qtype, src)
        tensors[f"{name}.llama"] = (q, qtype)
        tensors[f"{name}.llama.ref"] = (gguf.quants.dequantize(q, qtype).astype(np.float32), None)
        if name in F16_FIELDS:
            r = random_blocks(name, qtype, rng)
            tensors[f"{name}.random"] = (r, qtype)
            tensors[f"{name}.random.ref"] = (gguf.quants.dequantize(r, qtype).astype(np.float32), None)
    return tensors


def write(tensors, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), "hxrt-quant-goldens")
    w.add_string("hxrt.goldens.quantizer", "llama.cpp ggml_quantize_chunk (llama-cpp-python)")
    w.add_string("hxrt.goldens.dequantizer", f"gguf {gguf.__version__ if hasattr(gguf, '__version__') else ''} numpy")
    for name, (data, qtype) in tensors.items():
        if qtype is None:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="compare with the file on disk instead of writing")
    args = parser.parse_args()
    tensors = build(load_ggml())
    if not args.check:
        write(tensors, args.out)
        print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes, {len(tensors)} tensors)")
        return 0
    reader = gguf.GGUFReader(str(args.out))
    on_disk = {t.name: np.asarray(t.data) for t in reader.tensors}
    bad = [n for n, (d, _) in tensors.items() if n not in on_disk or on_disk[n].tobytes() != d.tobytes()]
    print("identical" if not bad else f"differs: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
