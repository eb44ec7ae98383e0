#!/usr/bin/env python3
"""bench/gpu/torch_reference.py against a stand-in for PyTorch, so that its logic runs in CI,
where there is neither PyTorch nor a GPU (on a GPU machine bench/gpu/run.sh runs it on the real
one). The stand-in's CUDA clock advances by fixed times per call -- 1 ms an attention forward,
2.5 ms a backward, 0.5 ms a matmul --, so the printed figures are known exactly; its cuDNN
backend refuses SDPA's enable_gqa (the script must repeat k and v) and its FlashAttention
refuses 8,192 tokens (the script must say so). Checked: the rows and their TFLOP/s, the GQA
fallback, the refusal note, and the skip (exit 77) without a CUDA device.

Usage: test_torch_reference.py <bench/gpu/torch_reference.py>
"""
import os
import subprocess
import sys
import tempfile

FAKE_TORCH = '''
__version__ = "0.0-standin"
bfloat16 = "bf16"
_clock = [0.0]
_cuda = [True]

class Tensor:
    def __init__(self, shape):
        self.shape = tuple(shape)
    def detach(self):
        return Tensor(self.shape)
    def requires_grad_(self):
        return self
    def repeat_interleave(self, n, dim):
        s = list(self.shape)
        s[dim] *= n
        return Tensor(s)

def randn(*shape, device=None, dtype=None, generator=None):
    assert device == "cuda" and dtype == bfloat16
    return Tensor(shape)

def matmul(a, b):
    assert a.shape[1] == b.shape[0]
    _clock[0] += 0.5
    return Tensor((a.shape[0], b.shape[1]))

class Generator:
    def __init__(self, device):
        assert device == "cuda"
    def manual_seed(self, s):
        return self

class _Event:
    def __init__(self, enable_timing=False):
        assert enable_timing
        self.t = None
    def record(self):
        self.t = _clock[0]
    def synchronize(self):
        pass
    def elapsed_time(self, stop):
        return stop.t - self.t

class cuda:
    Event = _Event
    @staticmethod
    def is_available():
        return _cuda[0]
    @staticmethod
    def get_device_name(i):
        return "Stand-in GPU"

class backends:
    class cudnn:
        @staticmethod
        def version():
            return 91000

class autograd:
    @staticmethod
    def grad(out, inputs, grad_out, retain_graph=False):
        assert retain_graph and grad_out.shape == out.shape
        _clock[0] += 2.5
        return inputs
'''
FAKE_ATTENTION = '''
import contextlib
class SDPBackend:
    CUDNN_ATTENTION = "cudnn"
    FLASH_ATTENTION = "flash"
current = [None]
@contextlib.contextmanager
def sdpa_kernel(backends):
    current[0] = backends[0]
    yield
    current[0] = None
'''
FAKE_FUNCTIONAL = '''
import torch
from torch.nn.attention import current
def scaled_dot_product_attention(q, k, v, is_causal=False, enable_gqa=False):
    assert is_causal
    if current[0] == "cudnn" and enable_gqa:
        raise RuntimeError("No available kernel (stand-in: cuDNN without GQA)")
    if current[0] == "flash" and q.shape[2] > 4096:
        raise RuntimeError("No available kernel (stand-in: FlashAttention up to 4096 tokens)")
    if not enable_gqa:
        assert k.shape[1] == q.shape[1], "k, v must have the query heads without enable_gqa"
    torch._clock[0] += 1.0
    return torch.Tensor(q.shape)
'''


def run(script, fake_dir, *args, cuda=True):
    env = dict(os.environ, PYTHONPATH=fake_dir)
    if not cuda:
        env["STANDIN_NO_CUDA"] = "1"
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=env)


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: test_torch_reference.py <bench/gpu/torch_reference.py>")
    script = argv[1]
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "torch", "nn"))
        with open(os.path.join(d, "torch", "__init__.py"), "w") as f:
            f.write(FAKE_TORCH + '\nimport os\n_cuda[0] = not os.environ.get("STANDIN_NO_CUDA")\n')
        with open(os.path.join(d, "torch", "nn", "__init__.py"), "w") as f:
            f.write("")
        with open(os.path.join(d, "torch", "nn", "attention.py"), "w") as f:
            f.write(FAKE_ATTENTION)
        with open(os.path.join(d, "torch", "nn", "functional.py"), "w") as f:
            f.write(FAKE_FUNCTIONAL)

        p = run(script, d, "--reps", "3")
        out = p.stdout
        check(p.returncode == 0, f"exit {p.returncode}, stderr: {p.stderr.strip()}")
        # forward at 2,048 tokens: 4 * 32 * 2048^2 * 128 / 2 FLOP in 1 ms = 34.4 TFLOP/s; backward 2.5x in 2.5 ms
        check("| cuDNN fused attention (k, v repeated to the query heads) | 2048 | 1.00 | 34.4 | 2.50 | 34.4 |" in out,
              "cuDNN's row at 2048 tokens (GQA refused: k and v repeated)")
        check("| cuDNN fused attention (k, v repeated to the query heads) | 8192 | 1.00 | 549.8 | 2.50 | 549.8 |" in out,
              "cuDNN's row at 8192 tokens")
        check("| FlashAttention-2 | 2048 | 1.00 | 34.4 | 2.50 | 34.4 |" in out, "FlashAttention's row at 2048 tokens")
        check("| FlashAttention-2 | 8192 |" not in out, "no FlashAttention row at 8192 tokens")
        check("- FlashAttention-2 at 8192 tokens: refused (No available kernel (stand-in: FlashAttention up to 4096 tokens))"
              in out, "the refusal note")
        # 2 * 8192 * 4096 * 14336 FLOP in 0.5 ms
        check("| w1 | 4096 -> 14336 | 1924.1 |" in out, "the w1 GEMM row")
        check("# PyTorch 0.0-standin references on Stand-in GPU (cuDNN 91000)" in out, "the heading")

        p = run(script, d, cuda=False)
        check(p.returncode == 77 and "sees no CUDA device" in p.stdout, f"no CUDA: exit {p.returncode}, {p.stdout!r}")
        p = run(script, d, "--seqs", "1,x")
        check(p.returncode == 2 and "--seqs takes comma-separated integers" in p.stderr, "a bad --seqs")

    if failures:
        print("test_torch_reference: FAILED\n  " + "\n  ".join(failures) + "\n--- output of the first run ---\n" + out)
        return 1
    print("test_torch_reference: the script's tables, fallbacks and skip are as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
