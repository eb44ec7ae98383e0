#!/bin/bash
# The Float8 numerics comparison of docs/performance.md ("Float8"): 300 steps of the debug
# model on the fortunes with f32, bf16 mixed precision, Float8 tensorwise (with FP8
# all-gather) and Float8 rowwise, one rank each, then the table and the plot.
#   bash bench/train/float8_curves.sh BUILD_DIR OUT_DIR [steps=300]
set -euo pipefail
build=${1:?usage: float8_curves.sh BUILD_DIR OUT_DIR [steps]}
out=${2:?usage: float8_curves.sh BUILD_DIR OUT_DIR [steps]}
steps=${3:-300}
mkdir -p "$out"
for r in debug_fsdp debug_fsdp_bf16 debug_fsdp_float8_tw debug_fsdp_float8; do
  "$build/examples/train/train_llama" --recipe "$r" --ranks 1 --steps "$steps" --batch 4 --seq-len 128 --seed 0 \
    --metrics "$out/$r.jsonl" > "$out/$r.log"
done
python3 "$(dirname "$0")/float8_curves.py" "$out" "$out/float8_curves.svg"
