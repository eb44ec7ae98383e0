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
#include <string>
#include <thread>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/layout/local_shape.hpp>
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

/// The values of `b`, a block of parameter i's global shape (param_global_shape: rank 1 for
/// norms, else 2), into `out` (row-major in the block): TorchTitan's initialization
/// (param_stream) drawn up to the block's last element, so a rank that holds the first rows of
/// a tensor stops early and none holds more than its block. An empty block writes nothing.
inline void init_param_box(const llama_config& c, std::int64_t i, std::uint64_t seed, const box& b, float* out) {
  if (b.numel() == 0) return;
  const param_shape g = param_at(c, i).shape;
  check(b.rank == (g.is_vector() ? 1 : 2), "init_param_box: a block of " + std::to_string(b.rank) +
                                               " dimensions for parameter " + std::to_string(i));
  const bool v = b.rank == 1;
  const std::int64_t r0 = v ? 0 : b.offset[0], rows = v ? 1 : b.size[0];
  const std::int64_t c0 = b.offset[v ? 0 : 1], cols = b.size[v ? 0 : 1];
  check(r0 + rows <= g.rows && c0 + cols <= g.cols, "init_param_box: a block beyond parameter " + std::to_string(i));
  param_stream s(c, i, seed);
  s.skip(r0 * g.cols + c0);
  for (std::int64_t r = 0; r < rows; ++r) {
    if (r > 0) s.skip(g.cols - cols);
    for (std::int64_t k = 0; k < cols; ++k) *out++ = s.next();
  }
}

/// Shard `s`'s block of parameter i in global coordinates (local_param_offset's).
inline box shard_box(const llama_config& c, const llama_shard& s, std::int64_t i) {
  const param_entry e = param_at(c, i);
  const param_shape l = local_param_shape(c, s, e);
  box b = whole_box(param_global_shape(e));
  if (e.shape.is_vector() || l.numel() == e.shape.numel()) return b;
  const auto [d, off] = local_param_offset(c, s, e);
  b.offset[static_cast<std::size_t>(d)] = off;
  b.size[0] = l.rows, b.size[1] = l.cols;
  return b;
}

/// TorchTitan's initialization (init_param) of shard `s`'s block of parameter i, written to
/// `out` (local_param_shape floats).
inline void init_shard_param(const llama_config& c, const llama_shard& s, std::int64_t i, std::uint64_t seed,
                             float* out) {
  init_param_box(c, i, seed, shard_box(c, s, i), out);
}

/// TorchTitan's initialization of the block `box_of(i)` of every parameter i (an empty box:
/// none; init_param_box), on several host threads when the blocks are large (an 8B block takes
/// about 8 s on one thread, the 8B embedding 20 s: each value is a Box-Muller draw from a
/// Mersenne Twister). Each tensor draws from its own stream (seed, i), so the values do not
/// depend on the order or the thread. `dest(i)` gives where block i goes when the host can
/// write it there, or nullptr: then it is made in a host buffer and `put(i, values)` runs on
/// the calling thread (a device upload: CUDA's current device is per thread). Tensors go
/// largest first, in batches whose buffers hold at most `batch_floats` floats (one tensor at
/// least), which bounds the host memory used.
template <class BoxOf, class Dest, class Put>
void init_param_boxes(const llama_config& c, std::uint64_t seed, BoxOf&& box_of, Dest&& dest, Put&& put,
                      std::int64_t batch_floats = std::int64_t{1} << 30) {
  const std::int64_t n = param_tensor_count(c);
  std::vector<box> boxes;
  std::vector<std::int64_t> order;
  std::int64_t total = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    boxes.push_back(box_of(i));
    if (boxes.back().numel() > 0) order.push_back(i), total += boxes.back().numel();
  }
  const auto numel = [&](std::int64_t i) { return boxes[static_cast<std::size_t>(i)].numel(); };
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
        for (std::size_t k = next++; k < last; k = next++) {
          const std::int64_t i = order[k];
          float* out = dest(i);
          if (out == nullptr) {
            auto& b = bufs[static_cast<std::size_t>(i)];
            b.resize(static_cast<std::size_t>(numel(i)));
            out = b.data();
          }
          init_param_box(c, i, seed, boxes[static_cast<std::size_t>(i)], out);
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

/// The same for every parameter of shard `s` (its blocks: shard_box).
template <class Dest, class Put>
void init_shard_params(const llama_config& c, const llama_shard& s, std::uint64_t seed, Dest&& dest, Put&& put,
                       std::int64_t batch_floats = std::int64_t{1} << 30) {
  init_param_boxes(c, seed, [&](std::int64_t i) { return shard_box(c, s, i); }, dest, put, batch_floats);
}

}  // namespace tessera
