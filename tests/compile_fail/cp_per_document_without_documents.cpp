// expect: tessera::context_parallel: cp_balance<cp_balancing::per_document> balances packed documents and needs cp_documents<Eos>; add cp_documents<Eos>, or balance the sequence with cp_balancing::head_tail
// max-errors: 1
#include <tessera/parallel/context_parallel.hpp>
using namespace tessera;
using P = context_parallel<"cp", cp_rotation<cp_rotate::ring>, cp_balance<cp_balancing::per_document>>;
constexpr auto d = P::desc;
