// expect: tessera::fsdp / hsdp: unknown option; the options are reshard_after_forward<reshard::...> and mixed_precision<Param, Reduce>
#include <tessera/parallel/policies.hpp>
// sequence_parallel is a tensor_parallel option, not an FSDP one.
constexpr tessera::policy_desc d = tessera::fsdp<"dp", tessera::sequence_parallel>::desc;
