#!/usr/bin/env python3
"""The GPU tests of a build, from `ctest -L gpu --show-only=json-v1`, for bench/gpu/pack.sh.

  kit_tests.py programs <json>   the executables behind the tests, one per line
  kit_tests.py scripts <json>    the Python scripts behind the tests, one per line
  kit_tests.py list <json>       one line per test, fields separated by the unit separator (0x1f):
                                 name, program (its path; "python3" for a script), skip code,
                                 timeout (s), arguments (shell-quoted), environment
                                 (NAME=value;...)

A test whose command starts with a Python interpreter (gpu.train_llama) runs a script on
programs named in its arguments: the kit ships the script in share/ and the programs in bin/,
and its arguments name them as "$KIT/share/<script>" and "$KIT/bin/<program>" (run.sh sets
KIT to the unpacked kit).

Tests come in the order the GPU machine should run them: the kernel checks first (fast, and
what the rest builds on), then the model, NCCL, the recipes, and the benchmarks last, so that
a run cut short by its time limit has the checks.
"""
import json
import os
import shlex
import sys

ORDER = ["gpu.cuda_kernels", "gpu.cuda_attention", "gpu.cuda_float8", "gpu.cuda_llama", "comm.nccl", "gpu.cuda_recipes",
         "gpu.train_llama", "gpu.bench_kernels", "gpu.bench_llama", "gpu.bench_transitions"]


def props(test):
    return {p["name"]: p["value"] for p in test.get("properties", [])}


def is_script(test):
    return os.path.basename(test["command"][0]).startswith("python")


def is_program(arg):
    return os.path.isabs(arg) and os.path.isfile(arg) and os.access(arg, os.X_OK)


def programs(test):
    """The executables a test runs: its command's, or those a script is given."""
    if not is_script(test):
        return [test["command"][0]]
    return [a for a in test["command"][2:] if is_program(a)]


def arguments(test):
    """The test's arguments as run.sh passes them (shell words)."""
    if not is_script(test):
        return shlex.join(test["command"][1:])
    words = ['"$KIT/share/%s"' % os.path.basename(test["command"][1])]
    for a in test["command"][2:]:
        words.append('"$KIT/bin/%s"' % os.path.basename(a) if is_program(a) else shlex.quote(a))
    return " ".join(words)


def main(argv):
    if len(argv) != 3 or argv[1] not in ("programs", "scripts", "list"):
        sys.exit("usage: kit_tests.py programs|scripts|list <ctest json-v1 file>")
    with open(argv[2]) as f:
        tests = json.load(f).get("tests", [])
    unbuilt = [t["name"] for t in tests if not t.get("command")]
    if unbuilt:  # ctest names a test's program only once it is built
        sys.exit("kit_tests.py: no program built for " + ", ".join(unbuilt) +
                 " (build the target tessera_gpu_programs first)")
    rank = {n: i for i, n in enumerate(ORDER)}
    tests.sort(key=lambda t: (rank.get(t["name"], len(ORDER)), t["name"]))
    if argv[1] == "programs":
        for p in dict.fromkeys(p for t in tests for p in programs(t)):
            print(p)
        return
    if argv[1] == "scripts":
        for p in dict.fromkeys(t["command"][1] for t in tests if is_script(t)):
            print(p)
        return
    for t in tests:
        p = props(t)
        env = p.get("ENVIRONMENT", [])
        print("\x1f".join([t["name"], "python3" if is_script(t) else t["command"][0], str(p.get("SKIP_RETURN_CODE", "")),
                         str(int(float(p.get("TIMEOUT", 600)))), arguments(t),
                         ";".join(env if isinstance(env, list) else [env])]))


if __name__ == "__main__":
    main(sys.argv)
