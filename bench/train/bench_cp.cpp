// Context parallel (issue 14), docs/performance.md "Context parallel":
//
//   bench_cp balance [T] [cp...]   per-rank attention time (forward + backward of every block
//                                  pair a rank computes, one thread, the debug model's heads)
//                                  with head-tail balancing and with contiguous chunks, and
//                                  the imbalance max / mean over the ranks
//   bench_cp documents [T] [cp...] the same with packed documents (block-causal mask; lengths
//                                  log-uniform from 64 tokens to T / 2, and from T / 16 to
//                                  T / 2; seeded): the sequence's head-tail, contiguous
//                                  chunks, and head-tail per document
//   mpirun -np <cp> bench_cp long-mpi [T] [steps]
//                                  (with tessera::mpi) the cp rows of `long` on MPI processes
//   bench_cp long [T] [cp] [steps] the debug model trained on one rank at T / cp and at T, and
//                                  with cp ranks (ring and all-gather) at T: per-rank peak of
//                                  tracked memory next to estimate_memory's, tokens/s, and
//                                  for cp the attention's compute and exposed-communication
//                                  time with the fraction of the ring's transfers hidden
// Prints Markdown tables. Run with TESSERA_NUM_THREADS=1 (one core per rank thread).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <tessera/comm/threads.hpp>
#ifdef TESSERA_HAS_MPI
#include <tessera/comm/mpi.hpp>
#endif
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

/// Every cp rank's token positions in a sequence of T with documents `doc` (empty: none)
/// under balancing b, and the tokens' documents in the same order.
struct rank_tokens {
  std::vector<std::vector<std::int64_t>> pos;
  std::vector<std::vector<std::int32_t>> doc;
};
rank_tokens split_tokens(std::int64_t T, int cp, cp_balance_kind b, const std::vector<std::int32_t>& doc) {
  rank_tokens t;
  for (int s = 0; s < cp; ++s) {
    if (b == cp_balance_kind::per_document) {
      t.pos.emplace_back();
      parallel::cp_document_positions(t.pos.back(), doc.data(), T, cp, s);
    } else {
      t.pos.push_back(parallel::cp_positions(T, cp, s, b));
    }
    t.doc.emplace_back();
    if (!doc.empty())
      for (std::int64_t p : t.pos.back()) t.doc.back().push_back(doc[static_cast<std::size_t>(p)]);
  }
  return t;
}

/// Seconds of rank r's attention (forward and backward over every block it sees).
double rank_attention_s(std::int64_t T, int cp, int r, const rank_tokens& tok, const std::vector<float>& q,
                        const std::vector<float>& k, const std::vector<float>& v, std::int64_t NH, std::int64_t HD) {
  const std::int64_t Tl = T / cp, n = Tl * NH * HD;
  const auto& pos = tok.pos;
  auto span = [&](int s) {
    const auto& d = tok.doc[static_cast<std::size_t>(s)];
    return cpu::token_span{pos[static_cast<std::size_t>(s)].data(), d.empty() ? nullptr : d.data(), Tl};
  };
  std::vector<float> out(static_cast<std::size_t>(n)), ob(out.size()), lse(static_cast<std::size_t>(NH * Tl)),
      lb(lse.size()), D(lse.size()), dq(out.size()), dk(out.size()), dv(out.size()), dout(out.size(), 0.01f);
  const cpu::token_span qs = span(r);
  const float* Q = q.data() + r * n;
  const clock_type::time_point t0 = clock_type::now();
  std::fill(out.begin(), out.end(), 0.0f);
  std::fill(lse.begin(), lse.end(), -1e30f);
  for (int s = 0; s < cp; ++s) {
    const cpu::token_span ks = span(s);
    if (cpu::visibility(qs, ks) == cpu::block_visibility::none) continue;
    cpu::attention_block_forward(ob.data(), lb.data(), Q, k.data() + s * n, v.data() + s * n, qs, ks, 1, NH, NH, HD);
    cpu::attention_merge(out.data(), lse.data(), ob.data(), lb.data(), 1, Tl, NH, HD);
  }
  cpu::attention_delta(D.data(), dout.data(), out.data(), 1, Tl, NH, HD);
  for (int s = 0; s < cp; ++s) {
    const cpu::token_span ks = span(s);
    if (cpu::visibility(qs, ks) == cpu::block_visibility::none) continue;
    cpu::attention_block_backward(dq.data(), dk.data(), dv.data(), dout.data(), Q, k.data() + s * n,
                                  v.data() + s * n, lse.data(), D.data(), qs, ks, 1, NH, NH, HD);
  }
  return since(t0);
}

/// Packed documents: lengths log-uniform from `shortest` tokens to T / 2 (the last one cut at T).
std::vector<std::int32_t> packed_documents(std::int64_t T, std::int64_t shortest) {
  std::mt19937 g(11);
  std::uniform_real_distribution<double> u(std::log(static_cast<double>(shortest)),
                                           std::log(static_cast<double>(std::max(T / 2, shortest + 1))));
  std::vector<std::int32_t> doc;
  for (std::int32_t d = 0; static_cast<std::int64_t>(doc.size()) < T; ++d)
    for (auto n = static_cast<std::int64_t>(std::exp(u(g))); n > 0 && static_cast<std::int64_t>(doc.size()) < T; --n)
      doc.push_back(d);
  return doc;
}

void balance_table(std::int64_t T, const std::vector<int>& cps, std::int64_t shortest_document) {
  const bool documents = shortest_document > 0;
  const std::int64_t NH = debugmodel::config.n_heads, HD = head_dim(debugmodel::config);
  std::vector<float> q(static_cast<std::size_t>(T * NH * HD)), k(q.size()), v(q.size());
  std::mt19937 g(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto* x : {&q, &k, &v})
    for (float& e : *x) e = nd(g);
  const std::vector<std::int32_t> doc = documents ? packed_documents(T, shortest_document) : std::vector<std::int32_t>{};
  std::printf("per-rank attention (forward + backward), sequence %lld%s, %lld heads of %lld, one thread:\n\n",
              static_cast<long long>(T),
              documents ? (" packed with " + std::to_string(doc.back() + 1) + " documents of " +
                           std::to_string(shortest_document) + " to " + std::to_string(T / 2) + " tokens")
                              .c_str()
                        : "",
              static_cast<long long>(NH), static_cast<long long>(HD));
  std::printf("| cp | balancing | per-rank ms (rank 0, 1, ...) | max / mean |\n|---|---|---|---|\n");
  for (int cp : cps)
    for (cp_balance_kind b : {cp_balance_kind::head_tail, cp_balance_kind::none, cp_balance_kind::per_document}) {
      if (b == cp_balance_kind::per_document && !documents) continue;
      const rank_tokens tok = split_tokens(T, cp, b, doc);
      // median of 5 rounds after a warm-up; each round times every rank once, in a rotated
      // order, so that a drift of the machine's speed does not land on one rank
      (void)rank_attention_s(T, cp, 0, tok, q, k, v, NH, HD);
      std::vector<std::vector<double>> reps(static_cast<std::size_t>(cp));
      for (int i = 0; i < 5; ++i)
        for (int j = 0; j < cp; ++j) {
          const int r = (j + i) % cp;
          reps[static_cast<std::size_t>(r)].push_back(rank_attention_s(T, cp, r, tok, q, k, v, NH, HD));
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
      const char* name = b == cp_balance_kind::head_tail ? (documents ? "head-tail (sequence)" : "head-tail")
                         : b == cp_balance_kind::none ? "none (contiguous)"
                                                      : "head-tail per document";
      std::printf("| %d | %s | %s | %.3f |\n", cp, name, list.c_str(), mx / (sum / cp));
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


/// One ring pass of `n` floats over `g` (send to rank + 1, receive from rank - 1, posted as
/// cp_attention posts them), timed apart from the ranks' skew -- every round starts at a
/// barrier; medians of 5 rounds: `bare_s` posting and waiting with nothing between, the
/// transfer alone; `exposed_s` posting, then `compute` (a ring step's block), then waiting:
/// the part of the transfer the compute did not hide (posting counted: on in-process ranks
/// the copy happens there).
struct pass_timing {
  double bare_s = 0, exposed_s = 0;
  double hidden() const { return bare_s > 0 ? std::clamp(1.0 - exposed_s / bare_s, 0.0, 1.0) : 0.0; }
};
template <class F>
pass_timing ring_pass(comm::any_communicator& g, std::int64_t n, F&& compute) {
  std::vector<float> a(static_cast<std::size_t>(n), 1.0f), b(a.size());
  const int next = (g.rank() + 1) % g.size(), prev = (g.rank() - 1 + g.size()) % g.size();
  auto post = [&](int tag) {
    std::vector<comm::any_request> r;
    comm::group grp(g);
    r.push_back(comm::send(g, std::span<const float>(a), next, tag));
    r.push_back(comm::recv(g, std::span<float>(b), prev, tag));
    return r;
  };
  std::vector<double> bare, exposed;
  for (int i = 0; i < 5; ++i) {
    g.barrier().wait();
    clock_type::time_point t0 = clock_type::now();
    for (auto& r : post(9000 + 2 * i)) r.wait();
    bare.push_back(since(t0));
    g.barrier().wait();
    t0 = clock_type::now();
    auto inflight = post(9001 + 2 * i);
    const double posting = since(t0);
    compute();
    t0 = clock_type::now();
    for (auto& r : inflight) r.wait();
    exposed.push_back(posting + since(t0));
  }
  std::sort(bare.begin(), bare.end());
  std::sort(exposed.begin(), exposed.end());
  return {bare[2], exposed[2]};
}

struct rank_row {
  std::int64_t measured = 0, estimated = 0;
  double compute_s = 0, wait_s = 0, transfer_s = 0;
  pass_timing pass;  ///< one ring pass, bare and behind a block's compute (ring only)
};

/// Rank c's part of a long_row: `steps` steps of recipe R at T tokens (batch 1); returns its
/// peak and estimate, its attention time, and its ring transfers' bare time; rank 0 sets step_s.
template <class R, class C>
rank_row long_rank(C& c, int world, std::int64_t T, int steps, const std::vector<std::int32_t>& tokens,
                   double& step_s) {
  const std::int64_t B = 1;
  rank_row row;
  rank_current = 0, rank_peak = 0;
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
        const std::int64_t Tl = T / world, NH = cfg.n_heads, NKV = cfg.n_kv_heads, HD = head_dim(cfg);
        const std::int64_t n = 2 * B * Tl * NKV * HD;
        // the compute a pass hides behind: the forward of this rank's diagonal block
        const std::vector<std::int64_t> p = parallel::cp_positions(T, world, c.rank(), cp_balance_kind::head_tail);
        const cpu::token_span qs{p.data(), nullptr, Tl};
        std::vector<float> q(static_cast<std::size_t>(Tl * NH * HD), 0.5f), kv(static_cast<std::size_t>(Tl * NKV * HD), 0.25f),
            o(q.size()), l(static_cast<std::size_t>(NH * Tl));
        row.pass = ring_pass(dm.group(g), n, [&] {
          cpu::attention_block_forward(o.data(), l.data(), q.data(), kv.data(), kv.data(), qs, qs, 1, NH, NKV, HD);
        });
        row.transfer_s = row.pass.bare_s * static_cast<double>(cfg.n_layers * (3 * world - 2));
      }
    }
  }
  return row;
}

std::vector<std::int32_t> long_tokens(std::int64_t T, int steps) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(T * (steps + 2) + 1));
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 7 + i / 13) % 2048);
  return tokens;
}

void print_long_row(const char* what, int world, std::int64_t T, const std::vector<rank_row>& rows, double step_s) {
  std::int64_t mx = 0, est = 0;
  double comp = 0, wait = 0, transfer = 0, bare = 0, exposed = 0;
  for (const rank_row& r : rows) {
    if (r.measured > mx) mx = r.measured, est = r.estimated;
    comp += r.compute_s / world, wait += r.wait_s / world, transfer += r.transfer_s / world;
    bare += r.pass.bare_s / world, exposed += r.pass.exposed_s / world;
  }
  std::string overlap = "-";
  if (transfer > 0) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "transfers %.0f ms a step; a pass %.2f ms bare, %.2f ms exposed behind a block: %.2f hidden",
                  1e3 * transfer, 1e3 * bare, 1e3 * exposed, pass_timing{bare, exposed}.hidden());
    overlap = buf;
  }
  std::printf("| %s | %d | %lld | %.1f | %.1f | %.4f | %.1f | %.0f | %s |\n", what, world, static_cast<long long>(T),
              mx / 1048576.0, est / 1048576.0, static_cast<double>(est) / static_cast<double>(mx), step_s,
              static_cast<double>(T) / step_s,
              transfer > 0 || comp > 0 ? (std::to_string(static_cast<int>(1e3 * comp)) + " / " +
                                          std::to_string(static_cast<int>(1e3 * wait)) + " ms; " + overlap)
                                             .c_str()
                                       : "-");
  std::fflush(stdout);
}

template <class R>
void long_row(const char* what, int world, std::int64_t T, int steps) {
  const std::vector<std::int32_t> tokens = long_tokens(T, steps);
  std::vector<rank_row> rows(static_cast<std::size_t>(world));
  double step_s = 0;
  memory_tracker<host_space>::set_hook(&count);
  comm::run_threads(world, [&](comm::threads_communicator& c) {
    rows[static_cast<std::size_t>(c.rank())] = long_rank<R>(c, world, T, steps, tokens, step_s);
  });
  memory_tracker<host_space>::set_hook(nullptr);
  print_long_row(what, world, T, rows, step_s);
}

#ifdef TESSERA_HAS_MPI
/// long_row with one MPI process per rank (mpirun -np cp): the ranks' transfers are real
/// messages, progressed by the MPI library.
template <class R>
void long_row_mpi(const char* what, comm::mpi_communicator& w, std::int64_t T, int steps) {
  const std::vector<std::int32_t> tokens = long_tokens(T, steps);
  double step_s = 0;
  memory_tracker<host_space>::set_hook(&count);
  const rank_row mine = long_rank<R>(w, w.size(), T, steps, tokens, step_s);
  memory_tracker<host_space>::set_hook(nullptr);
  const std::vector<double> v{static_cast<double>(mine.measured), static_cast<double>(mine.estimated), mine.compute_s,
                              mine.wait_s, mine.transfer_s, mine.pass.bare_s, mine.pass.exposed_s};
  std::vector<double> all(v.size() * static_cast<std::size_t>(w.size()));
  comm::all_gather(w, std::span<const double>(v), std::span<double>(all)).wait();
  std::vector<rank_row> rows;
  for (int r = 0; r < w.size(); ++r) {
    const double* x = all.data() + v.size() * static_cast<std::size_t>(r);
    rows.push_back({static_cast<std::int64_t>(x[0]), static_cast<std::int64_t>(x[1]), x[2], x[3], x[4], {x[5], x[6]}});
  }
  if (w.rank() == 0) print_long_row(what, w.size(), T, rows, step_s);
}
#endif

void long_table(std::int64_t T, int cp, int steps) {
  std::printf("the debug model, batch 1, forward + backward, median of %d step(s); memory: the largest rank's "
              "peak of tracked bytes (with AdamW's two arenas) and its estimate:\n\n",
              steps);
  std::printf("| run | ranks | seq | measured peak MiB | estimated MiB | est / meas | step s | tokens/s | attention "
              "compute / exposed comm per rank; the ring's transfers |\n|---|---|---|---|---|---|---|---|---|\n");
  long_row<one_rank>("one rank", 1, T / cp, steps);
  long_row<one_rank>("one rank", 1, T, steps);
  long_row<cp_only<cp_rotation_kind::ring>>("cp ring", cp, T, steps);
  long_row<cp_only<cp_rotation_kind::allgather>>("cp all-gather", cp, T, steps);
}
}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "balance" || what == "documents") {
    const std::int64_t T = argc > 2 ? std::atoll(argv[2]) : 4096;
    std::vector<int> cps;
    for (int i = 3; i < argc; ++i) cps.push_back(std::atoi(argv[i]));
    if (cps.empty()) cps = {2, 4, 8};
    for (int cp : cps)
      if (cp < 1 || T % (2 * cp) != 0) {
        std::fprintf(stderr, "bench_cp: seq_len %lld is not divisible by 2 x cp (%d)\n", static_cast<long long>(T), cp);
        return 2;
      }
    if (what == "balance") balance_table(T, cps, 0);
    else
      for (std::int64_t shortest : {std::int64_t{64}, T / 16}) {
        balance_table(T, cps, shortest);
        std::printf("\n");
      }
    return 0;
  }
#ifdef TESSERA_HAS_MPI
  if (what == "long-mpi") {  // under mpirun -np cp: the ring and the all-gather between processes
    comm::mpi_environment env(argc, argv);
    comm::mpi_communicator w;
    const std::int64_t T = argc > 2 ? std::atoll(argv[2]) : 8192;
    const int steps = argc > 3 ? std::atoi(argv[3]) : 1;
    if (T % (2 * w.size()) != 0 || steps < 1) {
      if (w.rank() == 0) std::fprintf(stderr, "bench_cp long-mpi: seq_len must be divisible by 2 x cp, steps >= 1\n");
      return 2;
    }
    if (w.rank() == 0)
      std::printf("| run | ranks | seq | measured peak MiB | estimated MiB | est / meas | step s | tokens/s | attention "
                  "compute / exposed comm per rank; the ring's transfers |\n|---|---|---|---|---|---|---|---|---|\n");
    long_row_mpi<cp_only<cp_rotation_kind::ring>>("cp ring (MPI processes)", w, T, steps);
    long_row_mpi<cp_only<cp_rotation_kind::allgather>>("cp all-gather (MPI processes)", w, T, steps);
    return 0;
  }
#endif
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
  std::fprintf(stderr,
               "usage: bench_cp balance|documents [seq_len] [cp...] | bench_cp long [seq_len] [cp] [steps]\n");
  return 2;
}
