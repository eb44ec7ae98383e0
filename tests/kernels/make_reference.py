#!/usr/bin/env python3
"""Writes tests/kernels/data/torch_reference.bin: inputs and PyTorch outputs (forward and
backward) of RMSNorm, Llama 3.1 RoPE, causal GQA attention, the SwiGLU feed-forward,
cross-entropy, AdamW and gradient clipping. test_torch_reference.cpp compares tessera's CPU
kernels with them.

Run with Debian's torch:  /usr/bin/python3 tests/kernels/make_reference.py
The references are computed in float64 from float32 inputs (RoPE frequencies in float32,
as TorchTitan computes them), so the comparison measures tessera's float32 error only.

File format (little-endian): magic b"TSRF", u32 record count; per record: u32 name length,
name bytes, u32 rank, rank x i64 extents, then float32 data (int tensors stored as float).
"""
import math
import os
import struct
import sys
import tempfile

import torch
import torch.nn.functional as F

torch.manual_seed(1234)
records = []


def put(name, t):
    records.append((name, t.detach().to(torch.float32).contiguous()))


def rand(*shape, scale=1.0):
    return (torch.randn(*shape, dtype=torch.float32) * scale).to(torch.float64).requires_grad_(True)


# ---- RMSNorm (TorchTitan: x * rsqrt(mean(x^2) + eps) * weight) -------------------------
N, C = 6, 32
x, w = rand(N, C), rand(C)
y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
dy = torch.randn(N, C, dtype=torch.float64)
y.backward(dy)
for k, v in dict(x=x, w=w, y=y, dy=dy, dx=x.grad, dw=w.grad).items():
    put("rmsnorm." + k, v)


# ---- RoPE, Llama 3.1 (Meta's apply_scaling; complex, interleaved pairs) ----------------
def llama31_freqs(dim, theta=500000.0, factor=8.0, low=1.0, high=4.0, old_ctx=8192.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    out = []
    for f in freqs.tolist():
        wl = 2 * math.pi / f
        if wl < old_ctx / high:
            out.append(f)
        elif wl > old_ctx / low:
            out.append(f / factor)
        else:
            s = (old_ctx / wl - low) / (high - low)
            out.append((1 - s) * f / factor + s * f)
    return torch.tensor(out, dtype=torch.float32)


B, T, NH, HD = 2, 12, 3, 128
freqs = llama31_freqs(HD)
ang = torch.outer(torch.arange(T, dtype=torch.float32), freqs).to(torch.float64)
xr = rand(B, T, NH, HD)
xc = torch.view_as_complex(xr.reshape(B, T, NH, HD // 2, 2))
rot = torch.polar(torch.ones_like(ang), ang).reshape(1, T, 1, HD // 2)
yr = torch.view_as_real(xc * rot).reshape(B, T, NH, HD)
dyr = torch.randn(B, T, NH, HD, dtype=torch.float64)
yr.backward(dyr)
for k, v in dict(freqs=freqs, x=xr, y=yr, dy=dyr, dx=xr.grad).items():
    put("rope." + k, v)

# ---- causal GQA attention (TorchTitan: repeat_kv, softmax(q k^T / sqrt(d)) v) ----------
B, T, NH, NKV, HD = 2, 80, 4, 2, 8
q, k, v = rand(B, T, NH, HD), rand(B, T, NKV, HD), rand(B, T, NKV, HD)
rep = NH // NKV
kk = k.repeat_interleave(rep, dim=2)
vv = v.repeat_interleave(rep, dim=2)
s = torch.einsum("bthd,bshd->bhts", q, kk) / math.sqrt(HD)
mask = torch.ones(T, T, dtype=torch.bool).tril()
s = s.masked_fill(~mask, float("-inf"))
lse = torch.logsumexp(s, dim=-1)  # [B, NH, T]
o = torch.einsum("bhts,bshd->bthd", torch.softmax(s, dim=-1), vv)
do = torch.randn(B, T, NH, HD, dtype=torch.float64)
o.backward(do)
for kname, val in dict(q=q, k=k, v=v, out=o, lse=lse, dout=do, dq=q.grad, dk=k.grad, dv=v.grad).items():
    put("attention." + kname, val)

# ---- SwiGLU feed-forward ---------------------------------------------------------------
N, C, H = 6, 16, 24
x, w1, w3, w2 = rand(N, C), rand(H, C, scale=0.3), rand(H, C, scale=0.3), rand(C, H, scale=0.3)
y = (F.silu(x @ w1.T) * (x @ w3.T)) @ w2.T
dy = torch.randn(N, C, dtype=torch.float64)
y.backward(dy)
for kname, val in dict(x=x, w1=w1, w3=w3, w2=w2, y=y, dy=dy, dx=x.grad, dw1=w1.grad, dw3=w3.grad,
                       dw2=w2.grad).items():
    put("ffn." + kname, val)

# ---- cross-entropy (mean over non-ignored tokens, ignore_index -100) -------------------
N, V = 12, 50
logits = rand(N, V, scale=3.0)
targets = torch.randint(0, V, (N,))
targets[4] = -100
loss = F.cross_entropy(logits, targets, ignore_index=-100)
loss.backward()
for kname, val in dict(logits=logits, targets=targets, loss=loss.reshape(1), dlogits=logits.grad).items():
    put("ce." + kname, val)

# ---- AdamW (TorchTitan defaults) and clip_grad_norm_ -----------------------------------
n = 64
p0 = torch.randn(n, dtype=torch.float32)
grads = [torch.randn(n, dtype=torch.float32) for _ in range(3)]
p = p0.clone().requires_grad_(True)
opt = torch.optim.AdamW([p], lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, foreach=False)
for g in grads:
    p.grad = g.clone()
    opt.step()
put("adamw.p0", p0)
put("adamw.grads", torch.stack(grads))
put("adamw.p3", p)
g = torch.randn(1000, dtype=torch.float32) * 0.1
gc = g.clone().requires_grad_(True)
gc.grad = g.clone()
total = torch.nn.utils.clip_grad_norm_([gc], max_norm=1.0)
put("clip.g", g)
put("clip.norm", total.reshape(1))
put("clip.clipped", gc.grad)

# ---- write (temp file, then rename) ----------------------------------------------------
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "data", "torch_reference.bin")
os.makedirs(os.path.dirname(out), exist_ok=True)
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(out))
with os.fdopen(fd, "wb") as f:
    f.write(b"TSRF" + struct.pack("<I", len(records)))
    for name, t in records:
        nb = name.encode()
        f.write(struct.pack("<I", len(nb)) + nb + struct.pack("<I", t.dim()))
        f.write(struct.pack("<%dq" % t.dim(), *t.shape))
        f.write(t.numpy().astype("<f4").tobytes())
os.replace(tmp, out)
print("wrote", out, os.path.getsize(out), "bytes, torch", torch.__version__)
