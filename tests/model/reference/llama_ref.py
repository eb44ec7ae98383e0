#!/usr/bin/python3
"""A reference Llama 3 in PyTorch, written for tessera's equivalence test.

It follows the Hugging Face `LlamaForCausalLM` conventions (weights named
model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ..., lm_head.weight;
rotary embedding applied to the two halves of each head, "rotate_half"), with Llama 3.1's
RoPE frequency scaling. It loads and saves safetensors with its own tiny reader (no
`safetensors` package needed), computes the mean cross-entropy loss and, by autograd, the
gradient of every weight.

  llama_ref.py make-fixture OUT_DIR     # writes tiny_weights / tiny_expected .safetensors
  llama_ref.py loss WEIGHTS TOKENS.bin B T CONFIG.json   # prints loss (f64)

Run with Debian's interpreter: /usr/bin/python3 (python3-torch).
"""
import json
import math
import os
import struct
import sys

import torch

# ---- safetensors (format: u64 LE header length, JSON header, raw LE data) -------------
_DT = {"F32": (torch.float32, 4), "BF16": (torch.bfloat16, 2), "F64": (torch.float64, 8)}


def load_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        dt, _ = _DT[e["dtype"]]
        b, en = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:en]), dtype=dt).reshape(e["shape"])
        out[name] = t
    return out, meta


def save_safetensors(path, tensors, meta=None):
    header = {}
    if meta:
        header["__metadata__"] = {k: str(v) for k, v in meta.items()}
    blobs, off = [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().to(torch.float32)
        b = t.numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


# ---- the model --------------------------------------------------------------------------
def ffn_hidden(cfg):
    h = int(2 * 4 * cfg["dim"] / 3)
    h = int(cfg.get("ffn_dim_multiplier", 1.0) * h)
    m = cfg["multiple_of"]
    return m * ((h + m - 1) // m)


def rope_inv_freq(cfg, dtype):
    hd = cfg["dim"] // cfg["n_heads"]
    inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    if cfg.get("rope_scaling", True):
        # Llama 3.1: factor 8, low_freq_factor 1, high_freq_factor 4, original context 8192.
        factor, lo, hi, old = 8.0, 1.0, 4.0, 8192.0
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > old / lo, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        mid = (wavelen >= old / hi) & (wavelen <= old / lo)
        inv = torch.where(mid, (1 - smooth) * scaled / factor + smooth * scaled, scaled)
    return inv.to(dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def forward_loss(cfg, W, inputs, targets):
    """W: dict of HF-named tensors (requires_grad as the caller wants). Returns mean CE."""
    B, T = inputs.shape
    D, H, KV = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"]
    hd = D // H
    eps = cfg["norm_eps"]
    dt = W["model.embed_tokens.weight"].dtype
    inv = rope_inv_freq(cfg, torch.float64)
    ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos().to(dt), emb.sin().to(dt)
    x = W["model.embed_tokens.weight"][inputs]
    mask = torch.full((T, T), float("-inf"), dtype=dt).triu(1)
    for l in range(cfg["n_layers"]):
        p = f"model.layers.{l}."
        a = rmsnorm(x, W[p + "input_layernorm.weight"], eps)
        q = (a @ W[p + "self_attn.q_proj.weight"].T).view(B, T, H, hd).transpose(1, 2)
        k = (a @ W[p + "self_attn.k_proj.weight"].T).view(B, T, KV, hd).transpose(1, 2)
        v = (a @ W[p + "self_attn.v_proj.weight"].T).view(B, T, KV, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(hd) + mask
        o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, D)
        x = x + o @ W[p + "self_attn.o_proj.weight"].T
        f = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps)
        g = torch.nn.functional.silu(f @ W[p + "mlp.gate_proj.weight"].T) * (f @ W[p + "mlp.up_proj.weight"].T)
        x = x + g @ W[p + "mlp.down_proj.weight"].T
    x = rmsnorm(x, W["model.norm.weight"], eps)
    out_w = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else W["lm_head.weight"]
    logits = x @ out_w.T
    return torch.nn.functional.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))


def random_weights(cfg, gen):
    D, H, KV, V = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"], cfg["vocab_size"]
    hd, F = D // H, ffn_hidden(cfg)
    W = {"model.embed_tokens.weight": 0.5 * torch.randn(V, D, generator=gen)}
    for l in range(cfg["n_layers"]):
        p = f"model.layers.{l}."
        W[p + "input_layernorm.weight"] = 1 + 0.1 * torch.randn(D, generator=gen)
        W[p + "self_attn.q_proj.weight"] = 0.2 * torch.randn(H * hd, D, generator=gen)
        W[p + "self_attn.k_proj.weight"] = 0.2 * torch.randn(KV * hd, D, generator=gen)
        W[p + "self_attn.v_proj.weight"] = 0.2 * torch.randn(KV * hd, D, generator=gen)
        W[p + "self_attn.o_proj.weight"] = 0.1 * torch.randn(D, H * hd, generator=gen)
        W[p + "post_attention_layernorm.weight"] = 1 + 0.1 * torch.randn(D, generator=gen)
        W[p + "mlp.gate_proj.weight"] = 0.2 * torch.randn(F, D, generator=gen)
        W[p + "mlp.up_proj.weight"] = 0.2 * torch.randn(F, D, generator=gen)
        W[p + "mlp.down_proj.weight"] = 0.1 * torch.randn(D, F, generator=gen)
    W["model.norm.weight"] = 1 + 0.1 * torch.randn(D, generator=gen)
    if not cfg.get("tie_word_embeddings"):
        W["lm_head.weight"] = 0.2 * torch.randn(V, D, generator=gen)
    return W


TINY = {"dim": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 96,
        "multiple_of": 16, "norm_eps": 1e-5, "rope_theta": 500000.0, "rope_scaling": True,
        "tie_word_embeddings": False}
TINY_B, TINY_T = 2, 16


def make_fixture(out_dir, name, cfg, seed):
    gen = torch.Generator().manual_seed(seed)
    W = random_weights(cfg, gen)
    # Round the weights to f32 once: C++ and the f64 oracle then see identical values.
    W = {k: v.to(torch.float32) for k, v in W.items()}
    inputs = torch.randint(0, cfg["vocab_size"], (TINY_B, TINY_T), generator=gen)
    targets = torch.randint(0, cfg["vocab_size"], (TINY_B, TINY_T), generator=gen)
    W64 = {k: v.to(torch.float64).requires_grad_(True) for k, v in W.items()}
    loss = forward_loss(cfg, W64, inputs, targets)
    loss.backward()
    meta = {k: json.dumps(v) for k, v in cfg.items()}
    meta.update({"batch": TINY_B, "seq_len": TINY_T, "generator": "llama_ref.py (PyTorch %s, f64)" % torch.__version__})
    save_safetensors(os.path.join(out_dir, name + "_weights.safetensors"), W, meta)
    exp = {"loss": loss.detach().reshape(1), "inputs": inputs.to(torch.float32),
           "targets": targets.to(torch.float32)}
    for k, v in W64.items():
        exp["grad." + k] = v.grad
    save_safetensors(os.path.join(out_dir, name + "_expected.safetensors"), exp, meta)
    print(f"{name}: loss {loss.item():.9f}")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "make-fixture":
        make_fixture(sys.argv[2], "tiny", TINY, 1234)
        make_fixture(sys.argv[2], "tiny_tied", dict(TINY, tie_word_embeddings=True, n_kv_heads=4), 4321)
        return
    print(__doc__)
    sys.exit(2)


if __name__ == "__main__":
    main()
