#!/usr/bin/env python3
"""No lambda in tessera's headers captures `this` implicitly (docs/cuda.md, "nvcc and g++
units in one program").

A closure type's layout is not fixed by the language: each compiler orders the captured
entities its own way. nvcc's host compilation (cudafe++, then g++) and g++ agree on the order
of explicit captures and of variables captured by a default capture, but not on an implicit
`this`: in `[&] { return f(a); }` inside a member function, g++ captures `a` first and
`this` after it (it resolves the call's implicit object after its arguments), nvcc captures
`this` first. An inline function or template instantiated both in a .cu unit and in a .cpp
unit of one program then has two definitions that lay out the same closure type differently,
and the linker keeps one of them: the program reads `this` where the other unit stored `&a`.
That crashed train_llama --profiling.trace_file when its CUDA units came first on the link
line (trace::recorder::write).

Naming `this` in the capture list (`[&, this]`, `[this, &a]`) puts it first for both
compilers, so this check asks for that everywhere a header's lambda captures `this`. It runs
clang-query's matcher

    lambdaExpr(hasAnyCapture(lambdaCapture(capturesThis(), isImplicit())))

over translation units that include every header of include/ (with the CUDA headers through
the host emulation of tests/support/emulated_cuda), examples/ and tests/, and fails naming
each lambda. Any compile error in those units fails the check too, so that it cannot go blind.

Usage: check_this_capture.py ROOT [--clang-query PATH] [--headers H...]
(--headers: check these headers alone, as one unit; the self-test's fixture does)
Exit 0: none found; 1: found (or the units did not compile); 77: no clang-query (skipped).
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

MATCHER = "lambdaExpr(hasAnyCapture(lambdaCapture(capturesThis(), isImplicit())))"
DEFINES = ["TESSERA_HAS_OPENBLAS", "TESSERA_HAS_MPI", "TESSERA_HAS_NCCL", "TESSERA_HAS_CUDA",
           "TESSERA_HAS_SENTENCEPIECE", "TESSERA_HAS_TOMLPLUSPLUS", "TESSERA_CUDA_EMULATION",
           "TESSERA_EMULATION_FIBERS"]
CUDA_INCLUDE = "/usr/local/cuda/include"
SYSTEM = ["/usr/include/x86_64-linux-gnu/openblas-pthread", "/usr/lib/x86_64-linux-gnu/openmpi/include",
          "/usr/lib/x86_64-linux-gnu/openmpi/include/openmpi"]


def headers(root, sub):
    out = []
    for d, _, files in os.walk(os.path.join(root, sub)):
        out += [os.path.join(d, f) for f in files if f.endswith((".hpp", ".cuh"))]
    return sorted(out)


def units(root):
    """Header groups, one translation unit each: as few as the names allow, since parsing is
    nearly all of the check's time and the groups share most of include/ (five units took 48
    s, these three 27 s). The groups are apart where their names clash: examples/plan and
    bench both have a namespace `bench`, and bench's GPU benchmarks include the CUDA
    toolkit's headers, which clash with the host emulation's."""
    lib = [h for h in headers(root, "include/tessera") if not needs_cudnn(h)]
    support = headers(root, "tests/support") + headers(root, "tests/gpu")
    # tests/odr holds the self-test's fixture, which breaks the rule on purpose
    tests = [h for h in headers(root, "tests") if h not in support and "/tests/odr/" not in h]
    emulated = ["-I" + os.path.join(root, "tests/support/emulated_cuda"), "-I" + os.path.join(root, "tests/support")]
    groups = [("include, tests, examples/train", lib + support + tests + headers(root, "examples/train"), emulated),
              ("examples/plan", headers(root, "examples/plan"), emulated), ("bench", headers(root, "bench"), emulated)]
    # cuDNN's headers take the CUDA toolkit's own headers (the cuDNN frontend includes
    # cuda_bf16.h, which the emulation also names) and the frontend's, where .ci/setup.sh put them
    cudnn = [h for h in headers(root, "include/tessera") if needs_cudnn(h)]
    frontend = sorted(glob.glob(os.path.join(root, "build/deps/cudnn-frontend-*/include")))
    if cudnn and frontend and os.path.isdir(CUDA_INCLUDE):
        groups.append(("cudnn", cudnn, ["-isystem" + frontend[-1], "-isystem" + CUDA_INCLUDE,
                                        "-DNV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING"]))
    elif cudnn:
        print("not checked (no cuDNN frontend in build/deps or no %s): %s" %
              (CUDA_INCLUDE, ", ".join(os.path.relpath(h, root) for h in cudnn)))
    return groups


def needs_cudnn(h):
    with open(h) as f:
        return "// tessera-requires: cudnn" in f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root")
    ap.add_argument("--clang-query", default=None)
    ap.add_argument("--headers", nargs="+", default=None)
    a = ap.parse_args()
    root = os.path.realpath(a.root)
    query = a.clang_query or shutil.which("clang-query") or shutil.which("clang-query-14")
    if not query:
        print("skipped: no clang-query (Debian: clang-tools; .ci/setup.sh installs it)")
        return 77
    flags = ["-std=c++20", "-I" + os.path.join(root, "include")]
    flags += ["-isystem" + d for d in SYSTEM if os.path.isdir(d)] + ["-D%s=1" % d for d in DEFINES]
    given = ["-I" + os.path.join(root, "tests/support/emulated_cuda"), "-I" + os.path.join(root, "tests/support")]
    found, errors, checked = [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        groups = [("given", [os.path.realpath(h) for h in a.headers], given)] if a.headers else units(root)
        for name, hs, extra in groups:
            if not hs:
                continue
            tu = os.path.join(tmp, re.sub(r"[^a-z]+", "_", name) + ".cpp")
            with open(tu, "w") as f:
                f.write("".join('#include "%s"\n' % h for h in hs))
            # the unit's own directory first: the test headers include their neighbours by name
            dirs = sorted({"-I" + os.path.dirname(h) for h in hs})
            r = subprocess.run([query, "-c", "set output diag", "-c", "match " + MATCHER, tu, "--"] + dirs + flags + extra,
                               capture_output=True, text=True)
            checked += len(hs)
            text = r.stdout + r.stderr
            errors += [l for l in text.splitlines() if re.search(r"\berror:", l)]
            if r.returncode != 0 or "match" not in text:  # a crash, or no answer at all
                errors.append("%s: clang-query exited %d: %s" % (name, r.returncode, text[-500:]))
            for m in re.finditer(r"^(\S+?):(\d+):(\d+): note: \"root\" binds here", text, re.M):
                path = os.path.realpath(m.group(1))
                # tessera's files; not the cuDNN frontend's in build/deps, which has such lambdas
                # (kernels/cuda/cudnn_attention.hpp: only the host compiler compiles it, in one
                # unit a program, which registers it for the nvcc units)
                if path.startswith(root + os.sep) and not path.startswith(os.path.join(root, "build") + os.sep):
                    found.append((os.path.relpath(path, root), int(m.group(2)), int(m.group(3))))
    if errors:
        print("the units of the check did not compile, so it cannot tell (fix the header, or the "
              "check's flags in tests/odr/check_this_capture.py):")
        print("\n".join(errors[:20]))
        return 1
    for f, l, c in sorted(set(found)):
        print("%s:%d:%d: a lambda captures `this` implicitly; name it in the capture list ([&, this] "
              "or [this, &x]): nvcc and g++ lay such closures out differently, and a program with "
              ".cu and .cpp units then reads one unit's closure with the other's layout "
              "(docs/cuda.md, \"nvcc and g++ units in one program\")" % (f, l, c))
    if found:
        return 1
    print("checked %d headers: no lambda captures `this` implicitly" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
