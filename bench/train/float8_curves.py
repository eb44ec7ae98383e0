#!/usr/bin/env python3
"""Table and SVG plot of the Float8 loss curves (bench/train/float8_curves.sh).

    float8_curves.py DIR OUT.svg

Reads DIR/{debug_fsdp,debug_fsdp_bf16,debug_fsdp_float8_tw,debug_fsdp_float8}.jsonl (train_llama
--metrics), prints a markdown table (final loss as the mean of the last 10 steps, its
difference from bf16's, median tokens/s) and writes the four curves, each smoothed over 10
steps, as one SVG (written to a temporary name, then renamed)."""
import json
import os
import statistics
import sys

RUNS = [("debug_fsdp", "f32", "#444444"), ("debug_fsdp_bf16", "bf16 mixed precision", "#1f77b4"),
        ("debug_fsdp_float8_tw", "Float8 tensorwise + FP8 all-gather", "#d62728"),
        ("debug_fsdp_float8", "Float8 rowwise", "#2ca02c")]


def load(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if not rows:
        sys.exit(f"{path}: no steps; run bench/train/float8_curves.sh first")
    return rows


def smooth(v, k=10):
    return [statistics.fmean(v[max(0, i - k + 1):i + 1]) for i in range(len(v))]


def svg(curves, path):
    w, h, ml, mr, mt, mb = 720, 420, 60, 20, 20, 50
    steps = max(len(c) for _, _, c in curves)
    lo = min(min(c) for _, _, c in curves)
    hi = max(max(c) for _, _, c in curves)
    lo, hi = lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)
    x = lambda i: ml + (w - ml - mr) * i / max(1, steps - 1)
    y = lambda v: mt + (h - mt - mb) * (hi - v) / (hi - lo)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<line x1="{ml}" y1="{h - mb}" x2="{w - mr}" y2="{h - mb}" stroke="black"/>',
           f'<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{h - mb}" stroke="black"/>']
    for t in range(5):
        v = lo + (hi - lo) * t / 4
        out.append(f'<text x="{ml - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>')
        out.append(f'<line x1="{ml}" y1="{y(v):.1f}" x2="{w - mr}" y2="{y(v):.1f}" stroke="#eeeeee"/>')
    for s in range(0, steps + 1, max(1, steps // 6)):
        out.append(f'<text x="{x(max(0, s - 1)):.1f}" y="{h - mb + 16}" text-anchor="middle">{s}</text>')
    out.append(f'<text x="{(w + ml) / 2}" y="{h - 10}" text-anchor="middle">step</text>')
    out.append(f'<text x="14" y="{(h - mb + mt) / 2}" transform="rotate(-90 14 {(h - mb + mt) / 2})" '
               'text-anchor="middle">loss (mean of 10 steps)</text>')
    for k, (label, color, c) in enumerate(curves):
        pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(c))
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{pts}"/>')
        out.append(f'<line x1="{w - 280}" y1="{mt + 14 + 16 * k}" x2="{w - 256}" y2="{mt + 14 + 16 * k}" '
                   f'stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{w - 250}" y="{mt + 18 + 16 * k}">{label}</text>')
    out.append("</svg>")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(out) + "\n")
    os.replace(tmp, path)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    d, path = sys.argv[1], sys.argv[2]
    data = {name: load(os.path.join(d, name + ".jsonl")) for name, _, _ in RUNS}
    final = {n: statistics.fmean(r["loss"] for r in rows[-10:]) for n, rows in data.items()}
    base = final["debug_fsdp_bf16"]
    print("| run | recipe | steps | final loss (last 10) | vs bf16 | median tokens/s |")
    print("|---|---|---|---|---|---|")
    for name, label, _ in RUNS:
        rows = data[name]
        tps = statistics.median(r["tokens_per_s"] for r in rows[1:])
        print(f"| {label} | `{name}` | {len(rows)} | {final[name]:.4f} | {100 * (final[name] - base) / base:+.2f}% | "
              f"{tps:,.0f} |")
    svg([(label, color, smooth([r["loss"] for r in data[name]])) for name, label, color in RUNS], path)
    print(f"\nplot: {path}")


if __name__ == "__main__":
    main()
