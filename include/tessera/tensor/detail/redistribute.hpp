// tessera/tensor/detail/redistribute.hpp: executes one plan step (collective.hpp's
// semantics) on a rank's block. Uneven shards are padded to the group's largest block for
// the collective and unpadded after; where blocks are even and contiguous in group order
// the collective reads and writes the blocks directly (no packing copy).
#pragma once

#include <algorithm>
#include <cstdint>
#include <tessera/comm/any_communicator.hpp>
#include <tessera/layout/local_shape.hpp>
#include <tessera/plan/collective.hpp>
#include <tessera/tensor/detail/box_copy.hpp>
#include <tessera/tensor/device_mesh.hpp>
#include <vector>

namespace tessera::detail {

constexpr comm::reduce_op to_comm(reduce op) noexcept {
  switch (op) {
    case reduce::sum: return comm::reduce_op::sum;
    case reduce::avg: return comm::reduce_op::avg;
    case reduce::max: return comm::reduce_op::max;
    case reduce::min: return comm::reduce_op::min;
  }
  return comm::reduce_op::sum;
}

/// True when every dimension before `d` has extent 1 in `b`: blocks split along d are then
/// contiguous, in order, in the row-major block.
constexpr bool outer_trivial(const box& b, int d) noexcept {
  for (int e = 0; e < d; ++e)
    if (b.size[static_cast<std::size_t>(e)] != 1) return false;
  return true;
}

/// Runs step `s` (layouts `before` -> `after`) on this rank's block `cur` (box `b`);
/// returns the new block and sets `b` to its box.
template <class T, class Mesh>
std::vector<T> run_step(device_mesh<Mesh>& dm, const plan_step& s, const layout_spec& before,
                        const layout_spec& after, const shape_t& global, std::vector<T> cur, box& b) {
  const mesh_shape& m = dm.shape();
  const coords_t& me = dm.coords();
  const box b1 = local_box(after, m, global, me);
  if (s.kind == step_kind::local_slice) {
    std::vector<T> out(static_cast<std::size_t>(b1.numel()));
    copy_region(cur.data(), b, out.data(), b1, b1);
    b = b1;
    return out;
  }
  if (s.kind == step_kind::local_partial) {
    if (s.op == reduce::sum && group_index(m, s.group, me) != 0) std::fill(cur.begin(), cur.end(), T{});
    b = b1;
    return cur;
  }
  auto& c = dm.group(s.group);
  const auto members = group_ranks(m, s.group, dm.rank());
  const auto n = members.size();
  std::vector<box> b0k(n), b1k(n);
  for (std::size_t k = 0; k < n; ++k) {
    const coords_t ck = coords_of(m, members[k]);
    b0k[k] = local_box(before, m, global, ck);
    b1k[k] = local_box(after, m, global, ck);
  }
  constexpr auto dt = comm::dtype_of<T>;
  std::vector<T> out(static_cast<std::size_t>(b1.numel()));
  switch (s.kind) {
    case step_kind::all_gather: {
      std::int64_t maxn = 0;
      bool even = true;
      for (auto& x : b0k) maxn = std::max(maxn, x.numel());
      for (auto& x : b0k) even = even && x.numel() == maxn;
      const auto mx = static_cast<std::size_t>(maxn);
      if (even && outer_trivial(b1, s.dim)) {  // blocks land in place
        c.all_gather(cur.data(), out.data(), mx, dt).wait();
        break;
      }
      cur.resize(mx);
      std::vector<T> recv(mx * n);
      c.all_gather(cur.data(), recv.data(), mx, dt).wait();
      for (std::size_t k = 0; k < n; ++k) copy_region(recv.data() + k * mx, b0k[k], out.data(), b1, b0k[k]);
      break;
    }
    case step_kind::reduce_scatter: {
      std::int64_t maxn = 0;
      bool even = true;
      for (auto& x : b1k) maxn = std::max(maxn, x.numel());
      for (auto& x : b1k) even = even && x.numel() == maxn;
      const auto mx = static_cast<std::size_t>(maxn);
      if (even && outer_trivial(b, s.dim)) {  // pieces are in place in the block
        c.reduce_scatter(cur.data(), out.data(), mx, dt, to_comm(s.op)).wait();
        break;
      }
      std::vector<T> send(mx * n), recv(mx);
      for (std::size_t k = 0; k < n; ++k) copy_region(cur.data(), b, send.data() + k * mx, b1k[k], b1k[k]);
      c.reduce_scatter(send.data(), recv.data(), mx, dt, to_comm(s.op)).wait();
      std::copy(recv.begin(), recv.begin() + static_cast<std::ptrdiff_t>(out.size()), out.begin());
      break;
    }
    case step_kind::all_reduce: {
      c.all_reduce(cur.data(), cur.data(), cur.size(), dt, to_comm(s.op)).wait();
      b = b1;
      return cur;
    }
    case step_kind::all_to_all: {
      std::int64_t maxn = 0;
      for (auto& x : b0k)
        for (auto& y : b1k) maxn = std::max(maxn, intersect(x, y).numel());
      const auto mx = static_cast<std::size_t>(maxn);
      std::vector<T> send(mx * n), recv(mx * n);
      for (std::size_t q = 0; q < n; ++q) {
        const box x = intersect(b, b1k[q]);
        copy_region(cur.data(), b, send.data() + q * mx, x, x);
      }
      c.all_to_all(send.data(), recv.data(), mx, dt).wait();
      for (std::size_t p = 0; p < n; ++p) {
        const box x = intersect(b0k[p], b1);
        copy_region(recv.data() + p * mx, x, out.data(), b1, x);
      }
      break;
    }
    default: break;
  }
  b = b1;
  return out;
}

}  // namespace tessera::detail
