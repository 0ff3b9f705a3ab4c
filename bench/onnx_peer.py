#!/usr/bin/env python3
"""Peer benchmark: hxrt against ONNX Runtime on the real ONNX models (docs/onnx.md, "Speed against ONNX Runtime").

    scripts/fetch_onnx_models.sh
    TARGETS=onnx_model_runner scripts/build.sh build -DHXRT_BUILD_BENCHMARKS=ON
    ~/.cache/hxrt/onnxvenv/bin/python bench/onnx_peer.py [--runs 10] [--warmup 3] [--threads 2]

Models and inputs: paraphrase-MiniLM-L3-v2 (batch 1 seq 7; batch 2 seq 16 with a padded attention mask) and
PP-OCRv6 det tiny (1x3x64x64; 1x3x96x128), the inputs of the goldens (tests/onnx/goldens, tests/onnx/make_goldens.py),
so both sides run exactly what the correctness test checks.

Both sides get the same number of threads (--threads, 2 by default; BENCHMARKING.md): ONNX Runtime
intra_op_num_threads = N, inter_op_num_threads = 1, sequential execution, its default graph optimizations
(ORT_ENABLE_ALL, what a user gets); hxrt: build/bench/onnx_model_runner, runtime::Model on the CPU driver with N
intra-op threads (CpuDriverOptions::num_threads), default plan options. Each side is one process holding one loaded
model; a run is one session.run / Model::run on the same inputs, timed in that process (steady clock around the
call). After --warmup runs each, --runs counted runs alternate A B A B; reported: median, min and max per side and
the ratio of medians (hxrt / ONNX Runtime: above 1, hxrt is slower). A model hxrt cannot load or run (a missing
converter) is reported with hxrt's error and no hxrt time. Writes bench/results/onnx_peer.json (--json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDENS = os.path.join(REPO, "tests", "onnx", "goldens")


def cpu_model() -> str:
    """lscpu's model name with its family, model and hypervisor ("AMD EPYC (family 26, model 2, KVM)")."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "unknown"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    details = [f"family {fields['CPU family']}" if "CPU family" in fields else "",
               f"model {fields['Model']}" if "Model" in fields else "", fields.get("Hypervisor vendor", "")]
    details = ", ".join(d for d in details if d)
    return fields.get("Model name", "unknown") + (f" ({details})" if details else "")


def git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


class HxrtRunner:
    """build/bench/onnx_model_runner holding one loaded model; run() answers one run's seconds."""

    def __init__(self, exe: str, model: str, inputs: dict[str, str], threads: int):
        args = [exe, model, "--threads", str(threads)]
        for name, path in inputs.items():
            args += ["--input", f"{name}={path}"]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        first = self._answer()
        if not first.startswith("ready "):
            self.close()
            raise RuntimeError(first.removeprefix("error ").strip() or "the runner exited")
        self.load_seconds = float(first.split()[1])

    def _answer(self) -> str:
        return self.proc.stdout.readline().strip()

    def run(self) -> float:
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        answer = self._answer()
        if not answer.startswith("time "):
            raise RuntimeError(answer.removeprefix("error ").strip() or "the runner exited")
        return float(answer.split()[1])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                pass
            self.proc.wait(timeout=30)


def ort_session(path: str, threads: int, spin: bool = True):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if not spin:
        # ONNX Runtime's intra-op threads spin after a run by default; on a 2-core machine they then hold both cores
        # while hxrt's threads wake for the next alternating run (--ort-no-spin measures that interference).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def summary(samples: list[float]) -> dict:
    return {"median_ms": statistics.median(samples) * 1e3, "min_ms": min(samples) * 1e3, "max_ms": max(samples) * 1e3,
            "samples_ms": [s * 1e3 for s in samples]}


def bench_case(case: dict, model_path: str, exe: str, args) -> dict:
    inputs = {i["name"]: os.path.join(GOLDENS, i["file"]) for i in case["inputs"]}
    feed = {name: np.load(path) for name, path in inputs.items()}
    result = {"model": case["file"], "case": case["case"],
              "inputs": {name: list(value.shape) for name, value in feed.items()}}
    session = ort_session(model_path, args.threads, spin=not args.ort_no_spin)
    ort_run = lambda: session.run(None, feed)  # noqa: E731
    hxrt = None
    try:
        hxrt = HxrtRunner(exe, model_path, inputs, args.threads)
        for _ in range(args.warmup):
            hxrt.run()
    except (RuntimeError, OSError) as e:
        result["hxrt_error"] = str(e)
        if hxrt is not None:
            hxrt.close()
        hxrt = None
    for _ in range(args.warmup):
        ort_run()
    ort_times, hxrt_times = [], []
    for _ in range(args.runs):  # A B A B ...
        start = time.perf_counter()
        ort_run()
        ort_times.append(time.perf_counter() - start)
        if hxrt is not None:
            hxrt_times.append(hxrt.run())
    result["onnxruntime"] = summary(ort_times)
    if hxrt is not None:
        hxrt.close()
        result["hxrt"] = summary(hxrt_times)
        result["hxrt"]["load_s"] = hxrt.load_seconds
        result["ratio_hxrt_over_ort"] = result["hxrt"]["median_ms"] / result["onnxruntime"]["median_ms"]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=os.environ.get("HXRT_ONNX_MODELS")
                        or os.path.expanduser("~/.cache/hxrt/models/onnx"))
    parser.add_argument("--runner", default=os.path.join(REPO, "build", "bench", "onnx_model_runner"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--ort-no-spin", action="store_true",
                        help="ONNX Runtime's intra-op pool without spinning (session.intra_op.allow_spinning = 0)")
    parser.add_argument("--json", default=os.path.join(REPO, "bench", "results", "onnx_peer.json"))
    parser.add_argument("--note", default="", help="recorded as is: what the build had beyond hxrt_commit")
    args = parser.parse_args()
    if args.runs < 5:
        parser.error("--runs must be at least 5 (BENCHMARKING.md)")
    if not os.path.exists(args.runner):
        print(f"onnx_peer: {args.runner} is missing; build it with\n"
              "  TARGETS=onnx_model_runner scripts/build.sh build -DHXRT_BUILD_BENCHMARKS=ON", file=sys.stderr)
        return 1
    import onnxruntime as ort

    with open(os.path.join(GOLDENS, "manifest.json")) as f:
        cases = json.load(f)["cases"]
    load_before = list(os.getloadavg())  # the machine is shared: how busy it was
    results = []
    for case in cases:
        model_path = os.path.join(args.models, case["file"])
        if not os.path.exists(model_path):
            print(f"onnx_peer: {model_path} is missing (scripts/fetch_onnx_models.sh fetches it)", file=sys.stderr)
            return 1
        r = bench_case(case, model_path, args.runner, args)
        results.append(r)
        o = r["onnxruntime"]
        line = f"{case['model']:8} {case['case']:14} ort {o['median_ms']:8.3f} ms [{o['min_ms']:.3f}-{o['max_ms']:.3f}]"
        if "hxrt" in r:
            h = r["hxrt"]
            line += (f"  hxrt {h['median_ms']:8.3f} ms [{h['min_ms']:.3f}-{h['max_ms']:.3f}]"
                     f"  hxrt/ort {r['ratio_hxrt_over_ort']:.2f}")
        else:
            line += f"  hxrt: FAILED ({r['hxrt_error'][:160]})"
        print(line, flush=True)

    report = {
        "command": "~/.cache/hxrt/onnxvenv/bin/python bench/onnx_peer.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpu": cpu_model(),
        "nproc": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": list(os.getloadavg()),
        "hxrt_commit": git_commit(),
        "onnxruntime": ort.__version__,
        "note": args.note,
        "threads": args.threads,
        "runs": args.runs,
        "warmup": args.warmup,
        "environment": {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "HXRT_NUM_THREADS",
                                                   "OMP_NUM_THREADS") if k in os.environ},
        "settings": {"onnxruntime": f"CPUExecutionProvider, intra_op_num_threads {args.threads}, inter_op 1, "
                                    "ORT_SEQUENTIAL, default graph optimizations (ORT_ENABLE_ALL)"
                                    + (", allow_spinning 0" if args.ort_no_spin else ""),
                     "hxrt": f"runtime::Model on cpu, CpuDriverOptions::num_threads {args.threads}, default plan"},
        "results": results,
    }
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    print(f"wrote {args.json} ({report['cpu']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
