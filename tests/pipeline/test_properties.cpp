// Property tests over p in {2,4,8}, stages per rank in {1,2,4}, m in 1..4p, every schedule.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tessera/pipeline/pipeline.hpp>

namespace {
using namespace tessera::pipeline;

template <class F>
void for_each_case(F&& f) {
  for (schedule_kind k : all_schedule_kinds)
    for (int p : {2, 4, 8})
      for (int v : {1, 2, 4})
        for (int m = 1; m <= 4 * p; ++m)
          if (check_arguments(k, p, v, m).empty()) f(k, p, v, m);
}

std::string name(schedule_kind k, int p, int v, int m) {
  return std::string(schedule_name(k)) + " p=" + std::to_string(p) + " v=" + std::to_string(v) + " m=" + std::to_string(m);
}
}  // namespace

TEST_CASE("every generated schedule verifies, lowered or not, with or without FSDP") {
  int cases = 0;
  for_each_case([&](schedule_kind k, int p, int v, int m) {
    INFO(name(k, p, v, m));
    const schedule s = generate(k, p, v, m);
    const verify_result r = verify(s);
    REQUIRE_MESSAGE(r.ok, r.message());
    const bool split = k == schedule_kind::interleaved_zero_bubble || k == schedule_kind::zbv_zero_bubble ||
                       k == schedule_kind::dualpipe_v;
    CHECK(s.size() == static_cast<std::size_t>(p * v * m * (split ? 3 : 2)));
    for (bool fsdp : {false, true}) {
      const schedule low = lower(s, {.fsdp = fsdp});
      const verify_result rl = verify(low);
      REQUIRE_MESSAGE(rl.ok, rl.message());
      // No send/recv between stages of one rank; all compute kept in order.
      for (std::size_t q = 0; q < low.actions.size(); ++q)
        for (const action& a : low.actions[q])
          if (a.kind == op::SEND_F) CHECK(low.rank_of(a.stage + 1) != static_cast<int>(q));
      CHECK(compute_only(low).actions == s.actions);
    }
    ++cases;
  });
  CHECK(cases > 900);
}

TEST_CASE("simulation: busy time is the work, idle is the rest, memory within the budget") {
  for_each_case([&](schedule_kind k, int p, int v, int m) {
    INFO(name(k, p, v, m));
    const costs c = per_chunk({}, v);
    const simulation sim = simulate(generate(k, p, v, m), c);
    REQUIRE(sim.ok);
    for (int r = 0; r < p; ++r) {
      CHECK(sim.busy[static_cast<std::size_t>(r)] == doctest::Approx(3.0 * m));  // F + B = 1 + 2 per full stage
      CHECK(sim.idle[static_cast<std::size_t>(r)] == doctest::Approx(sim.makespan - 3.0 * m));
      CHECK(sim.peak_activations[static_cast<std::size_t>(r)] >= 1);
      CHECK(sim.peak_activations[static_cast<std::size_t>(r)] <= v * m);
    }
    // A pipeline cannot beat one rank's work plus the fill of the first microbatch.
    CHECK(sim.makespan >= 3.0 * m + (p - 1) * 1.0 / v - 1e-9);
    if (v == 1 && (k == schedule_kind::gpipe || k == schedule_kind::one_f_one_b)) {
      CHECK(sim.makespan == doctest::Approx(3.0 * (m + p - 1)));
    }
    // Memory stays within the schedule's budget (the list scheduler never had to relax
    // it). InterleavedZeroBubble's budget may grow to its fixed order's peak, see below.
    if (k != schedule_kind::interleaved_zero_bubble) {
      const schedule_kind bk = k == schedule_kind::one_f_one_b && v > 1 ? schedule_kind::interleaved_1f1b : k;
      const std::vector<int> cap = detail::budget(bk, p, v, m);
      for (int r = 0; r < p; ++r)
        CHECK(sim.peak_activations[static_cast<std::size_t>(r)] <= cap[static_cast<std::size_t>(r)]);
    } else {
      // The fixed order with PyTorch's round size G holds at most its warm-up plus one.
      const int G = m / std::max(1, m / p);
      for (int r = 0; r < p; ++r)
        CHECK(sim.peak_activations[static_cast<std::size_t>(r)] <= std::min(v * m, std::max(v * p, (v - 1) * G + p + 1)));
    }
    if (k == schedule_kind::one_f_one_b && v == 1)
      for (int r = 0; r < p; ++r) CHECK(sim.peak_activations[static_cast<std::size_t>(r)] == std::min(m, p - r));
  });
}

TEST_CASE("simulation with latency: makespan grows, order stays valid") {
  const schedule s = interleaved_1f1b(4, 2, 8);
  const double t0 = simulate(s, {}).makespan;
  const double t1 = simulate(s, {1, 2, 1, 1, 0.25}).makespan;
  CHECK(t1 > t0);
}

TEST_CASE("seeded mutations: the verifier and the simulator agree on what can run") {
  std::mt19937 rng(12345);
  int rejected = 0, total = 0;
  for (schedule_kind k : all_schedule_kinds)
    for (int p : {2, 4}) {
      const int v = (k == schedule_kind::zbv_zero_bubble || k == schedule_kind::dualpipe_v) ? 2 : 2;
      const schedule base = lower(generate(k, p, v, p + 1));
      for (int trial = 0; trial < 60; ++trial) {
        schedule s = base;
        auto& list = s.actions[rng() % s.actions.size()];
        const std::size_t i = rng() % list.size();
        const int how = static_cast<int>(rng() % 3);
        if (how == 0 && i + 1 < list.size()) std::swap(list[i], list[i + 1]);  // reorder
        else if (how == 1) list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));  // drop
        else std::swap(list[i], list[rng() % list.size()]);  // swap far
        const verify_result r = verify(s);
        ++total;
        if (!r.ok) ++rejected;
        if (how == 1) CHECK_FALSE(r.ok);  // a dropped action is always missed
        if (r.ok) CHECK(simulate(s).ok);  // what verifies also runs
      }
    }
  CHECK(rejected > total / 4);
}
