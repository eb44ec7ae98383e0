// expect: tessera::fsdp / hsdp: mixed_precision supports <tessera::bf16, float> and <float, float>
#include <tessera/parallel/policies.hpp>
// gradients reduced in bf16 are not supported (FSDP2 allows it; tessera reduces in f32).
constexpr tessera::policy_desc d =
    tessera::fsdp<"dp", tessera::mixed_precision<tessera::bf16, tessera::bf16>>::desc;
