// Enumerates layouts for the planner's property tests.
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include <tessera/layout/layout_spec.hpp>

namespace testing_layouts {

/// All canonical layouts of a rank-R tensor on a mesh of A axes: every axis replicate,
/// partial (with `op`) or sharding some dim, in every order within a dim.
inline std::vector<tessera::layout_spec> all_layouts(int R, int A, tessera::reduce op, bool with_partial = true) {
  using tessera::layout_spec;
  std::vector<layout_spec> out;
  const int K = 2 + R;
  int total = 1;
  for (int a = 0; a < A; ++a) total *= K;
  for (int code = 0; code < total; ++code) {
    std::vector<int> state(static_cast<std::size_t>(A));
    int c = code;
    for (int a = 0; a < A; ++a) {
      state[static_cast<std::size_t>(a)] = c % K;
      c /= K;
    }
    if (!with_partial && std::count(state.begin(), state.end(), 1)) continue;
    std::vector<std::vector<int>> dims(static_cast<std::size_t>(R));
    for (int a = 0; a < A; ++a)
      if (state[static_cast<std::size_t>(a)] >= 2)
        dims[static_cast<std::size_t>(state[static_cast<std::size_t>(a)] - 2)].push_back(a);
    std::function<void(int, layout_spec)> rec = [&](int d, layout_spec s) {
      if (d == R) {
        for (int a = 0; a < A; ++a)
          if (state[static_cast<std::size_t>(a)] == 1) s.set_partial(a, op);
        out.push_back(s);
        return;
      }
      auto axes = dims[static_cast<std::size_t>(d)];
      do {
        layout_spec t = s;
        for (int a : axes) t.push_shard(d, a);
        rec(d + 1, t);
      } while (std::next_permutation(axes.begin(), axes.end()));
    };
    rec(0, tessera::replicated_spec(R, A));
  }
  return out;
}

}  // namespace testing_layouts
