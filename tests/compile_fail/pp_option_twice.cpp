// expect: tessera::pipeline_parallel: an option is given twice
// max-errors: 1
#include <tessera/parallel/pipeline_parallel.hpp>
using P = tessera::pipeline_parallel<"pp", tessera::microbatches<2>, tessera::microbatches<4>>;
constexpr auto d = P::desc;
