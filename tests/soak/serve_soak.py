#!/usr/bin/env python3
"""Soak of `hxrt serve` (docs/reliability.md, "Soak"): N concurrent clients send streaming and non-streaming
completion and chat requests with random prompts and lengths for --seconds, some cancelled mid-stream by closing
the connection, under a KV budget small enough that the engine preempts. Every temperature-0 result must be a
prefix of the same request run alone (of exactly the solo text when it was not cancelled); the server's RSS is
sampled every second and its least-squares slope after the first fifth reported; a watchdog fails the run when no
request finishes for --stall-seconds. Exit status: 0 clean, 1 mismatches or errors, 3 stall.

    PY=$(scripts/python_env.sh)
    $PY tests/soak/serve_soak.py --hxrt build/tools/hxrt --seconds 600 --clients 8 --kv-tokens 192
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sys
import threading
import time

import httpx

from serve_process import default_model, start_server

PROMPTS = [
    "The capital of France is", "Water boils at", "Write a haiku about rain.", "List three colors:",
    "Once upon a time, in a small village,", "The best way to learn to code is", "Explain gravity briefly.",
    "A recipe for pancakes:", "The history of Rome began", "Why do cats purr?", "Describe the ocean.",
    "My favourite book is",
]


def rss_kib(pid: int) -> tuple[float, float]:
    """(resident anonymous memory, resident file pages: the memory-mapped model), KiB."""
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("RssAnon:", "RssFile:")):
                values[line.split(":")[0]] = float(line.split()[1])
    return values.get("RssAnon", 0.0), values.get("RssFile", 0.0)


def slope(points):
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(t for t, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((t - mx) ** 2 for t, _ in points)
    return sum((t - mx) * (y - my) for t, y in points) / den if den else 0.0


def request(client: httpx.Client, url: str, kind: str, prompt: str, max_tokens: int, stream: bool,
            cancel_after: int | None) -> tuple[str, bool]:
    """(text, cancelled)."""
    if kind == "chat":
        path, body = "/v1/chat/completions", {"messages": [{"role": "user", "content": prompt}]}
    else:
        path, body = "/v1/completions", {"prompt": prompt}
    body.update({"max_tokens": max_tokens, "temperature": 0, "stream": stream})
    if not stream:
        response = client.post(url + path, json=body, timeout=600)
        response.raise_for_status()
        choice = response.json()["choices"][0]
        return (choice["message"]["content"] if kind == "chat" else choice["text"]), False
    text, chunks = "", 0
    with client.stream("POST", url + path, json=body, timeout=600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if "error" in event:
                raise RuntimeError(event["error"]["message"])
            choice = event["choices"][0]
            piece = (choice.get("delta", {}).get("content") if kind == "chat" else choice.get("text")) or ""
            text += piece
            chunks += 1 if piece else 0
            if cancel_after is not None and chunks >= cancel_after:
                return text, True
    return text, False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hxrt", default="build/tools/hxrt")
    parser.add_argument("--model", default=default_model())
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--kv-tokens", type=int, default=192)
    parser.add_argument("--max-new", type=int, default=40)
    parser.add_argument("--cancel-rate", type=float, default=0.1, help="fraction of streams closed early")
    parser.add_argument("--stall-seconds", type=float, default=120)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    proc, url = start_server(args.hxrt, args.model, "--threads", str(args.threads),
                             "--parallel", str(args.clients), "--kv-tokens", str(args.kv_tokens))
    if url is None:
        print("serve_soak: the server did not start", file=sys.stderr)
        return 1

    # Solo references: every (kind, prompt, length) a client may ask for, run alone first.
    lengths = sorted({max(1, args.max_new // d) for d in (1, 2, 4, 8)})
    solo = {}
    with httpx.Client() as client:
        for kind in ("completion", "chat"):
            for prompt in PROMPTS:
                for n in lengths:
                    solo[(kind, prompt, n)] = request(client, url, kind, prompt, n, False, None)[0]

    stats = {"requests": 0, "cancelled": 0, "mismatches": 0, "errors": 0, "chars": 0}
    lock = threading.Lock()
    last_finish = [time.time()]
    stop_at = time.time() + args.seconds
    failures: list[str] = []

    def client_loop(index: int) -> None:
        rng = random.Random(args.seed * 1000 + index)
        with httpx.Client() as client:
            while time.time() < stop_at:
                kind = rng.choice(("completion", "chat"))
                prompt = rng.choice(PROMPTS)
                n = rng.choice(lengths)
                stream = rng.random() < 0.7
                cancel_after = rng.randint(1, 4) if stream and rng.random() < args.cancel_rate else None
                try:
                    text, cancelled = request(client, url, kind, prompt, n, stream, cancel_after)
                except Exception as e:  # noqa: BLE001 — every failure is counted and reported
                    with lock:
                        stats["errors"] += 1
                        failures.append(f"{kind} {prompt!r} n={n}: {e}")
                    continue
                reference = solo[(kind, prompt, n)]
                ok = reference.startswith(text) if cancelled else text == reference
                with lock:
                    stats["requests"] += 1
                    stats["cancelled"] += cancelled
                    stats["chars"] += len(text)
                    last_finish[0] = time.time()
                    if not ok:
                        stats["mismatches"] += 1
                        failures.append(f"{kind} {prompt!r} n={n} stream={stream}: {text!r} vs solo {reference!r}")

    threads = [threading.Thread(target=client_loop, args=(i,), daemon=True) for i in range(args.clients)]
    start = time.time()
    for t in threads:
        t.start()
    samples = []
    stalled = False
    while any(t.is_alive() for t in threads):
        time.sleep(1)
        samples.append((time.time() - start, rss_kib(proc.pid)))
        if time.time() - last_finish[0] > args.stall_seconds:
            stalled = True
            break
    wall = time.time() - start
    metrics = httpx.get(url + "/metrics").text
    counter = {name: float(re.search(rf"^{name} (\S+)", metrics, re.M).group(1))
               for name in ("hxrt_generation_tokens_total", "hxrt_preemptions_total")}
    proc.terminate()
    code = proc.wait(timeout=60)
    warm_anon = [(t, anon) for t, (anon, _) in samples if t >= wall / 5]
    warm_file = [(t, file) for t, (_, file) in samples if t >= wall / 5]
    report = {**stats, "seconds": round(wall, 1), "requests_per_s": round(stats["requests"] / wall, 2),
              "generated_tokens": counter["hxrt_generation_tokens_total"],
              "preemptions": counter["hxrt_preemptions_total"],
              "rss_start_mib": round(sum(samples[0][1]) / 1024, 1) if samples else None,
              "rss_end_mib": round(sum(samples[-1][1]) / 1024, 1) if samples else None,
              "anon_start_mib": round(samples[0][1][0] / 1024, 1) if samples else None,
              "anon_end_mib": round(samples[-1][1][0] / 1024, 1) if samples else None,
              "anon_slope_kib_per_min": round(slope(warm_anon) * 60, 1),
              "file_slope_kib_per_min": round(slope(warm_file) * 60, 1),
              "server_exit": code, "stalled": stalled}
    print(json.dumps(report))
    for f in failures[:10]:
        print("serve_soak:", f, file=sys.stderr)
    if stalled:
        return 3
    return 0 if stats["mismatches"] == 0 and stats["errors"] == 0 and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
