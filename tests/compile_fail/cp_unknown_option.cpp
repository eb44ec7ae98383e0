// expect: tessera::context_parallel: unknown option; the options are cp_rotation<cp_rotate::allgather | ring>, cp_balance<cp_balancing::head_tail | none | per_document> and cp_documents<Eos>
// max-errors: 1
#include <tessera/parallel/context_parallel.hpp>
using namespace tessera;
using P = context_parallel<"cp", sequence_parallel>;
constexpr auto d = P::desc;
