// expect: tessera model config (Config below): head_dim (dim / n_heads) is odd
// expect-gcc: Config = bad
// expect-clang: config_is_valid<tessera::config_error::odd_head_dim, bad>
// max-errors: 1
#include <tessera/model/llama.hpp>
struct bad {
  static constexpr tessera::llama_config config{.name = "bad", .dim = 48, .n_layers = 1, .n_heads = 16,
                                                .n_kv_heads = 16, .vocab_size = 10};
};
tessera::llama<bad> m;
