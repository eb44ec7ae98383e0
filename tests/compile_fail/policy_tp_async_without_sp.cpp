// expect: tessera::tensor_parallel: async_tp needs sequence_parallel (it overlaps the sequence's all-gathers and reduce-scatters with the GEMMs; without it TP all-reduces); add tessera::sequence_parallel to the policy
#include <tessera/parallel/policies.hpp>
// async TP pipelines SP's all-gathers and reduce-scatters; plain TP has none to pipeline.
constexpr tessera::policy_desc d = tessera::tensor_parallel<"tp", tessera::async_tp, tessera::loss_parallel>::desc;
