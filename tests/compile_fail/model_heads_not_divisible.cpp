// expect: tessera model config (Config below): n_heads is not divisible by n_kv_heads
// expect-gcc: Config = bad
// expect-clang: config_is_valid<tessera::config_error::heads_not_divisible, bad>
// max-errors: 1
#include <tessera/model/llama.hpp>
struct bad {
  static constexpr tessera::llama_config config{.name = "bad", .dim = 96, .n_layers = 1, .n_heads = 12,
                                                .n_kv_heads = 8, .vocab_size = 10};
};
tessera::llama<bad> m;
