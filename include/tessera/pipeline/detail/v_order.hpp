// tessera/pipeline/detail/v_order.hpp: a fixed ZB-V style order (V placement, split
// backward), offered to the V-shaped generators next to the list scheduler.
//
// Rank r holds chunk 0 (stage r) and chunk 1 (stage 2p-1-r). It runs
//   warm-up:   min(m, 2(p-1-r)+1) forwards of chunk 0, then forwards of chunk 1 and
//              chunk 0 alternately until r+1 forwards of chunk 1 are done;
//   then:      I and W of chunk 1, and p-1-r times (F, I, W) of chunk 1;
//   steady:    F of chunk 0, I+W of chunk 0, F of chunk 1, I+W of chunk 1, ... skipping
//              what is used up, until all forwards ran;
//   cool-down: the I's left, chunk 0 then chunk 1 alternately, each W deferred until
//              `w_lag_per_rank` * r later I's have run, then the W's left.
// Until the cool-down each I is followed by its W, which keeps the activations of 1F1B.
// In the cool-down an I of rank r is what ranks below it wait for (the chunk-0 chain runs
// down to rank 0), a W only delays this rank: rank 0 feeds nobody and runs each W at once,
// higher ranks push their W's back in proportion to the ranks that wait on them.
// The generator keeps this order only when it fits the memory budget and no other
// candidate is faster.
#pragma once

#include <tessera/pipeline/schedule.hpp>
#include <vector>

namespace tessera::pipeline::detail {

constexpr schedule v_order(int p, int m, int w_lag_per_rank) {
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
    // Cool-down: W's wait in `ws` until `lag` later I's have run.
    std::vector<action> ws;
    ws.reserve(static_cast<std::size_t>(2 * m));
    std::size_t wnext = 0;
    const auto lag = static_cast<std::size_t>(w_lag_per_rank * r);
    auto flush = [&](std::size_t keep) {
      while (ws.size() - wnext > keep) out.push_back(ws[wnext++]);
    };
    auto I = [&](int stage, int& i) {
      if (i < m) {
        out.push_back(action{op::I, stage, i});
        ws.push_back(action{op::W, stage, i++});
        flush(lag);
      }
    };
    while (i0 < m || i1 < m) {
      I(a, i0);
      I(b, i1);
    }
    flush(0);
  }
  return s;
}

}  // namespace tessera::pipeline::detail
