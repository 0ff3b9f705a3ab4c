#!/usr/bin/env python3
"""Peer benchmark: per-node dispatch cost of hxrt's executor (per-launch path and captured replay) against ONNX
Runtime, on the same 10,000-node chain of tiny ops (x f32[16] -> Relu -> Add(b) -> Relu -> ...), in one run.

    python3 -m venv ~/.cache/hxrt/peers/onnxruntime && ~/.cache/hxrt/peers/onnxruntime/bin/pip install onnxruntime onnx numpy
    ~/.cache/hxrt/peers/onnxruntime/bin/python bench/ort_dispatch_peer.py [--reps 7] [--json out.json]

ONNX Runtime: one intra-op thread, sequential execution, default graph optimizations (nothing in this chain fuses);
ns/node = median wall time of session.run over --reps batches of runs / 10,000. hxrt: build/src/runtime/runtime_bench
(BM_DispatchPerNode and BM_Replay, arena plan), its ns_per_node counter, --reps repetitions, median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

NODES = 10_000


def ort_ns_per_node(reps: int) -> dict:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    nodes, prev = [], "x"
    for i in range(NODES):
        out = f"t{i}"
        nodes.append(helper.make_node("Relu", [prev], [out]) if i % 2 == 0 else helper.make_node("Add", [prev, "b"], [out]))
        prev = out
    b = helper.make_tensor("b", TensorProto.FLOAT, [16], np.random.default_rng(1).standard_normal(16).astype(np.float32))
    graph = helper.make_graph(nodes, "tiny_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [16])], initializer=[b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    x = {"x": np.random.default_rng(2).standard_normal(16).astype(np.float32)}
    session.run(None, x)  # warm-up
    per_rep = []
    for _ in range(reps):
        runs = 20
        start = time.perf_counter()
        for _ in range(runs):
            session.run(None, x)
        per_rep.append((time.perf_counter() - start) / runs / NODES * 1e9)
    return {"version": ort.__version__, "ns_per_node": statistics.median(per_rep), "samples": per_rep}


def hxrt_ns_per_node(reps: int) -> dict:
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    exe = next((os.path.join(repo, b, "src", "runtime", "runtime_bench") for b in ("build-release", "build")
                if os.path.exists(os.path.join(repo, b, "src", "runtime", "runtime_bench"))), None)
    if exe is None:
        raise SystemExit("runtime_bench not built (scripts/build.sh build)")
    p = subprocess.run([exe, "--benchmark_filter=^BM_(DispatchPerNode|Replay)/arena:1", "--benchmark_format=json",
                        f"--benchmark_repetitions={reps}", "--benchmark_min_time=0.2"],
                       stdout=subprocess.PIPE, text=True, check=True)
    samples: dict[str, list[float]] = {}
    for b in json.loads(p.stdout)["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        samples.setdefault(b["name"].split("/")[0], []).append(b["ns_per_node"])
    return {name: {"ns_per_node": statistics.median(v), "samples": v} for name, v in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    ort_result = ort_ns_per_node(args.reps)
    hxrt_result = hxrt_ns_per_node(args.reps)
    ort_ns = ort_result["ns_per_node"]
    print(f"{'side':28s} {'ns/node':>10s} {'x ORT':>8s}")
    print(f"{'onnxruntime ' + ort_result['version']:28s} {ort_ns:10.1f} {1.0:8.2f}")
    for name, r in hxrt_result.items():
        print(f"{'hxrt ' + name:28s} {r['ns_per_node']:10.1f} {r['ns_per_node'] / ort_ns:8.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"onnxruntime": ort_result, "hxrt": hxrt_result, "cpu": cpu_name()}, f, indent=2)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
