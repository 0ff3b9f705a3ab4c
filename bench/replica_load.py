#!/usr/bin/env python3
"""Load test of `hxrt serve` replicas behind nginx (scripts/serve_replicas.sh; docs/scale-out.md, "Replicas").

    CLIENT=$(scripts/python_env.sh)       # httpx comes with the openai client
    $CLIENT bench/replica_load.py --hxrt build/tools/hxrt --threads 1 --json bench/results/replicas.json

Runs the same bounded load against three setups on loopback: 1 replica, 2 replicas with least-connections
balancing, 2 replicas with affinity by a consistent hash of the X-Session-Id header. The load: --conversations
multi-turn chats, each with its own long system prompt, --turns user turns each, --clients at a time; every turn
resends the whole conversation (as OpenAI clients do), so its prefix is the previous turn's prompt and reply. Per
setup it reports requests/s and generated tokens/s over the wall time, time to first token (p50, p90), and the
prefix-cache hit rate: prompt tokens the replicas took from their prefix caches / prompt tokens, summed over the
replicas' /metrics (hxrt_prompt_tokens_cached_total, hxrt_prompt_tokens_total).

On a 2-core machine two replicas do not add compute (each has --threads cores of the same two); the point is the
routing: with affinity, every later turn of a conversation reaches the replica that holds its earlier turns.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

import httpx

TOPICS = ["dragons who paint", "bicycles", "autumn forests", "the printing press", "sailors' letters",
          "why the sky is blue", "butterflies", "cities at night", "lighthouses", "volcanoes", "chess openings",
          "bread baking"]
QUESTIONS = ["Tell me one fact about it.", "Why does that matter?", "Give me another example.",
             "Summarise what you said.", "What should I read next?"]


def system_prompt(i: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    return (f"You are assistant number {i}, an expert on {topic}. Answer briefly and precisely. "
            f"Conversation {i} is about {topic}; keep to it. " * 6)


def default_model() -> str:
    cache = os.environ.get("HXRT_MODEL_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "hxrt", "models")
    return os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def metric(text: str, name: str) -> float:
    m = re.search(rf"^{name} ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def run_setup(args, replicas: int, affinity: bool) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [os.path.join(root, "scripts", "serve_replicas.sh"), str(replicas), "--port", str(args.port),
           "--base-port", str(args.base_port), "--hxrt", args.hxrt]
    if affinity:
        cmd.append("--affinity")
    cmd += ["--", "-m", args.model, "--threads", str(args.threads), "--parallel", str(args.clients),
            "--kv-tokens", str(args.kv_tokens)]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, start_new_session=True)
    base = f"http://127.0.0.1:{args.port}"
    try:
        deadline = time.time() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"serve_replicas.sh exited: {proc.stderr.read()}")
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                raise RuntimeError("the replicas never became healthy")
            time.sleep(0.3)
        ttft: list[float] = []
        tokens = 0
        requests = 0
        lock = threading.Lock()
        queue = list(range(args.conversations))

        def conversation(i: int, client: httpx.Client) -> None:
            nonlocal tokens, requests
            messages = [{"role": "system", "content": system_prompt(i)}]
            for turn in range(args.turns):
                messages.append({"role": "user", "content": QUESTIONS[turn % len(QUESTIONS)]})
                body = {"messages": messages, "max_tokens": args.max_tokens, "temperature": 0, "stream": True}
                start = time.perf_counter()
                first = None
                reply = []
                with client.stream("POST", base + "/v1/chat/completions", json=body,
                                   headers={"X-Session-Id": f"conversation-{i}"}, timeout=600) as r:
                    r.raise_for_status()
                    for line in r.iter_lines():
                        if not line.startswith("data: ") or line == "data: [DONE]":
                            continue
                        delta = json.loads(line[6:])["choices"][0].get("delta", {}).get("content")
                        if delta:
                            if first is None:
                                first = time.perf_counter() - start
                            reply.append(delta)
                messages.append({"role": "assistant", "content": "".join(reply)})
                with lock:
                    requests += 1
                    tokens += len(reply)
                    if first is not None:
                        ttft.append(first)

        def worker() -> None:
            with httpx.Client() as client:
                while True:
                    with lock:
                        if not queue:
                            return
                        i = queue.pop(0)
                    conversation(i, client)

        start = time.perf_counter()
        threads = [threading.Thread(target=worker) for _ in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
        prompt = cached = 0.0
        for r in range(replicas):
            text = httpx.get(f"http://127.0.0.1:{args.base_port + r}/metrics", timeout=5).text
            prompt += metric(text, "hxrt_prompt_tokens_total")
            cached += metric(text, "hxrt_prompt_tokens_cached_total")
        ttft.sort()
        return {"replicas": replicas, "balancing": "affinity" if affinity else "least_conn", "requests": requests,
                "wall_s": round(wall, 3), "requests_per_s": round(requests / wall, 3),
                "tokens_per_s": round(tokens / wall, 2),
                "ttft_p50_s": round(statistics.median(ttft), 4) if ttft else None,
                "ttft_p90_s": round(ttft[int(0.9 * (len(ttft) - 1))], 4) if ttft else None,
                "prompt_tokens": int(prompt), "cached_prompt_tokens": int(cached),
                "prefix_hit_rate": round(cached / prompt, 4) if prompt else None}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hxrt", default="build/tools/hxrt")
    parser.add_argument("--model", default=default_model())
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of each replica")
    parser.add_argument("--conversations", type=int, default=12)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4, help="conversations in flight at once")
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--kv-tokens", type=int, default=8192)
    parser.add_argument("--port", type=int, default=8280)
    parser.add_argument("--base-port", type=int, default=8290)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    args.hxrt = os.path.abspath(args.hxrt)
    results = []
    for replicas, affinity in ((1, False), (2, False), (2, True)):
        row = run_setup(args, replicas, affinity)
        print(json.dumps(row), flush=True)
        results.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu_name(), "cores": os.cpu_count(), "args": {k: v for k, v in vars(args).items()
                                                                            if k != "json"},
                       "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
