#!/usr/bin/env bash
# tessera's main job. Installs what is missing, builds the examples, and runs the plan
# explorer (until training lands). Extra arguments go to tessera-plan; without any it
# plans the transition of a 1024 x 4096 bf16 tensor on a dp=2 x tp=4 mesh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/.ci/setup.sh"
dir="$root/build/main"
cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF >/dev/null
cmake --build "$dir" -j "$(nproc)" --target tessera-plan
if (($#)); then
  exec "$dir/examples/plan/tessera-plan" "$@"
fi
exec "$dir/examples/plan/tessera-plan" --mesh dp=2,tp=4 --from 'S(0),R' --to 'R,S(1)' --shape 1024,4096 --dtype bf16
