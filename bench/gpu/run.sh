#!/usr/bin/env bash
# Builds and runs every GPU test and benchmark of tessera (ctest label `gpu`) and writes
# their results as Markdown, then PyTorch's attention and GEMMs at the same shapes where the
# machine's python3 has PyTorch with CUDA (bench/gpu/torch_reference.py: a reference beside
# the benchmarks, which does not change the exit status). Run it first whenever a GPU is
# available (issue 17).
#
# Usage: bash bench/gpu/run.sh [results.md] [build folder]
#          builds here (bench/gpu/pack.sh --build: Release, g++, nvcc from /usr/local/cuda,
#          sm_90 unless TESSERA_GPU_ARCHS says otherwise; needs the project's dependencies,
#          which .ci/setup.sh installs), then runs what it packed
#        bash bench/gpu/run.sh --kit <archive> [results.md]
#          runs the programs of an archive bench/gpu/pack.sh built on another machine -- for
#          a GPU machine without the project's dependencies (its CUDA runtime, cuBLASLt and
#          NCCL are used: found under /usr/local/cuda*, /usr/lib, /opt, or Python's nvidia
#          packages)
#   results.md    where the Markdown goes (default: $OUT/gpu_results.md when $OUT is set,
#                 else <build folder>/gpu_results.md, ./gpu_results.md with --kit); written
#                 as the tests go to a temporary name, renamed when all have run
#   build folder  default build/gpu
# TESSERA_GPU_BUDGET_S: seconds for all the tests together (default: none); a test that would
# start with under 20 s left is reported "not run (time)", and each runs under the time left.
# TESSERA_GPU_SKIP: an extended regular expression (grep -E, whole name); the tests it
# matches are reported "not run (TESSERA_GPU_SKIP)" -- a call that reruns part of the kit,
# or leaves a long benchmark to another call.
# Exit status: 0 when every GPU test passed (or, without a GPU, reported itself skipped),
# 1 when one failed or did not run, 2 when the build (or the archive) failed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="/usr/local/cuda/bin:$PATH"
start=$(date +%s)
budget=${TESSERA_GPU_BUDGET_S:-}

if [ "${1:-}" != "--kit" ]; then
  # build here: bench/gpu/pack.sh builds the programs and packs them; then run that kit
  build=${2:-$root/build/gpu}
  out=${1:-${OUT:+$OUT/gpu_results.md}}
  out=${out:-$build/gpu_results.md}
  bash "$root/bench/gpu/pack.sh" --build "$build" "$build/gpu-kit.tar.xz" || exit 2
  set -- --kit "$build/gpu-kit.tar.xz" "$out"
fi
[ $# -ge 2 ] && [ -f "$2" ] || { echo "bench/gpu/run.sh: --kit needs an archive of bench/gpu/pack.sh (got '${2:-}')" >&2; exit 2; }
out=${3:-${OUT:+$OUT/gpu_results.md}}
out=${out:-$PWD/gpu_results.md}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xJf "$2" || { echo "bench/gpu/run.sh: cannot unpack $2" >&2; exit 2; }
kit="$work/kit"
# cuDNN 9 for cuDNN's attention (the programs open it when asked: TESSERA_ATTENTION=cudnn and
# the cuDNN rows; kernels/cuda/cudnn_attention.hpp): a Python package's (PyTorch's, the newer
# where both are) before the CUDA folders', first on the path, since cuDNN opens its parts by
# name
cudnn=""
for where in /usr/local/lib/python3* /usr/lib/python3* /opt /usr/local/cuda* /usr/lib/x86_64-linux-gnu; do
  d=$(find "$where" -name "libcudnn_graph.so.9" 2>/dev/null | head -1 || true)
  if [ -n "$d" ]; then cudnn=$(dirname "$d"); break; fi
done
libdirs=${cudnn:+:$cudnn}
# this machine's CUDA libraries (the runtime, cuBLASLt, NCCL, NVRTC for the cuDNN engines it
# compiles), matching its driver
for n in libcudart.so.13 libcublasLt.so.13 libnccl.so.2 libnvrtc.so.13; do
  d=$(find /usr/local/cuda* /usr/lib/x86_64-linux-gnu /usr/local/lib /opt /usr/lib/python3* -name "$n" 2>/dev/null | head -1 || true)
  if [ -n "$d" ]; then libdirs="$libdirs:$(dirname "$d")"; fi
done
# (PyTorch, run below, gets the caller's path: these folders may hold an older cuDNN than the
# one PyTorch bundles, which it then refuses -- seen on an H200 machine, cuDNN 9.14 vs 9.19)
caller_ld_path=${LD_LIBRARY_PATH-}
export LD_LIBRARY_PATH="$kit/lib$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
origin="archive $(basename "$2") ($(tr '\n' ' ' < "$kit/BUILD"))"
mkdir -p "$(dirname "$out")"

tmp="$out.tmp.$$"
{
  echo "# tessera on a GPU -- $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Programs: $origin; this machine's nvcc: $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo none); cuDNN: ${cudnn:-none found}."
  echo
  if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
    echo '```'
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    echo '```'
  else
    echo "No GPU visible (nvidia-smi found none): every test below reports itself skipped."
  fi
  echo
  echo "| test | result | seconds |"
  echo "|---|---|---|"
} > "$tmp"
status=0
details=""
export KIT="$kit"  # a script test's arguments name its script and programs under it (kit_tests.py)
while IFS=$'\037' read -r name program skip timeout args env; do
  exe="$kit/bin/$(basename "$program")"
  [ "$program" = python3 ] && exe=python3
  left=$timeout
  if [ -n "$budget" ]; then
    left=$(( budget - ($(date +%s) - start) ))
    [ "$left" -gt "$timeout" ] && left=$timeout
  fi
  if [ -n "${TESSERA_GPU_SKIP:-}" ] && grep -qxE -- "$TESSERA_GPU_SKIP" <<< "$name"; then
    printf '| %s | not run (TESSERA_GPU_SKIP) | 0 |\n' "$name" >> "$tmp"
    continue
  fi
  if [ "$left" -lt 20 ]; then
    printf '| %s | not run (time) | 0 |\n' "$name" >> "$tmp"
    status=1
    continue
  fi
  t0=$(date +%s%N)
  set +e
  missing=""
  [ "$exe" = python3 ] || missing=$(ldd "$exe" 2>&1 | grep "not found")
  # shellcheck disable=SC2086  # args are shell-quoted by kit_tests.py
  log=$(IFS=';'; env $env timeout "$left" bash -c "exec \"\$0\" $args" "$exe" 2>&1)
  rc=$?
  set -e
  secs=$(awk -v ns=$(( $(date +%s%N) - t0 )) 'BEGIN { printf "%.1f", ns / 1e9 }')
  if [ -n "$skip" ] && [ "$rc" -eq "$skip" ]; then result=skipped
  elif [ $rc -eq 0 ]; then result=passed
  elif [ $rc -eq 124 ]; then result="FAILED (timed out after $left s)"; status=1
  else result="FAILED (exit $rc)"; status=1; fi
  printf '| %s | %s | %s |\n' "$name" "$result" "$secs" >> "$tmp"
  details+=$'\n'"## $name ($result)"$'\n\n```\n'"${missing:+$missing$'\n'}$log"$'\n```\n'
  # what has run so far is kept where a cut-off run still returns it
  { cat "$tmp"; printf '%s\n' "$details"; } > "$tmp.partial"
done < "$kit/tests.tsv"
# PyTorch's kernels on the same shapes (bench/gpu/torch_reference.py), where this machine's
# python3 has PyTorch with CUDA: beside gpu.bench_kernels' tables, not a test of tessera (its
# result does not change the exit status)
ref="$kit/share/torch_reference.py"
left=600
[ -n "$budget" ] && left=$(( budget - ($(date +%s) - start) ))
if [ -f "$ref" ] && [ "$left" -ge 20 ]; then
  [ "$left" -gt 300 ] && left=300
  t0=$(date +%s%N)
  set +e
  log=$(LD_LIBRARY_PATH=$caller_ld_path timeout "$left" python3 "$ref" 2>&1)
  rc=$?
  set -e
  secs=$(awk -v ns=$(( $(date +%s%N) - t0 )) 'BEGIN { printf "%.1f", ns / 1e9 }')
  case $rc in
    0) result="ran (a reference)" ;;
    77) result=skipped ;;
    124) result="FAILED (timed out after $left s; a reference, not counted)" ;;
    *) result="FAILED (exit $rc; a reference, not counted)" ;;
  esac
  printf '| %s | %s | %s |\n' "torch.reference" "$result" "$secs" >> "$tmp"
  details+=$'\n'"## torch.reference ($result)"$'\n\n'"$log"$'\n'
elif [ -f "$ref" ]; then
  printf '| %s | not run (time) | 0 |\n' "torch.reference" >> "$tmp"
fi
printf '%s\n' "$details" >> "$tmp"
mv "$tmp" "$out"
rm -f "$tmp.partial"
echo "bench/gpu/run.sh: results in $out"
exit $status
