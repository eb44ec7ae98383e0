#!/usr/bin/env bash
# bench/gpu/pack.sh and run.sh --kit on the GPU programs of a build (no GPU needed): the
# archive holds every program of ctest's label gpu, the list of tests and OpenBLAS; unpacked
# elsewhere, every program starts from it and (without a GPU) reports itself skipped, and so
# does bench/gpu/torch_reference.py; TESSERA_GPU_SKIP leaves out the tests it names; a bad
# archive is refused with exit 2.
# Usage: test_gpu_kit.sh <source folder> <build folder>
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

bash "$src/bench/gpu/pack.sh" --from "$build" "$work/kit.tar.xz"
listing=$(tar -tJf "$work/kit.tar.xz")
tests=$(cd "$build" && ctest -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *//p')
[ -n "$tests" ] || fail "no test of label gpu in $build"
listed=$(tar -xJOf "$work/kit.tar.xz" kit/tests.tsv | cut -d$'\037' -f1)
for t in $tests; do
  grep -qx "$t" <<< "$listed" || fail "$t is not in the kit's tests.tsv"
done
for p in $(cd "$build" && ctest -L gpu --show-only=json-v1 | python3 "$src/bench/gpu/kit_tests.py" programs /dev/stdin); do
  grep -qx "kit/bin/$(basename "$p")" <<< "$listing" || fail "$(basename "$p") is not in the kit"
done
grep -q '^kit/lib/libopenblas' <<< "$listing" || fail "OpenBLAS is not in the kit"
grep -qx 'kit/share/torch_reference.py' <<< "$listing" || fail "bench/gpu/torch_reference.py is not in the kit"

if bash "$src/bench/gpu/run.sh" --kit "$work/missing.tar.xz" 2> "$work/err"; then fail "a missing archive was accepted"; fi
grep -q "needs an archive" "$work/err" || fail "no message for a missing archive: $(cat "$work/err")"

if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
  echo "a GPU is visible: the kit's programs are not run here (bench/gpu/run.sh --kit runs them)"
  echo "PASSED: packed"
  exit 0
fi
(cd "$work" && env -u LD_LIBRARY_PATH bash "$src/bench/gpu/run.sh" --kit kit.tar.xz "$work/results.md") || fail "run.sh --kit failed"
# one row per test, and PyTorch's reference (skipped here: no GPU, or no PyTorch)
rows=$(grep -c '^| [a-z]*\.[a-z_0-9]* | ' "$work/results.md")
[ "$rows" -eq $(( $(wc -w <<< "$tests") + 1 )) ] || fail "$rows result rows for $(wc -w <<< "$tests") tests and torch.reference"
grep -q '^| torch.reference | skipped | ' "$work/results.md" || fail "no torch.reference row, or not skipped"
if grep '^| [a-z]*\.[a-z_0-9]* | ' "$work/results.md" | grep -v '| skipped |'; then fail "a test did not report itself skipped without a GPU"; fi
grep -q "not found" "$work/results.md" && fail "a program's library was not found: $(grep 'not found' "$work/results.md")"
# PyTorch runs with the caller's library path, not the kit's (whose CUDA folders may hold a
# cuDNN older than PyTorch's own, which PyTorch refuses): a stand-in python3 reports it
mkdir -p "$work/fake"
printf '#!/bin/sh\nprintf "%%s" "$LD_LIBRARY_PATH" > "%s/seen"\nexit 77\n' "$work" > "$work/fake/python3"
chmod +x "$work/fake/python3"
# ... and TESSERA_GPU_SKIP leaves out the tests it names whole (gpu.cuda_kernels), not those it
# only begins (gpu.cuda_kernels matches no other test's whole name)
(cd "$work" && PATH="$work/fake:$PATH" LD_LIBRARY_PATH=/callers/own TESSERA_GPU_SKIP='gpu\.cuda_kernels|gpu\.bench' \
  bash "$src/bench/gpu/run.sh" --kit kit.tar.xz "$work/again.md") ||
  fail "run.sh --kit failed with a stand-in python3"
[ "$(cat "$work/seen")" = /callers/own ] || fail "PyTorch's reference ran with LD_LIBRARY_PATH '$(cat "$work/seen")', not the caller's"
grep -q '^| gpu.cuda_kernels | not run (TESSERA_GPU_SKIP) | ' "$work/again.md" || fail "TESSERA_GPU_SKIP did not leave gpu.cuda_kernels out"
skipped=$(grep -c '| not run (TESSERA_GPU_SKIP) |' "$work/again.md")
[ "$skipped" -eq 1 ] || fail "TESSERA_GPU_SKIP left out $skipped tests, not 1 (a regex matches whole names)"
echo "PASSED: $(wc -w <<< "$tests") tests packed, unpacked and skipped"
