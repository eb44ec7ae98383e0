#!/usr/bin/env bash
# Runs tessera's kernel benchmarks and the PyTorch eager equivalents back to back (one
# session, same machine state), printing medians. Usage, from the repository root after
# building bench_kernels in BUILD (default build-gcc):
#   bash bench/kernels/side_by_side.sh [BUILD] [THREADS]     (THREADS defaults to 2)
set -euo pipefail
build=${1:-build-gcc}
export TESSERA_NUM_THREADS=${2:-2}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}  # OpenBLAS 0.3.21 misdetects this CPU
echo "== tessera (OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE, $TESSERA_NUM_THREADS threads), median of 5"
"$build/bench/kernels/bench_kernels" --benchmark_repetitions=5 --benchmark_min_time=0.2 \
  --benchmark_report_aggregates_only=true 2>&1 | grep -E "^blas_core|^threads|_median"
echo "== PyTorch eager (same OpenBLAS), median of 5"
/usr/bin/python3 "$(dirname "$0")/torch_kernels.py" "$TESSERA_NUM_THREADS"
