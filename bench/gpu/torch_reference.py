#!/usr/bin/env python3
"""PyTorch's kernels on the same GPU and shapes as bench_kernels.cu, for the tables beside it.

bench/gpu/run.sh runs this after tessera's GPU tests when the machine's python3 has PyTorch
with CUDA (the GPU machines lent here do); its Markdown goes into the results beside
gpu.bench_kernels':

  * attention: torch.nn.functional.scaled_dot_product_attention, causal, bf16, 32 query and
    8 KV heads of 128, one sequence of 2,048 and 8,192 tokens, on each backend PyTorch has
    for it here -- cuDNN's fused attention (SDPBackend.CUDNN_ATTENTION) and FlashAttention-2
    (SDPBackend.FLASH_ATTENTION) --, forward and backward; TFLOP/s with FlashAttention's count
    (forward 4 T^2 HD NH / 2 for causal, backward 2.5 x forward), as bench_kernels counts;
  * GEMMs: torch.matmul with bf16 operands (cuBLAS) at the 8B block's linears on 8,192 tokens.

Each figure is the median of --reps timed runs (CUDA events) after 2 warm-up runs. Without
PyTorch or without a CUDA device it says why and exits 77 (skipped), as the GPU tests do.
"""
import argparse
import statistics
import sys

SKIPPED = 77
HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
LINEARS = [("wq", 4096, 4096), ("wk", 4096, 1024), ("w1", 4096, 14336), ("w2", 14336, 4096)]


def attention_flops(seq):
    """FlashAttention's count for one causal forward (bench_kernels.cu counts the same)."""
    return 4.0 * HEADS * seq * seq * HEAD_DIM / 2.0


def median_ms(torch, fn, reps):
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def attention(torch, seqs, reps):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    print(f"## PyTorch attention (causal, {HEADS} query / {KV_HEADS} KV heads of {HEAD_DIM}, bf16)\n")
    print("| backend | seq | forward ms | forward TFLOP/s | backward ms | backward TFLOP/s |")
    print("|---|---|---|---|---|---|")
    notes = []
    for seq in seqs:
        gen = torch.Generator(device="cuda").manual_seed(seq)
        def rand(heads):
            return torch.randn(1, heads, seq, HEAD_DIM, device="cuda", dtype=torch.bfloat16, generator=gen)
        q, k, v, dy = rand(HEADS), rand(KV_HEADS), rand(KV_HEADS), rand(HEADS)
        for name, backend in (("cuDNN fused attention", getattr(SDPBackend, "CUDNN_ATTENTION", None)),
                              ("FlashAttention-2", SDPBackend.FLASH_ATTENTION)):
            if backend is None:
                notes.append(f"{name}: this PyTorch has no such SDPA backend")
                continue
            # GQA as SDPA takes it (enable_gqa), else k and v repeated to the query heads
            for gqa in (True, False):
                kk = k if gqa else k.repeat_interleave(HEADS // KV_HEADS, dim=1)
                vv = v if gqa else v.repeat_interleave(HEADS // KV_HEADS, dim=1)
                qg, kg, vg = (t.detach().requires_grad_() for t in (q, kk, vv))
                extra = {"enable_gqa": True} if gqa else {}
                try:
                    with sdpa_kernel([backend]):
                        def forward():
                            return F.scaled_dot_product_attention(qg, kg, vg, is_causal=True, **extra)
                        fwd = median_ms(torch, forward, reps)
                        out = forward()
                        bwd = median_ms(torch, lambda: torch.autograd.grad(out, (qg, kg, vg), dy, retain_graph=True), reps)
                except (RuntimeError, TypeError, ValueError, NotImplementedError) as e:
                    if gqa:
                        continue
                    notes.append(f"{name} at {seq} tokens: refused ({str(e).splitlines()[0][:160]})")
                    break
                label = name if gqa else name + " (k, v repeated to the query heads)"
                flops = attention_flops(seq)
                print(f"| {label} | {seq} | {fwd:.2f} | {flops / fwd / 1e9:.1f} | {bwd:.2f} | "
                      f"{2.5 * flops / bwd / 1e9:.1f} |")
                break
    print()
    for n in notes:
        print(f"- {n}")
    if notes:
        print()


def gemms(torch, tokens, reps):
    print(f"## PyTorch GEMMs (torch.matmul, bf16 operands, N = {tokens} tokens)\n")
    print("| linear | C -> OC | TFLOP/s |")
    print("|---|---|---|")
    for name, c, oc in LINEARS:
        x = torch.randn(tokens, c, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(c, oc, device="cuda", dtype=torch.bfloat16)
        ms = median_ms(torch, lambda: torch.matmul(x, w), reps)
        print(f"| {name} | {c} -> {oc} | {2.0 * tokens * c * oc / ms / 1e9:.1f} |")
    print()


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqs", default="2048,8192", help="sequence lengths of the attention table (comma-separated)")
    ap.add_argument("--tokens", type=int, default=8192, help="tokens of the GEMM table")
    ap.add_argument("--reps", type=int, default=10, help="timed runs per figure (the median is printed)")
    args = ap.parse_args(argv)
    try:
        seqs = [int(s) for s in args.seqs.split(",") if s]
    except ValueError:
        ap.error(f"--seqs takes comma-separated integers (got '{args.seqs}')")
    if not seqs or min(seqs) < 1 or args.tokens < 1 or args.reps < 1:
        ap.error("--seqs, --tokens and --reps must be positive")
    try:
        import torch
    except ImportError:
        print("skipped: this python3 has no PyTorch")
        return SKIPPED
    if not torch.cuda.is_available():
        print(f"skipped: PyTorch {torch.__version__} sees no CUDA device")
        return SKIPPED
    print(f"# PyTorch {torch.__version__} references on {torch.cuda.get_device_name(0)} "
          f"(cuDNN {torch.backends.cudnn.version()})\n")
    attention(torch, seqs, args.reps)
    gemms(torch, args.tokens, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
