// Context parallel (issue 14), docs/performance.md "Context parallel":
//
//   bench_cp balance [T] [cp...]   per-rank attention time (forward + backward of every block
//                                  pair a rank computes, one thread, the debug model's heads)
//                                  with head-tail balancing and with contiguous chunks, and
//                                  the imbalance max / mean over the ranks
//   bench_cp long [T] [cp] [steps] the debug model trained on one rank at T / cp and at T, and
//                                  with cp ranks (ring and all-gather) at T: per-rank peak of
//                                  tracked memory next to estimate_memory's, tokens/s, and
//                                  for cp the attention's compute and exposed-communication
//                                  time with the fraction of the ring's transfers hidden
// Prints Markdown tables. Run with TESSERA_NUM_THREADS=1 (one core per rank thread).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/kernels/cpu/ring_attention.hpp>
#include <tessera/parallel/context_parallel.hpp>
#include <tessera/tensor/memory.hpp>
#include <tessera/train/memory_estimator.hpp>
#include <tessera/train/parallel_llama.hpp>
#include <tessera/train/trainer.hpp>

using namespace tessera;

namespace {
using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

// ---- per-rank attention work -----------------------------------------------------------

/// Seconds of rank r's attention (forward and backward over every block it sees).
double rank_attention_s(std::int64_t T, int cp, int r, cp_balance_kind b, const std::vector<float>& q,
                        const std::vector<float>& k, const std::vector<float>& v, std::int64_t NH, std::int64_t HD) {
  const std::int64_t Tl = T / cp, n = Tl * NH * HD;
  std::vector<std::vector<std::int64_t>> pos;
  for (int s = 0; s < cp; ++s) pos.push_back(parallel::cp_positions(T, cp, s, b));
  std::vector<float> out(static_cast<std::size_t>(n)), ob(out.size()), lse(static_cast<std::size_t>(NH * Tl)),
      lb(lse.size()), D(lse.size()), dq(out.size()), dk(out.size()), dv(out.size()), dout(out.size(), 0.01f);
  const cpu::token_span qs{pos[static_cast<std::size_t>(r)].data(), nullptr, Tl};
  const float* Q = q.data() + r * n;
  const clock_type::time_point t0 = clock_type::now();
  std::fill(out.begin(), out.end(), 0.0f);
  std::fill(lse.begin(), lse.end(), -1e30f);
  for (int s = 0; s < cp; ++s) {
    const cpu::token_span ks{pos[static_cast<std::size_t>(s)].data(), nullptr, Tl};
    if (cpu::visibility(qs, ks) == cpu::block_visibility::none) continue;
    cpu::attention_block_forward(ob.data(), lb.data(), Q, k.data() + s * n, v.data() + s * n, qs, ks, 1, NH, NH, HD);
    cpu::attention_merge(out.data(), lse.data(), ob.data(), lb.data(), 1, Tl, NH, HD);
  }
  cpu::attention_delta(D.data(), dout.data(), out.data(), 1, Tl, NH, HD);
  for (int s = 0; s < cp; ++s) {
    const cpu::token_span ks{pos[static_cast<std::size_t>(s)].data(), nullptr, Tl};
    if (cpu::visibility(qs, ks) == cpu::block_visibility::none) continue;
    cpu::attention_block_backward(dq.data(), dk.data(), dv.data(), dout.data(), Q, k.data() + s * n,
                                  v.data() + s * n, lse.data(), D.data(), qs, ks, 1, NH, NH, HD);
  }
  return since(t0);
}

void balance_table(std::int64_t T, const std::vector<int>& cps) {
  const std::int64_t NH = debugmodel::config.n_heads, HD = head_dim(debugmodel::config);
  std::vector<float> q(static_cast<std::size_t>(T * NH * HD)), k(q.size()), v(q.size());
  std::mt19937 g(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto* x : {&q, &k, &v})
    for (float& e : *x) e = nd(g);
  std::printf("per-rank attention (forward + backward), sequence %lld, %lld heads of %lld, one thread:\n\n",
              static_cast<long long>(T), static_cast<long long>(NH), static_cast<long long>(HD));
  std::printf("| cp | balancing | per-rank ms (rank 0, 1, ...) | max / mean |\n|---|---|---|---|\n");
  for (int cp : cps)
    for (cp_balance_kind b : {cp_balance_kind::head_tail, cp_balance_kind::none}) {
      // median of 5 rounds after a warm-up; each round times every rank once, in a rotated
      // order, so that a drift of the machine's speed does not land on one rank
      (void)rank_attention_s(T, cp, 0, b, q, k, v, NH, HD);
      std::vector<std::vector<double>> reps(static_cast<std::size_t>(cp));
      for (int i = 0; i < 5; ++i)
        for (int j = 0; j < cp; ++j) {
          const int r = (j + i) % cp;
          reps[static_cast<std::size_t>(r)].push_back(rank_attention_s(T, cp, r, b, q, k, v, NH, HD));
        }
      std::vector<double> t;
      for (auto& x : reps) {
        std::sort(x.begin(), x.end());
        t.push_back(x[2]);
      }
      double mx = 0, sum = 0;
      std::string list;
      for (double x : t) {
        mx = std::max(mx, x), sum += x;
        char buf[32];
        std::snprintf(buf, sizeof buf, "%s%.1f", list.empty() ? "" : ", ", 1e3 * x);
        list += buf;
      }
      std::printf("| %d | %s | %s | %.3f |\n", cp, b == cp_balance_kind::head_tail ? "head-tail" : "none (contiguous)",
                  list.c_str(), mx / (sum / cp));
    }
}

// ---- long context ----------------------------------------------------------------------

thread_local std::int64_t rank_current = 0, rank_peak = 0;
void count(std::string_view, std::int64_t delta, std::int64_t, void*) {
  rank_current += delta;
  rank_peak = std::max(rank_peak, rank_current);
}

struct one_rank {
  static constexpr std::string_view name = "one_rank";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp">>;
};
template <cp_rotation_kind Rot>
struct cp_only {
  static constexpr std::string_view name = "cp";
  using model = debugmodel;
  using mesh = tessera::mesh<axis<"cp">>;
  using parallelize = tessera::parallelize<context_parallel<"cp", cp_rotation<Rot>>>;
};

struct rank_row {
  std::int64_t measured = 0, estimated = 0;
  double compute_s = 0, wait_s = 0, transfer_s = 0;
};

/// Seconds of one bare ring pass of `n` floats over `g` (the ring's transfer alone; median of 5).
double bare_pass_s(comm::any_communicator& g, std::int64_t n) {
  std::vector<float> a(static_cast<std::size_t>(n), 1.0f), b(a.size());
  const int next = (g.rank() + 1) % g.size(), prev = (g.rank() - 1 + g.size()) % g.size();
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) {
    g.barrier().wait();
    const clock_type::time_point t0 = clock_type::now();
    auto s = comm::send(g, std::span<const float>(a), next, 9000 + i);
    auto r = comm::recv(g, std::span<float>(b), prev, 9000 + i);
    s.wait();
    r.wait();
    t.push_back(since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[2];
}

template <class R>
void long_row(const char* what, int world, std::int64_t T, int steps) {
  const std::int64_t B = 1;
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(B * T * (steps + 2) + 1));
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 7 + i / 13) % 2048);
  std::vector<rank_row> rows(static_cast<std::size_t>(world));
  double step_s = 0;
  memory_tracker<host_space>::set_hook(&count);
  comm::run_threads(world, [&](comm::threads_communicator& c) {
    rank_current = 0, rank_peak = 0;
    rank_row& row = rows[static_cast<std::size_t>(c.rank())];
    {
      device_mesh<typename R::mesh> dm(typename R::mesh(world), c);
      train::parallel_llama<R> pm(dm);
      arena<float> m(pm.params().layout()), v(pm.params().layout());  // AdamW's m and v (as the estimate)
      pm.init_weights(0);
      train::batch_loader loader(tokens, B, T, 0);
      std::vector<double> times;
      std::vector<std::int32_t> in(static_cast<std::size_t>(B * T)), tg(in.size());
      for (int s = 0; s < steps; ++s) {
        loader.next(in, tg);
        dm.world().barrier().wait();
        const clock_type::time_point t0 = clock_type::now();
        pm.zero_grad();
        (void)pm.forward(in, tg, B, T);
        pm.backward();
        times.push_back(since(t0));
      }
      std::sort(times.begin(), times.end());
      if (c.rank() == 0) step_s = times[times.size() / 2];
      row.measured = rank_peak;
      row.estimated = estimate_memory<R>(dm.shape(), B, T, dm.coords()).tracked_peak();
      if constexpr (recipe_traits<R>::spec.cp >= 0) {
        const auto& t = pm.context().timing();
        row.compute_s = t.compute_s / steps, row.wait_s = t.wait_s / steps;
        if (recipe_traits<R>::spec.context.rotation == cp_rotation_kind::ring) {
          // per step: each of the L attentions passes cp - 1 K/V pairs forward, cp - 1 K/V
          // pairs and cp dK/dV pairs backward, each 2 x [T / cp, kv heads x hd] floats
          axis_group g;
          g.push(0);
          const llama_config& cfg = debugmodel::config;
          const std::int64_t n = 2 * B * (T / world) * cfg.n_kv_heads * head_dim(cfg);
          const double one = bare_pass_s(dm.group(g), n);
          row.transfer_s = one * static_cast<double>(cfg.n_layers * (3 * world - 2));
        }
      }
    }
  });
  memory_tracker<host_space>::set_hook(nullptr);
  std::int64_t mx = 0, est = 0;
  double comp = 0, wait = 0, transfer = 0;
  for (const rank_row& r : rows) {
    if (r.measured > mx) mx = r.measured, est = r.estimated;
    comp += r.compute_s / world, wait += r.wait_s / world, transfer += r.transfer_s / world;
  }
  std::string overlap = "-";
  if (transfer > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f (%.0f of %.0f ms exposed)", std::clamp(1.0 - wait / transfer, 0.0, 1.0),
                  1e3 * wait, 1e3 * transfer);
    overlap = buf;
  }
  std::printf("| %s | %d | %lld | %.1f | %.1f | %.4f | %.1f | %.0f | %s |\n", what, world, static_cast<long long>(T),
              mx / 1048576.0, est / 1048576.0, static_cast<double>(est) / static_cast<double>(mx), step_s,
              static_cast<double>(B * T) / step_s,
              transfer > 0 || comp > 0 ? (std::to_string(static_cast<int>(1e3 * comp)) + " / " +
                                          std::to_string(static_cast<int>(1e3 * wait)) + " ms; " + overlap)
                                             .c_str()
                                       : "-");
  std::fflush(stdout);
}

void long_table(std::int64_t T, int cp, int steps) {
  std::printf("the debug model, batch 1, forward + backward, median of %d step(s); memory: the largest rank's "
              "peak of tracked bytes (with AdamW's two arenas) and its estimate:\n\n",
              steps);
  std::printf("| run | ranks | seq | measured peak MiB | estimated MiB | est / meas | step s | tokens/s | attention "
              "compute / exposed comm per rank; ring transfer hidden |\n|---|---|---|---|---|---|---|---|---|\n");
  long_row<one_rank>("one rank", 1, T / cp, steps);
  long_row<one_rank>("one rank", 1, T, steps);
  long_row<cp_only<cp_rotation_kind::ring>>("cp ring", cp, T, steps);
  long_row<cp_only<cp_rotation_kind::allgather>>("cp all-gather", cp, T, steps);
}
}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "balance") {
    const std::int64_t T = argc > 2 ? std::atoll(argv[2]) : 4096;
    std::vector<int> cps;
    for (int i = 3; i < argc; ++i) cps.push_back(std::atoi(argv[i]));
    if (cps.empty()) cps = {2, 4, 8};
    for (int cp : cps)
      if (cp < 1 || T % (2 * cp) != 0) {
        std::fprintf(stderr, "bench_cp: seq_len %lld is not divisible by 2 x cp (%d)\n", static_cast<long long>(T), cp);
        return 2;
      }
    balance_table(T, cps);
    return 0;
  }
  if (what == "long") {
    const std::int64_t T = argc > 2 ? std::atoll(argv[2]) : 16384;
    const int cp = argc > 3 ? std::atoi(argv[3]) : 4, steps = argc > 4 ? std::atoi(argv[4]) : 1;
    if (cp < 1 || T % (2 * cp) != 0 || steps < 1) {
      std::fprintf(stderr, "bench_cp long: seq_len must be divisible by 2 x cp, steps >= 1\n");
      return 2;
    }
    long_table(T, cp, steps);
    return 0;
  }
  std::fprintf(stderr, "usage: bench_cp balance [seq_len] [cp...] | bench_cp long [seq_len] [cp] [steps]\n");
  return 2;
}
