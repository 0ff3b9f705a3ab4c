#!/usr/bin/env python3
"""Writes tests/llm/goldens/gemma3-270m-q4_k_m.json: llama.cpp's tokens and greedy continuations on the real
Gemma 3 270M Q4_K_M (the model cache's `gemma3-270m`), read by tests/llm/gemma_golden_test.cc.

    PY=$(scripts/setup_llama_cpp_peer.sh | tail -1)
    $PY scripts/make_gemma_goldens.py --model "$(scripts/fetch_model.sh gemma3-270m)"

What it records, with llama.cpp's default arithmetic (f16 KV cache, no flash attention, 2 threads):
- tokenizer: make_llm_goldens.py's corpus (Unicode, code, numbers, whitespace runs, special tokens) plus Gemma's
  turn markers, tokenized with and without special-token parsing (no BOS added), for the 262,144-token
  SentencePiece vocabulary with byte fallback;
- generation: plain prompts, a prompt in Gemma's turn format, and one longer than the 512-position sliding window
  (the history essay four times, ~830 tokens), each with BOS as the file asks: the prompt ids, N_PREDICT greedy
  ids, the two best logits of every step, and the 64 best first-step logits (the whole 262,144-value row would
  make the file 4 MB per case).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

import numpy as np

import llama_cpp as L

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_llm_goldens import FA, LONG_TEXT, TOKENIZER_TEXTS, Model  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "llm" / "goldens" / "gemma3-270m-q4_k_m.json"
N_CTX = 2048
N_BATCH = 512
N_PREDICT = 24
TOP_K = 64

GEMMA_TURN = "<start_of_turn>user\n{msg}<end_of_turn>\n<start_of_turn>model\n"
EXTRA_TOKENIZER_TEXTS = [
    ("gemma_turn", GEMMA_TURN.format(msg="What is the capital of France?")),
    ("gemma_specials_inline", "a<start_of_turn>b<end_of_turn>c<eos>d<bos>"),
    ("long_word_byte_fallback", "\U0001F9EC\U0001FAE0\U00010348 \u2603\ufe0f \u0f3a\u0f3b"),
]
GENERATION_CASES = [
    ("plain_short", "The capital of France is"),
    ("plain_code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"),
    ("turn_question", GEMMA_TURN.format(msg="Name three colours of the rainbow.")),
    ("past_the_window", " ".join([LONG_TEXT] * 4)),
]


def decode_all(ctx, n_vocab: int, toks: list[int], pos0: int, batch) -> np.ndarray:
    """Evaluates toks in chunks of N_BATCH; the logits of the last token."""
    for start in range(0, len(toks), N_BATCH):
        chunk = toks[start:start + N_BATCH]
        batch.n_tokens = len(chunk)
        for i, t in enumerate(chunk):
            batch.token[i] = t
            batch.pos[i] = pos0 + start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1 if start + i == len(toks) - 1 else 0
        if L.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")
    ptr = L.llama_get_logits_ith(ctx, len(toks) - 1 - (len(toks) - 1) // N_BATCH * N_BATCH)
    return np.ctypeslib.as_array(ptr, shape=(n_vocab,)).astype(np.float32, copy=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    model = Model(args.model)
    golden = {"file": Path(args.model).name, "llama_cpp_python": L.__version__, "n_ctx": N_CTX,
              "n_predict": N_PREDICT, "tokenizer": [], "generation": []}
    for name, text in TOKENIZER_TEXTS + EXTRA_TOKENIZER_TEXTS:
        golden["tokenizer"].append({"name": name, "text": text,
                                    "ids_special": model.tokenize(text, False, True),
                                    "ids_plain": model.tokenize(text, False, False)})
    cp = L.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = N_CTX, N_BATCH, N_BATCH, 1
    cp.n_threads = cp.n_threads_batch = 2
    cp.flash_attn_type = FA["disabled"]
    cp.type_k = cp.type_v = L.GGML_TYPE_F16
    ctx = L.llama_init_from_model(model.model, cp)
    batch = L.llama_batch_init(N_BATCH, 0, 1)
    for name, text in GENERATION_CASES:
        L.llama_memory_clear(L.llama_get_memory(ctx), True)
        prompt = model.tokenize(text, True, True)
        logits = decode_all(ctx, model.n_vocab, prompt, 0, batch)
        order = np.argsort(-logits, kind="stable")[:TOP_K]
        case = {"name": name, "prompt": text, "prompt_ids": prompt,
                "first_top_ids": [int(i) for i in order], "first_top_logits": [float(logits[i]) for i in order],
                "generated_ids": [], "steps": []}
        pos = len(prompt)
        for _ in range(N_PREDICT):
            top2 = np.argsort(-logits, kind="stable")[:2]
            token = int(np.argmax(logits))
            case["generated_ids"].append(token)
            case["steps"].append({"top2_ids": [int(t) for t in top2], "top2_logits": [float(logits[t]) for t in top2]})
            logits = decode_all(ctx, model.n_vocab, [token], pos, batch)
            pos += 1
        case["text"] = b"".join(model.piece(t) for t in case["generated_ids"]).decode("utf-8", errors="replace")
        golden["generation"].append(case)
        print(f"{name}: {len(prompt)} prompt tokens -> {case['text']!r}", file=sys.stderr)
    L.llama_batch_free(batch)
    L.llama_free(ctx)
    model.close()
    OUT.write_text(json.dumps(golden, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
