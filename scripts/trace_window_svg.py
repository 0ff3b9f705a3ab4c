#!/usr/bin/env python3
"""Draws a time window of a Chrome trace (as `hxrt generate --trace-steps` or `--profile` write) as an SVG: one
lane per thread of the trace, one box per complete event, labelled when it is wide enough. For pictures of a few
steps in the docs (docs/llm.md); Perfetto (ui.perfetto.dev) opens the same JSON interactively.

Usage: scripts/trace_window_svg.py TRACE.json OUT.svg [--last-ms MS | --from-ms A --to-ms B] [--title TEXT]
Render it with: chromium --headless --no-sandbox --screenshot=OUT.png --window-size=1400,300 file://$PWD/OUT.svg
"""
import argparse
import html
import json

COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--last-ms", type=float, help="the window: the trace's last MS milliseconds")
    ap.add_argument("--from-ms", type=float, help="the window's start, ms from the trace's start")
    ap.add_argument("--to-ms", type=float, help="the window's end, ms from the trace's start")
    ap.add_argument("--title", default="")
    ap.add_argument("--width", type=int, default=1360)
    args = ap.parse_args()

    events = json.load(open(args.trace))["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    boxes = [e for e in events if e.get("ph") == "X" and e.get("dur", 0) > 0]
    if not boxes:
        raise SystemExit(f"{args.trace}: no complete events with a duration")
    end = max(e["ts"] + e["dur"] for e in boxes)
    t0, t1 = (end - args.last_ms * 1e3, end) if args.last_ms else (args.from_ms * 1e3, args.to_ms * 1e3)
    lanes = sorted({(e["pid"], e["tid"]) for e in boxes})
    colour = {}
    left, lane_h, top = 230, 34, 56
    scale = (args.width - left - 20) / (t1 - t0)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{args.width}" height="{top + lane_h * len(lanes) + 40}" '
           'font-family="sans-serif" font-size="12">', '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="22" font-size="15" font-weight="bold">{html.escape(args.title)}</text>']
    for i in range(6):  # time axis
        t = t0 + (t1 - t0) * i / 5
        x = left + (t - t0) * scale
        out.append(f'<line x1="{x:.1f}" y1="{top - 8}" x2="{x:.1f}" y2="{top + lane_h * len(lanes)}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{top - 12}" text-anchor="middle" fill="#555">{(t - t0) / 1e3:.2f} ms</text>')
    for row, lane in enumerate(lanes):
        y = top + row * lane_h
        out.append(f'<text x="10" y="{y + lane_h / 2 + 4}">{html.escape(names.get(lane, str(lane)))}</text>')
        for e in boxes:
            if (e["pid"], e["tid"]) != lane or e["ts"] + e["dur"] < t0 or e["ts"] > t1:
                continue
            kind = e.get("cat", e["name"])
            fill = colour.setdefault(kind, COLOURS[len(colour) % len(COLOURS)])
            x0 = left + (max(e["ts"], t0) - t0) * scale
            x1 = left + (min(e["ts"] + e["dur"], t1) - t0) * scale
            w = max(x1 - x0, 1.5)
            label = html.escape(f'{e["name"]}: {e["dur"] / 1e3:.2f} ms')
            out.append(f'<rect x="{x0:.1f}" y="{y + 4}" width="{w:.1f}" height="{lane_h - 8}" fill="{fill}">'
                       f'<title>{label}</title></rect>')
            if w > 7 * len(label):
                out.append(f'<text x="{x0 + 4:.1f}" y="{y + lane_h / 2 + 4}" fill="white">{label}</text>')
    y = top + lane_h * len(lanes) + 24
    x = 10
    for kind, fill in colour.items():
        out.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{fill}"/>'
                   f'<text x="{x + 16}" y="{y}">{html.escape(kind)}</text>')
        x += 30 + 8 * len(kind)
    out.append("</svg>")
    open(args.out, "w").write("\n".join(out))


if __name__ == "__main__":
    main()
