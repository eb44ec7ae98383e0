// tessera/bench/transition.hpp: a layout transition as a Google Benchmark, in one line.
// tessera-requires: benchmark
//
//   using M    = tessera::mesh<tessera::axis<"dp", 2>, tessera::axis<"tp", 2>>;
//   using FSDP = tessera::layout_t<M, 2, tessera::dim<0, "dp", "tp">>;
//   using TP   = tessera::layout_t<M, 2, tessera::dim<1, "tp">>;
//   int main(int argc, char** argv) {
//     tessera::bench::transition<FSDP, TP, float>("fsdp->tp", {4096, 4096});
//     return tessera::bench::main(argc, argv);   // Google Benchmark's main, MPI-aware
//   }
//
// Link tessera::benchmark (and tessera::mpi to run it under mpirun as well). Each
// benchmark runs dist_tensor::redistribute on every rank of the mesh: on in-process ranks
// (threads) by default; under `mpirun -np <ranks>` on the MPI processes, when the program
// is built with tessera::mpi and runs tessera::bench::main. Every
// iteration runs one call after a barrier; its time is the slowest rank's (Google
// Benchmark's manual time), so the reported time is per call, as nccl-tests and
// tessera-plan --run report it. Counters: bytes_per_rank (the bus bytes the busiest rank
// moves, as executed), bus_GBps (bytes_per_rank over the mean time per call), modelled_us
// (the cost model's time as executed), steps (of the compile-time plan), ranks. The
// result is checked against the source values once, after the warm-up calls.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include <tessera/bench/measure.hpp>
#include <tessera/comm/threads.hpp>
#include <tessera/plan/plan.hpp>
#include <tessera/tensor/dist_tensor.hpp>
#include <tessera/tensor/dtype.hpp>
#ifdef TESSERA_HAS_MPI
#include <tessera/comm/mpi.hpp>
#endif

namespace tessera::bench {

struct transition_options {
  /// Time `x.redistribute<To>()` (a fresh result per call, from tessera::result_pool)
  /// instead of `x.redistribute(out)` into one result tensor.
  bool fresh_result = false;
  int warmup = 2;          ///< untimed calls first (the first creates the process groups)
  std::int64_t iterations = 0;  ///< timed calls; 0: Google Benchmark decides
  cost_model model{};      ///< for the modelled_us counter (default: plan_t's constants)
};

namespace detail {

/// True when mpirun started this process (and MPI is built in): benchmarks then run on
/// the MPI processes.
inline bool under_mpirun() {
#ifdef TESSERA_HAS_MPI
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE");
#else
  return false;
#endif
}

/// Whether L's mesh has only static axes (true when L is not a layout: that is said apart).
template <class L>
constexpr bool static_mesh_of() {
  if constexpr (is_layout_v<L>)
    return L::mesh_type::is_always_static();
  else
    return true;
}

/// Benchmarks that failed (skipped with an error): bench::main then exits with 1.
inline int& failures() {
  static int n = 0;
  return n;
}

/// The MPI world when the program runs under mpirun (set by bench::main), else null.
inline comm::any_communicator*& mpi_world() {
  static comm::any_communicator* w = nullptr;
  return w;
}

/// Runs one benchmark on this rank: the transition on `data`'s ranks (Space's buffers), the
/// benchmark's own agreement -- the check, whether to go on, the slowest time -- over
/// `control`, the same ranks on host memory (the same communicator where Space is the host's).
/// `st` is null on the threads backend's ranks other than 0: they follow rank 0's decision to
/// go on (one all_reduce(min) per iteration).
template <class From, class To, class T, class Space = host_space>
void transition_on_rank(comm::any_communicator data, comm::any_communicator control, benchmark::State* st,
                        const shape_t& global, const transition_options& o) {
  using Mesh = typename From::mesh_type;
  device_mesh<Mesh> dm(Mesh{}, data);
  auto value = [](const index_t& i) { return static_cast<T>(static_cast<float>((i[0] * 7 + i[1] * 3 + i[2]) % 13)); };
  const auto x = dist_tensor<T, From, Space>::distribute(dm, global, value);
  auto y = x.template redistribute<To>();
  for (int i = 0; i < o.warmup; ++i) x.redistribute(y);
  // the result, once: every element of this rank's block (a partial target is not checked)
  int bad = 0;
  if constexpr (!To::spec.has_partial()) {
    const box& b = y.local_box();
    index_t idx{};
    for (int d = 0; d < b.rank; ++d) idx[static_cast<std::size_t>(d)] = b.offset[static_cast<std::size_t>(d)];
    for (const T& v : y.local_values()) {
      bad |= static_cast<float>(v) != static_cast<float>(value(idx));
      for (int d = b.rank - 1; d >= 0; --d) {
        const auto u = static_cast<std::size_t>(d);
        if (++idx[u] < b.offset[u] + b.size[u]) break;
        idx[u] = b.offset[u];
      }
    }
  }
  control.all_reduce(&bad, &bad, 1, comm::dtype::i32, comm::reduce_op::max).wait();
  if (bad) throw error("tessera::bench::transition: the result differs from the source tensor; this is a bug in tessera");
  double total_us = 0;
  std::int64_t n = 0;
  while (true) {
    const int mine = st ? (st->KeepRunning() ? 1 : 0) : 1;
    int keep = mine;
    control.all_reduce(&keep, &keep, 1, comm::dtype::i32, comm::reduce_op::min).wait();
    if (st && keep != mine)
      throw error("tessera::bench::transition: the ranks' Google Benchmark disagree on the iteration count; "
                  "give every process the same flags");
    if (!keep) break;
    control.barrier().wait();
    const auto t0 = std::chrono::steady_clock::now();
    if (o.fresh_result)
      benchmark::DoNotOptimize(x.template redistribute<To>().local().data());
    else
      x.redistribute(y);
    const auto t1 = std::chrono::steady_clock::now();
    double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    control.all_reduce(&us, &us, 1, comm::dtype::f64, comm::reduce_op::max).wait();
    if (st) st->SetIterationTime(us * 1e-6);
    total_us += us;
    ++n;
  }
  if (!st) return;
  using P = plan_t<From, To, T>;
  const executed e = executed_cost(From::spec, P::value, dm.shape(), global, sizeof(T), o.model);
  st->counters["bytes_per_rank"] = static_cast<double>(e.bus_bytes);
  st->counters["bus_GBps"] = n && total_us > 0 ? static_cast<double>(e.bus_bytes) * static_cast<double>(n) / (total_us * 1e3) : 0.0;
  st->counters["modelled_us"] = e.time_us;
  st->counters["steps"] = P::size;
  st->counters["ranks"] = static_cast<double>(dm.mesh().world_size());
}

/// Where transition()'s ranks run: host memory, as threads of this process or mpirun's
/// processes. (transition_cuda.hpp's cuda_ranks: device memory over NCCL.)
struct host_ranks {
  using space = host_space;
  static std::string label(int) { return under_mpirun() ? "mpi" : "threads"; }
  static comm::any_communicator on_thread(comm::threads_communicator& c, int) { return comm::any_communicator(c); }
  static comm::any_communicator on_mpi(comm::any_communicator& w) { return w; }
};

/// Registers "<name>/<Ranks::label>:<ranks>": From -> To on Ranks' ranks (transition()).
template <class From, class To, class T, class Ranks>
benchmark::internal::Benchmark* register_transition(const std::string& name, const shape_t& global,
                                                    const transition_options& o) {
  static_assert(is_layout_v<From> && is_layout_v<To>,
                "tessera::bench::transition: From and To must be tessera layouts (tessera::layout_t<...>)");
  static_assert(static_mesh_of<From>(),
                "tessera::bench::transition: the layouts' mesh has a dynamic axis; a benchmark runs on as many ranks "
                "as its mesh has: give every axis a size (tessera::axis<\"dp\", 2>)");
  if constexpr (is_layout_v<From> && is_layout_v<To> && static_mesh_of<From>()) {
    using Mesh = typename From::mesh_type;
    (void)plan_t<From, To, T>::size;  // an illegal transition fails here, at compile time
    int ranks = static_cast<int>(Mesh{}.world_size());  // (not const: clang would drop it from the capture)
    // (registrations run before main, before MPI is initialized: the name follows mpirun's
    // environment, the run uses the world bench::main made)
    auto* b = benchmark::RegisterBenchmark(
        (name + "/" + Ranks::label(ranks) + ":" + std::to_string(ranks)).c_str(),
        [global, o, ranks, name](benchmark::State& st) {
          try {
            if (comm::any_communicator* w = mpi_world()) {
              if (w->size() != ranks)
                throw error("tessera::bench::transition: \"" + name + "\" needs " + std::to_string(ranks) +
                            " ranks, but mpirun started " + std::to_string(w->size()) + "; run mpirun -np " +
                            std::to_string(ranks));
              transition_on_rank<From, To, T, typename Ranks::space>(Ranks::on_mpi(*w), *w, &st, global, o);
            } else {
              comm::run_threads(ranks, [&](comm::threads_communicator& c) {
                transition_on_rank<From, To, T, typename Ranks::space>(
                    Ranks::on_thread(c, ranks), comm::any_communicator(c), c.rank() == 0 ? &st : nullptr, global, o);
              });
            }
          } catch (const std::exception& e) {
            ++failures();
            st.SkipWithError(e.what());
          }
        });
    b->UseManualTime()->Unit(benchmark::kMicrosecond);
    if (o.iterations > 0) b->Iterations(o.iterations);
    return b;
  } else {
    return nullptr;
  }
}

}  // namespace detail

/// Registers the benchmark "<name>/<backend>:<ranks>" of the transition From -> To on a
/// tensor of shape `global` with elements of type T, in host memory (threads, or mpirun's
/// processes). Returns Google Benchmark's handle (add ->Repetitions(5) etc.).
template <class From, class To, class T = float>
benchmark::internal::Benchmark* transition(const std::string& name, const shape_t& global,
                                           const transition_options& o = {}) {
  return detail::register_transition<From, To, T, detail::host_ranks>(name, global, o);
}

/// Google Benchmark's main, run by every rank: under mpirun (built with tessera::mpi)
/// it initializes MPI and runs the benchmarks on the MPI processes, rank 0 reporting.
/// Returns 1 when a transition failed (its line says ERROR OCCURRED and why), else 0.
inline int main(int argc, char** argv) {
#ifdef TESSERA_HAS_MPI
  std::unique_ptr<comm::mpi_environment> env;
  std::unique_ptr<comm::any_communicator> world;
  if (detail::under_mpirun()) {
    env = std::make_unique<comm::mpi_environment>(argc, argv);
    comm::mpi_options opts;
    opts.check_calls = false;  // timing: no agreement round before each collective
    world = std::make_unique<comm::any_communicator>(comm::mpi_communicator(MPI_COMM_WORLD, opts));
    detail::mpi_world() = world.get();
  }
#endif
  bool file_out = false;  // --benchmark_out: only rank 0 writes the file
  for (int i = 1; i < argc; ++i) file_out = file_out || std::string_view(argv[i]).starts_with("--benchmark_out=");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  struct silent final : benchmark::BenchmarkReporter {
    bool ReportContext(const Context&) override { return true; }
    void ReportRuns(const std::vector<Run>&) override {}
  };
  const comm::any_communicator* w = detail::mpi_world();
  if (w && w->rank() != 0) {
    silent display, file;
    benchmark::RunSpecifiedBenchmarks(&display, file_out ? &file : nullptr);
  } else {
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
#ifdef TESSERA_HAS_MPI
  detail::mpi_world() = nullptr;
  world.reset();
#endif
  return detail::failures() ? 1 : 0;
}

}  // namespace tessera::bench
