// expect: tessera::fsdp / hsdp: mixed_precision supports <tessera::bf16, float> and <float, float>
// max-errors: 1
#include <tessera/parallel/policies.hpp>
// A supported option next to an unsupported one: the library's message, not a missing
// `::supported` member of reshard_after_forward (issue: options could not be combined).
constexpr tessera::policy_desc d = tessera::hsdp<"r", "s", tessera::reshard_after_forward<tessera::reshard::never>,
                                                 tessera::mixed_precision<tessera::bf16, tessera::bf16>>::desc;
