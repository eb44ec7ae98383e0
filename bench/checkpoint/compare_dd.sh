#!/usr/bin/env bash
# bench_checkpoint next to dd on the same disk (docs/performance.md, "Checkpoints").
#   bash bench/checkpoint/compare_dd.sh BUILD_DIR FOLDER
set -euo pipefail
build=${1:-build/gcc}
folder=${2:-/tmp/tessera_bench_ckpt}
mkdir -p "$folder"
for fsync in 0 1; do
  "$build/bench/checkpoint/bench_checkpoint" "$folder/run" debug 2 5 $fsync
  "$build/bench/checkpoint/bench_checkpoint" "$folder/run" large 2 3 $fsync
done
echo "dd, 256 MiB in 1 MiB blocks (page cache; then with conv=fdatasync):"
dd if=/dev/zero of="$folder/dd.bin" bs=1M count=256 2>&1 | tail -1
dd if=/dev/zero of="$folder/dd.bin" bs=1M count=256 conv=fdatasync 2>&1 | tail -1
rm -rf "$folder"
