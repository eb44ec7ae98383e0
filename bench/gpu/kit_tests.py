#!/usr/bin/env python3
"""The GPU tests of a build, from `ctest -L gpu --show-only=json-v1`, for bench/gpu/pack.sh.

  kit_tests.py programs <json>   the executables behind the tests, one per line
  kit_tests.py list <json>       one line per test, fields separated by the unit separator (0x1f):
                                 name, program (its path), skip code, timeout (s), arguments
                                 (shell-quoted), environment (NAME=value;...)

Tests come in the order the GPU machine should run them: the kernel checks first (fast, and
what the rest builds on), then the model, NCCL, the recipes, and the benchmarks last, so that
a run cut short by its time limit has the checks.
"""
import json
import shlex
import sys

ORDER = ["gpu.cuda_kernels", "gpu.cuda_attention", "gpu.cuda_float8", "gpu.cuda_llama", "comm.nccl", "gpu.cuda_recipes",
         "gpu.bench_kernels", "gpu.bench_llama"]


def props(test):
    return {p["name"]: p["value"] for p in test.get("properties", [])}


def main(argv):
    if len(argv) != 3 or argv[1] not in ("programs", "list"):
        sys.exit("usage: kit_tests.py programs|list <ctest json-v1 file>")
    with open(argv[2]) as f:
        tests = json.load(f).get("tests", [])
    unbuilt = [t["name"] for t in tests if not t.get("command")]
    if unbuilt:  # ctest names a test's program only once it is built
        sys.exit("kit_tests.py: no program built for " + ", ".join(unbuilt) +
                 " (build the target tessera_gpu_programs first)")
    rank = {n: i for i, n in enumerate(ORDER)}
    tests.sort(key=lambda t: (rank.get(t["name"], len(ORDER)), t["name"]))
    if argv[1] == "programs":
        for p in dict.fromkeys(t["command"][0] for t in tests):
            print(p)
        return
    for t in tests:
        p = props(t)
        env = p.get("ENVIRONMENT", [])
        print("\x1f".join([t["name"], t["command"][0], str(p.get("SKIP_RETURN_CODE", "")),
                         str(int(float(p.get("TIMEOUT", 600)))), shlex.join(t["command"][1:]),
                         ";".join(env if isinstance(env, list) else [env])]))


if __name__ == "__main__":
    main(sys.argv)
