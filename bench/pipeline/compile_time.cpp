// Compile-time cost of generating and verifying a schedule inside the compiler.
// Not part of the default build; time it by hand (see docs/performance.md):
//   time clang++ -std=c++20 -fsyntax-only -fconstexpr-steps=4000000000 -Iinclude \
//        -DTESSERA_P=64 -DTESSERA_V=4 -DTESSERA_M=256 bench/pipeline/compile_time.cpp
// g++ needs -fconstexpr-ops-limit=... and -fconstexpr-loop-limit=... instead.
#include <tessera/pipeline/generators.hpp>
#include <tessera/pipeline/verify.hpp>

#ifndef TESSERA_P
#define TESSERA_P 8
#define TESSERA_V 4
#define TESSERA_M 32
#endif
#ifndef TESSERA_KIND
#define TESSERA_KIND interleaved_1f1b
#endif

namespace tp = tessera::pipeline;
static_assert(tp::verify(tp::generate(tp::schedule_kind::TESSERA_KIND, TESSERA_P, TESSERA_V, TESSERA_M)).ok);

int main() { return 0; }
