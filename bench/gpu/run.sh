#!/usr/bin/env bash
# Builds and runs every GPU test and benchmark of tessera (ctest label `gpu`) and writes
# their results as Markdown. Run it first whenever a GPU is available (issue 17).
#
# Usage: bash bench/gpu/run.sh [results.md] [build folder]
#   results.md    where the Markdown goes (default: $OUT/gpu_results.md when $OUT is set,
#                 else build/gpu/gpu_results.md); written to a temporary name, then renamed
#   build folder  default build/gpu (Release, g++, nvcc from /usr/local/cuda)
# Exit status: 0 when every GPU test passed (or, without a GPU, reported itself skipped),
# 1 when one failed, 2 when the build failed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${2:-$root/build/gpu}
out=${1:-${OUT:+$OUT/gpu_results.md}}
out=${out:-$build/gpu_results.md}
mkdir -p "$(dirname "$out")" "$build"
export PATH="/usr/local/cuda/bin:$PATH"

if ! cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_BENCH=OFF \
       -DTESSERA_BUILD_EXAMPLES=OFF > "$build/configure.log" 2>&1; then
  echo "bench/gpu/run.sh: configure failed; see $build/configure.log" >&2
  exit 2
fi
targets=$(cd "$build" && ctest -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *//p')
# the executables behind the gpu tests (test names are <area>.<name>; targets test_<...>)
build_targets="test_cuda_kernels test_cuda_float8 test_cuda_llama bench_gpu_kernels bench_gpu_llama"
grep -q "^gpu.cuda_recipes$" <<< "$targets" && build_targets="$build_targets test_cuda_recipes"
grep -q '^comm.nccl$' <<< "$targets" && build_targets="$build_targets test_comm_nccl"
if ! cmake --build "$build" -j "$(nproc)" --target $build_targets > "$build/build.log" 2>&1; then
  echo "bench/gpu/run.sh: build failed; see $build/build.log" >&2
  tail -20 "$build/build.log" >&2
  exit 2
fi

tmp="$out.tmp.$$"
{
  echo "# tessera on a GPU -- $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Commit \`$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)\`; $(nvcc --version | tail -1)."
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
for t in $targets; do
  t0=$(date +%s%N)
  set +e
  log=$(cd "$build" && ctest -R "^${t//./\\.}\$" --verbose --timeout 600 2>&1)
  rc=$?
  set -e
  secs=$(awk -v ns=$(( $(date +%s%N) - t0 )) 'BEGIN { printf "%.1f", ns / 1e9 }')
  if grep -q "Skipped\|\*\*\*Not Run" <<< "$log"; then result=skipped
  elif [ $rc -eq 0 ]; then result=passed
  else result=FAILED; status=1; fi
  printf '| %s | %s | %s |\n' "$t" "$result" "$secs" >> "$tmp"
  details+=$'\n'"## $t ($result)"$'\n\n```\n'"$log"$'\n```\n'
done
printf '%s\n' "$details" >> "$tmp"
mv "$tmp" "$out"
echo "bench/gpu/run.sh: results in $out"
exit $status
