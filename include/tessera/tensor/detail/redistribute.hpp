// tessera/tensor/detail/redistribute.hpp: executes one plan step (collective.hpp's
// semantics) on a rank's block. Uneven shards are padded to the group's largest block for
// the collective and unpadded after (all_to_all steps that are uneven or sparse run as
// grouped point-to-point calls instead); where blocks are even and contiguous in group
// order the collective reads and writes the blocks directly (no packing copy).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <tessera/comm/any_communicator.hpp>
#include <tessera/core/error.hpp>
#include <tessera/layout/local_shape.hpp>
#include <tessera/plan/collective.hpp>
#include <tessera/plan/runs.hpp>
#include <tessera/tensor/detail/box_copy.hpp>
#include <tessera/tensor/device_mesh.hpp>
#include <vector>

namespace tessera::detail {

/// An all_to_all step (block `b` of this rank -> block `b1`; the group's before and after
/// boxes b0k, b1k). Even exchanges (every pair moves the same number of elements) run as
/// one all_to_all, reading the input block and writing the output block directly where
/// their pieces are contiguous and in group order, packing and unpacking otherwise.
/// Uneven or sparse exchanges (some pairs move nothing, as in nested 2-D transitions) run
/// as grouped point-to-point calls of the pairs that move something (as NCCL runs its
/// all-to-all), with no padding; this rank's own piece is copied block to block.
template <class T, class Space, class Mesh, class Members>
void all_to_all_step(device_mesh<Mesh>& dm, comm::any_communicator& c, const Members& members, const box& b,
                     const box* b0k, const box& b1, const box* b1k, const T* in, T* out) {
  constexpr auto dt = comm::dtype_of<T>;
  const std::size_t n = members.size();
  std::size_t self = 0;
  for (std::size_t k = 0; k < n; ++k)
    if (members[k] == dm.rank()) self = k;
  std::int64_t per_pair = 0;
  auto before_of = [&](std::int64_t p) { return b0k[static_cast<std::size_t>(p)]; };
  auto after_of = [&](std::int64_t q) { return b1k[static_cast<std::size_t>(q)]; };
  const bool even = even_pairs(static_cast<std::int64_t>(n), before_of, after_of, &per_pair);
  const auto mx = static_cast<std::size_t>(per_pair);
  if (even) {
    const pieces_in_place direct = in_place_pieces(static_cast<std::int64_t>(n), b, b1, before_of, after_of, per_pair);
    const bool send_direct = direct.send, recv_direct = direct.recv;
    const T* send = in;
    if (!send_direct) {
      T* packed = dm.template scratch<T, Space>(0, mx * n);
      for (std::size_t q = 0; q < n; ++q) {
        const box x = intersect(b, b1k[q]);
        copy_region<Space>(in, b, packed + q * mx, x, x);
      }
      send = packed;
    }
    T* recv = recv_direct ? out : dm.template scratch<T, Space>(1, mx * n);
    Space::fence();
    c.all_to_all(send, recv, mx, dt).wait();
    if (!recv_direct)
      for (std::size_t p = 0; p < n; ++p) {
        const box x = intersect(b0k[p], b1);
        copy_region<Space>(recv + p * mx, x, out, b1, x);
      }
    return;
  }
  constexpr int tag = 0x7e55;  // tessera's redistribute
  std::size_t send_n = 0, recv_n = 0;  // scratch needed for pieces that are not contiguous
  for (std::size_t q = 0; q < n; ++q) {
    if (q == self) continue;
    const box x = intersect(b, b1k[q]);
    if (x.numel() && !contiguous_at(x, b)) send_n += static_cast<std::size_t>(x.numel());
    const box y = intersect(b0k[q], b1);
    if (y.numel() && !contiguous_at(y, b1)) recv_n += static_cast<std::size_t>(y.numel());
  }
  T* sbuf = send_n ? dm.template scratch<T, Space>(0, send_n) : nullptr;
  T* rbuf = recv_n ? dm.template scratch<T, Space>(1, recv_n) : nullptr;
  std::vector<comm::any_request> reqs;
  reqs.reserve(2 * n);
  std::size_t so = 0, ro = 0;
  // pack the pieces that are not contiguous first, so that one fence covers every copy
  for (std::size_t k = 1; k < n; ++k) {
    const std::size_t q = (self + k) % n;
    const box x = intersect(b, b1k[q]);
    if (x.numel() && !contiguous_at(x, b)) {
      copy_region<Space>(in, b, sbuf + so, x, x);
      so += static_cast<std::size_t>(x.numel());
    }
  }
  Space::fence();
  so = 0;
  c.group_start();
  for (std::size_t k = 1; k < n; ++k) {  // peers in ring order from this rank
    const std::size_t q = (self + k) % n, p = (self + n - k) % n;
    const box x = intersect(b, b1k[q]);
    if (const auto cnt = static_cast<std::size_t>(x.numel())) {
      const T* from = nullptr;
      if (const auto at = contiguous_at(x, b)) {
        from = in + *at;
      } else {
        from = sbuf + so;
        so += cnt;
      }
      reqs.push_back(c.send(from, cnt, dt, static_cast<int>(q), tag));
    }
    const box y = intersect(b0k[p], b1);
    if (const auto cnt = static_cast<std::size_t>(y.numel())) {
      const auto at = contiguous_at(y, b1);
      reqs.push_back(c.recv(at ? out + *at : rbuf + ro, cnt, dt, static_cast<int>(p), tag));
      if (!at) ro += cnt;
    }
  }
  c.group_end();
  copy_region<Space>(in, b, out, b1, intersect(b, b1));  // this rank's own piece
  for (auto& r : reqs) r.wait();
  ro = 0;
  for (std::size_t k = 1; k < n; ++k) {
    const std::size_t p = (self + n - k) % n;
    const box y = intersect(b0k[p], b1);
    if (y.numel() && !contiguous_at(y, b1)) {
      copy_region<Space>(rbuf + ro, y, out, b1, y);
      ro += static_cast<std::size_t>(y.numel());
    }
  }
}

/// The boxes of a group's ranks before and after a step (on the stack for groups of up to
/// 64 ranks, on the heap beyond).
struct group_boxes {
  std::array<box, 64> small0, small1;
  std::vector<box> big0, big1;
  box* before = small0.data();
  box* after = small1.data();

  template <class Members>
  group_boxes(const Members& members, const mesh_shape& m, const layout_spec& l0, const layout_spec& l1,
              const shape_t& global) {
    const std::size_t n = members.size();
    if (n > small0.size()) {
      big0.resize(n), big1.resize(n);
      before = big0.data(), after = big1.data();
    }
    for (std::size_t k = 0; k < n; ++k) {
      const coords_t ck = coords_of(m, members[k]);
      before[k] = local_box(l0, m, global, ck);
      after[k] = local_box(l1, m, global, ck);
    }
  }
  group_boxes(const group_boxes&) = delete;
  group_boxes& operator=(const group_boxes&) = delete;
};

/// Runs a fused run of all_to_all steps (layouts `before` -> `after`) as one exchange over
/// the union `g` of their groups (plan/runs.hpp): every rank sends each rank of `g` the
/// part of its block that rank holds afterwards.
template <class T, class Space = host_space, class Mesh>
void run_exchange(device_mesh<Mesh>& dm, const axis_group& g, const layout_spec& before, const layout_spec& after,
                  const shape_t& global, const T* in, box& b, T* out) {
  const mesh_shape& m = dm.shape();
  const box b1 = local_box(after, m, global, dm.coords());
  const auto members = group_ranks(m, g, dm.rank());
  Space::fence();  // `in` complete (the previous step's copies, the caller's kernels)
  const group_boxes gb(members, m, before, after, global);
  all_to_all_step<T, Space>(dm, dm.group(g), members, b, gb.before, b1, gb.after, in, out);
  b = b1;
}

/// Runs step `s` (layouts `before` -> `after`) on this rank's block `in` (box `b`),
/// writing the new block to `out` (`out_n` elements, the after-box) and setting `b` to
/// its box. Staging buffers come from the device mesh's scratch slots 0 and 1.
template <class T, class Space = host_space, class Mesh>
void run_step(device_mesh<Mesh>& dm, const plan_step& s, const layout_spec& before, const layout_spec& after,
              const shape_t& global, const T* in, box& b, T* out) {
  const mesh_shape& m = dm.shape();
  const coords_t& me = dm.coords();
  const box b1 = local_box(after, m, global, me);
  const auto n_out = static_cast<std::size_t>(b1.numel());
  if (s.kind == step_kind::local_slice) {
    copy_region<Space>(in, b, out, b1, b1);
    b = b1;
    return;
  }
  if (s.kind == step_kind::local_partial) {
    if (s.op == reduce::sum && group_index(m, s.group, me) != 0) Space::zero(out, n_out * sizeof(T));
    else Space::copy(out, in, n_out * sizeof(T));
    b = b1;
    return;
  }
  auto& c = dm.group(s.group);
  const auto members = group_ranks(m, s.group, dm.rank());
  Space::fence();  // `in` complete (the previous step's copies, the caller's kernels)
  const auto n = members.size();
  const group_boxes gb(members, m, before, after, global);
  const box* b0k = gb.before;
  const box* b1k = gb.after;
  constexpr auto dt = comm::dtype_of<T>;
  switch (s.kind) {
    case step_kind::all_gather: {
      std::int64_t maxn = 0;
      bool even = true;
      for (std::size_t k = 0; k < n; ++k) maxn = std::max(maxn, b0k[k].numel());
      for (std::size_t k = 0; k < n; ++k) even = even && b0k[k].numel() == maxn;
      const auto mx = static_cast<std::size_t>(maxn);
      if (even && leading_dims_one(b1.shape(), s.dim)) {  // blocks land in place
        c.all_gather(in, out, mx, dt).wait();
        break;
      }
      // even blocks are sent as they are; an uneven one is padded to the largest first
      const T* send = in;
      if (!even) {
        T* padded = dm.template scratch<T, Space>(0, mx);
        Space::copy(padded, in, static_cast<std::size_t>(b.numel()) * sizeof(T));
        Space::fence();
        send = padded;
      }
      T* recv = dm.template scratch<T, Space>(1, mx * n);
      c.all_gather(send, recv, mx, dt).wait();
      for (std::size_t k = 0; k < n; ++k) copy_region<Space>(recv + k * mx, b0k[k], out, b1, b0k[k]);
      break;
    }
    case step_kind::reduce_scatter: {
      std::int64_t maxn = 0;
      bool even = true;
      for (std::size_t k = 0; k < n; ++k) maxn = std::max(maxn, b1k[k].numel());
      for (std::size_t k = 0; k < n; ++k) even = even && b1k[k].numel() == maxn;
      const auto mx = static_cast<std::size_t>(maxn);
      if (even && leading_dims_one(b.shape(), s.dim)) {  // pieces are in place in the block
        c.reduce_scatter(in, out, mx, dt, s.op).wait();
        break;
      }
      T* send = dm.template scratch<T, Space>(0, mx * n);
      for (std::size_t k = 0; k < n; ++k) copy_region<Space>(in, b, send + k * mx, b1k[k], b1k[k]);
      Space::fence();
      if (even) {  // this rank's piece lands in its block as it is
        c.reduce_scatter(send, out, mx, dt, s.op).wait();
        break;
      }
      T* recv = dm.template scratch<T, Space>(1, mx);
      c.reduce_scatter(send, recv, mx, dt, s.op).wait();
      Space::copy(out, recv, n_out * sizeof(T));
      break;
    }
    case step_kind::all_reduce:
      c.all_reduce(in, out, n_out, dt, s.op).wait();
      break;
    case step_kind::all_to_all:
      all_to_all_step<T, Space>(dm, c, members, b, b0k, b1, b1k, in, out);
      break;
    default: break;
  }
  b = b1;
}

/// Throws when the communicator cannot move buffers of `Space` (device memory needs a
/// communicator that takes device buffers -- nccl --, host memory one that does not).
template <class Space>
void check_space(comm::any_communicator& c, std::string_view who) {
  const std::string be = c.backend();
  const bool device = comm::moves_device_buffers(be);
  if (be == "?" || device == Space::device_buffers) return;
  throw error(std::string(who) + ": the tensor is in " + std::string(Space::name) + " memory, but the device mesh's " +
              "communicator is " + be + ", which moves " + (device ? "device" : "host") + " buffers only; " +
              (Space::device_buffers ? "make the device mesh on an nccl communicator (comm::nccl_communicator), or on "
                                       "comm::cuda_staged over a host one (several ranks a GPU)"
                                     : "keep tensors of a device mesh in cuda_space"));
}

/// Runs the steps of plan `p` cut into `runs`, through `layouts` (layouts[k] is the layout
/// before step k; plan/runs.hpp, plan_layouts), on this rank's block `in` (box `b`) of a
/// tensor of shape `global`, writing the target layout's block to `out` (which must not
/// overlap `in`). Intermediate blocks alternate between scratch slots 2 and 3. What
/// redistribute_local runs with a compile-time plan's constants and run_plan with a plan
/// known at run time.
template <class T, class Space, class Mesh, class Layouts>
void run_runs(device_mesh<Mesh>& dm, const plan_value& p, const plan_runs& runs, const Layouts& layouts,
              const shape_t& global, const T* in, box b, T* out) {
  if (p.n == 0) {
    if (in != out) Space::copy(out, in, static_cast<std::size_t>(b.numel()) * sizeof(T));
    Space::fence();
    return;
  }
  const T* from = in;
  for (int r = 0; r < runs.size(); ++r) {
    const step_run& run = runs[r];
    const layout_spec& before = layouts[static_cast<std::size_t>(run.begin)];
    const layout_spec& after = layouts[static_cast<std::size_t>(run.end)];
    T* to = out;
    if (r + 1 < runs.size())
      to = dm.template scratch<T, Space>(
          2 + r % 2, static_cast<std::size_t>(local_box(after, dm.shape(), global, dm.coords()).numel()));
    if (run.fused())
      run_exchange<T, Space>(dm, run.group, before, after, global, from, b, to);
    else
      run_step<T, Space>(dm, p[run.begin], before, after, global, from, b, to);
    from = to;
  }
  Space::fence();
}

/// Runs plan `p` from layout `src` (known only at run time: tessera-plan --run, the planner
/// check) as redistribute_local runs a compile-time plan.
template <class T, class Space = host_space, class Mesh>
void run_plan(device_mesh<Mesh>& dm, const layout_spec& src, const plan_value& p, const shape_t& global, const T* in,
              T* out) {
  run_runs<T, Space>(dm, p, runs_of(p), plan_layouts(src, p), global, in,
                     local_box(src, dm.shape(), global, dm.coords()), out);
}

}  // namespace tessera::detail
