// tessera/pipeline/detail/v_order.hpp: a fixed ZB-V style order (V placement, split
// backward), offered to the V-shaped generators next to the list scheduler.
//
// Rank r holds chunk 0 (stage r) and chunk 1 (stage 2p-1-r). It runs
//   warm-up:  min(m, 2(p-1-r)+1) forwards of chunk 0, then forwards of chunk 1 and
//             chunk 0 alternately until r+1 forwards of chunk 1 are done;
//   then:     I and W of chunk 1, and p-1-r times (F, I, W) of chunk 1;
//   steady:   F of chunk 0, I+W of chunk 0, F of chunk 1, I+W of chunk 1, ... skipping
//             what is used up, until everything ran.
// Each I is followed by its W (W of microbatch j right after I of j), which keeps the
// activations of 1F1B; once all forwards ran, a W may lag `cooldown_lag` I's behind. The generator keeps this order only when it runs and fits the
// memory budget.
#pragma once

#include <tessera/pipeline/schedule.hpp>
#include <vector>

namespace tessera::pipeline::detail {

constexpr schedule v_order(int p, int m, int cooldown_lag) {
  schedule s = make_empty(p, 2 * p, m, placement::v_shape);
  for (int r = 0; r < p; ++r) {
    const int a = r, b = 2 * p - 1 - r;
    auto& out = s.actions[static_cast<std::size_t>(r)];
    out.reserve(static_cast<std::size_t>(6 * m));
    int f0 = 0, f1 = 0, i0 = 0, i1 = 0;
    auto F0 = [&] { if (f0 < m) out.push_back(action{op::F, a, f0++}); };
    auto F1 = [&] { if (f1 < m) out.push_back(action{op::F, b, f1++}); };
    auto IW0 = [&] {
      if (i0 < f0) {
        out.push_back(action{op::I, a, i0});
        out.push_back(action{op::W, a, i0++});
      }
    };
    auto IW1 = [&] {
      if (i1 < f1) {
        out.push_back(action{op::I, b, i1});
        out.push_back(action{op::W, b, i1++});
      }
    };
    const int warm0 = 2 * (p - 1 - r) + 1 < m ? 2 * (p - 1 - r) + 1 : m;
    while (f0 < warm0) F0();
    const int warm1 = r + 1 < m ? r + 1 : m;
    while (f1 < warm1) {
      F1();
      if (f1 < warm1) F0();
    }
    IW1();
    for (int k = 0; k < p - 1 - r; ++k) {
      F1();
      IW1();
    }
    while (f0 < m || f1 < m) {
      F0();
      IW0();
      F1();
      IW1();
    }
    // Cool-down: the I's feed the rank below, the W's only this one, so a W may wait
    // until `cooldown_lag` later I's have run.
    std::vector<action> ws;
    std::size_t wnext = 0;
    auto flush = [&](std::size_t keep) {
      while (ws.size() - wnext > keep) out.push_back(ws[wnext++]);
    };
    while (i0 < m || i1 < m) {
      if (i1 < m) {
        out.push_back(action{op::I, b, i1});
        ws.push_back(action{op::W, b, i1++});
        flush(static_cast<std::size_t>(cooldown_lag));
      }
      if (i0 < m) {
        out.push_back(action{op::I, a, i0});
        ws.push_back(action{op::W, a, i0++});
        flush(static_cast<std::size_t>(cooldown_lag));
      }
    }
    flush(0);
  }
  return s;
}

}  // namespace tessera::pipeline::detail
