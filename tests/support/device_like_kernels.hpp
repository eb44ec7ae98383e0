// For compile-fail tests: a kernel backend whose memory is not the host's as far as the
// library knows (the CPU kernels otherwise), and a tiny Llama config, so that a case can form
// a device-backend type and hit the static_assert that refuses it.
#pragma once

#include <string_view>

#include <tessera/kernels/backend.hpp>
#include <tessera/model/llama_config.hpp>

struct device_like_space : tessera::host_space {
  static constexpr std::string_view name = "device-like";
  static constexpr bool host_accessible = false;
};
struct device_like_kernels : tessera::cpu_kernels {
  using space = device_like_space;
};
struct tiny_cfg {
  static constexpr tessera::llama_config config{.name = "tiny", .dim = 32, .n_layers = 4, .n_heads = 4,
                                                .n_kv_heads = 2, .vocab_size = 97, .multiple_of = 32};
};
