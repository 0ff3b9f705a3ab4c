#!/usr/bin/env python3
"""Speculative decoding (Note [Speculative decoding] in src/llm/engine.cc): decode speed with and without
prompt-lookup drafts, on a task that copies from its prompt and on one that does not.

    python3 bench/speculative.py --hxrt build/tools/hxrt --model FILE [--model FILE ...] --reps 5

For each (model, prompt) it runs `hxrt generate --json -q` with --draft-max 0 and --draft-max N alternately
(A B A B ...: machine drift hits both sides alike) and reports the median decode tokens/s of each side, their
ratio, and the drafts' acceptance. The prompts are bench/prompts/copy_passage.txt (a passage and the start of its
copy: the output repeats the passage) and bench/prompts/free_story.txt (free text). Greedy output is the same on
both sides by construction (tests/llm/golden_test.cc checks it bit for bit); this measures only speed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPTS = {
    "copy": os.path.join(HERE, "prompts", "copy_passage.txt"),
    "free": os.path.join(HERE, "prompts", "free_story.txt"),
}


def run(hxrt: str, model: str, prompt_file: str, draft_max: int, n_predict: int, threads: int) -> dict:
    with open(prompt_file, encoding="utf-8") as f:
        prompt = f.read().rstrip("\n")  # the prompt as a shell $(cat FILE) passes it
    cmd = [hxrt, "generate", "-m", model, "-p", prompt, "-n", str(n_predict), "-t", str(threads), "-q", "--json",
           "--draft-max", str(draft_max), "--ignore-eos"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hxrt", default="build/tools/hxrt")
    parser.add_argument("--model", action="append", required=True)
    parser.add_argument("--draft-max", type=int, default=16)
    parser.add_argument("--n-predict", type=int, default=96)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    print(f"| model | prompt | decode tok/s, no drafts | with --draft-max {args.draft_max} | ratio | accepted / drafted |")
    print("|---|---|---|---|---|---|")
    for model in args.model:
        for name, prompt_file in PROMPTS.items():
            plain, drafted, accepted, proposed = [], [], 0, 0
            for _ in range(args.reps):
                plain.append(run(args.hxrt, model, prompt_file, 0, args.n_predict, args.threads)["decode_tokens_per_s"])
                r = run(args.hxrt, model, prompt_file, args.draft_max, args.n_predict, args.threads)
                drafted.append(r["decode_tokens_per_s"])
                accepted += r["accepted_tokens"]
                proposed += r["drafted_tokens"]
            a, b = statistics.median(plain), statistics.median(drafted)
            print(f"| {os.path.basename(model)} | {name} | {a:.1f} | {b:.1f} | {b / a:.2f}x | "
                  f"{accepted // args.reps} / {proposed // args.reps} |", flush=True)


if __name__ == "__main__":
    main()
