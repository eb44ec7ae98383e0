#!/usr/bin/env python3
"""Loss and throughput curves of training runs, as one SVG (Python standard library only).

  python3 tools/plot_metrics.py metrics.jsonl [more.jsonl ...] -o curves.svg

Each input is a metrics file of train_llama (--metrics FILE.jsonl, one JSON object per step
with the keys step, loss, tokens_per_s, mfu, ...). The SVG has two panels, loss and tokens
per second against the step, one line per file (named by the file, or by --label). Exit
status 0 on success, 2 on bad command-line use, 1 on an unreadable or malformed metrics
file (the message names the file and line). The SVG is written to a temporary name and
renamed.
"""
import argparse
import json
import math
import os
import pathlib
import sys
from xml.sax.saxutils import escape

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
PANEL_W, PANEL_H = 560, 300
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 70, 20, 40, 45


class BadInput(Exception):
    pass


def read_metrics(path):
    """[(step, loss, tokens_per_s)] of a metrics JSONL file, in file order."""
    try:
        lines = pathlib.Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise BadInput(f"{path}: cannot read: {e.strerror}")
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise BadInput(f"{path}:{n}: not a JSON object: {e}")
        if not isinstance(obj, dict):
            raise BadInput(f"{path}:{n}: not a JSON object")
        for key in ("step", "loss", "tokens_per_s"):
            if key not in obj:
                raise BadInput(f"{path}:{n}: no '{key}' key (is this a train_llama --metrics file?)")
        step, loss, tps = obj["step"], obj["loss"], obj["tokens_per_s"]
        if not isinstance(step, (int, float)) or isinstance(step, bool):
            raise BadInput(f"{path}:{n}: step is not a number")
        num = lambda v: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan
        rows.append((float(step), num(loss), num(tps)))  # null (NaN, inf in the run) -> a gap
    if not rows:
        raise BadInput(f"{path}: no steps (an empty metrics file)")
    return rows


def nice_ticks(lo, hi, n=5):
    """About n round tick values covering [lo, hi]."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=10 * mag)
    first = math.floor(lo / step) * step
    ticks, t = [], first
    while t <= hi + step * 1e-9:
        if t >= lo - step * 1e-9:
            ticks.append(t)
        t += step
    return ticks, step


def fmt(v, step):
    if abs(v) >= 10000:
        return f"{v:,.0f}"
    digits = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return f"{v:.{digits}f}"


def panel(series, column, title, x0, y0):
    """SVG of one panel: series = [(label, color, rows)], column 1 (loss) or 2 (tokens/s)."""
    pts = [(r[0], r[column]) for _, _, rows in series for r in rows if math.isfinite(r[column])]
    out = [f'<g transform="translate({x0},{y0})">',
           f'<text x="{PANEL_W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{escape(title)}</text>']
    w, h = PANEL_W - MARGIN_L - MARGIN_R, PANEL_H - MARGIN_T - MARGIN_B
    out.append(f'<rect x="{MARGIN_L}" y="{MARGIN_T}" width="{w}" height="{h}" fill="none" stroke="#888"/>')
    if not pts:
        out.append(f'<text x="{PANEL_W / 2}" y="{PANEL_H / 2}" text-anchor="middle">no finite values</text></g>')
        return out
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    xt, xstep = nice_ticks(min(xs), max(xs))
    yt, ystep = nice_ticks(min(ys), max(ys))
    xlo, xhi, ylo, yhi = xt[0], max(xt[-1], xt[0] + xstep), yt[0], max(yt[-1], yt[0] + ystep)
    sx = lambda x: MARGIN_L + (x - xlo) / (xhi - xlo) * w
    sy = lambda y: MARGIN_T + h - (y - ylo) / (yhi - ylo) * h
    for t in xt:
        out.append(f'<line x1="{sx(t):.1f}" y1="{MARGIN_T + h}" x2="{sx(t):.1f}" y2="{MARGIN_T + h + 5}" stroke="#888"/>')
        out.append(f'<text x="{sx(t):.1f}" y="{MARGIN_T + h + 18}" text-anchor="middle" font-size="11">{fmt(t, xstep)}</text>')
    for t in yt:
        out.append(f'<line x1="{MARGIN_L}" y1="{sy(t):.1f}" x2="{MARGIN_L + w}" y2="{sy(t):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{MARGIN_L - 6}" y="{sy(t) + 4:.1f}" text-anchor="end" font-size="11">{fmt(t, ystep)}</text>')
    out.append(f'<text x="{MARGIN_L + w / 2}" y="{PANEL_H - 6}" text-anchor="middle" font-size="12">step</text>')
    for label, color, rows in series:
        # One polyline per run of finite values (a NaN step leaves a gap).
        runs, cur = [], []
        for r in rows:
            if math.isfinite(r[column]):
                cur.append(f"{sx(r[0]):.1f},{sy(r[column]):.1f}")
            elif cur:
                runs.append(cur)
                cur = []
        if cur:
            runs.append(cur)
        for run in runs:
            out.append(f'<polyline class="series" data-label="{escape(label)}" fill="none" stroke="{color}" '
                       f'stroke-width="1.5" points="{" ".join(run)}"/>')
    out.append("</g>")
    return out


def render(series):
    legend_h = 20 * len(series) + 10
    width, height = 2 * PANEL_W, PANEL_H + legend_h
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    out += panel(series, 1, "loss", 0, 0)
    out += panel(series, 2, "tokens per second", PANEL_W, 0)
    for i, (label, color, rows) in enumerate(series):
        y = PANEL_H + 15 + 20 * i
        out.append(f'<line x1="{MARGIN_L}" y1="{y}" x2="{MARGIN_L + 24}" y2="{y}" stroke="{color}" stroke-width="3"/>')
        out.append(f'<text x="{MARGIN_L + 30}" y="{y + 4}" font-size="12">{escape(label)} ({len(rows)} steps)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description="Loss and throughput curves of train_llama metrics files, as SVG.")
    ap.add_argument("metrics", nargs="+", help="metrics JSONL files (train_llama --metrics)")
    ap.add_argument("-o", "--output", required=True, help="the SVG file to write")
    ap.add_argument("--label", action="append", default=[], help="a name per metrics file, in order")
    a = ap.parse_args(argv)  # exits with status 2 on misuse
    if a.label and len(a.label) != len(a.metrics):
        ap.error(f"give one --label per metrics file ({len(a.metrics)}), or none")
    out = pathlib.Path(a.output)
    if not out.parent.is_dir():
        ap.error(f"the folder of --output '{out}' does not exist")
    try:
        series = [(a.label[i] if a.label else pathlib.Path(p).name, COLORS[i % len(COLORS)], read_metrics(p))
                  for i, p in enumerate(a.metrics)]
    except BadInput as e:
        print(f"plot_metrics: error: {e}", file=sys.stderr)
        return 1
    tmp = out.with_name(out.name + f".tmp.{os.getpid()}")
    tmp.write_text(render(series), encoding="utf-8")
    os.replace(tmp, out)
    print(f"wrote {out} ({', '.join(f'{s[0]}: {len(s[2])} steps' for s in series)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
