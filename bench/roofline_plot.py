#!/usr/bin/env python3
"""Decode speed against the memory roofline, hxrt next to llama.cpp: a PNG from bench/llama_cpp_peer.py results.

Each results file (written with --json by bench/llama_cpp_peer.py, which measures the machine's read bandwidth on
the same thread count right after its runs and records it under "roofline") becomes one group of bars: hxrt's and
llama.cpp's batch-1 decode tok/s, with the roofline (read bandwidth / bytes a decode step reads) drawn over them and
each side's share of it written on its bar. Groups are labelled by model and thread count; the CPU goes in the title.

    PY=/path/to/a/python/with/matplotlib
    $PY bench/roofline_plot.py bench/results/llama_cpp_peer_zen5_*_t[12].json --out docs/images/decode_roofline.png
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def load(paths: list[str]) -> list[dict]:
    groups = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        roofline = data.get("roofline")
        results = data.get("results", {})
        if not roofline or "hxrt" not in results or "llama.cpp" not in results:
            print(f"roofline_plot: {path} has no roofline or lacks a side (rerun llama_cpp_peer.py with both sides "
                  "and build/bench/read_bandwidth built); skipped", file=sys.stderr)
            continue
        model = os.path.splitext(data["model"])[0]
        groups.append({
            "label": f"{model}\n{data['threads']} thread{'s' if data['threads'] != 1 else ''}",
            "cpu": data.get("cpu", ""),
            "roofline": roofline["decode_tok_s"],
            "read_gib_s": roofline["read_gib_s"],
            "hxrt": results["hxrt"]["decode_tok_s"],
            "llama.cpp": results["llama.cpp"]["decode_tok_s"],
        })
    return groups


def plot(groups: list[dict], out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2.4 * len(groups) + 2, 4.8), dpi=120)
    width = 0.36
    sides = [("hxrt", "#2b6cb0"), ("llama.cpp", "#c05621")]
    for i, g in enumerate(groups):
        for j, (side, color) in enumerate(sides):
            x = i + (j - 0.5) * width
            value = g[side]
            ax.bar(x, value, width, color=color, label=side if i == 0 else None)
            ax.text(x, value, f"{value:.0f}\n{value / g['roofline']:.0%}", ha="center", va="bottom", fontsize=8)
        ax.hlines(g["roofline"], i - width * 1.1, i + width * 1.1, colors="black", linestyles="dashed",
                  label="roofline (read bandwidth / bytes a token)" if i == 0 else None)
        ax.text(i, g["roofline"], f"{g['roofline']:.0f} ({g['read_gib_s']:.0f} GiB/s)", ha="center",
                va="bottom", fontsize=8)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g["label"] for g in groups], fontsize=8)
    ax.set_ylabel("batch-1 decode, tokens/s")
    ax.set_ylim(0, max(g["roofline"] for g in groups) * 1.18)
    cpus = sorted({g["cpu"] for g in groups if g["cpu"]})
    ax.set_title("Decode against the memory roofline" + (f" — {', '.join(cpus)}" if cpus else ""), fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(out)
    print(f"wrote {out} ({len(groups)} groups)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", help="bench/llama_cpp_peer.py --json files")
    parser.add_argument("--out", default="decode_roofline.png")
    args = parser.parse_args()
    groups = load(args.results)
    if not groups:
        print("roofline_plot: nothing to plot", file=sys.stderr)
        return 1
    plot(groups, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
