#!/usr/bin/env python3
"""PyTorch DTensor's side of bench/dtensor/side_by_side.py: the five transitions of issue 21
on 4 CPU processes (gloo), f32, at the sizes given; prints one JSON line per transition and
size with the median time per call of the slowest rank (a barrier before each call, the
same protocol as tessera's benchmarks) and whether the result was right.

  python3 bench/dtensor/torch_dtensor.py --sizes 4096,1048576,16777216
"""
import argparse
import json
import math
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

try:  # torch >= 2.4
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
except ImportError:  # older: the private module
    from torch.distributed._tensor import DTensor, Replicate, Shard, distribute_tensor
    from torch.distributed._tensor.placement_types import _Partial as Partial
from torch.distributed.device_mesh import init_device_mesh


def iterations(nbytes):  # as bench/comm/bench_common.hpp: about 256 MiB moved, 3..2000
    return max(3, min(2000, (256 << 20) // nbytes))


def side_of(nbytes, ranks=4):
    side = int(math.sqrt(nbytes // 4))
    return max(ranks, side // ranks * ranks)


def run(rank, world, sizes, out_path, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    mesh2 = init_device_mesh("cpu", (2, 2), mesh_dim_names=("a", "b"))
    mesh1 = init_device_mesh("cpu", (4,), mesh_dim_names=("x",))
    cases = [
        ("nested_2d", mesh2, [Shard(0), Shard(1)], [Shard(1), Shard(0)]),
        ("all_gather", mesh1, [Shard(0)], [Replicate()]),
        ("all_reduce", mesh1, [Partial()], [Replicate()]),
        ("reduce_scatter", mesh1, [Partial()], [Shard(0)]),
        ("all_to_all", mesh1, [Shard(0)], [Shard(1)]),
    ]
    lines = []
    for nbytes in sizes:
        side = side_of(nbytes)
        full = (torch.arange(side * side, dtype=torch.float32) % 13).reshape(side, side)
        for name, mesh, src, dst in cases:
            if isinstance(src[0], Partial):  # every rank holds full / 4: the sum is `full`
                x = DTensor.from_local(full / 4, mesh, src, run_check=False)
            else:
                x = distribute_tensor(full, mesh, src)
            y = x.redistribute(mesh, dst)  # warm-up, and the check
            ok = bool(torch.allclose(y.full_tensor(), full))
            for _ in range(2):
                x.redistribute(mesh, dst)
            times = []
            for _ in range(iterations(nbytes)):
                dist.barrier()
                t0 = time.perf_counter()
                y = x.redistribute(mesh, dst)
                y.to_local()
                times.append((time.perf_counter() - t0) * 1e6)
            t = torch.tensor(times, dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            if rank == 0:
                lines.append(json.dumps({"transition": name, "bytes": nbytes, "median_us": statistics.median(t.tolist()),
                                         "correct": ok, "calls": len(times)}))
    if rank == 0:
        with open(out_path, "w") as f:
            f.write("\n".join(lines) + "\n")
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="4096,1048576,16777216")
    ap.add_argument("--out", default="/dev/stdout")
    ap.add_argument("--port", type=int, default=29521)
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    tmp = a.out + ".part" if a.out != "/dev/stdout" else f"/tmp/torch_dtensor_{os.getpid()}.jsonl"
    mp.spawn(run, args=(4, sizes, tmp, a.port), nprocs=4, join=True)
    with open(tmp) as f:
        text = f.read()
    os.remove(tmp)
    if a.out == "/dev/stdout":
        print(text, end="")
    else:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
