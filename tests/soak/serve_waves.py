#!/usr/bin/env python3
"""Waves of load and faults against `hxrt serve` (docs/reliability.md, "Load and faults"): each wave starts --clients
concurrent clients (loopback only) that each send --requests requests of a random kind: streaming (some closing the
connection after a few chunks), slow readers, non-streaming, chat with a JSON grammar or a forced tool call, and
faults — malformed JSON, a form-urlencoded body over the HTTP library's 8 KiB limit (413), a prompt over the model's
context (400), an unknown role (400). After each wave, once the server is idle:
  - no KV block is still used (hxrt_kv_blocks{state="used"} back to its value before the first wave),
  - the server's anonymous RSS is within --rss-slack-mib of its value after the first --warmup-waves waves (the
    warm baseline: glibc's per-thread arenas and the handler threads grow over the first few waves, then level off),
  - /metrics' hxrt_requests_total grew by exactly the answers the clients saw, by endpoint and status code,
  - every grammar answer that ended by itself parses as JSON, every forced tool call parses,
and the client-side time to first token and inter-token latency (p50, p99) of the streamed requests are reported.
With --seconds, waves repeat until that much time has passed (the soak). Exit status: 0 clean, 1 otherwise.

    PY=$(scripts/python_env.sh)
    $PY tests/soak/serve_waves.py --hxrt build/tools/hxrt --waves 3 --clients 64
    $PY tests/soak/serve_waves.py --hxrt build/tools/hxrt --seconds 600 --clients 64     # the 10-minute soak
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import sys
import threading
import time

import httpx

from serve_process import default_model, start_server

PROMPTS = ["The capital of France is", "Write a haiku about rain.", "List three colors:", "Why do cats purr?",
           "Once upon a time,", "Explain gravity briefly.", "A recipe for pancakes:", "Describe the ocean."]
KINDS = {  # kind: weight
    "stream": 30, "stream_cancel": 12, "slow_reader": 6, "plain": 12, "chat_plain": 8, "grammar": 8, "tools": 6,
    "malformed": 5, "too_large": 4, "over_context": 4, "bad_role": 5,
}
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 30}}, "required": ["city"]}}}


def rss_anon_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return float(line.split()[1]) / 1024
    return 0.0


def metrics(url: str) -> tuple[collections.Counter, dict[str, float]]:
    """(hxrt_requests_total by (endpoint, code), the gauges by name)."""
    text = httpx.get(url + "/metrics", timeout=30).text
    requests = collections.Counter()
    for endpoint, code, value in re.findall(r'^hxrt_requests_total\{endpoint="([^"]*)",code="(\d+)"\} (\S+)', text, re.M):
        requests[(endpoint, int(code))] = int(float(value))
    gauges = {name: float(value) for name, value in re.findall(
        r'^(hxrt_sequences_running|hxrt_sequences_waiting|hxrt_kv_blocks\{state="used"\}) (\S+)', text, re.M)}
    return requests, gauges


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class Wave:
    """What the clients of one wave saw."""

    def __init__(self):
        self.lock = threading.Lock()
        self.answers = collections.Counter()  # (endpoint, status)
        self.ttft: list[float] = []
        self.itl: list[float] = []
        self.failures: list[str] = []
        self.kinds = collections.Counter()

    def record(self, endpoint: str, status: int, kind: str):
        with self.lock:
            self.answers[(endpoint, status)] += 1
            self.kinds[kind] += 1

    def fail(self, message: str):
        with self.lock:
            self.failures.append(message)


def expect(wave: Wave, kind: str, response: httpx.Response, status: int, param: str | None = None):
    if response.status_code != status:
        wave.fail(f"{kind}: HTTP {response.status_code} (expected {status}): {response.text[:200]}")
        return
    if status != 200:
        error = response.json().get("error", {})
        if not error.get("message") or (param is not None and error.get("param") != param):
            wave.fail(f"{kind}: error object {error} (expected param {param})")


def stream(client: httpx.Client, url: str, wave: Wave, kind: str, rng: random.Random):
    chat = rng.random() < 0.5
    path = "/v1/chat/completions" if chat else "/v1/completions"
    body = ({"messages": [{"role": "user", "content": rng.choice(PROMPTS)}]} if chat else {"prompt": rng.choice(PROMPTS)})
    body.update({"max_tokens": rng.randint(8, 32), "temperature": rng.choice([0.0, 0.8]), "stream": True})
    cancel_after = rng.randint(1, 4) if kind == "stream_cancel" else None
    start = time.perf_counter()
    last = None
    chunks = 0
    with client.stream("POST", url + path, json=body, timeout=600) as response:
        wave.record(path, response.status_code, kind)
        if response.status_code != 200:
            response.read()
            if response.status_code != 503:  # overloaded is a legitimate answer under this load
                wave.fail(f"{kind}: HTTP {response.status_code}: {response.text[:200]}")
            return
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if "error" in event:
                wave.fail(f"{kind}: streamed error {event['error']}")
                return
            choice = event["choices"][0] if event.get("choices") else {}
            piece = (choice.get("delta", {}).get("content") if chat else choice.get("text")) or ""
            if not piece:
                continue
            now = time.perf_counter()
            with wave.lock:
                (wave.ttft if last is None else wave.itl).append(now - (start if last is None else last))
            last = now
            chunks += 1
            if kind == "slow_reader":
                time.sleep(0.1)
            if cancel_after is not None and chunks >= cancel_after:
                return  # leaving the block closes the connection mid-stream


def one_request(client: httpx.Client, url: str, wave: Wave, kind: str, rng: random.Random):
    chat_path, completion_path = "/v1/chat/completions", "/v1/completions"
    user = [{"role": "user", "content": rng.choice(PROMPTS)}]
    if kind in ("stream", "stream_cancel", "slow_reader"):
        return stream(client, url, wave, kind, rng)
    if kind == "plain":
        response = client.post(url + completion_path, json={"prompt": rng.choice(PROMPTS), "max_tokens": 16}, timeout=600)
        wave.record(completion_path, response.status_code, kind)
        if response.status_code != 503:
            expect(wave, kind, response, 200)
        return
    if kind == "chat_plain":
        response = client.post(url + chat_path, json={"messages": user, "max_tokens": 16, "n": 2}, timeout=600)
    elif kind == "grammar":
        response = client.post(url + chat_path, json={"messages": user, "max_tokens": 48, "temperature": 0.7,
                                                      "response_format": {"type": "json_object"}}, timeout=600)
    elif kind == "tools":
        response = client.post(url + chat_path, json={"messages": user, "max_tokens": 48, "tools": [TOOL],
                                                      "tool_choice": "required", "parallel_tool_calls": False},
                               timeout=600)
    elif kind == "malformed":
        response = client.post(url + chat_path, content=b'{"messages": [{"role": "user", "content": "hi"', timeout=60,
                               headers={"Content-Type": "application/json"})
        wave.record(chat_path, response.status_code, kind)
        return expect(wave, kind, response, 400)
    elif kind == "too_large":  # form-urlencoded (curl -d) over 8 KiB
        response = client.post(url + completion_path, content=json.dumps({"prompt": "x" * 9000}).encode(), timeout=60,
                               headers={"Content-Type": "application/x-www-form-urlencoded"})
        wave.record(completion_path, response.status_code, kind)
        return expect(wave, kind, response, 413)
    elif kind == "over_context":
        response = client.post(url + completion_path, json={"prompt": [100] * 40000, "max_tokens": 1}, timeout=60)
        wave.record(completion_path, response.status_code, kind)
        return expect(wave, kind, response, 400, "max_tokens")
    elif kind == "bad_role":
        response = client.post(url + chat_path, json={"messages": [{"role": "wizard", "content": "hi"}]}, timeout=60)
        wave.record(chat_path, response.status_code, kind)
        return expect(wave, kind, response, 400, "messages[0].role")
    else:
        raise ValueError(kind)
    wave.record(chat_path, response.status_code, kind)
    if response.status_code == 503:
        return
    expect(wave, kind, response, 200)
    if response.status_code != 200:
        return
    for choice in response.json()["choices"]:
        if kind == "grammar" and choice["finish_reason"] == "stop":
            try:
                json.loads(choice["message"]["content"])
            except ValueError:
                wave.fail(f"grammar: an answer that ended by itself does not parse: {choice['message']['content']!r}")
        if kind == "tools":
            calls = choice["message"].get("tool_calls") or []
            if choice["finish_reason"] == "tool_calls" and not calls:
                wave.fail(f"tools: finish_reason tool_calls without calls: {choice}")
            for call in calls:
                if call["function"]["name"] != "get_weather" or not isinstance(
                        json.loads(call["function"]["arguments"]).get("city"), str):
                    wave.fail(f"tools: a forced call that does not follow its schema: {call}")


def run_wave(url: str, clients: int, requests: int, seed: int) -> Wave:
    wave = Wave()
    names, weights = zip(*KINDS.items())

    def client_loop(index: int):
        rng = random.Random(seed * 100003 + index)
        with httpx.Client() as client:
            for _ in range(requests):
                kind = rng.choices(names, weights)[0]
                try:
                    one_request(client, url, wave, kind, rng)
                except Exception as e:  # noqa: BLE001 — every failure is reported
                    wave.fail(f"{kind}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=client_loop, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return wave


def wait_idle(url: str, timeout: float) -> dict[str, float]:
    """The gauges once no sequence runs or waits (a cancelled stream leaves the batch at the next step)."""
    deadline = time.time() + timeout
    while True:
        _, gauges = metrics(url)
        if gauges.get("hxrt_sequences_running", 0) == 0 and gauges.get("hxrt_sequences_waiting", 0) == 0:
            return gauges
        if time.time() > deadline:
            return gauges
        time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hxrt", default=os.environ.get("HXRT_BIN", "build/tools/hxrt"))
    parser.add_argument("--model", default=default_model())
    parser.add_argument("--waves", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0, help="repeat waves until this much time passed")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--requests", type=int, default=2, help="requests per client per wave")
    parser.add_argument("--parallel", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rss-slack-mib", type=float, default=48)
    parser.add_argument("--warmup-waves", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    proc, url = start_server(args.hxrt, args.model, "--threads", str(args.threads),
                             "--parallel", str(args.parallel), "--max-queue", str(args.clients))
    if url is None:
        print("serve_waves: the server did not start", file=sys.stderr)
        return 1
    failures: list[str] = []
    reports = []
    _, gauges = metrics(url)
    used_before = gauges.get('hxrt_kv_blocks{state="used"}', 0)
    warm_rss = None
    start = time.time()
    wave_index = 0
    while (wave_index < args.waves) if args.seconds <= 0 else (time.time() - start < args.seconds):
        before, _ = metrics(url)
        t0 = time.time()
        wave = run_wave(url, args.clients, args.requests, args.seed + wave_index)
        seconds = time.time() - t0
        gauges = wait_idle(url, 120)
        after, _ = metrics(url)
        rss = rss_anon_mib(proc.pid)
        if wave_index == args.warmup_waves - 1:
            warm_rss = rss
        grown = collections.Counter({k: after[k] - before[k] for k in after if after[k] != before[k]})
        problems = list(wave.failures)
        if gauges.get("hxrt_sequences_running", 0) or gauges.get("hxrt_sequences_waiting", 0):
            problems.append(f"the server is not idle 120 s after the wave: {gauges}")
        if gauges.get('hxrt_kv_blocks{state="used"}', 0) != used_before:
            problems.append(f"KV blocks still used after the wave: {gauges} (before: {used_before})")
        if warm_rss is not None and wave_index >= args.warmup_waves and rss > warm_rss + args.rss_slack_mib:
            problems.append(f"anonymous RSS {rss:.1f} MiB > the warm {warm_rss:.1f} MiB + {args.rss_slack_mib}")
        if grown != wave.answers:
            problems.append(f"/metrics counted {dict(grown)}, the clients saw {dict(wave.answers)}")
        report = {"wave": wave_index, "seconds": round(seconds, 1), "requests": sum(wave.kinds.values()),
                  "answers": {f"{e} {s}": n for (e, s), n in sorted(wave.answers.items())},
                  "ttft_p50_ms": round(1000 * (percentile(wave.ttft, 50) or 0), 1),
                  "ttft_p99_ms": round(1000 * (percentile(wave.ttft, 99) or 0), 1),
                  "itl_p50_ms": round(1000 * (percentile(wave.itl, 50) or 0), 1),
                  "itl_p99_ms": round(1000 * (percentile(wave.itl, 99) or 0), 1),
                  "rss_anon_mib": round(rss, 1), "kv_used": gauges.get('hxrt_kv_blocks{state="used"}'),
                  "problems": len(problems)}
        print(json.dumps(report), flush=True)
        reports.append(report)
        failures += [f"wave {wave_index}: {p}" for p in problems]
        wave_index += 1
    proc.terminate()
    code = proc.wait(timeout=60)
    if code != 0:
        failures.append(f"the server exited with {code}")
    for f in failures[:20]:
        print("serve_waves:", f, file=sys.stderr)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
