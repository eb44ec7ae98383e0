#!/usr/bin/python3
"""PyTorch eager CPU baseline for tessera's training-step benchmark.

The same model as tessera's debugmodel (TorchTitan's: dim 256, 6 layers, 16 heads, FFN
768, vocab 2048, RoPE theta 500000 with Llama 3.1 scaling, untied output), the same batch
(B x T tokens), the same step (forward, cross-entropy, backward, clip_grad_norm_ 1.0,
AdamW with TorchTitan's betas (0.9, 0.95), eps 1e-8, weight decay 0.1), on N threads.
torch 1.13 (Debian) has no F.scaled_dot_product_attention, so attention is the eager
softmax(QK^T/sqrt(d) + causal mask) V that TorchTitan's sdpa falls back to in math mode.

  torch_train_step.py [--batch 8] [--seq-len 256] [--threads 2] [--steps 10] [--warmup 2]

Prints one line: JSON with median tokens/s over the timed steps.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn.functional as F


class Llama(torch.nn.Module):
    def __init__(self, dim=256, n_layers=6, n_heads=16, n_kv_heads=16, vocab=2048, ffn=768, T=256):
        super().__init__()
        self.h, self.kv, self.hd = n_heads, n_kv_heads, dim // n_heads
        self.emb = torch.nn.Embedding(vocab, dim)
        L = torch.nn.ModuleList()
        for _ in range(n_layers):
            m = torch.nn.Module()
            m.an = torch.nn.Parameter(torch.ones(dim))
            m.wq = torch.nn.Linear(dim, n_heads * self.hd, bias=False)
            m.wk = torch.nn.Linear(dim, n_kv_heads * self.hd, bias=False)
            m.wv = torch.nn.Linear(dim, n_kv_heads * self.hd, bias=False)
            m.wo = torch.nn.Linear(n_heads * self.hd, dim, bias=False)
            m.fn = torch.nn.Parameter(torch.ones(dim))
            m.w1 = torch.nn.Linear(dim, ffn, bias=False)
            m.w2 = torch.nn.Linear(ffn, dim, bias=False)
            m.w3 = torch.nn.Linear(dim, ffn, bias=False)
            L.append(m)
        self.layers = L
        self.norm = torch.nn.Parameter(torch.ones(dim))
        self.out = torch.nn.Linear(dim, vocab, bias=False)
        inv = 1.0 / (500000.0 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        wl = 2 * math.pi / inv  # Llama 3.1 scaling (factor 8, low 1, high 4, context 8192)
        sc = torch.where(wl > 8192, inv / 8, inv)
        s = (8192 / wl - 1) / 3
        inv = torch.where((wl >= 2048) & (wl <= 8192), (1 - s) * sc / 8 + s * sc, sc)
        ang = torch.outer(torch.arange(T).float(), inv)
        self.register_buffer("cis", torch.polar(torch.ones_like(ang), ang))
        self.register_buffer("mask", torch.full((T, T), float("-inf")).triu(1))

    @staticmethod
    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w

    def rope(self, x):
        B, T, H, D = x.shape
        xc = torch.view_as_complex(x.float().reshape(B, T, H, D // 2, 2))
        return torch.view_as_real(xc * self.cis[:T].view(1, T, 1, D // 2)).flatten(3)

    def forward(self, tok):
        B, T = tok.shape
        x = self.emb(tok)
        for m in self.layers:
            a = self.rms(x, m.an)
            q = self.rope(m.wq(a).view(B, T, self.h, self.hd)).transpose(1, 2)
            k = self.rope(m.wk(a).view(B, T, self.kv, self.hd)).transpose(1, 2)
            v = m.wv(a).view(B, T, self.kv, self.hd).transpose(1, 2)
            if self.kv != self.h:
                k = k.repeat_interleave(self.h // self.kv, 1)
                v = v.repeat_interleave(self.h // self.kv, 1)
            s = q @ k.transpose(-1, -2) / math.sqrt(self.hd) + self.mask[:T, :T]
            o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, -1)
            x = x + m.wo(o)
            f = self.rms(x, m.fn)
            x = x + m.w2(F.silu(m.w1(f)) * m.w3(f))
        return self.out(self.rms(x, self.norm))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Llama(T=a.seq_len)
    opt = torch.optim.AdamW(model.parameters(), lr=8e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    g = torch.Generator().manual_seed(0)
    times = []
    for i in range(a.warmup + a.steps):
        tok = torch.randint(0, 2048, (a.batch, a.seq_len + 1), generator=g)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = model(tok[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 2048), tok[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        t1 = time.perf_counter()
        if i >= a.warmup:
            times.append(t1 - t0)
    med = statistics.median(times)
    print(json.dumps({"impl": "pytorch-eager", "torch": torch.__version__, "threads": a.threads,
                      "batch": a.batch, "seq_len": a.seq_len, "median_step_s": med,
                      "tokens_per_s": a.batch * a.seq_len / med}))


if __name__ == "__main__":
    main()
