// expect: tessera::fsdp / hsdp: an option is given twice; give each option at most once
#include <tessera/parallel/policies.hpp>
using tessera::reshard;
using tessera::reshard_after_forward;
constexpr tessera::policy_desc d =
    tessera::hsdp<"r", "s", reshard_after_forward<reshard::never>, reshard_after_forward<reshard::always>>::desc;
