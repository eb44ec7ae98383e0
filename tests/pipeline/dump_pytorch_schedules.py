#!/usr/bin/env python3
"""Dumps PyTorch's pipeline schedules as CSV test data for tessera's comparison test.

Needs torch (torch.distributed.pipelining). For every schedule name, pp degree p in
{2,4,8}, stages per rank v in {1,2,4} and microbatch count m in 1..4p it asks PyTorch's
own generator (through its schedule visualizer helper, which builds mock stages) for the
compute-only order of every rank, and writes one file per schedule:

    #case p v m          followed by p rows in PyTorch's CSV format (one row per rank,
                         one action per cell, idle steps as empty cells)
    #raises p v m text   when PyTorch's generator rejects the case

Usage: python3 dump_pytorch_schedules.py OUTDIR
"""
import csv
import io
import sys

import torch
from torch.distributed.pipelining._schedule_visualizer import get_schedule_ops

NAMES = ["GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble",
         "ZBVZeroBubble", "DualPipeV"]


def main(outdir):
    for name in NAMES:
        out = io.StringIO()
        out.write(f"# PyTorch {torch.__version__} {name}\n")
        for p in (2, 4, 8):
            for v in (1, 2, 4):
                for m in range(1, 4 * p + 1):
                    try:
                        ops = get_schedule_ops(name, p, m, v)
                    except Exception as e:  # PyTorch rejects the case
                        msg = " ".join(str(e).split())[:200]
                        out.write(f"#raises {p} {v} {m} {type(e).__name__}: {msg}\n")
                        continue
                    out.write(f"#case {p} {v} {m}\n")
                    w = csv.writer(out, lineterminator="\n")
                    for rank in range(p):
                        w.writerow(["" if a is None else str(a) for a in ops[rank]])
        with open(f"{outdir}/pytorch_{name}.csv", "w") as f:
            f.write(out.getvalue())


if __name__ == "__main__":
    main(sys.argv[1])
