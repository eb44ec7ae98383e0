#!/usr/bin/env python3
"""tessera (threads and MPI backends) next to PyTorch DTensor on CPU (gloo), 4 ranks, f32,
4 KiB / 1 MiB / 16 MiB, the five transitions of issue 21 (nested 2-D swap on 2 x 2,
all-gather, all-reduce, reduce-scatter, all-to-all on 4), in interleaved rounds (each round
runs the three systems one after the other, in a rotating order). Prints a Markdown table:
median over rounds of each run's median time per call (slowest rank, barrier before each
call), and DTensor / tessera ratios (above 1: tessera is faster).

  cmake --build build/gcc --target bench_comm_redistribute
  python3 bench/dtensor/side_by_side.py build/gcc --rounds 3 [--python /path/to/venv/bin/python3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
NAMES = {"nested_2d": "nested 2-D swap [S(0),S(1)] -> [S(1),S(0)] (2 x 2)", "all_gather": "S(0) -> R (all-gather)",
         "all_reduce": "P -> R (all-reduce)", "all_reduce_fresh_result": "P -> R, fresh result each call",
         "reduce_scatter": "P -> S(0) (reduce-scatter)", "all_to_all": "S(0) -> S(1) (all-to-all)"}


def tessera(build, mpi):
    exe = os.path.join(build, "bench", "comm", "bench_comm_redistribute")
    cmd = [exe, "--benchmark_filter=/(threads|mpi):4/", "--benchmark_format=json"]
    if mpi:
        cmd = ["mpirun", "-np", "4", "--oversubscribe"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, check=True)
    out = {}
    lines = r.stdout.splitlines()
    text = "\n".join(lines[next(i for i, l in enumerate(lines) if l == "{"):])  # (after the plans main prints)
    for b in json.loads(text)["benchmarks"]:
        parts = b["name"].split("/")
        if b.get("error_occurred"):
            sys.exit(f"side_by_side: {b['name']}: {b.get('error_message')}")
        out[(parts[0], int(parts[2]))] = b["real_time"]  # manual time, microseconds
    return out


def torch_side(python, sizes):
    r = subprocess.run([python, os.path.join(HERE, "torch_dtensor.py"), "--sizes", ",".join(map(str, sizes))],
                       capture_output=True, text=True, check=True)
    out = {}
    for line in r.stdout.splitlines():
        d = json.loads(line)
        if not d["correct"]:
            sys.exit(f"side_by_side: DTensor's {d['transition']} at {d['bytes']} bytes gave a wrong result")
        out[(d["transition"], d["bytes"])] = d["median_us"]
    return out


def human(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--python", default=sys.executable, help="a Python with torch (pip install torch)")
    ap.add_argument("--no-mpi", action="store_true")
    a = ap.parse_args()
    sizes = [4096, 1 << 20, 16 << 20]
    systems = ["threads", "dtensor"] + ([] if a.no_mpi else ["mpi"])
    runs = {s: [] for s in systems}
    for r in range(a.rounds):
        order = systems[r % len(systems):] + systems[:r % len(systems)]
        for s in order:
            print(f"round {r + 1}: {s}", file=sys.stderr)
            runs[s].append(torch_side(a.python, sizes) if s == "dtensor" else tessera(a.build, s == "mpi"))
    med = {s: {k: statistics.median(run[k] for run in runs[s]) for k in runs[s][0]} for s in systems}
    print(f"| transition | size | tessera threads us | tessera MPI us | DTensor (gloo) us | DTensor / threads | DTensor / MPI |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for t in ["nested_2d", "all_gather", "all_reduce", "all_reduce_fresh_result", "reduce_scatter", "all_to_all"]:
        for n in sizes:
            th = med["threads"].get((t, n))
            mp = med.get("mpi", {}).get((t, n))
            dt = med["dtensor"].get(("all_reduce" if t == "all_reduce_fresh_result" else t, n))
            f = lambda v: f"{v:.1f}" if v is not None else "-"
            rt = f"{dt / th:.2f}x" if dt and th else "-"
            rm = f"{dt / mp:.2f}x" if dt and mp else "-"
            print(f"| {NAMES[t]} | {human(n)} | {f(th)} | {f(mp)} | {f(dt)} | {rt} | {rm} |")


if __name__ == "__main__":
    main()
