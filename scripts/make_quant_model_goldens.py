#!/usr/bin/env python3
"""Writes tests/llm/goldens/quant/: a tiny random-weight Llama model quantized by llama.cpp into each K-quant file
type people download, with llama.cpp's greedy tokens and per-step logits on it (read by
tests/llm/model_golden_test.cc). CI cannot build llama.cpp; these files are generated once and committed.

    PY=$(scripts/setup_llama_cpp_peer.sh | tail -1)
    $PY -m pip install gguf==0.19.0          # into the same venv: writes the f32 model
    $PY scripts/make_quant_model_goldens.py

The model: llama architecture, 2 layers, n_embd 256, 4 heads (2 KV heads, head_dim 64), n_ff 256, a 320-token
SentencePiece vocabulary (3 specials, the 256 byte tokens, 61 words), tied output; weights are seeded normals
scaled so that the logits spread over several units (greedy choices are rarely near-ties). Every matrix row is a
whole number of 256-value super-blocks, so llama.cpp's mixes keep their K-quant types (no fallbacks).

Per file type: <type>.gguf (llama.cpp's quantizer, from the f32 model, which is not kept) and <type>.json: the
prompts' ids, llama.cpp's greedy continuation ids and, per step, its full logits vector (greedy argmax, lowest id on
ties; prompt in one batch, then one token per llama_decode), its first-step logits and its two best logits at every
step (to tell a near-tie from a divergence), with the llama.cpp version.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

import gguf
import llama_cpp as L

OUT = Path(__file__).resolve().parent.parent / "tests" / "llm" / "goldens" / "quant"
# llama.cpp's file types (llama.h LLAMA_FTYPE_MOSTLY_*).
FTYPES = {"Q4_K_M": 15, "Q5_K_M": 17, "Q6_K": 18, "Q3_K_M": 12, "Q2_K": 10, "IQ4_XS": 30}
N_LAYER, N_EMBD, N_HEAD, N_HEAD_KV, N_FF = 2, 256, 4, 2, 256
PROMPTS = [[1, 70, 81, 300, 12, 200, 64, 5], [1, 260, 261, 262, 263], [1, 100]]
N_PREDICT = 12


def vocab() -> tuple[list[str], list[float], list[int]]:
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    words = [f"\u2581w{i}" for i in range(61)]
    tokens += words
    types += [1] * len(words)
    scores = [0.0] * 259 + [-float(i) for i in range(len(words))]
    return tokens, scores, types


def add_vocab(w: gguf.GGUFWriter) -> None:
    """The tokenizer keys of vocab(): SentencePiece ("llama"), bos 1, eos 2, unk 0, BOS added."""
    tokens, scores, types = vocab()
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)


def write_f32_model(path: str) -> None:
    rng = np.random.default_rng(2026)
    tokens = vocab()[0]
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("hxrt-tiny-llama")
    w.add_context_length(512)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(0)
    add_vocab(w)

    def mat(rows: int, cols: int, scale: float) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale / np.sqrt(cols)).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w.add_tensor("token_embd.weight", mat(len(tokens), N_EMBD, 4.0))
    w.add_tensor("output_norm.weight", norm(N_EMBD))
    kv = N_EMBD // N_HEAD * N_HEAD_KV
    for i in range(N_LAYER):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(N_EMBD))
        w.add_tensor(p + "attn_q.weight", mat(N_EMBD, N_EMBD, 2.0))
        w.add_tensor(p + "attn_k.weight", mat(kv, N_EMBD, 2.0))
        w.add_tensor(p + "attn_v.weight", mat(kv, N_EMBD, 1.0))
        w.add_tensor(p + "attn_output.weight", mat(N_EMBD, N_EMBD, 1.0))
        w.add_tensor(p + "ffn_norm.weight", norm(N_EMBD))
        w.add_tensor(p + "ffn_gate.weight", mat(N_FF, N_EMBD, 1.0))
        w.add_tensor(p + "ffn_up.weight", mat(N_FF, N_EMBD, 1.0))
        w.add_tensor(p + "ffn_down.weight", mat(N_EMBD, N_FF, 1.0))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize(src: str, dst: str, ftype: int) -> None:
    params = L.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = 2
    rc = L.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params))
    if rc != 0:
        sys.exit(f"llama_model_quantize {dst}: {rc}")


def greedy(model: str) -> list[dict]:
    llm = L.Llama(model_path=model, n_ctx=64, n_threads=2, n_threads_batch=2, logits_all=True, verbose=False)
    cases = []
    for prompt in PROMPTS:
        llm.reset()
        llm.eval(prompt)
        ids, steps, first = [], [], None
        for _ in range(N_PREDICT):
            row = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            if first is None:
                first = [round(float(x), 5) for x in row]
            token = int(np.argmax(row))  # lowest id on exact ties
            top2 = np.argsort(-row, kind="stable")[:2]
            ids.append(token)
            steps.append({"top2_ids": [int(t) for t in top2], "top2_logits": [float(row[t]) for t in top2]})
            llm.eval([token])
        cases.append({"prompt_ids": prompt, "generated_ids": ids, "first_logits": first, "steps": steps})
    return cases


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        f32 = os.path.join(tmp, "tiny-f32.gguf")
        write_f32_model(f32)
        for name, ftype in FTYPES.items():
            path = OUT / f"{name}.gguf"
            quantize(f32, str(path), ftype)
            types = sorted({gguf.GGMLQuantizationType(t.tensor_type).name for t in gguf.GGUFReader(str(path)).tensors})
            golden = {"file": path.name, "llama_cpp_python": L.__version__, "tensor_types": types,
                      "n_predict": N_PREDICT, "cases": greedy(str(path))}
            with open(OUT / f"{name}.json", "w", encoding="utf-8") as f:
                json.dump(golden, f)
            print(f"{name}: {os.path.getsize(path)} bytes, types {types}, greedy "
                  f"{[c['generated_ids'] for c in golden['cases']]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
