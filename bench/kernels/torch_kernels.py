#!/usr/bin/env python3
"""PyTorch eager CPU timings of the ops in bench_kernels.cpp, same shapes, 2 threads.

Run (Debian's torch; OPENBLAS_CORETYPE as for tessera, since both use the same OpenBLAS):
    OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/kernels/torch_kernels.py
Prints one line per benchmark: name, median milliseconds over 5 repetitions (3 when one
call takes over a second), GFLOP/s
where the op has a FLOP count. Names match bench_kernels' so the two outputs line up.
"""
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
torch.manual_seed(0)
REPS = 5


def bench(name, fn, flops=None, min_time=0.3):
    fn()  # warm-up
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-6)
    inner = max(1, int(min_time / once))
    samples = []
    for _ in range(REPS if once < 1.0 else 3):  # 3 for the slow naive attention
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    med = statistics.median(samples)
    rate = "" if flops is None else "  %8.1f GFLOP/s" % (flops / med / 1e9)
    print("%-44s %10.3f ms%s" % (name, med * 1e3, rate), flush=True)


def sgemm(n):
    a, b = torch.randn(n, n), torch.randn(n, n)
    bench("BM_sgemm/%d" % n, lambda: torch.mm(a, b), 2.0 * n ** 3)


def linear(N, C, OC):
    x, w, dy = torch.randn(N, C), torch.randn(OC, C), torch.randn(N, OC)
    bench("BM_linear_fwd/%d/%d/%d" % (N, C, OC), lambda: F.linear(x, w), 2.0 * N * C * OC)
    # what autograd runs for nn.Linear's backward: dx = dy w, dw = dy^T x
    bench("BM_linear_bwd/%d/%d/%d" % (N, C, OC), lambda: (dy @ w, dy.t() @ x), 4.0 * N * C * OC)


def attention_eager(q, k, v):
    # TorchTitan's eager path without SDPA (torch 1.13): repeat_kv, masked softmax, matmul
    B, T, NH, HD = q.shape
    rep = NH // k.shape[2]
    qh = q.transpose(1, 2)
    kh = k.repeat_interleave(rep, dim=2).transpose(1, 2)
    vh = v.repeat_interleave(rep, dim=2).transpose(1, 2)
    s = (qh @ kh.transpose(-1, -2)) / math.sqrt(HD)
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    s = s.masked_fill(mask, float("-inf"))
    return (torch.softmax(s, dim=-1) @ vh).transpose(1, 2)


def attention(B, T, NH, NKV, HD, backward=True):
    f = 4.0 * B * NH * T * (T + 1) / 2 * HD
    q = torch.randn(B, T, NH, HD, requires_grad=True)
    k = torch.randn(B, T, NKV, HD, requires_grad=True)
    v = torch.randn(B, T, NKV, HD, requires_grad=True)
    tag = "%d/%d/%d/%d/%d" % (B, T, NH, NKV, HD)
    with torch.no_grad():
        bench("BM_attention_fwd/" + tag, lambda: attention_eager(q, k, v), f)
    if backward:
        o = attention_eager(q, k, v)
        do = torch.randn_like(o)
        bench("BM_attention_bwd/" + tag,
              lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True), 2.5 * f)


def rmsnorm(N, C):
    x = torch.randn(N, C, requires_grad=True)
    w = torch.randn(C, requires_grad=True)
    dy = torch.randn(N, C)

    def step():
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
        torch.autograd.grad(y, (x, w), dy)
    bench("BM_rmsnorm_fwd_bwd/%d/%d" % (N, C), step)


def rope(B, T, NH, HD):
    x = torch.randn(B, T, NH, HD, requires_grad=True)
    freqs = 1.0 / (500000.0 ** (torch.arange(0, HD, 2).float() / HD))
    cis = torch.polar(torch.ones(T, HD // 2), torch.outer(torch.arange(T).float(), freqs)).reshape(1, T, 1, HD // 2)
    dy = torch.randn(B, T, NH, HD)

    def step():
        y = torch.view_as_real(torch.view_as_complex(x.reshape(B, T, NH, HD // 2, 2)) * cis).flatten(3)
        torch.autograd.grad(y, x, dy)
    bench("BM_rope_fwd_bwd/%d/%d/%d/%d" % (B, T, NH, HD), step)


def swiglu(n):
    a = torch.randn(n, requires_grad=True)
    b = torch.randn(n, requires_grad=True)
    g = torch.randn(n)
    bench("BM_swiglu_fwd_bwd/%d" % n, lambda: torch.autograd.grad(F.silu(a) * b, (a, b), g))


def cross_entropy(N, V):
    logits = (torch.randn(N, V) * 2).requires_grad_(True)
    t = torch.tensor([(i * 7919) % V for i in range(N)])
    bench("BM_cross_entropy_fwd_bwd/%d/%d" % (N, V),
          lambda: torch.autograd.grad(F.cross_entropy(logits, t), logits))


def embedding(N, V, C):
    wte = torch.randn(V, C, requires_grad=True)
    t = torch.tensor([(i * 7919) % V for i in range(N)])
    dy = torch.randn(N, C)
    bench("BM_embedding_fwd_bwd/%d/%d/%d" % (N, V, C),
          lambda: torch.autograd.grad(F.embedding(t, wte), wte, dy))


def adamw(n):
    p = torch.nn.Parameter(torch.randn(n))
    p.grad = torch.randn(n)
    opt = torch.optim.AdamW([p], lr=8e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    bench("BM_adamw/%d" % n, opt.step)


def clip(n):
    p = torch.nn.Parameter(torch.randn(n))
    p.grad = torch.randn(n)
    bench("BM_clip_grad_norm/%d" % n, lambda: torch.nn.utils.clip_grad_norm_([p], 1e9))


print("torch", torch.__version__, "threads", torch.get_num_threads())
for n in (512, 1024, 2048):
    sgemm(n)
for s in ((4096, 256, 768), (4096, 768, 256), (4096, 1024, 1024)):
    linear(*s)
attention(8, 512, 16, 16, 16)
attention(2, 2048, 8, 2, 64)
attention(1, 8192, 4, 1, 64, backward=False)
rmsnorm(4096, 256)
rmsnorm(4096, 1024)
rope(8, 512, 16, 16)
rope(2, 2048, 8, 64)
swiglu(4096 * 768)
cross_entropy(4096, 2048)
cross_entropy(1024, 32000)
embedding(4096, 2048, 256)
adamw(1 << 23)
clip(1 << 23)
