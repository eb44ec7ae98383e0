#!/usr/bin/env bash
# Per-step time of each shipped recipe against one rank on the same global batch
# (debugmodel, global batch 8 x seq 128, threads backend). Medians of steps 2..N from the
# JSONL metrics (step 1 includes first-touch allocation). Usage:
#   bash bench/train/compare_recipes.sh build/gcc [steps]
set -euo pipefail
build=${1:-build/gcc}
steps=${2:-12}
exe="$build/examples/train/train_llama"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
run() {  # name, args...
  local name=$1; shift
  "$exe" --steps "$steps" --seq-len 128 --metrics "$tmp/$name.jsonl" "$@" > /dev/null 2>&1
  python3 - "$tmp/$name.jsonl" "$name" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
tps = statistics.median(r["tokens_per_s"] for r in rows[1:])
print(f"{sys.argv[2]:<22} median step {8 * 128 / tps * 1e3:8.1f} ms   {tps:8.0f} tokens/s")
PY
}
run "one rank" --batch 8
run "debug_fsdp (2 ranks)" --recipe debug_fsdp --ranks 2 --batch 4
run "debug_hsdp (4 ranks)" --recipe debug_hsdp --ranks 4 --batch 2
run "debug_tp (2 ranks)" --recipe debug_tp --batch 8
run "debug_2d (4 ranks)" --recipe debug_2d --batch 4
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
