// expect: tessera model config (Config below): dim is not divisible by n_heads; head_dim = dim / n_heads must be whole
// expect-gcc: Config = bad_model
// expect-clang: config_is_valid<tessera::config_error::dim_not_divisible, bad_model>
// max-errors: 1
// A recipe's model config is checked when recipe_traits<R> is formed, as llama<Config> checks
// it, before the policies (which read it): a recipe of an invalid model does not compile.
#include <tessera/train/recipe.hpp>
using namespace tessera;
struct bad_model {
  static constexpr llama_config config{.name = "bad", .dim = 100, .n_layers = 2, .n_heads = 8, .n_kv_heads = 4,
                                       .vocab_size = 97, .multiple_of = 32};
};
struct r {
  using model = bad_model;
  using mesh = tessera::mesh<axis<"dp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">>;
};
constexpr bool ok = recipe_traits<r>::ok;
