#!/usr/bin/env python3
"""The planner checked against measurement (issue 21): for every pair of layouts of a 2-D
tensor on a mesh (DTensor spelling: each axis R, P, S(0) or S(1), plus the nested orders of
a dimension split by two axes), run `tessera-plan --run --json`, which executes and times the
chosen plan, the next best plans the search considered and the gather-first baseline. Report
how often the chosen plan is the measured fastest or within 10% of it, and the rank
correlation (Spearman) between modelled and measured time, pooled over every measured plan.

  python3 bench/plan/check_planner.py build/gcc --mesh a=2,b=2 --shape 1024,1024
  python3 bench/plan/check_planner.py build/gcc --mesh a=2,b=2 --shape 1024,1024 --links links.toml
  python3 bench/plan/check_planner.py build/gcc --mesh a=4 --shape 1024,1024 --mpi 4   # under mpirun
  python3 bench/plan/check_planner.py build/gcc --mesh a=2,b=4 --shape 1024,1024 --sample 60
  python3 bench/plan/check_planner.py build/gcc --mesh a=2,b=2 --shape 1024,1024 --misses 10

--misses N lists the N pairs where the chosen plan was furthest from the fastest: both
plans' steps, modelled and measured times (where the model is wrong, structurally or by
a tie).

A timing, not a test: the machine is shared; run before/after calibration back to back.
"""
import argparse
import itertools
import json
import os
import random
import subprocess
import sys


def layouts(axes):
    """DTensor-style layouts of a 2-D tensor on a mesh of `axes` axes; a dim split by several
    axes also gets its non-default orders (canonical spelling)."""
    out = []
    for combo in itertools.product(["R", "P", "S(0)", "S(1)"], repeat=len(axes)):
        out.append(",".join(combo))
        for d in (0, 1):
            split = [axes[i] for i, p in enumerate(combo) if p == f"S({d})"]
            if len(split) < 2 or any(p == "P" for p in combo):
                continue
            for perm in itertools.permutations(split):
                if list(perm) == split:
                    continue
                dims = {d: list(perm)}
                other = [axes[i] for i, p in enumerate(combo) if p == f"S({1 - d})"]
                if other:
                    dims[1 - d] = other
                out.append("{" + ", ".join(f"{k}: ({', '.join(v)})" for k, v in sorted(dims.items())) + "}")
    return out


def legal(src, dst):
    """shard -> partial on one axis is not a transition (checked here for the DTensor
    spelling; tessera-plan's exit code 2 skips the rest)."""
    if src.startswith("{") or dst.startswith("{"):
        return True
    return not any(s.startswith("S") and d == "P" for s, d in zip(src.split(","), dst.split(",")))


def spearman(xs, ys):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2.0
            i = j + 1
        return r
    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx) ** 0.5
    vy = sum((b - my) ** 2 for b in ry) ** 0.5
    return cov / (vx * vy) if vx and vy else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--mesh", default="a=2,b=2")
    ap.add_argument("--shape", default="1024,1024")
    ap.add_argument("--links", help="a link profile (tessera-plan --calibrate)")
    ap.add_argument("--mpi", type=int, help="run under mpirun -np N (--backend mpi)")
    ap.add_argument("--calls", type=int, default=7)
    ap.add_argument("--sample", type=int, help="measure a random sample of this many pairs (seeded)")
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--misses", type=int, default=0, help="list the N pairs where the chosen plan was slowest "
                    "against the fastest")
    a = ap.parse_args()
    tool = os.path.join(a.build, "examples", "plan", "tessera-plan")
    if not os.path.exists(tool):
        sys.exit(f"check_planner: {tool} not found; build the tessera-plan target first")
    axes = [kv.split("=")[0] for kv in a.mesh.split(",")]
    ls = layouts(axes)
    pairs = [(s, d) for s in ls for d in ls if s != d and legal(s, d)]
    if a.sample and a.sample < len(pairs):
        pairs = random.Random(a.seed).sample(pairs, a.sample)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    measured, ok, within, fastest, errors, points, misses = 0, 0, 0, 0, 0, [], []
    for s, d in pairs:
        cmd = [tool, "--mesh", a.mesh, "--from", s, "--to", d, "--shape", a.shape, "--run", "--json",
               "--calls", str(a.calls), "--warmup", "2"]
        if a.links:
            cmd += ["--links", a.links]
        if a.mpi:
            cmd = ["mpirun", "-np", str(a.mpi), "--oversubscribe"] + cmd + ["--backend", "mpi"]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode == 2 and "not a transition" in r.stderr:  # an illegal pair the filter let through
            continue
        if r.returncode == 2 and not measured and not errors:  # bad flags or --links: every pair would fail alike
            sys.exit(f"check_planner: {' '.join(cmd)}\n{r.stderr.strip()}")
        if r.returncode != 0:
            errors += 1
            print(f"{s} -> {d}: exit {r.returncode}: {r.stderr.strip()[:200]}", file=sys.stderr)
            continue
        plans = json.loads(r.stdout)["plans"]
        if not all(p["correct"] for p in plans):
            errors += 1
            continue
        comm = [p for p in plans if p["bytes_per_rank"] > 0]
        if len(plans) < 2 or not comm:
            continue  # a local plan only: nothing to choose between
        measured += 1
        best = min(p["median_us"] for p in plans)
        chosen = plans[0]["median_us"]
        if chosen > 1.10 * best:
            misses.append((chosen / best, s, d, plans[0], min(plans, key=lambda p: p["median_us"])))
        fastest += chosen == best
        within += chosen <= 1.10 * best
        for p in plans:
            if p["modelled_us"] > 0:
                points.append((p["modelled_us"], p["median_us"]))
        ok += 1
    rho = spearman([x for x, _ in points], [y for _, y in points]) if len(points) > 2 else float("nan")
    ratios = sorted(y / x for x, y in points if x > 0)
    med_ratio = ratios[len(ratios) // 2] if ratios else float("nan")
    print(f"mesh {a.mesh}, shape {a.shape}, {'mpi -np ' + str(a.mpi) if a.mpi else 'threads'}, "
          f"links {a.links or 'default (NVLink constants)'}")
    print(f"pairs measured (a choice between plans): {measured}; wrong results or failures: {errors}")
    if measured:
        print(f"chosen plan measured fastest: {fastest} ({100 * fastest / measured:.0f}%); "
              f"fastest or within 10%: {within} ({100 * within / measured:.0f}%)")
    print(f"Spearman rank correlation modelled vs measured over {len(points)} plans: {rho:.2f}; "
          f"median measured/modelled {med_ratio:.2f}x")
    within25 = sum(1 for x, y in points if abs(y / x - 1) <= 0.25)
    print(f"plans modelled within 25% of measured: {within25} of {len(points)}")
    for ratio, s, d, ch, best in sorted(misses, key=lambda m: -m[0])[:a.misses]:
        print(f"{ratio:5.2f}x  {s} -> {d}")
        for name, p in (("chosen", ch), ("fastest", best)):
            print(f"       {name:8} {p['median_us']:9.1f} us measured, {p['modelled_us']:9.1f} modelled: "
                  f"{'; '.join(p['steps'])}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
