// expect: tessera::parallelize: every argument must be a policy (fsdp<...>, hsdp<...>, tensor_parallel<...>, pipeline_parallel<...>, context_parallel<...>, activation_checkpointing<...>, float8<...>)
#include <tessera/parallel/policies.hpp>
// an option given where a policy belongs
constexpr int n = tessera::parallelize<tessera::fsdp<"dp">, tessera::loss_parallel>::size;
