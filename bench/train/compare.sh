#!/bin/sh
# Side by side: tessera's training step (bench_train_step) and PyTorch eager
# (torch_train_step.py), same model, batch and threads, alternated ROUNDS times so that
# both see the same machine load. Prints every measurement, then medians and the ratio.
#   bench/train/compare.sh BUILD_DIR [ROUNDS=3] [BATCH=8] [SEQ=256] [THREADS=2]
set -eu
build=${1:?usage: compare.sh BUILD_DIR [ROUNDS] [BATCH] [SEQ] [THREADS]}
rounds=${2:-3}; batch=${3:-8}; seq=${4:-256}; threads=${5:-2}
here=$(dirname "$0")
# Debian's OpenBLAS misdetects this Xeon and falls back to generic SSE3 kernels; give both
# sides the same, native ones (PyTorch uses the same library). Override by exporting it.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -q avx512f /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=SkylakeX
fi
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, $(date -u +%H:%M) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
out=$(mktemp -d)
i=0
while [ "$i" -lt "$rounds" ]; do
  TESSERA_NUM_THREADS=$threads "$build/bench/train/bench_train_step" --batch="$batch" --seq-len="$seq" \
    --benchmark_filter='BM_train_step' --benchmark_min_time=10 --benchmark_format=json \
    > "$out/tessera_$i.json"
  /usr/bin/python3 "$here/torch_train_step.py" --batch "$batch" --seq-len "$seq" --threads "$threads" \
    --steps 5 --warmup 1 > "$out/torch_$i.json"
  i=$((i + 1))
done
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
tt, pt, fr = [], [], []
for i in range(n):
    b = [x for x in json.load(open(f"{out}/tessera_{i}.json"))["benchmarks"] if x["name"].startswith("BM_train_step")][0]
    p = json.load(open(f"{out}/torch_{i}.json"))
    tt.append(b["tokens/s"]); pt.append(p["tokens_per_s"])
    fr.append(b["frac_of_sgemm_peak"])
    print(f"round {i}: tessera {b['tokens/s']:.0f} tok/s ({b['model_GFLOP/s']:.1f} GFLOP/s of "
          f"sgemm, median fraction per step {b['frac_of_sgemm_peak']:.2f}), "
          f"pytorch eager {p['tokens_per_s']:.0f} tok/s")
mt, mp = statistics.median(tt), statistics.median(pt)
print(f"median: tessera {mt:.0f} tok/s, pytorch eager {mp:.0f} tok/s, ratio {mt/mp:.2f}x, "
      f"fraction of sgemm peak {statistics.median(fr):.2f}")
PY
rm -rf "$out"
