// tessera/pipeline/detail/greedy.hpp: the list scheduler behind the generators.
//
// Every generator is this one engine with a policy: ranks run in simulated time under
// the generation costs; when a rank is free it picks, among the actions whose inputs have
// arrived, the best by the policy's priority (backward first or forward first; deeper or
// shallower stage first; W only to fill idle time or to free memory), with a per-rank cap
// on live activations. Because it only ever picks actions whose inputs exist, the result
// is valid for every microbatch count; the cap is relaxed (one forward at a time) only
// when every rank would otherwise wait forever.
#pragma once

#include <algorithm>
#include <tessera/pipeline/schedule.hpp>
#include <tessera/pipeline/simulate.hpp>
#include <vector>

namespace tessera::pipeline::detail {

struct greedy_policy {
  bool split = false;           ///< backward as I then W (zero-bubble family)
  bool breadth_first = false;   ///< a rank starts backward only after all its forwards
  bool forward_deep_first = true;   ///< among ready F, the higher stage first
  bool backward_mb_first = true;    ///< among ready B/I, the older microbatch first
  bool w_lazy = true;           ///< W only when nothing else is ready or the cap is hit
  bool backward_lifo = false;   ///< backward of the newest microbatch first (breadth first)
  bool w_follow = false;        ///< a W right after each I (F, I, W cycles)
  bool alternate = true;        ///< after a backward prefer a forward (1F1B's steady state)
  std::vector<int> cap;         ///< per rank live-activation cap (soft)
  costs c{1, 2, 1, 1, 0};
};

struct greedy_pick {
  double t = -1;   ///< decision time, <0: none
  int kind = -1;   ///< 0 F, 1 B/I, 2 W
  int chunk = -1;
};

constexpr schedule greedy(int p, int stages, int m, placement place, const greedy_policy& g) {
  schedule s = make_empty(p, stages, m, place);
  const int v = stages / p;
  // Local stages of each rank, ascending.
  std::vector<std::vector<int>> local(static_cast<std::size_t>(p), std::vector<int>{});
  for (int st = 0; st < stages; ++st) local[static_cast<std::size_t>(s.rank_of(st))].push_back(st);
  const std::size_t pairs = static_cast<std::size_t>(stages) * static_cast<std::size_t>(m);
  std::vector<double> fdone(pairs, -1), bdone(pairs, -1);
  std::vector<int> fnext(static_cast<std::size_t>(stages), 0), bnext(static_cast<std::size_t>(stages), 0);
  struct rank_state {
    double free = 0;
    int live = 0;
    int fleft = 0;
    std::vector<action> wq;
    std::size_t whead = 0;
    int version = 0;
    int last = 0;  // kind of the last action: 0 F, 1 B/I, 2 W
    int before_last = -1;
  };
  std::vector<rank_state> rs(static_cast<std::size_t>(p), rank_state{});
  for (auto& r : rs) r.fleft = v * m;
  for (auto& a : s.actions) a.reserve(static_cast<std::size_t>(v * m * (g.split ? 3 : 2)));
  const double cb = g.split ? g.c.I : g.c.B;
  auto idx = [&](int st, int mb) { return static_cast<std::size_t>(st) * static_cast<std::size_t>(m) + static_cast<std::size_t>(mb); };
  auto arrive = [&](double t, int from, int to) { return s.rank_of(from) == s.rank_of(to) ? t : t + g.c.latency; };
  auto f_ready = [&](int st, int mb) -> double {
    if (st == 0) return 0;
    const double t = fdone[idx(st - 1, mb)];
    return t < 0 ? -1 : arrive(t, st - 1, st);
  };
  auto bmb = [&](int j) { return g.backward_lifo ? m - 1 - j : j; };
  auto b_ready = [&](int st, int mb) -> double {
    const double tf = fdone[idx(st, mb)];
    if (tf < 0) return -1;
    if (st + 1 == stages) return tf;
    const double tb = bdone[idx(st + 1, mb)];
    if (tb < 0) return -1;
    const double a = arrive(tb, st + 1, st);
    return a > tf ? a : tf;
  };
  // The pick of rank r: the earliest time it can start something, and what.
  auto pick = [&](int r, bool ignore_cap) -> greedy_pick {
    const auto& st = rs[static_cast<std::size_t>(r)];
    const auto& loc = local[static_cast<std::size_t>(r)];
    const int cap = g.cap.empty() ? v * m : g.cap[static_cast<std::size_t>(r)];
    double fr[16]{}, br[16]{};
    double earliest = -1;
    auto consider = [&](double t) {
      if (t >= 0) {
        const double u = t > st.free ? t : st.free;
        if (earliest < 0 || u < earliest) earliest = u;
      }
    };
    const bool f_ok = ignore_cap || st.live < cap;
    const bool b_ok = !g.breadth_first || st.fleft == 0;
    for (std::size_t k = 0; k < loc.size(); ++k) {
      const int stg = loc[k];
      fr[k] = br[k] = -1;
      if (f_ok && fnext[static_cast<std::size_t>(stg)] < m) fr[k] = f_ready(stg, fnext[static_cast<std::size_t>(stg)]);
      if (b_ok && bnext[static_cast<std::size_t>(stg)] < m) br[k] = b_ready(stg, bmb(bnext[static_cast<std::size_t>(stg)]));
      consider(fr[k]);
      consider(br[k]);
    }
    const bool w_avail = st.whead < st.wq.size();
    const bool w_now = w_avail && (!g.w_lazy || st.live >= cap);
    if (w_now) consider(st.free);
    if (earliest < 0) {
      if (w_avail) return {st.free, 2, -1};  // nothing else will come without it
      return {};
    }
    const double t = earliest;
    greedy_pick best{t, -1, -1};
    auto better_b = [&](std::size_t a, std::size_t b) {  // is chunk a better than b for B
      const int ma = bnext[static_cast<std::size_t>(loc[a])], mb_ = bnext[static_cast<std::size_t>(loc[b])];
      if (g.backward_mb_first && ma != mb_) return ma < mb_;
      return loc[a] > loc[b];
    };
    auto better_f = [&](std::size_t a, std::size_t b) {
      if (g.forward_deep_first) return loc[a] > loc[b];
      return loc[a] < loc[b];
    };
    int bk = -1, fk = -1;
    for (std::size_t k = 0; k < loc.size(); ++k) {
      if (br[k] >= 0 && br[k] <= t && (bk < 0 || better_b(k, static_cast<std::size_t>(bk)))) bk = static_cast<int>(k);
      if (fr[k] >= 0 && fr[k] <= t && (fk < 0 || better_f(k, static_cast<std::size_t>(fk)))) fk = static_cast<int>(k);
    }
    if (g.breadth_first) {
      if (fk >= 0) return {t, 0, fk};
      if (bk >= 0) return {t, 1, bk};
    } else {
      if (g.w_follow && st.last == 1 && w_avail && (st.fleft > 0 || st.before_last == 0)) return {t, 2, -1};
      if (g.alternate && st.last != 0 && fk >= 0) return {t, 0, fk};
      if (bk >= 0) return {t, 1, bk};
      if (fk >= 0) return {t, 0, fk};
    }
    if (w_avail) return {t, 2, -1};
    return best;
  };
  struct entry {
    double t;
    int rank;
    int version;
  };
  auto later = [](const entry& a, const entry& b) { return a.t != b.t ? a.t > b.t : a.rank > b.rank; };
  std::vector<entry> heap;
  auto refresh = [&](int r) {
    auto& st = rs[static_cast<std::size_t>(r)];
    ++st.version;
    const greedy_pick pk = pick(r, false);
    if (pk.t >= 0) {
      heap.push_back({pk.t, r, st.version});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (int r = 0; r < p; ++r) refresh(r);
  std::size_t remaining = static_cast<std::size_t>(stages) * static_cast<std::size_t>(m) * (g.split ? 3u : 2u);
  while (remaining > 0) {
    int r = -1;
    bool relaxed = false;
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), later);
      const entry e = heap.back();
      heap.pop_back();
      if (e.version == rs[static_cast<std::size_t>(e.rank)].version) {
        r = e.rank;
        break;
      }
    }
    if (r < 0) {  // every rank waits: let the earliest capped forward through
      double best_t = -1;
      for (int q = 0; q < p; ++q) {
        const greedy_pick pk = pick(q, true);
        if (pk.t >= 0 && (best_t < 0 || pk.t < best_t)) best_t = pk.t, r = q;
      }
      if (r < 0) break;  // cannot happen for a valid policy; verify() will say what is wrong
      relaxed = true;
    }
    auto& st = rs[static_cast<std::size_t>(r)];
    const greedy_pick pk = pick(r, relaxed);
    const auto& loc = local[static_cast<std::size_t>(r)];
    action a{};
    double cost = 0;
    if (pk.kind == 0) {
      const int stg = loc[static_cast<std::size_t>(pk.chunk)];
      a = action{op::F, stg, fnext[static_cast<std::size_t>(stg)]++};
      cost = g.c.F;
      fdone[idx(a.stage, a.mb)] = pk.t + cost;
      ++st.live;
      --st.fleft;
      st.before_last = st.last;
      st.last = 0;
    } else if (pk.kind == 1) {
      const int stg = loc[static_cast<std::size_t>(pk.chunk)];
      a = action{g.split ? op::I : op::B, stg, bmb(bnext[static_cast<std::size_t>(stg)]++)};
      cost = cb;
      bdone[idx(a.stage, a.mb)] = pk.t + cost;
      st.before_last = st.last;
      st.last = 1;
      if (g.split) st.wq.push_back(action{op::W, a.stage, a.mb});
      else --st.live;
    } else {
      a = st.wq[st.whead++];
      st.before_last = st.last;
      st.last = 2;
      cost = g.c.W;
      --st.live;
    }
    s.actions[static_cast<std::size_t>(r)].push_back(a);
    st.free = pk.t + cost;
    --remaining;
    refresh(r);
    if (a.kind != op::W) {
      const int w = consumer_rank(s, a);
      if (w >= 0 && w != r) refresh(w);
    }
  }
  return s;
}

}  // namespace tessera::pipeline::detail
