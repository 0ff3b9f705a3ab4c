#!/usr/bin/env python3
"""Writes tests/llm/goldens/families/: one tiny random-weight model per decoder family hxrt builds (llama, qwen2,
qwen3, gemma2, gemma3, phi3), quantized by llama.cpp to Q8_0, with llama.cpp's greedy tokens and logits on it, as
llama.cpp's own test-llama-archs does. Read by tests/llm/model_golden_test.cc beside the quant goldens.

    PY=$(scripts/setup_llama_cpp_peer.sh | tail -1)
    $PY -m pip install gguf==0.19.0
    $PY scripts/make_family_goldens.py

Each model exercises its family's variants at sizes where they change the result: Q/K/V biases (qwen2), q/k norm
and head_dim != n_embd / n_heads (qwen3, gemma3), fused attn_qkv and gate-up (phi3), embedding scaling, GELU-tanh
and post norms (gemma2/3), sliding-window layers with a window of 5 positions (shorter than the prompts plus the
continuation; gemma3's sixth layer is global, at its own RoPE base), attention and final logit softcaps small
enough to bite (gemma2). The vocabulary, prompts and the greedy/logit recording are the quant goldens'
(make_quant_model_goldens.py). Four more models carry RoPE scaling: frequency factors (llama), YaRN (qwen2),
Phi-3's short/long factors with an attention factor, and linear scaling of Gemma 3's global layers; two carry
expert FFNs (qwen3moe, and llama in Mixtral's form).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

import gguf
import llama_cpp as L

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_quant_model_goldens import N_PREDICT, add_vocab, greedy, quantize, vocab  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "llm" / "goldens" / "families"
Q8_0 = 7  # LLAMA_FTYPE_MOSTLY_Q8_0

# family: hyperparameters and the variants its tensors carry.
FAMILIES = {
    "llama": dict(layers=2, embd=256, heads=4, kv_heads=2, head_dim=64, ff=256, tied=False),
    "qwen2": dict(layers=2, embd=256, heads=4, kv_heads=2, head_dim=64, ff=256, tied=False, bias=True),
    "qwen3": dict(layers=2, embd=256, heads=8, kv_heads=2, head_dim=64, ff=256, tied=True, qk_norm=True),
    "gemma2": dict(layers=2, embd=256, heads=4, kv_heads=2, head_dim=64, ff=256, tied=True, post_norms=True,
                   window=5, attn_softcap=1.5, final_softcap=10.0),
    "gemma3": dict(layers=6, embd=256, heads=4, kv_heads=1, head_dim=128, ff=256, tied=True, post_norms=True,
                   qk_norm=True, window=5, rope_base=1.0e6),
    "phi3": dict(layers=2, embd=256, heads=4, kv_heads=4, head_dim=64, ff=256, tied=False, fused=True),
    # RoPE scaling, at an original context short enough that the prompts (up to position ~19) reach the scaled range:
    # Llama 3.1's rope_freqs factors; Qwen's YaRN; Phi-3's short/long factors (llama.cpp's n_ctx 64 exceeds the
    # original 32, so both take the long ones) with its attention factor; Gemma 3's linear scaling of the global
    # layers only.
    "llama-rope-freqs": dict(arch="llama", layers=2, embd=256, heads=4, kv_heads=2, head_dim=64, ff=256, tied=False,
                             rope_freqs=True),
    "qwen2-yarn": dict(arch="qwen2", layers=2, embd=256, heads=4, kv_heads=2, head_dim=64, ff=256, tied=False,
                       bias=True, scaling="yarn", factor=4.0, orig_ctx=16),
    "phi3-longrope": dict(arch="phi3", layers=2, embd=256, heads=4, kv_heads=4, head_dim=64, ff=256, tied=False,
                          fused=True, long_short=True, orig_ctx=32, attn_factor=1.2),
    # Mixture of experts: Qwen3-MoE (8 experts, 2 per token, renormalised) and Mixtral's form of llama (4 experts).
    # The router's weights are large so that no token's choice of experts is a near-tie.
    "qwen3moe": dict(layers=2, embd=256, heads=8, kv_heads=2, head_dim=64, ff=256, tied=True, qk_norm=True,
                     experts=8, experts_used=2, ff_expert=128),
    "llama-moe": dict(arch="llama", layers=2, embd=256, heads=4, kv_heads=2, head_dim=64, ff=256, tied=False,
                      experts=4, experts_used=2, ff_expert=256),
    "gemma3-linear": dict(arch="gemma3", layers=6, embd=256, heads=4, kv_heads=1, head_dim=128, ff=256, tied=True,
                          post_norms=True, qk_norm=True, window=5, rope_base=1.0e6, scaling="linear", factor=8.0),
}


def write_f32_model(path: str, name: str, h: dict) -> None:
    rng = np.random.default_rng(sum(map(ord, name)))
    arch = h.get("arch", name)
    tokens = vocab()[0]
    e, d, ff = h["embd"], h["head_dim"], h["ff"]
    q, kv = h["heads"] * d, h["kv_heads"] * d
    w = gguf.GGUFWriter(path, arch)
    # Not "phi3" in the name: llama.cpp then looks up Phi-3's special tokens, which this vocabulary lacks.
    w.add_name(f"hxrt-tiny-{arch}".replace("phi3", "fused-projections"))
    w.add_context_length(512)
    w.add_embedding_length(e)
    w.add_block_count(h["layers"])
    w.add_feed_forward_length(ff)
    w.add_head_count(h["heads"])
    w.add_head_count_kv(h["kv_heads"])
    w.add_key_length(d)
    w.add_value_length(d)
    w.add_rope_dimension_count(d)
    w.add_rope_freq_base(h.get("rope_base", 10000.0))
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(0)
    if "window" in h:
        w.add_uint32(f"{arch}.attention.sliding_window", h["window"])
    if "attn_softcap" in h:
        w.add_float32(f"{arch}.attn_logit_softcapping", h["attn_softcap"])
    if "final_softcap" in h:
        w.add_float32(f"{arch}.final_logit_softcapping", h["final_softcap"])
    if "experts" in h:
        w.add_uint32(f"{arch}.expert_count", h["experts"])
        w.add_uint32(f"{arch}.expert_used_count", h["experts_used"])
        w.add_uint32(f"{arch}.expert_feed_forward_length", h["ff_expert"])
    if "scaling" in h:
        w.add_string(f"{arch}.rope.scaling.type", h["scaling"])
        w.add_float32(f"{arch}.rope.scaling.factor", h["factor"])
    if "orig_ctx" in h:
        w.add_uint32(f"{arch}.rope.scaling.original_context_length", h["orig_ctx"])
    if "attn_factor" in h:
        w.add_float32(f"{arch}.rope.scaling.attn_factor", h["attn_factor"])
    add_vocab(w)

    def mat(rows: int, cols: int, scale: float) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale / np.sqrt(cols)).astype(np.float32)

    def vec(n: int, mean: float, spread: float) -> np.ndarray:
        return (mean + spread * rng.standard_normal(n)).astype(np.float32)

    def factors(n: int) -> np.ndarray:
        # Like Llama 3.1's: 1 for the fast pairs, rising to `high` for the slow ones.
        return np.linspace(1.0, 1.0 + 7.0 * rng.random(), n).astype(np.float32) ** 2

    w.add_tensor("token_embd.weight", mat(len(tokens), e, 4.0))
    if h.get("rope_freqs"):
        w.add_tensor("rope_freqs.weight", factors(d // 2))
    if h.get("long_short"):
        w.add_tensor("rope_factors_short.weight", factors(d // 2) ** 0.5)
        w.add_tensor("rope_factors_long.weight", factors(d // 2))
    w.add_tensor("output_norm.weight", vec(e, 1.0, 0.1))
    if not h["tied"]:
        w.add_tensor("output.weight", mat(len(tokens), e, 4.0))
    for i in range(h["layers"]):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", vec(e, 1.0, 0.1))
        if h.get("fused"):
            w.add_tensor(p + "attn_qkv.weight", np.concatenate([mat(q, e, 2.0), mat(kv, e, 2.0), mat(kv, e, 1.0)]))
        else:
            w.add_tensor(p + "attn_q.weight", mat(q, e, 2.0))
            w.add_tensor(p + "attn_k.weight", mat(kv, e, 2.0))
            w.add_tensor(p + "attn_v.weight", mat(kv, e, 1.0))
        if h.get("bias"):
            w.add_tensor(p + "attn_q.bias", vec(q, 0.0, 0.5))
            w.add_tensor(p + "attn_k.bias", vec(kv, 0.0, 0.5))
            w.add_tensor(p + "attn_v.bias", vec(kv, 0.0, 0.5))
        if h.get("qk_norm"):
            w.add_tensor(p + "attn_q_norm.weight", vec(d, 1.0, 0.2))
            w.add_tensor(p + "attn_k_norm.weight", vec(d, 1.0, 0.2))
        w.add_tensor(p + "attn_output.weight", mat(e, q, 1.0))
        w.add_tensor(p + "ffn_norm.weight", vec(e, 1.0, 0.1))
        if h.get("post_norms"):
            # Gemma multiplies the (tied) embeddings by sqrt(n_embd); post-norm gains of 4 let the blocks' outputs
            # weigh as much as that in the residual stream, so the logits are not just the input token's.
            w.add_tensor(p + "post_attention_norm.weight", vec(e, 4.0, 0.4))
            w.add_tensor(p + "post_ffw_norm.weight", vec(e, 4.0, 0.4))
        if "experts" in h:
            n_exp, fe = h["experts"], h["ff_expert"]
            w.add_tensor(p + "ffn_gate_inp.weight", mat(n_exp, e, 16.0))
            w.add_tensor(p + "ffn_gate_exps.weight", np.stack([mat(fe, e, 1.0) for _ in range(n_exp)]))
            w.add_tensor(p + "ffn_up_exps.weight", np.stack([mat(fe, e, 1.0) for _ in range(n_exp)]))
            w.add_tensor(p + "ffn_down_exps.weight", np.stack([mat(e, fe, 1.0) for _ in range(n_exp)]))
            continue
        if h.get("fused"):
            w.add_tensor(p + "ffn_up.weight", np.concatenate([mat(ff, e, 1.0), mat(ff, e, 1.0)]))
        else:
            w.add_tensor(p + "ffn_gate.weight", mat(ff, e, 1.0))
            w.add_tensor(p + "ffn_up.weight", mat(ff, e, 1.0))
        w.add_tensor(p + "ffn_down.weight", mat(e, ff, 1.0))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[1:])
    with tempfile.TemporaryDirectory() as tmp:
        for arch, h in FAMILIES.items():
            if only and arch not in only:
                continue
            f32 = os.path.join(tmp, f"{arch}-f32.gguf")
            write_f32_model(f32, arch, h)
            path = OUT / f"{arch}.gguf"
            quantize(f32, str(path), Q8_0)
            types = sorted({gguf.GGMLQuantizationType(t.tensor_type).name for t in gguf.GGUFReader(str(path)).tensors})
            golden = {"file": path.name, "llama_cpp_python": L.__version__, "tensor_types": types,
                      "n_predict": N_PREDICT, "variants": h, "cases": greedy(str(path))}
            with open(OUT / f"{arch}.json", "w", encoding="utf-8") as f:
                json.dump(golden, f)
            print(f"{arch}: {os.path.getsize(path)} bytes, types {types}, greedy "
                  f"{[c['generated_ids'] for c in golden['cases']]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
