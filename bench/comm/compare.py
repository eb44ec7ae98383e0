#!/usr/bin/env python3
"""Runs the communication benchmarks side by side and prints the Markdown table of
docs/performance.md (## Communication): for each collective, rank count and size, the
median busbw of tessera's threads backend, of OpenMPI's own collective (under mpirun),
and of memcpy, with the ratios, and the largest threads / memcpy ratio that the bytes the
collective must copy allow on this machine's cores ("copy bound", see bound()).

  python3 bench/comm/compare.py BUILD_DIR [--full] [--repetitions N]

--full sweeps 4 KiB .. 256 MiB on 2, 4, 8 ranks (TESSERA_BENCH_FULL=1); without it the
run is short (4 KiB, 1 MiB, 16 MiB on 2 ranks)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def run(cmd, env):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    subprocess.run(cmd + [f"--benchmark_out={out}", "--benchmark_out_format=json"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        data = json.load(f)
    os.unlink(out)
    return data


def medians(data):
    """name -> busbw (GB/s) median over repetitions (or the single run)."""
    res = {}
    for b in data["benchmarks"]:
        name = b["run_name"] if "run_name" in b else b["name"]
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        if "busbw_GBps" not in b:
            continue
        key = name.split("/iterations")[0]
        if b.get("run_type") == "aggregate" or key not in res:
            res[key] = b["busbw_GBps"] / 1.0
    return res


def bound(coll, n, cores):
    """The largest threads / memcpy ratio that copying allows (docs/performance.md,
    "Communication"): memcpy of S bytes reads S and writes S in S / M seconds on one core;
    a collective that must read R and write W bytes in all, on c = min(n, cores) cores at
    the same speed each, needs at least (R + W) / (2 c M), so its busbw is at most
    factor * S * 2 c M / (R + W)."""
    c = min(n, cores)
    rw = {"all_gather": n + 1, "all_to_all": 2 * n, "all_reduce": 2 * n, "reduce_scatter": n + 1}[coll]
    factor = 2 * (n - 1) / n if coll == "all_reduce" else (n - 1) / n
    return factor * 2 * c / rw


def human(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n // div} {unit}"
    return f"{n} B"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--repetitions", type=int, default=3)
    a = ap.parse_args()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if a.full:
        env["TESSERA_BENCH_FULL"] = "1"
    reps = [f"--benchmark_repetitions={a.repetitions}", "--benchmark_report_aggregates_only=true"]
    threads_bin = os.path.join(a.build, "bench/comm/bench_comm_threads")
    mpi_bin = os.path.join(a.build, "bench/comm/bench_comm_mpi")
    for b in (threads_bin, mpi_bin):
        if not os.path.exists(b):
            sys.exit(f"compare.py: {b} is missing; build the bench_comm_threads and bench_comm_mpi targets first")
    load0 = os.getloadavg()[0]
    ranks = [2, 4, 8] if a.full else [2]
    th, mp = {}, {}
    for n in ranks:  # one rank count at a time, threads then OpenMPI, close together in time
        th.update(medians(run([threads_bin, f"--benchmark_filter=(memcpy|ranks:{n}/)"] + reps, env)))
        mp.update(medians(run(["mpirun", "-np", str(n), "--oversubscribe", mpi_bin] + reps, env)))
    load1 = os.getloadavg()[0]
    print(f"load average (1 min) before / after: {load0:.1f} / {load1:.1f}; {os.cpu_count()} cores\n")
    cores = os.cpu_count()
    print("| collective | ranks | size | memcpy GB/s | threads busbw GB/s | OpenMPI busbw GB/s | threads / memcpy "
          "| copy bound / memcpy | threads / OpenMPI |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key in sorted(th, key=lambda k: (k.split("/")[1], int(k.split("ranks:")[1].split("/")[0]) if "ranks:" in k else 0,
                                          int(k.split("/")[-1]))):
        if not key.startswith("threads/"):
            continue
        _, coll, rk, size = key.split("/")
        n = rk.split(":")[1]
        m = th.get(f"memcpy/{size}")
        o = mp.get(f"openmpi/{coll}/{rk}/{size}")
        t = th[key]
        cells = [coll, n, human(int(size)), f"{m:.2f}" if m else "-", f"{t:.2f}", f"{o:.2f}" if o else "-",
                 f"{t / m:.2f}" if m else "-", f"{bound(coll, int(n), cores):.2f}", f"{t / o:.2f}" if o else "-"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
