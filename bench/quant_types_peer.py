#!/usr/bin/env python3
"""hxrt against llama.cpp on GGUF files of different quantization types: greedy text and perplexity.

For each model file: greedy continuations of a few prompts by llama.cpp (llama-cpp-python, temperature 0, no
repetition penalty) and by `hxrt generate --temp 0`, compared token for token through llama.cpp's tokenizer (the
first differing token is reported, with llama.cpp's top-2 logit gap there to tell a near-tie from a real
divergence), and each side's perplexity (bench/perplexity_peer.py's measurement) on the same text.

    PY=$(scripts/setup_llama_cpp_peer.sh | tail -1)
    # files made by llama.cpp's own quantizer from the default model, e.g. Q4_K_M (ftype 15):
    $PY -c "import llama_cpp, ctypes; p = llama_cpp.llama_model_quantize_default_params(); p.ftype = 15; \\
        p.allow_requantize = True; llama_cpp.llama_model_quantize(b'IN.gguf', b'OUT.Q4_K_M.gguf', ctypes.byref(p))"
    $PY bench/quant_types_peer.py /path/*.gguf --json bench/results/quant_types_peer.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_cpp_peer import hxrt_binary  # noqa: E402
from perplexity_peer import hxrt_ppl, llama_cpp_ppl  # noqa: E402

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village by the sea,",
]
N_PREDICT = 48


def llama_greedy(model: str, prompts: list[str]) -> list[dict]:
    import numpy as np
    from llama_cpp import Llama

    llm = Llama(model_path=model, n_ctx=512, n_threads=2, n_threads_batch=2, logits_all=True, verbose=False)
    out = []
    for prompt in prompts:
        tokens = llm.tokenize(prompt.encode(), add_bos=True, special=False)
        llm.reset()
        llm.eval(tokens)
        generated, gaps = [], []
        for _ in range(N_PREDICT):
            logits = np.asarray(llm.scores[llm.n_tokens - 1])
            top2 = np.argsort(logits)[-2:]
            token = int(np.argmax(logits))
            gaps.append(float(logits[top2[1]] - logits[top2[0]]))
            if token == llm.token_eos():
                break
            generated.append(token)
            llm.eval([token])
        out.append({"prompt": prompt, "tokens": generated, "gaps": gaps,
                    "text": llm.detokenize(generated).decode("utf-8", "replace")})
    return out, llm


def hxrt_greedy(binary: str, model: str, prompt: str) -> str:
    run = subprocess.run([binary, "generate", "-m", model, "-p", prompt, "-n", str(N_PREDICT), "--temp", "0", "-t", "2"],
                         capture_output=True, text=True, check=True)
    return run.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--hxrt", help="the hxrt binary (default: build-release, then build)")
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--json")
    args = ap.parse_args()
    args.hxrt = hxrt_binary(args)
    text = open(args.text, encoding="utf-8").read()
    results = []
    for model in args.models:
        ref, llm = llama_greedy(model, PROMPTS)
        cases = []
        for case in ref:
            got = hxrt_greedy(args.hxrt, model, case["prompt"])
            got = got[len(case["prompt"]):] if got.startswith(case["prompt"]) else got  # hxrt echoes the prompt
            # hxrt prints the prompt's continuation; llama.cpp's tokenizer turns it back into ids.
            got_tokens = list(llm.tokenize(got.rstrip("\n").encode(), add_bos=False, special=True))
            want = case["tokens"]
            same = 0
            while same < min(len(want), len(got_tokens)) and want[same] == got_tokens[same]:
                same += 1
            # llama.cpp ending at end-of-text where hxrt went on (or the reverse) is a divergence at that step too.
            diverged = same < len(want) or len(got_tokens) != len(want)
            cases.append({"prompt": case["prompt"], "llama_cpp": case["text"], "hxrt": got.rstrip("\n"),
                          "matching_tokens": same, "llama_cpp_tokens": len(want),
                          "hxrt_tokens": len(got_tokens),
                          "gap_at_divergence": case["gaps"][same] if diverged and same < len(case["gaps"]) else None})
        del llm
        ppl_ref = llama_cpp_ppl(model, text, 512, args.chunks, 2, 512, False)
        ppl_hxrt = hxrt_ppl(model, args.text, 512, args.chunks, 2, 512)
        row = {"model": os.path.basename(model), "cases": cases, "ppl_llama_cpp": ppl_ref, "ppl_hxrt": ppl_hxrt}
        results.append(row)
        summary = ", ".join(f"{c['matching_tokens']}/{c['llama_cpp_tokens']}" +
                            ("+eos" if c["llama_cpp_tokens"] < N_PREDICT else "") +
                            (f" (gap {c['gap_at_divergence']:.3f})" if c["gap_at_divergence"] is not None else "")
                            for c in cases)
        print(f"{row['model']}: greedy tokens equal {summary}; PPL llama.cpp {ppl_ref['ppl']:.4f}, "
              f"hxrt {ppl_hxrt['ppl']:.4f}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
