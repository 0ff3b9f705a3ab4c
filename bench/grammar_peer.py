#!/usr/bin/env python3
"""Constrained decoding against llama.cpp: decode speed with and without a GBNF grammar, both sides, same model,
same prompt, same grammar (Note [Grammar-constrained sampling] in src/llm/engine.cc).

    PY=$(scripts/setup_llama_cpp_peer.sh | tail -1)
    $PY bench/grammar_peer.py --hxrt build/tools/hxrt --model FILE --threads 2 --reps 3

The grammar is hxrt's built-in JSON object grammar (bench/prompts/json.gbnf, the same rules as
src/llm/grammar_json.cc); the prompt asks for a JSON object. Each side generates --n-predict greedy tokens
(ignoring EOS, so the lengths match) with the grammar and without; decode tokens/s is generated tokens / wall time
of the generation loop (prompt excluded). hxrt runs `hxrt generate --json -q` (its decode_tokens_per_s); llama.cpp
runs llama_decode one token at a time with a sampler chain (grammar → greedy, as llama-cli's). Medians of --reps,
the two sides alternated.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_log_callback = None
PROMPT = ("Here is the Eiffel Tower described as a JSON object with its name, city, country, height in meters, "
          "the year it was built and its architect:\n")


def llama_cpp_side(model: str, grammar: str, n_predict: int, threads: int) -> float:
    import ctypes

    import llama_cpp as L

    global _log_callback  # kept alive: llama.cpp calls it later
    _log_callback = L.llama_log_callback(lambda lvl, txt, ud: None)
    L.llama_log_set(_log_callback, ctypes.c_void_p(0))
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    m = L.llama_model_load_from_file(model.encode(), mp)
    vocab = L.llama_model_get_vocab(m)
    cp = L.llama_context_default_params()
    cp.n_ctx = 1024
    cp.n_batch = 512
    cp.n_threads = threads
    cp.n_threads_batch = threads
    ctx = L.llama_init_from_model(m, cp)
    data = PROMPT.encode()
    arr = (L.llama_token * (len(data) + 8))()
    n = L.llama_tokenize(vocab, data, len(data), arr, len(arr), True, False)
    tokens = list(arr[:n])
    chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
    if grammar:
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_grammar(vocab, grammar.encode(), b"root"))
    L.llama_sampler_chain_add(chain, L.llama_sampler_init_greedy())
    batch = L.llama_batch_init(512, 0, 1)

    def run(entries):
        batch.n_tokens = len(entries)
        for i, (t, p, lg) in enumerate(entries):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = t, p, 1, 1 if lg else 0
            batch.seq_id[i][0] = 0
        assert L.llama_decode(ctx, batch) == 0

    run([(t, i, i == len(tokens) - 1) for i, t in enumerate(tokens)])
    pos = len(tokens)
    start = time.perf_counter()
    for _ in range(n_predict):
        token = L.llama_sampler_sample(chain, ctx, -1)
        run([(token, pos, True)])
        pos += 1
    seconds = time.perf_counter() - start
    L.llama_sampler_free(chain)
    L.llama_batch_free(batch)
    L.llama_free(ctx)
    L.llama_model_free(m)
    return n_predict / seconds


def hxrt_side(hxrt: str, model: str, grammar_file: str, n_predict: int, threads: int) -> float:
    cmd = [hxrt, "generate", "-m", model, "-p", PROMPT, "-n", str(n_predict), "-t", str(threads), "-q", "--json",
           "--ignore-eos"]
    if grammar_file:
        cmd += ["--grammar-file", grammar_file]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["decode_tokens_per_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hxrt", default="build/tools/hxrt")
    parser.add_argument("--model", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-predict", type=int, default=96)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--side", choices=["llama.cpp"], help=argparse.SUPPRESS)  # one llama.cpp run, in a subprocess
    parser.add_argument("--grammar", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    grammar_file = os.path.join(HERE, "prompts", "json.gbnf")
    if args.side:
        text = open(grammar_file, encoding="utf-8").read() if args.grammar else ""
        print(llama_cpp_side(args.model, text, args.n_predict, args.threads))
        return
    rates: dict[tuple[str, bool], list[float]] = {}
    for _ in range(args.reps):
        for constrained in (False, True):
            rates.setdefault(("hxrt", constrained), []).append(
                hxrt_side(args.hxrt, args.model, grammar_file if constrained else "", args.n_predict, args.threads))
            cmd = [sys.executable, __file__, "--side", "llama.cpp", "--model", args.model, "--threads",
                   str(args.threads), "--n-predict", str(args.n_predict)] + (["--grammar", "1"] if constrained else [])
            rates.setdefault(("llama.cpp", constrained), []).append(
                float(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]))
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"| side | decode tok/s, free | with the JSON grammar | grammar's cost |")
    print("|---|---|---|---|")
    for side in ("hxrt", "llama.cpp"):
        print(f"| {side} | {med[(side, False)]:.1f} | {med[(side, True)]:.1f} | "
              f"{1 - med[(side, True)] / med[(side, False)]:.1%} |")
    print(f"\nhxrt / llama.cpp with the grammar: {med[('hxrt', True)] / med[('llama.cpp', True)]:.2f}x; "
          f"without: {med[('hxrt', False)] / med[('llama.cpp', False)]:.2f}x")


if __name__ == "__main__":
    main()
