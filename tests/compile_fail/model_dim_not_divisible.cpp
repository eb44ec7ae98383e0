// expect: tessera model config (Config below): dim is not divisible by n_heads
// expect-gcc: Config = bad
// expect-clang: config_is_valid<tessera::config_error::dim_not_divisible, bad>
// max-errors: 1
#include <tessera/model/llama.hpp>
struct bad {
  static constexpr tessera::llama_config config{.name = "bad", .dim = 100, .n_layers = 1, .n_heads = 16,
                                                .n_kv_heads = 16, .vocab_size = 10};
};
tessera::llama<bad> m;
