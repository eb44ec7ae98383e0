// expect: tessera::train::parallel_llama<Recipe, K>: Float8's FP8 all-gather runs on host buffers
// max-errors: 1
// A backend whose memory is not the host's (a device) takes no recipe with this policy yet.
#include <device_like_kernels.hpp>
#include <tessera/train/parallel_llama.hpp>
using namespace tessera;
struct r {
  using model = tiny_cfg;
  using mesh = tessera::mesh<axis<"dp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, float8<fp8::tensorwise, fp8::all_gather>>;
};
constexpr auto size = sizeof(train::parallel_llama<r, device_like_kernels>);
