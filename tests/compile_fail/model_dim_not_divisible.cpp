// expect: tessera::llama<Config>: dim is not divisible by n_heads
#include <tessera/model/llama.hpp>
struct bad {
  static constexpr tessera::llama_config config{.name = "bad", .dim = 100, .n_layers = 1, .n_heads = 16,
                                                .n_kv_heads = 16, .vocab_size = 10};
};
tessera::llama<bad> m;
