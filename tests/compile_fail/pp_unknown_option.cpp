// expect: tessera::pipeline_parallel: unknown option; the options are pp_schedule<K> or schedule_table<F>
// max-errors: 1
#include <tessera/parallel/pipeline_parallel.hpp>
using P = tessera::pipeline_parallel<"pp", tessera::sequence_parallel>;
constexpr auto d = P::desc;
