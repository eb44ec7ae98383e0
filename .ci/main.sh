#!/usr/bin/env bash
# tessera's main job: installs what is missing, builds train_llama, and trains TorchTitan's
# debug model with the debug_4d recipe (pipeline pp=2 x FSDP dp=2 x context parallel cp=2 x
# TP tp=2 with sequence and loss parallel) on 16 in-process ranks, one progress line per step. Extra arguments go to
# train_llama (e.g. --steps 50 --metrics m.jsonl, or --config FILE.toml).
# `main.sh --configure-only DIR` configures into DIR and stops (the test package.main_configure:
# this configuration must generate wherever the tests run, CUDA toolkit or not).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
configure=(-DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF)
if [ "${1:-}" = --configure-only ]; then
  if [ -z "${2:-}" ]; then echo "main.sh: --configure-only needs a build folder" >&2; exit 2; fi
  exec cmake -S "$root" -B "$2" "${configure[@]}"
fi
bash "$root/.ci/setup.sh"
dir="$root/build/main"
cmake -S "$root" -B "$dir" "${configure[@]}" >/dev/null
cmake --build "$dir" -j "$(nproc)" --target train_llama
exec "$dir/examples/train/train_llama" --recipe debug_4d --steps 20 --batch 4 --seq-len 128 "$@"
