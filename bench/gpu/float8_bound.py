#!/usr/bin/env python3
"""How fast can Float8 rowwise make bench_gpu_llama's step? (docs/performance.md, "Float8's bound")

Counts the bytes Float8 rowwise's casts must move in a step of the 8B benchmark (18 blocks,
8,192 tokens) when each cast is a kernel of its own, and bounds the step's speed-up over bf16
from the profile of a measured step (GPU time by kind, CUPTI, `bench_gpu_llama --profile`).
Arithmetic only: no GPU, no dependencies.

  python3 bench/gpu/float8_bound.py [--step S] [--block-gemms MS] [--fp8-gemms MS] [--bf16-casts MS]
                                    [--f8-casts MS] [--bandwidth TB/s]
                                    [--attention MS] [--attention-cudnn MS]

The defaults are the H200 profile of the third GPU session's call 4 (docs/performance.md, "On GPUs":
"Where a step goes"), whose bf16 and Float8 steps were 0.687 and 0.637 s.
"""
import argparse

T, D, KV, F, BLOCKS = 8192, 4096, 1024, 14336, 18

# Each linear group: (input features, output features). q, k, v share their input and so do
# w1, w3 (one cast of the input a group; kernels/backend.hpp's groups).
LINEARS = {"qkv": (D, D + 2 * KV), "wo": (D, D), "w1w3": (D, 2 * F), "w2": (F, D)}


def cast_bytes_per_block(dy_both=True):
    """Bytes a block's Float8 rowwise casts move at least, each cast a kernel of its own.

    Forward: the input's and the weight's codes scaled by row (amax and cast in one kernel,
    the row read twice, the second time from cache: 4 + 1 bytes an element).
    Backward: W and X cast by column and transposed (dX's W^T, dW = dY^T X): a column-amax pass
    (4 bytes), then the cast-and-transpose (4 + 1). dY's two casts (by row for dX = dY W, by
    column and transposed for dW): since 2026-12-07 one pass for both amaxes (4) and one for
    both codes (4 + 1 + 1), cuda::f8_codes_both; before, each cast alone (5 + 9).
    """
    x = sum(T * i for i, _ in LINEARS.values())
    w = sum(i * o for i, o in LINEARS.values())
    dy = sum(T * o for _, o in LINEARS.values())
    return (x + w) * (5 + 9) + dy * (10 if dy_both else 14), x, w, dy


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--step", type=float, default=0.687,
                   help="the bf16 step, s (third session, call 4: the profile the other defaults are from)")
    p.add_argument("--block-gemms", type=float, default=259.6,
                   help="the bf16 step's block GEMMs, ms (all GEMMs 292.3 less the output layer's 32.7)")
    p.add_argument("--fp8-gemms", type=float, default=148.2, help="the same GEMMs in FP8, ms")
    p.add_argument("--bf16-casts", type=float, default=41.6,
                   help="bf16 operand roundings that Float8 leaves out, ms (44.6 less the output layer's 3.0)")
    p.add_argument("--f8-casts", type=float, default=118.4, help="Float8's casts as measured, ms")
    p.add_argument("--bandwidth", type=float, default=4.0, help="what a cast kernel can reach, TB/s")
    p.add_argument("--attention", type=float, default=228.1, help="the bf16 step's attention kernels, ms")
    p.add_argument("--attention-cudnn", type=float, default=77.0,
                   help="cuDNN's attention and its casts at the same shapes, ms (PyTorch's SDPA, estimated)")
    a = p.parse_args()

    per_block, x, w, dy = cast_bytes_per_block()
    total = per_block * BLOCKS
    before = cast_bytes_per_block(dy_both=False)[0] * BLOCKS  # what the measured casts moved
    floor_ms = total / (a.bandwidth * 1e12) * 1e3
    now_ms = a.f8_casts * total / before  # the measured rate over the bytes moved now
    gain = a.block_gemms - a.fp8_gemms + a.bf16_casts  # ms a step Float8 saves before its casts
    print(f"elements a block: inputs {x / 1e6:.0f} M, weights {w / 1e6:.0f} M, output gradients {dy / 1e6:.0f} M")
    print(f"casts' bytes a step (separate kernels): {before / 1e9:.0f} GB, measured {a.f8_casts:.1f} ms "
          f"({before / (a.f8_casts * 1e-3) / 1e12:.2f} TB/s); with dY's two casts from two reads "
          f"{total / 1e9:.0f} GB: at that rate {now_ms:.0f} ms, at {a.bandwidth:.1f} TB/s {floor_ms:.0f} ms")
    print(f"Float8 saves {gain:.1f} ms of GEMMs and bf16 roundings a step of {a.step * 1e3:.0f} ms")
    cudnn_step = a.step - (a.attention - a.attention_cudnn) / 1e3
    print(f"| casts cost | Float8 step (s) | tokens/s over bf16 | with cuDNN's attention: "
          f"bf16 step {cudnn_step:.3f} s, Float8 step | tokens/s over bf16 |")
    print("|---|---|---|---|---|")
    for name, ms in (("as measured", a.f8_casts), ("dY's casts from two reads, at the measured rate", now_ms),
                     (f"separate kernels at {a.bandwidth:.1f} TB/s", floor_ms),
                     ("nothing (fused into the kernels that make the operands)", 0.0)):
        s, c = (base - gain / 1e3 + ms / 1e3 for base in (a.step, cudnn_step))
        print(f"| {name}: {ms:.0f} ms | {s:.3f} | {a.step / s:.3f}x | {c:.3f} | {cudnn_step / c:.3f}x |")
    for name, base in (("", a.step), (" with cuDNN's attention", cudnn_step)):
        need = base - base / 1.28  # s a step must lose for +28%
        print(f"+28%{name} needs the step {need * 1e3:.0f} ms shorter: the casts at {gain - need * 1e3:.0f} ms or less")


if __name__ == "__main__":
    main()
