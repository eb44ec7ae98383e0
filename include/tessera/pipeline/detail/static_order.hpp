// tessera/pipeline/detail/static_order.hpp: Megatron-style fixed orders (loop placement).
//
// Microbatches go in groups of G. A rank's forwards run group by group, within a group
// chunk by chunk (lowest local stage first), within a chunk microbatch by microbatch; its
// backwards the same with chunks reversed. Rank r runs `warmup[r]` forwards, then a
// steady state, then the rest of the backwards:
//   1F1B mode:  F, B, F, B, ...                           (interleaved 1F1B)
//   split mode: I, W (lagging `lag[r]` I's behind), F, ...  (zero bubble H1 style)
// The generators keep such an order only when it runs and fits the memory budget; for
// microbatch counts where the fixed order would wait forever they use the list scheduler.
#pragma once

#include <algorithm>
#include <tessera/pipeline/schedule.hpp>
#include <vector>

namespace tessera::pipeline::detail {

constexpr schedule static_order(int p, int v, int m, int group, const std::vector<int>& warmup, bool split,
                                const std::vector<int>& lag) {
  schedule s = make_empty(p, p * v, m, placement::loop);
  struct keyed {
    int g, k, mb;
  };
  for (int r = 0; r < p; ++r) {
    std::vector<keyed> fk, bk;
    fk.reserve(static_cast<std::size_t>(v * m));
    for (int k = 0; k < v; ++k)
      for (int mb = 0; mb < m; ++mb) fk.push_back({mb / group, k, mb});
    bk = fk;
    std::sort(fk.begin(), fk.end(), [](const keyed& a, const keyed& b) {
      return a.g != b.g ? a.g < b.g : a.k != b.k ? a.k < b.k : a.mb < b.mb;
    });
    std::sort(bk.begin(), bk.end(), [](const keyed& a, const keyed& b) {
      return a.g != b.g ? a.g < b.g : a.k != b.k ? a.k > b.k : a.mb < b.mb;
    });
    auto& out = s.actions[static_cast<std::size_t>(r)];
    out.reserve(static_cast<std::size_t>(v * m * (split ? 3 : 2)));
    const std::size_t n = fk.size();
    std::size_t fi = 0, bi = 0, wi = 0;
    auto emit_f = [&] {
      out.push_back(action{op::F, fk[fi].k * p + r, fk[fi].mb});
      ++fi;
    };
    auto emit_b = [&] {
      out.push_back(action{split ? op::I : op::B, bk[bi].k * p + r, bk[bi].mb});
      ++bi;
    };
    auto emit_w_if_due = [&](std::size_t lag_now) {
      if (split && wi < bi && bi - wi > lag_now) {
        out.push_back(action{op::W, bk[wi].k * p + r, bk[wi].mb});
        ++wi;
      }
    };
    const auto w = static_cast<std::size_t>(std::min(warmup[static_cast<std::size_t>(r)], static_cast<int>(n)));
    const auto l = static_cast<std::size_t>(lag[static_cast<std::size_t>(r)]);
    while (fi < w) emit_f();
    while (fi < n) {
      if (split) {
        emit_b();
        emit_w_if_due(l);
        emit_f();
      } else {
        emit_f();
        emit_b();
      }
    }
    while (bi < n) {
      emit_b();
      emit_w_if_due(l);
    }
    while (split && wi < bi) emit_w_if_due(0);
  }
  return s;
}

}  // namespace tessera::pipeline::detail
