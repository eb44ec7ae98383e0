#!/usr/bin/env bash
# Builds and runs every test of tessera: g++ and clang builds, each running all ctest tests.
# Usage: bash .ci/test.sh            (from anywhere; installs what is missing first)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/.ci/setup.sh"
jobs=$(nproc)
status=0
for cc in gcc clang; do
  if [ "$cc" = gcc ]; then cxx=g++; else cxx=clang++; fi
  dir="$root/build/$cc"
  echo "== tessera: configure and build with $cxx"
  cmake -S "$root" -B "$dir" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$dir" -j "$jobs"
  echo "== tessera: tests ($cxx)"
  (cd "$dir" && ctest -j "$jobs" --output-on-failure --timeout 600) || status=1
done
exit $status
