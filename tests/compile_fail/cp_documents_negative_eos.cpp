// expect: tessera::cp_documents<Eos>: Eos is a token id and must be >= 0
// max-errors: 1
#include <tessera/parallel/context_parallel.hpp>
using namespace tessera;
using P = context_parallel<"cp", cp_documents<-1>>;
constexpr auto d = P::desc;
