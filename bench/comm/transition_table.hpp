// The transitions bench_comm_redistribute times (host memory: threads or MPI) and
// bench_gpu_transitions times again on GPUs (device memory over NCCL): issue 21's DTensor
// table on 4 ranks -- the nested 2-D swap [S(0),S(1)] -> [S(1),S(0)] on a 2 x 2 mesh, and on
// a 1-D mesh of 4: S(0) -> R (all_gather), P -> R (all_reduce, into a reused result and into
// a fresh one), P -> S(0) (reduce_scatter), S(0) -> S(1) (all_to_all) -- and, with `eight`,
// the nested swap on a 2 x 4 mesh next to one all_to_all of the same bytes on 8 ranks.
// Every size of bench::sizes() (bytes = the global f32 tensor).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <tessera/bench/transition.hpp>

#include "bench_common.hpp"

namespace bench::table {

using namespace tessera;

using M = mesh<axis<"a", 2>, axis<"b", 2>>;
using AB = layout_t<M, 2, dim<0, "a">, dim<1, "b">>;
using BA = layout_t<M, 2, dim<0, "b">, dim<1, "a">>;
using M24 = mesh<axis<"a", 2>, axis<"b", 4>>;
using AB24 = layout_t<M24, 2, dim<0, "a">, dim<1, "b">>;
using BA24 = layout_t<M24, 2, dim<0, "b">, dim<1, "a">>;
using M4 = mesh<axis<"x", 4>>;
using S0 = layout_t<M4, 2, shard<0>>;
using S1 = layout_t<M4, 2, shard<1>>;
using R4 = layout_t<M4, 2, replicate>;
using P4 = layout_t<M4, 2, partial<>>;
using M8 = mesh<axis<"x", 8>>;
using S0_8 = layout_t<M8, 2, shard<0>>;
using S1_8 = layout_t<M8, 2, shard<1>>;

/// A square f32 tensor of about `bytes` bytes whose side is a multiple of `ranks`.
inline shape_t square(std::size_t bytes, std::int64_t ranks) {
  auto side = static_cast<std::int64_t>(std::sqrt(static_cast<double>(bytes / 4)));
  side = std::max(ranks, side / ranks * ranks);
  return {side, side};
}

inline tessera::bench::transition_options fixed(std::size_t bytes, bool fresh = false) {
  tessera::bench::transition_options o;
  o.iterations = ::bench::iterations(bytes);  // the same count on every rank and run
  o.fresh_result = fresh;
  return o;
}

/// Registers the table through `reg`, a generic lambda
/// []<class From, class To>(const std::string& name, const shape_t&, const transition_options&).
template <class Register>
void register_all(Register&& reg, bool eight) {
  for (std::size_t b : ::bench::sizes()) {
    const std::string s = "/" + std::to_string(b);
    const shape_t g = square(b, 4);
    reg.template operator()<AB, BA>("nested_2d/S0(a)S1(b)->S0(b)S1(a)" + s, g, fixed(b));
    reg.template operator()<S0, R4>("all_gather/S(0)->R" + s, g, fixed(b));
    reg.template operator()<P4, R4>("all_reduce/P->R" + s, g, fixed(b));
    reg.template operator()<P4, R4>("all_reduce_fresh_result/P->R" + s, g, fixed(b, true));
    reg.template operator()<P4, S0>("reduce_scatter/P->S(0)" + s, g, fixed(b));
    reg.template operator()<S0, S1>("all_to_all/S(0)->S(1)" + s, g, fixed(b));
  }
  if (eight)
    for (std::size_t b : ::bench::sizes()) {
      const std::string s = "/" + std::to_string(b);
      reg.template operator()<AB24, BA24>("nested_2d_2x4/S0(a)S1(b)->S0(b)S1(a)" + s, square(b, 8), fixed(b));
      reg.template operator()<S0_8, S1_8>("all_to_all_same_bytes/S(0)->S(1)" + s, square(b, 8), fixed(b));
    }
}

}  // namespace bench::table
