#!/usr/bin/env python3
"""Quality guard: hxrt's perplexity (`hxrt perplexity`) against llama.cpp's on the same text and model, measured as
llama-perplexity does (chunks of --ctx tokens, the second half of each scored, first token of a chunk BOS when the
model adds one; PPL = exp(mean NLL), error = PPL * stderr(NLL)). llama.cpp runs through llama-cpp-python with every
row's logits kept (logits_all), under several settings (threads, batch size, flash attention) whose spread is llama.cpp's own.

    PY=$(scripts/setup_llama_cpp_peer.sh | tail -1)
    $PY bench/perplexity_peer.py --text /usr/share/common-licenses/GPL-3 --chunks 4 --json /tmp/ppl.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_cpp_peer import default_model, hxrt_binary  # noqa: E402


def llama_cpp_ppl(model: str, text: str, ctx: int, chunks: int, threads: int, batch: int, flash: bool) -> dict:
    import numpy as np
    from llama_cpp import Llama, llama_token_bos  # noqa: F401

    llm = Llama(model_path=model, n_ctx=ctx, n_batch=batch, n_ubatch=batch, n_threads=threads, logits_all=True,
                flash_attn=flash, verbose=False)
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
    add_bos = llm._model.add_bos_token() if hasattr(llm._model, "add_bos_token") else False
    n_chunks = min(len(tokens) // ctx, chunks) if chunks > 0 else len(tokens) // ctx
    first = ctx // 2
    nll = nll2 = 0.0
    count = 0
    for c in range(n_chunks):
        chunk = list(tokens[c * ctx:(c + 1) * ctx])
        if add_bos:
            chunk[0] = llm.token_bos()
        llm.reset()
        llm.eval(chunk)
        logits = np.asarray(llm.scores[:ctx], dtype=np.float64)
        for i in range(first, ctx - 1):
            row = logits[i]
            m = row.max()
            logprob = row[chunk[i + 1]] - m - math.log(np.exp(row - m).sum())
            nll -= logprob
            nll2 += logprob * logprob
            count += 1
    mean = nll / count
    var = nll2 / count - mean * mean
    ppl = math.exp(mean)
    return {"ppl": ppl, "ppl_error": ppl * math.sqrt(var / (count - 1)) if var > 0 else 0.0, "scored_tokens": count,
            "text_tokens": len(tokens), "threads": threads, "batch": batch, "flash_attn": flash}


def hxrt_ppl(model: str, text_path: str, ctx: int, chunks: int, threads: int, batch: int) -> dict:
    cmd = [hxrt_binary(), "perplexity", text_path, "--model", model, "-c", str(ctx), "--chunks", str(chunks),
           "--threads", str(threads), "-b", str(batch), "--json"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    result = json.loads(p.stdout.strip().splitlines()[-1])
    result.update({"threads": threads, "batch": batch, "flash_attn": False})
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=default_model())
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--json")
    args = ap.parse_args()
    with open(args.text, encoding="utf-8") as f:
        text = f.read()
    rows = []
    for threads, batch, flash in [(2, 512, False), (1, 512, False), (2, 128, False), (2, 512, True), (2, 64, True)]:
        rows.append(("llama.cpp", llama_cpp_ppl(args.model, text, args.ctx, args.chunks, threads, batch, flash)))
    for threads, batch in [(2, 512), (1, 512), (2, 128)]:
        rows.append(("hxrt", hxrt_ppl(args.model, args.text, args.ctx, args.chunks, threads, batch)))
    print(f"{'side':10s} {'threads':>7s} {'batch':>6s} {'flash':>6s} {'PPL':>10s} {'+/-':>9s} {'scored':>7s}")
    for side, r in rows:
        print(f"{side:10s} {r['threads']:7d} {r['batch']:6d} {str(r['flash_attn']):>6s} {r['ppl']:10.4f} "
              f"{r['ppl_error']:9.5f} {r['scored_tokens']:7d}")
    llama = [r["ppl"] for s, r in rows if s == "llama.cpp"]
    ours = [r["ppl"] for s, r in rows if s == "hxrt"]
    print(f"llama.cpp spread across settings: [{min(llama):.4f}, {max(llama):.4f}]; hxrt: [{min(ours):.4f}, {max(ours):.4f}]")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": [{"side": s, **r} for s, r in rows], "text": args.text, "ctx": args.ctx}, f, indent=2)


if __name__ == "__main__":
    main()
