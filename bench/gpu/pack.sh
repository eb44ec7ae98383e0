#!/usr/bin/env bash
# Builds every GPU test and benchmark of tessera (ctest label `gpu`) on THIS machine -- no GPU
# needed, only the CUDA toolkit and the project's dependencies -- and packs the programs, the
# list of tests (command, skip code, timeout) and the shared libraries they need that a GPU
# machine's CUDA image may lack (OpenBLAS, libgfortran, ...) into one archive. A GPU machine
# that has the CUDA runtime, cuBLASLt and NCCL but not the project's dependencies (doctest,
# OpenBLAS, CMake's packages) then runs them without building anything:
#
#   bash bench/gpu/pack.sh                           # here: build/gpu-kit.tar.xz
#   bash bench/gpu/run.sh --kit build/gpu-kit.tar.xz # there: results as Markdown
#
# Usage: bash bench/gpu/pack.sh [--from <build folder> | --build <build folder>] [archive]
#   --from        pack the programs of a build folder that has them built (the g++ build of
#                 .ci/test.sh, say) instead of configuring and building one
#   --build       the folder to configure and build in (default build/gpu-pack)
#   archive       default build/gpu-kit.tar.xz (written to a temporary name, then renamed)
# TESSERA_GPU_ARCHS (default 90: the H100 and H200) names the architectures build/gpu-pack
# compiles. Exit status: 0 on success, 2 when the configure or the build failed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
from="" build=$root/build/gpu-pack
if [ "${1:-}" = "--from" ]; then
  [ $# -ge 2 ] && [ -d "$2" ] || { echo "bench/gpu/pack.sh: --from needs a build folder (got '${2:-}')" >&2; exit 2; }
  from=$(cd "$2" && pwd) build=$from
  shift 2
elif [ "${1:-}" = "--build" ]; then
  [ $# -ge 2 ] || { echo "bench/gpu/pack.sh: --build needs a folder" >&2; exit 2; }
  build=$2
  shift 2
fi
archive=${1:-$root/build/gpu-kit.tar.xz}
archs=${TESSERA_GPU_ARCHS:-90}
mkdir -p "$build" "$(dirname "$archive")"
export PATH="/usr/local/cuda/bin:$PATH"

if [ -z "$from" ]; then
  # examples on: train_llama (gpu.train_llama) is one of the GPU programs; the target
  # tessera_gpu_programs builds only those
  if ! cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$archs" \
         -DTESSERA_BUILD_BENCH=OFF -DTESSERA_BUILD_EXAMPLES=ON -DTESSERA_BUILD_CUDA_UNITS=ON \
         > "$build/configure.log" 2>&1; then
    echo "bench/gpu/pack.sh: configure failed; see $build/configure.log" >&2
    exit 2
  fi
  echo "bench/gpu/pack.sh: building the GPU programs for sm_${archs// /, sm_} in $build"
  if ! cmake --build "$build" -j "$(nproc)" --target tessera_gpu_programs > "$build/build.log" 2>&1; then
    echo "bench/gpu/pack.sh: build failed; see $build/build.log (no target tessera_gpu_programs: the CUDA toolkit was not found)" >&2
    tail -20 "$build/build.log" >&2
    exit 2
  fi
fi
# the tests of label gpu, as ctest runs them: name, program, arguments, skip code, timeout
# (ctest names a test's program only once it is built)
tests_json="$build/gpu_tests.json"
(cd "$build" && ctest -L gpu --show-only=json-v1) > "$tests_json"
programs=$(python3 "$root/bench/gpu/kit_tests.py" programs "$tests_json") || exit 2
if [ -z "$programs" ]; then
  echo "bench/gpu/pack.sh: no GPU test is built in $build (is the CUDA toolkit found? build its target tessera_gpu_programs)" >&2
  exit 2
fi
for p in $programs; do
  [ -x "$p" ] || { echo "bench/gpu/pack.sh: $p is not built (build the target tessera_gpu_programs in $build)" >&2; exit 2; }
done

stage=$(mktemp -d)
tmp="$archive.tmp.$$"
trap 'rm -rf "$stage" "$tmp"' EXIT
kit="$stage/kit"
mkdir -p "$kit/bin" "$kit/lib" "$kit/share"
for p in $programs; do cp "$p" "$kit/bin/"; done
cp "$root/bench/gpu/torch_reference.py" "$kit/share/"  # PyTorch's kernels beside them (run.sh)
for s in $(python3 "$root/bench/gpu/kit_tests.py" scripts "$tests_json"); do cp "$s" "$kit/share/"; done  # gpu.train_llama's
python3 "$root/bench/gpu/kit_tests.py" list "$tests_json" > "$kit/tests.tsv"
# The shared libraries the programs need, but not the C library, the C++ runtime, the CUDA
# driver or the CUDA libraries (the GPU machine's own, matching its driver).
skip='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia)[.-]'
for p in "$kit"/bin/*; do
  ldd "$p" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
  if ! grep -Eq "$skip" <<< "$name"; then cp -L "$path" "$kit/lib/$name"; fi
done
{
  echo "commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo '+changes')"
  echo "built=$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "nvcc=$(nvcc --version | grep -o 'release [0-9.]*')"
  # the GPU architectures compiled (sm_90 runs on an H100 or H200), from nvcc's flags
  echo "gpu_code=$(cat "$build"/tests/gpu/CMakeFiles/*/flags.make | grep -o 'code=\[[^]]*\]' | sort -u | tr '\n' ' ')"
} > "$kit/BUILD"
tar -C "$stage" -I "xz -T0 -1" -cf "$tmp" kit  # xz -1: 15 MB in 7 s; -6: 8 MB in 27 s
mv "$tmp" "$archive"
echo "bench/gpu/pack.sh: $(du -h "$archive" | cut -f1) in $archive ($(ls "$kit/bin" | wc -l) programs, libraries: $(ls "$kit/lib" | tr '\n' ' '))"
