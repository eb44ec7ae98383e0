// expect: tessera recipe: float8: a linear named in fp8::linears<...> has a dim that is not a multiple of 16
// expect-also: attention_q
// max-errors: 1
#include <tessera/train/recipe.hpp>
using namespace tessera;
struct cfg {
  static constexpr llama_config config{.name = "odd", .dim = 72, .n_layers = 2, .n_heads = 4, .n_kv_heads = 4, .vocab_size = 97, .multiple_of = 32};
};
struct r {
  using model = cfg;
  using mesh = tessera::mesh<axis<"dp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, float8<fp8::rowwise, fp8::linears<param_role::attention_q>>>;
};
constexpr bool ok = recipe_traits<r>::ok;
