#!/usr/bin/env bash
# Fuzzes each harness of tests/fuzz for a bounded time on top of its corpus.
# Usage: bash tests/fuzz/run_fuzzers.sh [-j N] BUILD_DIR SECONDS [HARNESS...]
#   -j N:      fuzz N harnesses at a time (default 1; each uses one core);
#   BUILD_DIR: a build configured with -DTESSERA_BUILD_FUZZERS=ON, tessera_fuzzers built and
#              `ctest -L fuzz` run once (it writes the seed corpora);
#   SECONDS:   per harness (-max_total_time); HARNESS: json safetensors ... (default: all).
# New inputs that add coverage go to BUILD_DIR/tests/fuzz/corpus/<harness>; a crash is
# saved as BUILD_DIR/tests/fuzz/findings/<harness>/crash-* and fails the script (exit 1).
# Exit 2: bad arguments. TESSERA_FUZZ_SEED=N fixes libFuzzer's seed (-seed=N): the inputs
# tried are then the same sequence on every run (CI uses 1, so a CI run explores what the
# same command explored here; only a faster machine goes further along it).
set -uo pipefail
par=1
if [ "${1:-}" = -j ]; then
  if ! [[ "${2:-}" =~ ^[1-9][0-9]*$ ]]; then echo "run_fuzzers.sh: -j needs a positive number" >&2; exit 2; fi
  par=$2
  shift 2
fi
if [ $# -lt 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]]; then
  echo "usage: run_fuzzers.sh [-j N] BUILD_DIR SECONDS [HARNESS...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd) || exit 2
secs=$2
shift 2
src=$(cd "$(dirname "$0")" && pwd)
all="json safetensors hf_index token_file flight layout schedule_csv checkpoint toml_config link_profile"
harnesses=${*:-$all}
fuzz_one() {  # fuzz_one HARNESS: fuzzes it, prints one line (and the log's tail on a finding)
  local h=$1 exe="$build/tests/fuzz/fuzz_$1"
  local corpus="$build/tests/fuzz/corpus/$h" findings="$build/tests/fuzz/findings/$h"
  mkdir -p "$corpus" "$findings"
  local extra=() d
  for d in "$src/seeds/$h" "$src/reproducers/$h"; do [ -d "$d" ] && extra+=("$d"); done
  local log="$findings/fuzz.log"
  local seed=()
  [ -n "${TESSERA_FUZZ_SEED:-}" ] && seed=(-seed="$TESSERA_FUZZ_SEED")
  "$exe" "${seed[@]}" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$findings/" "$corpus" "${extra[@]}" >"$log" 2>&1
  local rc=$?
  local runs
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  if [ $rc -eq 0 ]; then
    echo "fuzz_$h: ${runs:-?} executions in ${secs} s, nothing found"
  else
    echo "fuzz_$h: FOUND a problem (exit $rc); see $log and $findings/"
    tail -30 "$log"
    return 1
  fi
}

selected=()
for h in $harnesses; do
  if [ ! -x "$build/tests/fuzz/fuzz_$h" ]; then
    if [ "$h" = toml_config ] && [ $# -eq 0 ]; then continue; fi  # built only with toml++
    echo "run_fuzzers.sh: no $build/tests/fuzz/fuzz_$h; build the target tessera_fuzzers first" >&2
    exit 2
  fi
  selected+=("$h")
done
status_dir=$(mktemp -d)
trap 'rm -rf "$status_dir"' EXIT
for h in "${selected[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do wait -n || true; done
  (fuzz_one "$h" || touch "$status_dir/$h") &
done
wait
if [ -n "$(ls -A "$status_dir")" ]; then exit 1; fi
exit 0
