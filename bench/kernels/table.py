#!/usr/bin/env python3
"""Turns side_by_side.sh's output (stdin) into the markdown table of docs/performance.md:
benchmark | tessera median ms | PyTorch median ms | speed-up (PyTorch time / tessera time)."""
import re
import sys

tess, torch, rates = {}, {}, {}
section = None
for line in sys.stdin:
    if line.startswith("== tessera"):
        section = tess
    elif line.startswith("== PyTorch"):
        section = torch
    m = re.match(r"(BM_\S+?)(/real_time_median)?\s+([\d.]+) ms(.*)", line.strip())
    if not m or section is None:
        continue
    name = m.group(1).replace("BM_sgemm_tessera", "BM_sgemm")
    section[name] = float(m.group(3))
    r = re.search(r"FLOP/s=([\d.]+)G/s|([\d.]+) GFLOP/s", m.group(4))
    if r and section is tess:
        rates[name] = float(r.group(1) or r.group(2))
print("| benchmark | tessera ms | tessera GFLOP/s | PyTorch ms | PyTorch / tessera time |")
print("|---|---:|---:|---:|---:|")
for name, t in tess.items():
    p = torch.get(name)
    rate = "%.1f" % rates[name] if name in rates else ""
    print("| %s | %.2f | %s | %s | %s |" % (name[3:], t, rate, "%.2f" % p if p else "-",
                                            "%.2fx" % (p / t) if p else "-"))
