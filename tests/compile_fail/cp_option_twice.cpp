// expect: tessera::context_parallel: an option is given twice; give each option at most once
// max-errors: 1
#include <tessera/parallel/context_parallel.hpp>
using namespace tessera;
using P = context_parallel<"cp", cp_rotation<cp_rotate::ring>, cp_rotation<cp_rotate::allgather>>;
constexpr auto d = P::desc;
