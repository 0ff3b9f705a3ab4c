#!/usr/bin/env python3
"""Load test of OpenAI-compatible servers: `hxrt serve` against llama.cpp's server (llama-cpp-python[server]) on
the same GGUF, threads and machine.

    PEER=$(scripts/setup_llama_cpp_peer.sh | tail -1)        # llama-cpp-python with its [server] extra
    CLIENT=$(scripts/python_env.sh)                            # httpx (comes with the openai client)
    $CLIENT bench/serve_load.py --hxrt build-release/tools/hxrt --peer-python $PEER --threads 2 \
        --clients 1 4 16 --reps 3 --json bench/results/serve_load.json

For each concurrency C (clients), each side is started fresh, warmed up with one request, then C clients each send
--requests-per-client streaming chat requests back to back (temperature 0, max_tokens --max-tokens, the same prompt
set on both sides). Per side and C it reports:
  requests_per_s   finished requests / wall time of the whole load
  tokens_per_s     streamed content chunks (one per token on both servers) / wall time
  ttft_p50/p99     time from sending a request to its first content chunk, seconds
  itl_p50/p99      time between consecutive content chunks of one request, seconds
Sides alternate (hxrt, peer, hxrt, peer, ...) for --reps repetitions; the table quotes medians over the
repetitions and the ratio hxrt / peer (for latencies, peer / hxrt, so > 1 means hxrt is better everywhere).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import threading
import time

import httpx

PROMPTS = [
    "Write a short story about a dragon who learns to paint.",
    "Explain how a bicycle works to a ten-year-old.",
    "Describe a walk through a forest in autumn.",
    "Tell me about the history of the printing press.",
    "Write a letter from a sailor to his family.",
    "Explain why the sky is blue, in detail.",
    "Describe the life cycle of a butterfly.",
    "Write a poem about the city at night.",
]


def default_model() -> str:
    cache = os.environ.get("HXRT_MODEL_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hxrt", "models")
    return os.environ.get("HXRT_TEST_MODEL") or os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/v1/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("server did not come up")


def start(side: str, args) -> tuple[subprocess.Popen, str]:
    port = free_port()
    if side == "hxrt":
        cmd = [args.hxrt, "serve", "--model", args.model, "--port", str(port), "--threads", str(args.threads),
               "--kv-tokens", str(args.kv_tokens)]
        if args.hxrt_parallel > 0:
            cmd += ["--parallel", str(args.hxrt_parallel)]
    else:
        cmd = [args.peer_python, "-m", "llama_cpp.server", "--model", args.model, "--host", "127.0.0.1",
               "--port", str(port), "--n_threads", str(args.threads), "--n_threads_batch", str(args.threads),
               "--n_ctx", str(args.kv_tokens),
               # By default a new request interrupts the stream in progress; a server under load must queue it.
               "--interrupt_requests", "False"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc)
    return proc, url


# --feature: what each request asks for besides plain text (the same on both sides).
FEATURES = {
    "none": {},
    "logprobs": {"logprobs": True, "top_logprobs": 2},
    "json": {"response_format": {"type": "json_object"}},
}


def one_request(client: httpx.Client, url: str, prompt: str, max_tokens: int, feature: str = "none") -> dict:
    body = {"model": "m", "messages": [{"role": "user", "content": prompt}], "temperature": 0,
            "max_tokens": max_tokens, "stream": True, **FEATURES[feature]}
    sent = time.perf_counter()
    stamps = []
    with client.stream("POST", url + "/v1/chat/completions", json=body, timeout=600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("choices") and chunk["choices"][0].get("delta", {}).get("content"):
                stamps.append(time.perf_counter())
    return {"ttft": stamps[0] - sent if stamps else None,
            "itl": [b - a for a, b in zip(stamps, stamps[1:])],
            "tokens": len(stamps)}


def load(url: str, clients: int, requests_per_client: int, max_tokens: int, feature: str = "none") -> dict:
    results: list[dict] = []
    lock = threading.Lock()

    errors = []

    def client_loop(index: int) -> None:
        with httpx.Client() as client:
            for r in range(requests_per_client):
                prompt = PROMPTS[(index * requests_per_client + r) % len(PROMPTS)]
                try:
                    result = one_request(client, url, prompt, max_tokens, feature)
                except httpx.HTTPError as e:  # counted: a failed request is not a finished one
                    with lock:
                        errors.append(repr(e))
                    continue
                with lock:
                    results.append(result)

    start_time = time.perf_counter()
    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start_time
    ttfts = sorted(r["ttft"] for r in results if r["ttft"] is not None)
    itls = sorted(x for r in results for x in r["itl"])

    def pct(values, q):
        return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")

    return {"requests_per_s": len(results) / wall, "tokens_per_s": sum(r["tokens"] for r in results) / wall,
            "ttft_p50": pct(ttfts, 0.5), "ttft_p99": pct(ttfts, 0.99), "itl_p50": pct(itls, 0.5),
            "itl_p99": pct(itls, 0.99), "wall_s": wall, "requests": len(results), "errors": len(errors)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hxrt", default="build-release/tools/hxrt")
    parser.add_argument("--peer-python", required=True, help="python of the venv with llama-cpp-python[server]")
    parser.add_argument("--model", default=default_model())
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--requests-per-client", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--kv-tokens", type=int, default=8192)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--hxrt-parallel", type=int, default=0,
                        help="hxrt serve's --parallel (sequences decoded together); 0 = the server's default (4)")
    parser.add_argument("--feature", choices=sorted(FEATURES), default="none",
                        help="logprobs (top 2) or JSON mode on every request, on both sides")
    parser.add_argument("--json", help="write every measurement here")
    args = parser.parse_args()

    runs: dict[tuple[str, int], list[dict]] = {}
    for clients in args.clients:
        for rep in range(args.reps):
            for side in ("hxrt", "llama.cpp"):
                proc, url = start(side, args)
                try:
                    load(url, 1, 1, 8)  # warm-up: page in the weights, JIT nothing is left cold
                    m = load(url, clients, args.requests_per_client, args.max_tokens, args.feature)
                finally:
                    proc.terminate()
                    proc.wait(timeout=60)
                runs.setdefault((side, clients), []).append(m)
                print(f"{side:9s} clients={clients:2d} rep={rep}: {m['requests_per_s']:.2f} req/s "
                      f"{m['tokens_per_s']:.1f} tok/s ttft p50 {m['ttft_p50'] * 1e3:.0f} ms "
                      f"itl p50 {m['itl_p50'] * 1e3:.1f} ms, {m['errors']} failed requests", file=sys.stderr, flush=True)

    def med(side, clients, key):
        return statistics.median(r[key] for r in runs[(side, clients)])

    cpu = "?"
    if os.path.exists("/proc/cpuinfo"):
        match = re.search(r"model name\s*:\s*(.+)", open("/proc/cpuinfo").read())
        cpu = match.group(1) if match else cpu
    print(f"\nCPU: {cpu}, {os.cpu_count()} cores; threads {args.threads}; {args.reps} reps; "
          f"{args.requests_per_client} requests/client, max_tokens {args.max_tokens}, feature {args.feature}\n")
    print("| clients | side | req/s | tok/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | failed |")
    print("|---|---|---|---|---|---|---|---|---|")
    table = []
    for clients in args.clients:
        for side in ("hxrt", "llama.cpp"):
            row = {k: med(side, clients, k) for k in ("requests_per_s", "tokens_per_s", "ttft_p50", "ttft_p99",
                                                       "itl_p50", "itl_p99")}
            table.append({"side": side, "clients": clients, **row})
            print(f"| {clients} | {side} | {row['requests_per_s']:.2f} | {row['tokens_per_s']:.1f} | "
                  f"{row['ttft_p50'] * 1e3:.0f} | {row['ttft_p99'] * 1e3:.0f} | {row['itl_p50'] * 1e3:.1f} | "
                  f"{row['itl_p99'] * 1e3:.1f} | {sum(r['errors'] for r in runs[(side, clients)])} |")
        h = {k: med("hxrt", clients, k) for k in ("requests_per_s", "tokens_per_s", "ttft_p50", "ttft_p99",
                                                  "itl_p50", "itl_p99")}
        p = {k: med("llama.cpp", clients, k) for k in h}
        print(f"| {clients} | ratio | {h['requests_per_s'] / p['requests_per_s']:.2f}x | "
              f"{h['tokens_per_s'] / p['tokens_per_s']:.2f}x | {p['ttft_p50'] / h['ttft_p50']:.2f}x | "
              f"{p['ttft_p99'] / h['ttft_p99']:.2f}x | {p['itl_p50'] / h['itl_p50']:.2f}x | "
              f"{p['itl_p99'] / h['itl_p99']:.2f}x | |")
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu, "machine": platform.machine(), "args": vars(args), "table": table,
                       "runs": {f"{s}|{c}": v for (s, c), v in runs.items()}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
