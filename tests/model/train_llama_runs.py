"""Runs train_llama and checks what a run promises, beyond its exit status.

  train_llama_runs.py trace EXE [MPIEXEC ARGS...]  the Chrome/Perfetto trace of a run loads as
                                                  JSON with, per rank, every step's step,
                                                  forward, backward and optimizer events on
                                                  the compute track and the collectives on
                                                  their own track (threads; or under mpirun)
  train_llama_runs.py batch EXE                   --batch is per data-parallel rank: debug_fsdp
                                                  on 2 ranks with --batch 2 trains as one rank
                                                  with --batch 4, not as --grad-accum 2
                                                  with --batch 2; and with --init-from the
                                                  weights of a run, debug_fsdp and debug_2d
                                                  train as one rank from them, rank 0 reading
                                                  about half the file (debug_fsdp) and a
                                                  quarter (debug_2d)
  train_llama_runs.py cuda EXE EMULATED            --device cuda of EMULATED (train_llama_emulated:
                                                  the trainer's GPU path on the host's CUDA
                                                  emulation) trains as --device cpu of EXE, in
                                                  f32 and with --compute-dtype bf16, saves
                                                  the weights it trained, and its checkpoints
                                                  resume on the CPU (and the CPU's on it);
                                                  --attention cudnn is refused there (no cuDNN)
  train_llama_runs.py cuda_recipes EXE EMULATED    the same, and --recipe debug_2d on 4 emulated
                                                  GPUs over the emulated NCCL trains as on 4 CPU
                                                  thread ranks, and with --compute-dtype bf16
                                                  within 1% of them (EMULATED built with
                                                  TESSERA_EMULATED_TRAINER_RECIPES; with
                                                  TESSERA_EMULATED_GPUS=1 its 4 ranks share one
                                                  over comm::cuda_staged)
                                                  [MPIEXEC ARGS...: with
                                                  TESSERA_EMULATED_GPUS below 4, also debug_2d
                                                  as 4 MPI processes sharing each process's
                                                  emulated GPUs over comm::cuda_staged, and a
                                                  step beyond the shared GPU refused naming
                                                  its 4 ranks, and for one rank a GPU where
                                                  each process sees its own through
                                                  CUDA_VISIBLE_DEVICES]
  train_llama_runs.py gpu EXE                     the same checks on this machine's GPUs: EXE's
                                                  --device cuda (f32 and bf16 operands; bf16
                                                  with --attention cudnn too, where EXE links
                                                  it and cuDNN is found) against
                                                  its --device cpu, and --recipe debug_fsdp on
                                                  as many GPUs as are visible (up to 4; and
                                                  debug_2d on 4 ranks, sharing the GPUs over
                                                  comm::cuda_staged where there are fewer)
                                                  against as many CPU thread ranks (ctest's
                                                  gpu.train_llama; exit 77, skipped, without
                                                  a GPU)
Exit status 0 when every check holds, 1 (with the reasons) otherwise.
"""
import json
import os
import pathlib
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile

fails = []


def check(ok, what):
    if not ok:
        fails.append(what)


def tokens(path, n=20000, vocab=2048, seed=1):
    rnd = random.Random(seed)
    path.write_bytes(struct.pack(f"<{n}i", *[rnd.randrange(vocab) for _ in range(n)]))


def run(cmd):
    env = dict(os.environ, TESSERA_NUM_THREADS=os.environ.get("TESSERA_NUM_THREADS", "2"),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited with {p.returncode}:\n{p.stdout}{p.stderr}")
    return p.stdout


def run_fails(cmd):
    """(exit status, stdout + stderr) of a run expected to fail"""
    env = dict(os.environ, TESSERA_NUM_THREADS=os.environ.get("TESSERA_NUM_THREADS", "2"),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return p.returncode, p.stdout + p.stderr


def check_gpu_refusal(d, emulated, extra, what):
    """a step far beyond any GPU's memory (debugmodel, 64 x 100000 tokens: hundreds of GiB) is
    refused before the tokens are loaded, naming the GPU, the sizes and the fix; nothing written"""
    m = d / "refused.jsonl"
    rc, out = run_fails([emulated, "--device", "cuda", "--batch", "64", "--seq-len", "100000", "--metrics", str(m),
                         "--tokens", str(d / "absent.bin")] + extra)
    check(rc == 1, f"{what}: a step beyond the GPU's memory exited with {rc}, not 1:\n{out}")
    check("seq_len 100000 x global batch " in out and " GiB free; give a smaller seq_len or global batch" in out
          and "(of which activations " in out and "but GPU 0 (" in out,
          f"{what}: no refusal naming the GPU, the sizes and the fix:\n{out}")
    check(not m.exists(), f"{what}: the refused run wrote {m}")


def losses(path):
    return [json.loads(line)["loss"] for line in pathlib.Path(path).read_text().splitlines()]


def check_trace(d, exe, launcher):
    tok = d / "t.bin"
    tokens(tok)
    steps, accum = 2, 2
    common = ["--tokens", str(tok), "--batch", "1", "--seq-len", "32", "--steps", str(steps),
              "--grad-accum", str(accum)]
    cases = [("one rank", [exe] + common, 1, False)]
    if launcher:
        cases.append(("debug_fsdp on 2 MPI ranks",
                      launcher + [exe, "--recipe", "debug_fsdp", "--backend", "mpi"] + common, 2, True))
    else:
        cases.append(("debug_2d on 4 thread ranks", [exe, "--recipe", "debug_2d"] + common, 4, True))
    for name, cmd, ranks, parallel in cases:
        out = d / "trace.json"
        if out.exists():
            out.unlink()
        run(cmd + ["--profiling.trace_file", str(out)])
        try:
            doc = json.loads(out.read_text())
        except (OSError, ValueError) as e:
            fails.append(f"{name}: the trace does not load as JSON: {e}")
            continue
        ev = doc.get("traceEvents", [])
        names = {(e["pid"], e.get("tid", -1)): e["args"]["name"] for e in ev if e["ph"] == "M"
                 and e["name"] in ("process_name", "thread_name")}
        spans = [e for e in ev if e["ph"] == "X"]
        check(all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans), f"{name}: negative times")
        for r in range(ranks):
            check(names.get((r, -1)) == f"rank {r}", f"{name}: rank {r}'s track is not named")
            mine = [e for e in spans if e["pid"] == r]
            compute = [e for e in mine if e["tid"] == 0]
            count = lambda n: sum(e["name"] == n for e in compute)
            check(count("step") == steps, f"{name}: rank {r} has {count('step')} step events, not {steps}")
            check(sorted(e["args"]["step"] for e in compute if e["name"] == "step") == list(range(1, steps + 1)),
                  f"{name}: rank {r}'s steps are not numbered 1..{steps}")
            for n in ("forward", "backward"):
                check(count(n) == steps * accum, f"{name}: rank {r} has {count(n)} {n} events, not {steps * accum}")
            check(count("optimizer") == steps, f"{name}: rank {r} has {count('optimizer')} optimizer events")
            # The model's parts (model/llama.hpp): every block's forward and backward once per
            # micro-batch, numbered 0..n_layers-1, each inside a forward / backward event.
            layers = 6  # debugmodel
            for n, outer in (("forward block", "forward"), ("backward block", "backward")):
                blocks = [e for e in compute if e["name"] == n]
                check(len(blocks) == steps * accum * layers,
                      f"{name}: rank {r} has {len(blocks)} {n} events, not {steps * accum * layers}")
                check(sorted({e["args"]["block"] for e in blocks}) == list(range(layers)),
                      f"{name}: rank {r}'s {n} events are not numbered 0..{layers - 1}")
                spans_outer = [(e["ts"], e["ts"] + e["dur"]) for e in compute if e["name"] == outer]
                check(all(any(a <= e["ts"] and e["ts"] + e["dur"] <= b for a, b in spans_outer) for e in blocks),
                      f"{name}: rank {r} has a {n} event outside every {outer} event")
            for n in ("forward embedding", "forward head", "backward head", "backward embedding"):
                check(count(n) == steps * accum, f"{name}: rank {r} has {count(n)} {n} events, not {steps * accum}")
            # Every forward, backward and optimizer event lies inside one of the rank's steps.
            stepspans = [(e["ts"], e["ts"] + e["dur"]) for e in compute if e["name"] == "step"]
            for e in compute:
                if e["name"] != "step":
                    check(any(a <= e["ts"] and e["ts"] + e["dur"] <= b for a, b in stepspans),
                          f"{name}: rank {r}'s {e['name']} at {e['ts']} is outside every step")
            coll = [e for e in mine if e["tid"] == 1]
            kinds = {e["name"] for e in coll}
            if parallel:
                for k in ("all_gather", "reduce_scatter", "all_reduce"):
                    check(k in kinds, f"{name}: rank {r} has no {k} events (has {sorted(kinds)})")
                check(all(e["cat"] == "collective" and "bus_bytes" in e["args"] and "group" in e["args"]
                          for e in coll if e["name"] != "barrier"), f"{name}: rank {r}'s collectives lack arguments")
                check(any(e["args"]["bus_bytes"] > 0 for e in coll), f"{name}: rank {r} moved no bytes")
            else:
                check(not coll, f"{name}: a single rank recorded collectives")


def check_batch(d, exe):
    tok = d / "t.bin"
    tokens(tok)
    common = ["--tokens", str(tok), "--seq-len", "32", "--steps", "4", "--seed", "3"]
    runs = {
        "dp2_batch2": [exe, "--recipe", "debug_fsdp", "--ranks", "2", "--batch", "2"],
        "one_batch4": [exe, "--batch", "4"],
        "one_batch2_accum2": [exe, "--batch", "2", "--grad-accum", "2"],
        "dp2_global4": [exe, "--recipe", "debug_fsdp", "--ranks", "2", "--batch", "1",
                        "--training.global_batch_size", "4"],
    }
    got = {}
    for k, cmd in runs.items():
        m = d / f"{k}.jsonl"
        run(cmd + common + ["--metrics", str(m)])
        got[k] = losses(m)
    rel = lambda a, b: max(abs(x - y) / abs(y) for x, y in zip(a, b))
    check(len(got["dp2_batch2"]) == 4, "the metrics file does not have 4 steps")
    # Same data and math in another summation order: f32 rounding only (docs/recipes.md).
    check(rel(got["dp2_batch2"], got["one_batch4"]) < 1e-5,
          f"dp=2 --batch 2 differs from one rank --batch 4: {got['dp2_batch2']} vs {got['one_batch4']}")
    check(rel(got["dp2_global4"], got["one_batch4"]) < 1e-5,
          f"--training.global_batch_size 4 differs from one rank --batch 4: {got['dp2_global4']} vs {got['one_batch4']}")
    # Accumulation reads other windows (two of 2 x 32 tokens instead of one of 4 x 32).
    check(rel(got["dp2_batch2"], got["one_batch2_accum2"]) > 1e-3,
          f"dp=2 --batch 2 equals --grad-accum 2 --batch 2: {got['dp2_batch2']}")
    # --init-from under a recipe: each rank keeps its blocks of the weights one rank loads
    # (each rank reads its blocks' rows, a tensor at a time), FSDP's and FSDP x TP's alike.
    w = d / "w.safetensors"
    run([exe, "--batch", "4", "--steps", "2", "--tokens", str(tok), "--seq-len", "32", "--seed", "5",
         "--save-weights", str(w)])
    loaded = {
        "one": [exe, "--batch", "4"],
        "fsdp": [exe, "--recipe", "debug_fsdp", "--ranks", "2", "--batch", "2"],
        "2d": [exe, "--recipe", "debug_2d", "--ranks", "4", "--batch", "2"],
    }
    read = {}  # MiB of tensor data rank 0 read
    for k, cmd in loaded.items():
        m = d / f"init_from_{k}.jsonl"
        out = run(cmd + common + ["--init-from", str(w), "--metrics", str(m)])
        got["init_from_" + k] = losses(m)
        r = re.search(r"--init-from: rank 0 read ([0-9.]+) MiB", out)
        read[k] = float(r.group(1)) if r else None
    # a recipe's rank reads its blocks only: FSDP's rank 0 about half the file, FSDP 2 x TP 2's
    # about a quarter
    whole = w.stat().st_size / 2**20
    for k, share in (("fsdp", 0.5), ("2d", 0.25)):
        check(read[k] is not None and 0.8 * share * whole < read[k] < 1.2 * share * whole,
              f"--recipe debug_{k} --init-from: rank 0 read {read[k]} MiB of a {whole:.2f} MiB file, "
              f"not about {share:g} of it")
    check(rel(got["init_from_one"], got["one_batch4"]) > 1e-3,
          f"--init-from trained weights gives the losses of the seed's: {got['init_from_one']}")
    for k in ("fsdp", "2d"):
        check(rel(got["init_from_" + k], got["init_from_one"]) < 1e-5,
              f"--recipe debug_{k} --init-from differs from one rank's: {got['init_from_' + k]} vs "
              f"{got['init_from_one']}")


def check_cuda(d, exe, emulated, recipes, gpus=0, launcher=()):
    """`emulated` is train_llama_emulated, or with gpus > 0 exe itself on this machine's GPUs;
    `launcher` (mpiexec and its arguments, without the process count) runs recipes as MPI
    processes too."""
    tok = d / "t.bin"
    tokens(tok)
    common = ["--tokens", str(tok), "--batch", "2", "--seq-len", "64", "--steps", "3", "--seed", "5"]
    ck = lambda name: ["--checkpoint.folder", str(d / name), "--checkpoint.interval", "2"]
    cpu = run([exe, "--device", "cpu", "--metrics", str(d / "cpu.jsonl"), "--save-weights",
               str(d / "cpu.safetensors")] + common + ck("cpu_ck"))
    out = run([emulated, "--device", "cuda", "--metrics", str(d / "cuda.jsonl"), "--save-weights",
               str(d / "cuda.safetensors")] + common + ck("cuda_ck"))
    if gpus:
        print(out)
        check("CUDA emulation" not in out, f"--device cuda ran on the emulation, not a GPU:\n{out}")
    else:
        check("CUDA emulation" in out, f"--device cuda did not run on the emulated device:\n{out}")
    check("compute: f32" in out, f"--device cuda did not report f32 compute:\n{out}")
    a, b = losses(d / "cpu.jsonl"), losses(d / "cuda.jsonl")
    rel = lambda x, y: max(abs(p - q) / abs(q) for p, q in zip(x, y))
    check(len(a) == 3 and len(b) == 3, f"not 3 steps of metrics: {a} / {b}")
    # the GPU test's tolerance (tests/gpu/test_cuda_llama.cu): bf16's unit roundoff
    check(rel(b, a) < 2 ** -8, f"--device cuda's losses {b} differ from --device cpu's {a}")
    w_cpu, w_cuda = (d / "cpu.safetensors").read_bytes(), (d / "cuda.safetensors").read_bytes()
    check(len(w_cpu) == len(w_cuda) and len(w_cuda) > 1000000, "the weights saved from the device differ in size")
    # distributed checkpoints of the single rank (step 2 of 3): the GPU's resumes on the CPU and
    # the CPU's on the GPU, each step 3 as the uninterrupted runs'
    for saved, on, what in (("cuda_ck", [exe, "--device", "cpu"], "the CPU"),
                            ("cpu_ck", [emulated, "--device", "cuda"], "the GPU")):
        shutil.rmtree(d / saved / "step-3")
        res = run(on + ["--metrics", str(d / "resumed.jsonl")] + common + ck(saved))
        r = losses(d / "resumed.jsonl")
        check("resumed from" in res and "at step 2" in res and len(r) == 1 and rel(r, a[2:]) < 2 ** -8,
              f"{saved}'s step 2 resumed on {what}: step 3's loss {r}, the uninterrupted run's {a[2:]}:\n{res}")
    bf = run([emulated, "--device", "cuda", "--compute-dtype", "bf16", "--metrics", str(d / "bf16.jsonl")] + common)
    check("bf16 operands on the tensor cores" in bf, f"--compute-dtype bf16 did not say so:\n{bf}")
    c = losses(d / "bf16.jsonl")
    # bf16 operands: within 1% of f32 over a few steps (docs/training.md)
    check(len(c) == 3 and rel(c, a) < 1e-2, f"--compute-dtype bf16's losses {c} are not within 1% of f32's {a}")
    check("attention: tessera's tensor-core kernels" in bf, f"--compute-dtype bf16 did not name its attention:\n{bf}")
    check_cudnn_attention(d, emulated, common, a, gpus)
    del cpu
    check_gpu_refusal(d, emulated, [], "--device cuda")
    if not recipes:
        return
    check_gpu_refusal(d, emulated, ["--recipe", "debug_2d", "--ranks", "4"], "--device cuda --recipe debug_2d")
    # --recipe on GPUs: debug_2d (FSDP 2 x TP 2, sequence and loss parallel) on 4 emulated GPUs
    # over the emulated NCCL, against its 4 thread ranks on the CPU; on real GPUs, debug_fsdp
    # on as many as are visible (up to 4), and debug_2d on 4 ranks -- sharing the GPUs over
    # comm::cuda_staged where there are fewer (so too on the emulation's TESSERA_EMULATED_GPUS)
    runs = [("debug_2d", 4)] if not gpus else [("debug_fsdp", min(gpus, 4)), ("debug_2d", 4)]
    shared_gpus = gpus if gpus else int(os.environ.get("TESSERA_EMULATED_GPUS", "4"))
    for recipe, ranks in runs:
        rc = ["--recipe", recipe, "--ranks", str(ranks), "--tokens", str(tok), "--batch", "2", "--seq-len", "32",
              "--steps", "2", "--seed", "5"]
        run([exe] + rc + ["--metrics", str(d / "r_cpu.jsonl")])
        out = run([emulated, "--device", "cuda", "--metrics", str(d / "r_cuda.jsonl")] + rc)
        if gpus:
            print(out)
        shares = ranks > shared_gpus
        check(("staged through host memory (comm::cuda_staged)" in out) == shares,
              f"--device cuda --recipe {recipe} --ranks {ranks} on {shared_gpus} GPU(s) did not say whether its "
              f"ranks share them:\n{out}")
        a, b = losses(d / "r_cpu.jsonl"), losses(d / "r_cuda.jsonl")
        check(len(a) == 2 and len(b) == 2 and rel(b, a) < 2 ** -8,
              f"--device cuda --recipe {recipe} --ranks {ranks}'s losses {b} differ from the CPU's {a}:\n{out}")
        # bf16 operands on every rank: within 1% of f32's, as one GPU's (docs/training.md)
        out = run([emulated, "--device", "cuda", "--compute-dtype", "bf16", "--metrics", str(d / "r_bf16.jsonl")] + rc)
        c = losses(d / "r_bf16.jsonl")
        check("bf16 operands" in out and len(c) == 2 and rel(c, a) < 1e-2,
              f"--device cuda --compute-dtype bf16 --recipe {recipe}'s losses {c} are not within 1% of f32's {a}:\n{out}")
        # the same ranks as mpirun's processes: where a node has more processes than GPUs they
        # share them over comm::cuda_staged (MPI between them); the emulated NCCL connects the
        # threads of one process only, so on the emulation only the shared case runs
        if launcher and (gpus or ranks > shared_gpus):
            mpi = list(launcher) + ["-np", str(ranks), emulated, "--backend", "mpi", "--device", "cuda"]
            out = run(mpi + ["--metrics", str(d / "r_mpi.jsonl")] + rc)
            check(("staged through host memory (comm::cuda_staged)" in out) == shares,
                  f"mpirun -np {ranks} --device cuda --recipe {recipe} on {shared_gpus} GPU(s) a node did not say "
                  f"whether its processes share them:\n{out}")
            m = losses(d / "r_mpi.jsonl")
            check(len(m) == 2 and rel(m, a) < 2 ** -8,
                  f"mpirun -np {ranks} --device cuda --recipe {recipe}'s losses {m} differ from the CPU's {a}:\n{out}")
            if shares and not gpus:  # each process counts the node's processes on its GPU
                code, out = run_fails(mpi + ["--recipe", recipe, "--batch", "64", "--seq-len", "100000", "--metrics",
                                             str(d / "refused.jsonl"), "--tokens", str(d / "absent.bin")])
                check(code != 0 and f"on a GPU its {-(-ranks // shared_gpus)} ranks share" in out
                      and not (d / "refused.jsonl").exists(),
                      f"mpirun -np {ranks}: a step beyond the shared GPU was not refused naming its ranks "
                      f"(exit {code}):\n{out}")
                # each process on a GPU of its own, which it sees as its only one (CUDA_VISIBLE_DEVICES
                # a process, as srun --gpus-per-task=1 sets it): the GPUs' identities say they are not
                # shared, so the same step is refused for each GPU's one rank
                own = ['sh', '-c', 'CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK exec "$0" "$@"']
                code, out = run_fails(list(launcher) + ["-np", str(ranks)] + own +
                                      [emulated, "--backend", "mpi", "--device", "cuda", "--recipe", recipe,
                                       "--batch", "64", "--seq-len", "100000", "--tokens", str(d / "absent.bin")])
                check(code != 0 and "on each GPU (of which" in out and "ranks share" not in out,
                      f"mpirun -np {ranks}, a GPU a process: the step was not refused for each GPU's one rank "
                      f"(exit {code}):\n{out}")


def check_cudnn_attention(d, exe, common, f32, gpus):
    """--attention cudnn: cuDNN's fused attention trains within 1% of f32, as tessera's bf16
    attention does, where exe links it and cuDNN 9 is found; refused otherwise, naming why (the
    emulation never links it: refused there)"""
    m = d / "cudnn.jsonl"
    rc, out = run_fails([exe, "--device", "cuda", "--compute-dtype", "bf16", "--attention", "cudnn", "--metrics",
                         str(m)] + common)
    why = [w for w in ("built without cuDNN's attention", "cannot open cuDNN 9") if w in out]
    if rc != 0 and why and (gpus or why[0].startswith("built")):
        check(rc in (1, 2) and not m.exists() and ("tessera::cudnn" in out or "LD_LIBRARY_PATH" in out),
              f"--attention cudnn was refused without the fix named (exit {rc}):\n{out}")
        if gpus:
            print(f"--attention cudnn not run here: {out.strip().splitlines()[-1]}")
        return
    check(gpus > 0, f"--attention cudnn ran on the emulation, which has no cuDNN (exit {rc}):\n{out}")
    if gpus:
        print(out)
    c = losses(m) if rc == 0 else []
    check(rc == 0 and "attention: cuDNN's fused attention" in out and len(c) == 3 and
          max(abs(p - q) / abs(q) for p, q in zip(c, f32)) < 1e-2,
          f"--attention cudnn: exit {rc}, losses {c}, not within 1% of f32's {f32}:\n{out}")


def visible_gpus(exe):
    """How many GPUs --device cuda would use (0: none, the reason printed)."""
    try:
        p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
        n = sum(line.startswith("GPU ") for line in p.stdout.splitlines()) if p.returncode == 0 else 0
    except OSError:
        n = 0
    if n == 0:
        print(f"skipped: no GPU visible (nvidia-smi -L lists none); {exe} --device cuda needs one")
    return n


def main():
    what, exe, launcher = sys.argv[1], sys.argv[2], sys.argv[3:]
    with tempfile.TemporaryDirectory() as t:
        d = pathlib.Path(t)
        if what == "trace":
            check_trace(d, exe, launcher)
        elif what == "batch":
            check_batch(d, exe)
        elif what in ("cuda", "cuda_recipes"):
            check_cuda(d, exe, launcher[0], what == "cuda_recipes", launcher=launcher[1:])
        elif what == "gpu":
            gpus = visible_gpus(exe)
            if gpus == 0:
                sys.exit(77)
            check_cuda(d, exe, exe, True, gpus)
        else:
            sys.exit(f"unknown check '{what}'; use trace, batch, cuda, cuda_recipes or gpu")
    for f in fails:
        print("FAILED:", f)
    if fails:
        sys.exit(1)
    print(f"{what}: every check holds")


main()
