// A reference executor for plans, written from the step semantics alone (collective.hpp),
// used to check the planner: every rank holds a box of the global tensor and its values;
// steps move boxes and values between the ranks of a simulated mesh. It checks on the
// way that the boxes a step joins are adjacent and consistent, and the tests compare
// the result with local_box() of the target layout and with the global tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <tessera/layout/local_shape.hpp>
#include <tessera/layout/mesh.hpp>
#include <tessera/plan/collective.hpp>

namespace sim {

using tessera::box;
using tessera::coords_t;
using tessera::mesh_shape;
using tessera::plan_step;
using tessera::reduce;
using tessera::shape_t;
using tessera::step_kind;

struct rank_state {
  box b;
  std::vector<double> v;  // row-major over b
};

inline std::int64_t flat(const box& b, const std::array<std::int64_t, tessera::max_tensor_rank>& idx) {
  std::int64_t f = 0;
  for (int d = 0; d < b.rank; ++d) f = f * b.size[static_cast<std::size_t>(d)] + (idx[static_cast<std::size_t>(d)] - b.offset[static_cast<std::size_t>(d)]);
  return f;
}

/// Calls f(global index array) for every element of box b in row-major order.
template <class F>
void for_each_index(const box& b, F&& f) {
  if (b.numel() == 0) return;
  std::array<std::int64_t, tessera::max_tensor_rank> idx{};
  for (int d = 0; d < b.rank; ++d) idx[static_cast<std::size_t>(d)] = b.offset[static_cast<std::size_t>(d)];
  while (true) {
    f(idx);
    int d = b.rank - 1;
    for (; d >= 0; --d) {
      auto& x = idx[static_cast<std::size_t>(d)];
      if (++x < b.offset[static_cast<std::size_t>(d)] + b.size[static_cast<std::size_t>(d)]) break;
      x = b.offset[static_cast<std::size_t>(d)];
    }
    if (d < 0) return;
  }
}

inline rank_state sub_block(const rank_state& r, const box& nb) {
  rank_state out{nb, std::vector<double>(static_cast<std::size_t>(nb.numel()))};
  std::size_t k = 0;
  for_each_index(nb, [&](const auto& idx) { out.v[k++] = r.v[static_cast<std::size_t>(flat(r.b, idx))]; });
  return out;
}

/// Splits box b along d over the group's axes, nested (the first axis splits, each next
/// axis splits the piece left), and returns the piece of the rank at coordinates c.
inline box split(box b, int d, const mesh_shape& m, const tessera::axis_group& g, const coords_t& c) {
  const auto ud = static_cast<std::size_t>(d);
  for (int i = 0; i < g.n; ++i) {
    const std::int64_t n = b.size[ud], parts = m[g[i]], k = c[static_cast<std::size_t>(g[i])];
    b.offset[ud] += tessera::split_offset(n, parts, k);
    b.size[ud] = tessera::split_size(n, parts, k);
  }
  return b;
}

inline void fail(const std::string& what) { throw std::runtime_error("simulate: " + what); }

inline double combine(reduce op, double a, double b) {
  switch (op) {
    case reduce::sum:
    case reduce::avg: return a + b;
    case reduce::max: return a > b ? a : b;
    case reduce::min: return a < b ? a : b;
  }
  return a;
}

/// Concatenates the group members' blocks along dim d (in group order).
inline rank_state concat(const std::vector<const rank_state*>& parts, int d) {
  const auto ud = static_cast<std::size_t>(d);
  box b = parts[0]->b;
  for (std::size_t k = 1; k < parts.size(); ++k) {
    const box& p = parts[k]->b;
    for (int e = 0; e < b.rank; ++e) {
      const auto ue = static_cast<std::size_t>(e);
      if (e == d) continue;
      if (p.offset[ue] != b.offset[ue] || p.size[ue] != b.size[ue]) fail("gathered blocks differ outside the gathered dim");
    }
    if (p.offset[ud] != b.offset[ud] + b.size[ud]) fail("gathered blocks are not adjacent along dim " + std::to_string(d));
    b.size[ud] += p.size[ud];
  }
  rank_state out{b, std::vector<double>(static_cast<std::size_t>(b.numel()))};
  for (const rank_state* p : parts)
    for_each_index(p->b, [&](const auto& idx) {
      out.v[static_cast<std::size_t>(flat(b, idx))] = p->v[static_cast<std::size_t>(flat(p->b, idx))];
    });
  return out;
}

/// Reduces the group members' blocks (which must be the same box) with op.
inline rank_state reduce_all(const std::vector<const rank_state*>& parts, reduce op) {
  rank_state out = *parts[0];
  for (std::size_t k = 1; k < parts.size(); ++k) {
    if (!(parts[k]->b == out.b)) fail("reduced blocks differ");
    for (std::size_t i = 0; i < out.v.size(); ++i) out.v[i] = combine(op, out.v[i], parts[k]->v[i]);
  }
  if (op == reduce::avg)
    for (double& x : out.v) x /= static_cast<double>(parts.size());
  return out;
}

/// Runs one step on all ranks.
inline std::vector<rank_state> run_step(const std::vector<rank_state>& in, const mesh_shape& m, const plan_step& s) {
  const std::int64_t world = tessera::world_size(m);
  std::vector<rank_state> out(static_cast<std::size_t>(world));
  for (std::int64_t r = 0; r < world; ++r) {
    const coords_t c = tessera::coords_of(m, r);
    const std::int64_t gi = tessera::group_index(m, s.group, c);
    std::vector<const rank_state*> members;
    for (std::int64_t q : tessera::group_ranks(m, s.group, r)) members.push_back(&in[static_cast<std::size_t>(q)]);
    const rank_state& me = in[static_cast<std::size_t>(r)];
    rank_state res;
    switch (s.kind) {
      case step_kind::all_gather: res = concat(members, s.dim); break;
      case step_kind::all_to_all: {
        const rank_state whole = concat(members, s.dim);
        res = sub_block(whole, split(whole.b, s.to_dim, m, s.group, c));
        break;
      }
      case step_kind::all_reduce: res = reduce_all(members, s.op); break;
      case step_kind::reduce_scatter: {
        const rank_state whole = reduce_all(members, s.op);
        res = sub_block(whole, split(whole.b, s.dim, m, s.group, c));
        break;
      }
      case step_kind::local_slice: res = sub_block(me, split(me.b, s.dim, m, s.group, c)); break;
      case step_kind::local_partial:
        res = me;
        if (s.op == reduce::sum && gi != 0)
          for (double& x : res.v) x = 0;
        break;
    }
    out[static_cast<std::size_t>(r)] = std::move(res);
  }
  return out;
}

}  // namespace sim
