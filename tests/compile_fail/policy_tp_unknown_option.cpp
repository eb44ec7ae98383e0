// expect: tessera::tensor_parallel: unknown option; the options are sequence_parallel, loss_parallel and async_tp
#include <tessera/parallel/policies.hpp>
// reshard_after_forward is an FSDP option.
constexpr tessera::policy_desc d =
    tessera::tensor_parallel<"tp", tessera::reshard_after_forward<tessera::reshard::never>>::desc;
