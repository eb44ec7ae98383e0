#!/usr/bin/env bash
# tessera's main job: installs what is missing, builds train_llama, and trains TorchTitan's
# debug model with the debug_4d recipe (pipeline pp=2 x FSDP dp=2 x context parallel cp=2 x
# TP tp=2 with sequence and loss parallel) on 16 in-process ranks, one progress line per step. Extra arguments go to
# train_llama (e.g. --steps 50 --metrics m.jsonl, or --config FILE.toml).
# `main.sh --configure-only DIR` configures into DIR and stops (the test package.main_configure:
# this configuration must generate wherever the tests run, CUDA toolkit or not).
# The CUDA trainer (`--device cuda`: four nvcc units and cuDNN's attention unit, 857 s of
# compiler CPU time at Release for sm_80 and sm_90 on one machine -- over 7 minutes on 2 cores; the job
# itself takes seconds) is built only where a GPU is visible: the job trains on CPU ranks either
# way. TESSERA_MAIN_CUDA=ON builds it without a GPU (a machine that builds for others), OFF
# leaves it out with one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cuda=${TESSERA_MAIN_CUDA:-}
if [ -z "$cuda" ]; then
  # not `nvidia-smi -L | grep -q`: under pipefail, grep leaving early fails the pipe (SIGPIPE)
  gpus=$(nvidia-smi -L 2>/dev/null || true)
  if [[ "$gpus" == *"GPU "* ]]; then cuda=ON; else cuda=OFF; fi
fi
case "$cuda" in
  ON | OFF) ;;
  *) echo "main.sh: TESSERA_MAIN_CUDA is '$cuda'; give ON (build train_llama --device cuda) or OFF" >&2; exit 2 ;;
esac
configure=(-DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF
           "-DTESSERA_BUILD_CUDA_UNITS=$cuda")
if [ "${1:-}" = --configure-only ]; then
  if [ -z "${2:-}" ]; then echo "main.sh: --configure-only needs a build folder" >&2; exit 2; fi
  exec cmake -S "$root" -B "$2" "${configure[@]}"
fi
bash "$root/.ci/setup.sh"
if [ "$cuda" = OFF ] && [ -z "${TESSERA_MAIN_CUDA:-}" ]; then
  echo "main.sh: no GPU visible (nvidia-smi); train_llama is built without --device cuda" \
       "(TESSERA_MAIN_CUDA=ON builds it anyway)"
fi
dir="$root/build/main"
cmake -S "$root" -B "$dir" "${configure[@]}" >/dev/null
cmake --build "$dir" -j "$(nproc)" --target train_llama
exec "$dir/examples/train/train_llama" --recipe debug_4d --steps 20 --batch 4 --seq-len 128 "$@"
