#!/usr/bin/env python3
"""Writes ONNX Runtime's reference outputs for the real ONNX models (tests/onnx/real_models_test.cc).

ONNX Runtime is the REFERENCE for hxrt's ONNX import on real models, as llama.cpp is for the LLM path
(scripts/make_llm_goldens.py). It is not a dependency of hxrt or of CI: the goldens are generated once by hand,
committed, and read by the C++ test.

How to run (from the repo root; the models come from scripts/fetch_onnx_models.sh):

    ~/.cache/hxrt/onnxvenv/bin/python tests/onnx/make_goldens.py            # writes tests/onnx/goldens
    ~/.cache/hxrt/onnxvenv/bin/python tests/onnx/make_goldens.py --check    # compares with the files instead

Options:
    --models DIR   folder of the .onnx files (default $HXRT_ONNX_MODELS, else ~/.cache/hxrt/models/onnx)
    --out-dir DIR  default tests/onnx/goldens
    --check        recompute and compare with the committed files (exit 1 when an output differs by more than
                   1e-6 relative, or an input or the manifest differs)

Outputs (tests/onnx/goldens/):
    manifest.json                  the cases: model file and sha256, inputs and outputs by ONNX name and .npy file,
                                   the ONNX Runtime version and settings
    <model>/<case>/input_<i>.npy   the i-th graph input (ONNX input order)
    <model>/<case>/output_<i>.npy  ONNX Runtime's i-th graph output (ONNX output order)

Cases: MiniLM (paraphrase-MiniLM-L3-v2, opset 17) at batch 1 seq 7 and at batch 2 seq 16 whose second row has 11
real tokens and 5 padded ones (attention_mask 0, input id 0); PP-OCRv6 det tiny (opset 11) at 1x3x64x64 and
1x3x96x128. Inputs are deterministic (numpy's PCG64 with fixed seeds): token ids [CLS] w... [SEP] with w uniform in
[1000, 30000); images are pages of dark glyph-like bars on white in the model's normalised range [-1, 1] with
Gaussian noise (sigma 0.05).

Reference settings: CPUExecutionProvider, graph optimizations off (ORT_DISABLE_ALL: the literal ONNX graph, no fused
kernels with their own rounding), one intra-op thread, sequential execution.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

import numpy as np
import onnxruntime as ort

MINILM = "paraphrase-MiniLM-L3-v2.onnx"
OCR_DET = "PP-OCRv6_det_tiny.onnx"


def minilm_inputs(batch: int, seq: int, lengths: list[int], seed: int) -> dict[str, np.ndarray]:
    """Token ids [CLS] w... [SEP] then padding (id 0, mask 0) up to `seq`, one row per length."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((batch, seq), np.int64)  # (batch, seq)
    mask = np.zeros((batch, seq), np.int64)  # (batch, seq)
    for row, length in enumerate(lengths):
        ids[row, 0] = 101
        ids[row, 1:length - 1] = rng.integers(1000, 30000, length - 2)
        ids[row, length - 1] = 102
        mask[row, :length] = 1
    return {"input_ids": ids, "attention_mask": mask}


def image_input(height: int, width: int, seed: int) -> dict[str, np.ndarray]:
    """A page: white (1.0 after the model's normalisation) with lines of dark glyph-like bars (-1.0), plus noise,
    so that the detection map has text and background (uniform noise alone gives a map of ~0 everywhere)."""
    rng = np.random.default_rng(seed)
    page = np.ones((height, width), np.float32)  # (h, w)
    for top in range(6, height - 12, 20):
        x = 4
        while x < width - 8:
            glyph_width, glyph_height = int(rng.integers(2, 6)), int(rng.integers(7, 11))
            page[top:top + glyph_height, x:x + glyph_width] = -1.0
            x += glyph_width + int(rng.integers(1, 4)) + (6 if rng.random() < 0.2 else 0)
    noise = rng.normal(0.0, 0.05, (1, 3, height, width))
    return {"x": (page[None, None] + noise).astype(np.float32)}  # (batch, rgb, h, w)


CASES = [
    ("minilm", MINILM, "b1_s7", minilm_inputs(1, 7, [7], seed=1)),
    ("minilm", MINILM, "b2_s16_padded", minilm_inputs(2, 16, [16, 11], seed=2)),
    ("ocr_det", OCR_DET, "1x3x64x64", image_input(64, 64, seed=3)),
    ("ocr_det", OCR_DET, "1x3x96x128", image_input(96, 128, seed=4)),
]


def session(path: str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def main() -> int:
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    default_models = os.environ.get("HXRT_ONNX_MODELS") or os.path.expanduser("~/.cache/hxrt/models/onnx")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=default_models)
    parser.add_argument("--out-dir", default=os.path.join(repo, "tests", "onnx", "goldens"))
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()

    manifest = {
        "generator": "tests/onnx/make_goldens.py",
        "onnxruntime": ort.__version__,
        "settings": "CPUExecutionProvider, ORT_DISABLE_ALL, intra_op_num_threads 1, inter_op 1, sequential",
        "cases": [],
    }
    sessions: dict[str, ort.InferenceSession] = {}
    mismatches = []
    for model_name, model_file, case_name, inputs in CASES:
        path = os.path.join(args.models, model_file)
        if not os.path.exists(path):
            print(f"make_goldens: {path} is missing (scripts/fetch_onnx_models.sh fetches it)", file=sys.stderr)
            return 1
        if model_file not in sessions:
            sessions[model_file] = session(path)
        sess = sessions[model_file]
        input_names = [i.name for i in sess.get_inputs()]
        output_names = [o.name for o in sess.get_outputs()]
        outputs = sess.run(output_names, inputs)
        case_dir = os.path.join(model_name, case_name)
        case = {"model": model_name, "file": model_file, "sha256": sha256(path), "case": case_name,
                "inputs": [], "outputs": []}
        arrays = []
        for i, name in enumerate(input_names):
            rel = f"{case_dir}/input_{i}.npy"
            case["inputs"].append({"name": name, "file": rel, "dtype": str(inputs[name].dtype),
                                   "shape": list(inputs[name].shape)})
            arrays.append((rel, inputs[name], True))
        for i, (name, value) in enumerate(zip(output_names, outputs)):
            rel = f"{case_dir}/output_{i}.npy"
            case["outputs"].append({"name": name, "file": rel, "dtype": str(value.dtype), "shape": list(value.shape)})
            arrays.append((rel, value, False))
        manifest["cases"].append(case)
        for rel, value, exact in arrays:
            target = os.path.join(args.out_dir, rel)
            if args.check:
                if not os.path.exists(target):
                    mismatches.append(f"{rel}: missing")
                    continue
                old = np.load(target)
                same = old.shape == value.shape and old.dtype == value.dtype and (
                    np.array_equal(old, value) if exact or value.dtype.kind != "f"
                    else np.allclose(old, value, rtol=1e-6, atol=1e-6 * float(np.abs(value).max(initial=1.0))))
                if not same:
                    mismatches.append(f"{rel}: differs")
            else:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                np.save(target, value)
        print(f"{model_name}/{case_name}: " + ", ".join(f"{n} {list(v.shape)}" for n, v in zip(output_names, outputs)))

    manifest_path = os.path.join(args.out_dir, "manifest.json")
    text = json.dumps(manifest, indent=1) + "\n"
    if args.check:
        with open(manifest_path) as f:
            if json.load(f)["cases"] != manifest["cases"]:
                mismatches.append("manifest.json: cases differ")
        for m in mismatches:
            print("make_goldens --check:", m, file=sys.stderr)
        print("make_goldens --check:", "OK" if not mismatches else f"{len(mismatches)} difference(s)")
        return 1 if mismatches else 0
    with open(manifest_path, "w") as f:
        f.write(text)
    print(f"wrote {manifest_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
