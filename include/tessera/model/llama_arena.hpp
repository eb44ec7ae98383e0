// tessera/model/llama_arena.hpp: the flat parameter layout of a Llama shard and TorchTitan's
// initialization of its parameters -- what every model driver (llama_model on the host,
// device_llama on a kernel backend) allocates and fills the same way.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <span>
#include <thread>
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

/// TorchTitan's initialization of every parameter of shard `s`, on several host threads when
/// the shard is large (an 8B block takes about 8 s on one thread, the 8B embedding 20 s: each
/// value is a Box-Muller draw from a Mersenne Twister). Each tensor draws from its own stream
/// (seed, i), so the values do not depend on the order or the thread. `dest(i)` gives where
/// tensor i goes when the host can write it there, or nullptr: then it is made in a host
/// buffer and `put(i, values)` runs on the calling thread (a device upload: CUDA's current
/// device is per thread). Tensors go largest first, in batches whose buffers hold at most
/// `batch_floats` floats (one tensor at least), which bounds the host memory used.
template <class Dest, class Put>
void init_shard_params(const llama_config& c, const llama_shard& s, std::uint64_t seed, Dest&& dest, Put&& put,
                       std::int64_t batch_floats = std::int64_t{1} << 30) {
  const std::int64_t n = param_tensor_count(c);
  const auto numel = [&](std::int64_t i) { return local_param_shape(c, s, param_at(c, i)).numel(); };
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::int64_t total = 0;
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i, total += numel(i);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) { return numel(x) > numel(y); });
  // below a few million values a thread costs more than it saves
  const std::int64_t hw = total < (std::int64_t{1} << 22) ? 1 : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::vector<float>> bufs(static_cast<std::size_t>(n));
  for (std::size_t first = 0; first < order.size();) {
    std::size_t last = first;
    for (std::int64_t floats = 0; last < order.size(); ++last) {
      const std::int64_t i = order[last], buffered = dest(i) == nullptr ? numel(i) : 0;
      if (last > first && floats + buffered > batch_floats) break;
      floats += buffered;
    }
    std::atomic<std::size_t> next{first};
    std::mutex failed_lock;
    std::exception_ptr failed;
    const auto work = [&] {
      try {
        std::vector<float> full;
        for (std::size_t k = next++; k < last; k = next++) {
          const std::int64_t i = order[k];
          float* out = dest(i);
          if (out == nullptr) {
            auto& b = bufs[static_cast<std::size_t>(i)];
            b.resize(static_cast<std::size_t>(numel(i)));
            out = b.data();
          }
          init_shard_param(c, s, i, seed, out, full);
        }
      } catch (...) {
        const std::lock_guard g(failed_lock);
        if (!failed) failed = std::current_exception();
        next = last;
      }
    };
    std::vector<std::thread> helpers;
    for (std::int64_t t = 1; t < std::min<std::int64_t>(hw, static_cast<std::int64_t>(last - first)); ++t)
      helpers.emplace_back(work);
    work();
    for (auto& h : helpers) h.join();
    if (failed) std::rethrow_exception(failed);
    for (std::size_t k = first; k < last; ++k)
      if (auto& b = bufs[static_cast<std::size_t>(order[k])]; !b.empty()) {
        put(order[k], static_cast<const float*>(b.data()));
        std::vector<float>().swap(b);
      }
    first = last;
  }
}

}  // namespace tessera
