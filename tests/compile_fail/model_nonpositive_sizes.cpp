// expect: tessera model config (Config below): dim, n_layers, n_heads, n_kv_heads and vocab_size must be positive
// expect-gcc: Config = bad
// expect-clang: config_is_valid<tessera::config_error::nonpositive, bad>
// max-errors: 1
#include <tessera/model/llama.hpp>
struct bad {
  static constexpr tessera::llama_config config{.name = "bad", .dim = 64, .n_layers = 0, .n_heads = 4,
                                                .n_kv_heads = 4, .vocab_size = 10};
};
tessera::llama<bad> m;
