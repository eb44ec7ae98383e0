// tessera/model/llama_arena.hpp: the flat parameter layout of a Llama shard and TorchTitan's
// initialization of its parameters -- what every model driver (llama_model on the host,
// device_llama on a kernel backend) allocates and fills the same way.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include <tessera/model/llama_config.hpp>
#include <tessera/model/llama_params.hpp>
#include <tessera/model/llama_shard.hpp>
#include <tessera/tensor/arena.hpp>

namespace tessera {

/// One slot per parameter tensor of shard `s`, in param_at order, named as TorchTitan names
/// them, of the shard's local shapes (the gradient arena has the same layout).
inline arena_layout param_arena_layout(const llama_config& c, const llama_shard& s) {
  arena_layout layout;
  for (std::int64_t i = 0; i < param_tensor_count(c); ++i) {
    const param_shape ls = local_param_shape(c, s, param_at(c, i));
    const std::int64_t shape[2] = {ls.rows, ls.cols};
    layout.add(titan_name(param_at(c, i)), ls.is_vector() ? std::span<const std::int64_t>(shape + 1, 1)
                                                          : std::span<const std::int64_t>(shape, 2));
  }
  return layout;
}

/// TorchTitan's initialization (init_param) of shard `s`'s block of parameter i, written to
/// `out` (local_param_shape floats); `full` is scratch for a parameter the shard splits.
inline void init_shard_param(const llama_config& c, const llama_shard& s, std::int64_t i, std::uint64_t seed,
                             float* out, std::vector<float>& full) {
  const param_entry e = param_at(c, i);
  const param_shape g = e.shape, l = local_param_shape(c, s, e);
  if (g.numel() == l.numel()) return init_param(c, i, seed, out);
  full.resize(static_cast<std::size_t>(g.numel()));
  init_param(c, i, seed, full.data());
  const auto [d, off] = local_param_offset(c, s, e);
  for (std::int64_t r = 0; r < l.rows; ++r)
    std::copy_n(full.data() + (d == 0 ? (off + r) * g.cols : r * g.cols + off), l.cols, out + r * l.cols);
}

}  // namespace tessera
