// expect: bad_generator_arguments<tessera::pipeline::argument_problem::v_shape_needs_exactly_2_stages_per_rank
// DualPipeV is V-shaped: exactly two stages per rank. Four is rejected by name.
#include <tessera/pipeline/checked.hpp>

using sched = tessera::pipeline::generated_schedule<tessera::pipeline::schedule_kind::dualpipe_v, 4, 4, 8>;
int main() { return sched::ranks; }
