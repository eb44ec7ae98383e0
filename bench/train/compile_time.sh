#!/usr/bin/env bash
# Compile time of the train_llama translation unit (examples/train/train_llama.cpp, the
# largest user of the model, the parallel runtime and every shipped recipe), for one or
# more checkouts side by side: the checkouts are compiled in turn, ROUNDS times, and the
# median wall and CPU (user + sys) seconds are printed per checkout.
#   bash bench/train/compile_time.sh [--rounds N] [--cxx g++] [--tu FILE] ROOT [ROOT ...]
# --tu: another translation unit (a path inside each ROOT), e.g. bench/train/recipe_3d_tu.cpp
# (one 3-D pipeline recipe).
# Example (before / after a change): git worktree add /tmp/base <commit>;
#   bash bench/train/compile_time.sh --rounds 3 /tmp/base .
set -euo pipefail
rounds=3
cxx=g++
tu=examples/train/train_llama.cpp
roots=()
while (($#)); do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --cxx) cxx="$2"; shift 2 ;;
    --tu) tu="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    -*) echo "compile_time.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) roots+=("$1"); shift ;;
  esac
done
((${#roots[@]})) || { echo "compile_time.sh: give at least one checkout (see --help)" >&2; exit 2; }
flags=(-std=gnu++20 -O3 -DNDEBUG -march=native -DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1
       -DTESSERA_HAS_MPI=1 -DTESSERA_HAS_OPENBLAS=1 -DTESSERA_HAS_SENTENCEPIECE=1 -DTESSERA_HAS_TOMLPLUSPLUS=1
       -isystem /usr/include/x86_64-linux-gnu/openblas-pthread
       -isystem /usr/lib/x86_64-linux-gnu/openmpi/include -isystem /usr/lib/x86_64-linux-gnu/openmpi/include/openmpi)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A wall cpu
for ((r = 0; r < rounds; ++r)); do
  for i in "${!roots[@]}"; do
    root=$(cd "${roots[$i]}" && pwd)
    /usr/bin/time -f "%e %U %S" -o "$out/t" "$cxx" "${flags[@]}" -I"$root/include" -c \
      "$root/$tu" -o "$out/o.o"
    read -r w u s < "$out/t"
    wall[$i]+="$w "
    cpu[$i]+="$(python3 -c "print($u + $s)") "
  done
done
median() { python3 -c "import statistics,sys; print('%.1f' % statistics.median(map(float, sys.argv[1:])))" "$@"; }
printf "%-40s %10s %10s  (%s rounds, %s, load %s)\n" checkout "wall s" "cpu s" "$rounds" "$cxx" "$(cut -d' ' -f1 /proc/loadavg)"
for i in "${!roots[@]}"; do
  # shellcheck disable=SC2086
  printf "%-40s %10s %10s\n" "${roots[$i]}" "$(median ${wall[$i]})" "$(median ${cpu[$i]})"
done
