#!/usr/bin/env bash
# Builds and runs every test of tessera:
#   1. g++: everything (library tests, examples, benchmarks), then all ctest tests
#      (including the mpirun tests, the compile-fail tests and the GPU tests run on the host
#      through the CUDA emulation, gpu_emulated.*);
#   2. clang++: every test program and the header check compiled by clang++'s front end
#      only (-fsyntax-only: every template instantiated, every warning an error, no code
#      generated; CMake's TESSERA_FRONTEND_ONLY; the programs that 3. and 5. compile with
#      clang++ in full are left to them, TESSERA_SKIP_PROGRAMS; the headers in one unit per component,
#      TESSERA_HEADER_CHECK=grouped, since g++ checks that each stands alone), and the tests
#      that are clang++'s own: the compile-fail tests (clang++'s diagnostics matched) and the
#      static tests. The g++ pass builds and runs every program; clang++ builds and runs the
#      tests of core, comm, tensor, model, train and the emulated CUDA kernels under the
#      sanitizers in 3. and 5. Examples, the docs' programs, benchmarks and the CUDA
#      translation units are built by g++ alone (nvcc's host compiler is g++ either way);
#   3. ThreadSanitizer (clang++): the threads backend's tests and the CUDA kernels run by the
#      host emulation (tests/kernels/test_*_emulated.cpp);
#   4. fuzzing (clang++, ASan + UBSan): the harnesses of tests/fuzz on their corpora, then
#      30 s each (docs/fuzzing.md);
#   5. AddressSanitizer + UndefinedBehaviorSanitizer (clang++): the tests of comm, tensor,
#      model and train, and the emulated CUDA kernels.
# Usage: bash .ci/test.sh            (from anywhere; installs what is missing first)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/.ci/setup.sh"
jobs=$(nproc)
# Debian's OpenBLAS (0.3.21) does not know recent Xeons and falls back to its generic SSE3
# kernels ("Prescott"), about 5x slower GEMMs (docs/kernels.md); every test program then says
# so on stderr. CI picks the kernels the CPU has, as users are told to: the CPU tests run
# about 1.8x faster (test_checkpoint's first case 20.7 s -> 11.8 s, docs/performance.md, "CI").
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
  if [[ " $flags " == *" avx512f "* && " $flags " == *" avx512bw "* && " $flags " == *" avx512dq "* && " $flags " == *" avx512vl "* ]]; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif [[ " $flags " == *" avx2 "* && " $flags " == *" fma "* ]]; then
    export OPENBLAS_CORETYPE=Haswell
  fi
fi
echo "== tessera: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset, OpenBLAS chooses}"
# The clang++, ThreadSanitizer and fuzzing builds compile at -O1 (CMake's Release default is
# -O3; ASan + UBSan's at -O0, below): half the compile time of
# the test files at -O3 for about 15% more test time (docs/performance.md, "CI"). Build with
# the default flags for timings; CI measures nothing. The g++ pass, which builds and runs
# every program, compiles at -Og (a third less compile time than -O1 -- tests/comm/
# test_dist_tensor.cpp 48 s against 72 s -- for about 15% more test time: test_parallel 217
# s of CPU against 190), except the two emulated GPU tests whose runs are the emulated
# flash-attention kernels (TESSERA_EMULATION_FLAGS; they run 60% longer at -Og, the other
# emulated programs a few seconds: cmake/TesseraWarnings.cmake).
ci_opt=(-DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG")
gcc_opt=(-DCMAKE_CXX_FLAGS_RELEASE="-Og -DNDEBUG" -DTESSERA_EMULATION_FLAGS=-O1)
# The CUDA units: their host code at -O0 (CI runs none of it but the GPU tests' skip, and
# train_llama links train_llama.cpp's copies of the shared code first: test_cuda_recipes.cu
# 59 s instead of 86 s at -O1), and as PTX for compute_90 alone ("90-virtual"): nvcc's front
# ends (cudafe++, cicc) check the device code, ptxas's translation to sm_90 machine code is
# left out (16 s of test_cuda_recipes.cu's 102 s; bench/gpu/pack.sh builds sm_90 SASS). cicc,
# nvcc's device compiler, at -O0 too (-Xcicc -O0): its front end checks the device code as
# before, its optimizer is skipped (test_cuda_recipes.cu's cicc 33.5 s -> 12.6 s; nvcc --time).
cuda_opt=(-DCMAKE_CUDA_FLAGS_RELEASE="-O0 -Xcicc -O0 -DNDEBUG" -DCMAKE_CUDA_ARCHITECTURES=90-virtual)
# The clang++ pass compiles every test program with its front end only (below): what clang++
# adds over g++ is its front end's checks -- the language, the warnings --, which
# -fsyntax-only runs in full, and its code runs under the sanitizers at the end. Building
# and running the programs again cost about 400 s of CI (docs/performance.md, "CI").
frontend_only='.*'
# The g++ pass builds and runs every program, and checks the headers with its front end only
# (the header check's units generate no code: -fsyntax-only saves the tenth of their 224 s of
# compiler time that emitting an empty object took).
gcc_frontend_only='^tessera_header_check$'
# The clang++ pass checks every program but the ones the sanitizer builds (3. and 5.)
# compile with clang++ in full and the same warnings (-Wall -Wextra -Wpedantic -Werror): it
# leaves them out (TESSERA_SKIP_PROGRAMS; 105 s of compiler time).
# test_model first: the longest under ASan (122 s of the block's 202 s of tests, two at a time)
asan_tests="model/test_model kernels/test_kernels_emulated core/test_core comm/test_comm_threads tensor/test_tensor train/test_train"
tsan_tests="comm/test_comm_threads kernels/test_kernels_emulated"
sanitized="^($(for t in $asan_tests $tsan_tests; do echo "${t#*/}"; done | sort -u | paste -sd '|'))\$"
# The benchmarks at -O0 (TESSERA_BENCH_FLAGS): CI builds them to keep them compiling and
# linking, and times none (their compile: 213 s of g++ at -O1, about 40% less at -O0).
bench_flags=-O0
# programs <area/program>...: the programs as a CMake list, for TESSERA_PROGRAMS: the
# sanitizer builds build theirs as one target (tessera_programs), so that Make compiles every
# file of every program side by side instead of one program after the other (ASan + UBSan's
# build 112 s instead of 146 s; tests/CMakeLists.txt)
programs() { local t out=(); for t in "$@"; do out+=("${t#*/}"); done; (IFS=';'; echo "${out[*]}"); }
phase() { echo "== tessera: $1 ($(( $(date +%s) - start )) s since the start)"; }
# run_tests <label> <build folder> <area/program>...: runs the test programs under the
# environment in run_env, $jobs at a time (the sanitizer builds' programs run mostly on one
# core), each one's output to <build folder>/<program>.log, printed when it fails; prints one
# verdict a program in the order given, and sets status=1 on a failure.
run_tests() {
  local label=$1 dir=$2 t i=0
  shift 2
  local pids=()
  for t in "$@"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
    (cd "$dir/tests/${t%/*}" && env "${run_env[@]}" "./${t#*/}") > "$dir/${t#*/}.log" 2>&1 &
    pids+=("$!")
  done
  for t in "$@"; do
    if wait "${pids[$i]}"; then
      echo "$label: ${t#*/} clean ($(grep -m1 '^\[doctest\] test cases' "$dir/${t#*/}.log" || true))"
    else
      cat "$dir/${t#*/}.log"
      echo "$label: ${t#*/} FAILED"
      status=1
    fi
    i=$((i + 1))
  done
}
status=0
start=$(date +%s)
for cc in gcc clang; do
  if [ "$cc" = gcc ]; then
    cxx=g++; once=ON; only=$gcc_frontend_only; skip=''; headers=each; opt=("${gcc_opt[@]}")
  else
    cxx=clang++; once=OFF; only=$frontend_only; skip=$sanitized; headers=grouped; opt=("${ci_opt[@]}")
  fi
  # each test program of several files as one translation unit (TESSERA_UNITY_TESTS: g++,
  # tests/parallel's ten files 180 s of compile instead of 378 s, the eleven other programs
  # 204 s instead of 314 s; clang++'s front-end pass 59 s instead of 76 s on a faster machine);
  # the sanitizer builds compile each file of their programs apart
  dir="$root/build/$cc"
  phase "configure and build with $cxx"
  # the CUDA units (g++ pass only) for sm_90 alone: CI compiles them to check them, and the
  # host code is the same for every architecture (users' builds default to sm_80 and sm_90)
  # every compile timed (.ci/timed-compile: the compiler's CPU seconds, which other work on
  # the machine changes little), the costliest units printed after the build, so that a CI
  # log shows where its build time goes (docs/performance.md, "CI")
  times="$dir/compile-times.log"
  rm -f "$times"
  launcher="$root/.ci/timed-compile;$times"
  cmake -S "$root" -B "$dir" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release "${opt[@]}" "${cuda_opt[@]}" -DTESSERA_BUILD_BENCH=$once \
    -DTESSERA_BUILD_CUDA_UNITS=$once -DTESSERA_BUILD_EXAMPLES=$once -DTESSERA_FRONTEND_ONLY="$only" -DTESSERA_SKIP_PROGRAMS="$skip" -DTESSERA_UNITY_TESTS=ON -DTESSERA_HEADER_CHECK=$headers \
    -DTESSERA_BENCH_FLAGS="$bench_flags" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" -DCMAKE_CUDA_COMPILER_LAUNCHER="$launcher" >/dev/null
  cmake --build "$dir" -j "$jobs"
  if [ -s "$times" ]; then
    awk '{ s += $1 } END { printf "== tessera: %d units compiled in %.0f s of compiler CPU time; the costliest:\n", NR, s }' "$times"
    # awk reads all of sort's output (head would close the pipe early: SIGPIPE, exit 141
    # under pipefail)
    sort -rn "$times" | awk 'NR <= 15 { printf "   %7.1f s  %s\n", $1, $3 }'
  fi
  phase "tests ($cxx)"
  (cd "$dir" && ctest -j "$jobs" --output-on-failure --timeout 900) || status=1
done
phase "ThreadSanitizer (threads backend, emulated CUDA kernels)"
tsan="$root/build/tsan"
# shellcheck disable=SC2086  # one word a program
cmake -S "$root" -B "$tsan" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release "${ci_opt[@]}" -DTESSERA_SANITIZE=thread \
  -DTESSERA_BUILD_BENCH=OFF -DTESSERA_BUILD_EXAMPLES=OFF -DTESSERA_BUILD_CUDA_UNITS=OFF -DTESSERA_PROGRAMS="$(programs $tsan_tests)" >/dev/null
cmake --build "$tsan" -j "$jobs" --target tessera_programs
run_env=(TSAN_OPTIONS=halt_on_error=1)
# shellcheck disable=SC2086
run_tests ThreadSanitizer "$tsan" $tsan_tests
# ---- fuzzing (issue 22; docs/fuzzing.md) -------------------------------------------------
# The libFuzzer harnesses of tests/fuzz (clang++, ASan + UBSan): every harness once over its
# seed corpus and reproducers (ctest -L fuzz), then each fuzzed TESSERA_FUZZ_SECONDS (30) s,
# two at a time.
phase "fuzzing (libFuzzer, ASan + UBSan)"
fuzz="$root/build/fuzz"
cmake -S "$root" -B "$fuzz" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release "${ci_opt[@]}" -DTESSERA_BUILD_FUZZERS=ON \
  -DTESSERA_BUILD_BENCH=OFF -DTESSERA_BUILD_EXAMPLES=OFF -DTESSERA_BUILD_CUDA_UNITS=OFF >/dev/null
cmake --build "$fuzz" -j "$jobs" --target tessera_fuzzers
(cd "$fuzz" && ctest -L fuzz --output-on-failure --timeout 300) || status=1
# A fixed seed: the inputs tried are the same sequence as in the checks before landing
# (docs/fuzzing.md); fuzz with random seeds and longer by hand.
TESSERA_FUZZ_SEED=${TESSERA_FUZZ_SEED:-1} bash "$root/tests/fuzz/run_fuzzers.sh" -j 2 "$fuzz" "${TESSERA_FUZZ_SECONDS:-30}" || status=1
# ---- end of fuzzing ---------------------------------------------------------------------

# ---- AddressSanitizer + UndefinedBehaviorSanitizer: the tests of core, comm, tensor, model, train ----
# Only these six test binaries (asan_tests, above: core, comm, tensor, model, train, the emulated CUDA kernels) are built (clang++, -O0 -g,
# see tests/CMakeLists.txt) and run, two at a time; any ASan or UBSan report (leaks included)
# fails the run; .ci/ubsan.supp lists the known ones. -O0 because -O1 compiled a third slower
# for faster tests (841 s against 402 s once; docs/performance.md, "CI"); the block took 244 s
# in the fifth session's run.
phase "AddressSanitizer + UndefinedBehaviorSanitizer (tests of core, comm, tensor, model, train; emulated CUDA kernels)"
asan_start=$(date +%s)
asan="$root/build/asan"
# shellcheck disable=SC2086  # one word a program
cmake -S "$root" -B "$asan" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release \
  -DTESSERA_SANITIZE=address,undefined -DTESSERA_BUILD_BENCH=OFF -DTESSERA_BUILD_EXAMPLES=OFF -DTESSERA_BUILD_CUDA_UNITS=OFF \
  -DTESSERA_PROGRAMS="$(programs $asan_tests)" >/dev/null
cmake --build "$asan" -j "$jobs" --target tessera_programs
run_env=(TESSERA_NUM_THREADS=2 ASAN_OPTIONS=halt_on_error=1:detect_leaks=1
         UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions="$root/.ci/ubsan.supp")
# shellcheck disable=SC2086  # one word a program
run_tests ASan+UBSan "$asan" $asan_tests
echo "== tessera: the ASan+UBSan block took $(( $(date +%s) - asan_start )) s"
echo "== tessera: all tests took $(( $(date +%s) - start )) s"
exit $status
