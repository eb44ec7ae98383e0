#!/usr/bin/env python3
"""The tail a grid's launch order leaves under the causal mask: a list-scheduling model of the
tensor-core attention's three kernels (kernels/cuda/attention_tc*.cuh) at Llama 3 8B's shapes.

Each block does work proportional to the tiles of 64 rows it visits (a query block q sees q + 1
key tiles; a key block k is seen by n - k query tiles of each of the group's 4 heads), plus half
a tile of fixed cost; a GPU of `sms` SMs holds `per_sm` blocks each and starts the next block in
launch order wherever one finishes. Printed: each order's makespan over the ideal (the work
spread evenly). docs/performance.md, "The fourth session", quotes it:

    python3 bench/gpu/block_order_model.py            # 8,192 tokens, 132 SMs (H100 / H200)
    python3 bench/gpu/block_order_model.py --tokens 2048 --sms 108
"""
import argparse
import heapq


def makespan(works, slots):
    free = [0.0] * slots
    heapq.heapify(free)
    for w in works:
        heapq.heappush(free, heapq.heappop(free) + w)
    return max(free)


def query_blocks(n, heads, heavy_first, heads_fastest):
    order = range(n - 1, -1, -1) if heavy_first else range(n)
    if heads_fastest:
        return [q + 1.5 for q in order for _ in range(heads)]
    return [q + 1.5 for _ in range(heads) for q in order]


def key_blocks(n, kv_heads, group, heavy_first, heads_fastest):
    order = range(n) if heavy_first else range(n - 1, -1, -1)
    if heads_fastest:
        return [group * (n - k) + 0.5 for k in order for _ in range(kv_heads)]
    return [group * (n - k) + 0.5 for _ in range(kv_heads) for k in order]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--sms", type=int, default=132)
    a = p.parse_args()
    n, group = (a.tokens + 63) // 64, a.heads // a.kv_heads
    rows = [
        ("forward_k, before: query blocks outermost, light first", query_blocks(n, a.heads, False, False), 3),
        ("forward_k, tc_grid: heads fastest, heavy first", query_blocks(n, a.heads, True, True), 3),
        ("dq_k, before", query_blocks(n, a.heads, False, False), 2),
        ("dq_k, tc_grid", query_blocks(n, a.heads, True, True), 2),
        ("dkv_k, before: key blocks fastest, one head after another", key_blocks(n, a.kv_heads, group, True, False), 2),
        ("dkv_k, tc_grid: heads fastest, heavy first", key_blocks(n, a.kv_heads, group, True, True), 2),
    ]
    print(f"{a.tokens} tokens, {a.heads} / {a.kv_heads} heads, {a.sms} SMs")
    print("| kernel and order | blocks an SM | makespan / ideal |")
    print("|---|---|---|")
    for name, works, per_sm in rows:
        slots = a.sms * per_sm
        print(f"| {name} | {per_sm} | {makespan(works, slots) / (sum(works) / slots):.3f} |")


if __name__ == "__main__":
    main()
