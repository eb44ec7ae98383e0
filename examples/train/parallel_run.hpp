// train_llama's recipe mode: one rank's training loop for a shipped recipe, on the threads
// backend (ranks are threads of this process) or under mpirun (ranks are processes); on the
// CPU kernels, or on a device backend K (--device cuda: train_llama_cuda.cu runs these with
// cuda_kernels over NCCL, one GPU per rank).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <tessera/comm/flight_recorder.hpp>
#include <tessera/comm/flight_trace.hpp>
#include <tessera/comm/threads.hpp>
#include <tessera/core/trace.hpp>
#include <tessera/train/checkpoint.hpp>
#include <tessera/train/hf_checkpoint.hpp>
#include <tessera/train/memory_estimator.hpp>
#include <tessera/train/metrics.hpp>
#include <tessera/train/parallel_llama.hpp>
#include <tessera/train/recipes.hpp>
#include <tessera/train/traffic_estimator.hpp>
#include <tessera/train/trainer.hpp>

#include "step_loop.hpp"

namespace train_llama_cli {
using namespace tessera;

/// What every rank needs to run (the same on all ranks).
struct run_inputs {
  std::int64_t steps = 0, batch = 0, seq_len = 0, accum = 1;
  std::uint64_t seed = 0;
  bool shuffle = true;
  train::optimizer_options opt;
  std::string init_from, save_weights, metrics, save_dtype;
  std::span<const std::int32_t> tokens;  // a mapped token file, or the ids of a tokenized corpus
  /// Where the ranks record their events (nullptr: no trace). Ranks that are threads share
  /// one recorder and the caller writes it; MPI ranks have one each, and rank 0 gathers
  /// them into `trace_file` (gather_trace).
  trace::recorder* trace = nullptr;
  std::string trace_file;
  bool gather_trace = false;
  /// Ranks of this process (threads: all of them; one under mpirun).
  int local_ranks = 1;
  /// Distributed checkpoints (--checkpoint.*): resume from the latest complete one in the
  /// folder, save every interval steps and after the last step.
  train::checkpoint_options checkpoint;
  /// --device cuda: bf16 operands for the GEMMs and the attention (training.compute_dtype =
  /// bf16: cuda_bf16_kernels), else f32 (cuda_kernels).
  bool bf16 = false;
};

/// What memory the progress lines' "memory" is, and what the MFU denominator measured.
template <class K>
std::string hardware_words(int local_ranks) {
  if constexpr (K::space::host_accessible)
    return "(measured sgemm, once per host; the MFU denominator); \"memory\" below is the peak of tessera's tracked "
           "host memory of this process (" + std::to_string(local_ranks) + (local_ranks == 1 ? " rank)" : " ranks together)");
  else
    return "(each rank's measured " + std::string(K::name) + " GEMM peak, " +
           (K::name.ends_with("bf16") ? "bf16" : "f32") + " operands; rank 0's; the MFU denominator); "
           "\"memory\" below is the peak of tessera's tracked " + std::string(K::space::name) + " memory of this "
           "process (" + std::to_string(local_ranks) + (local_ranks == 1 ? " rank)" : " ranks together)");
}

/// Rank 0 writes the trace of every rank of `c` (each rank's events gathered as text).
template <class C>
void gather_and_write_trace(C& c, trace::recorder& t, const std::string& path) {
  const std::string mine = t.events_json();
  const std::int64_t len = static_cast<std::int64_t>(mine.size());
  std::vector<std::int64_t> lens(static_cast<std::size_t>(c.size()));
  c.all_gather(&len, lens.data(), 1, comm::dtype::i64).wait();
  const std::size_t width = static_cast<std::size_t>(std::max<std::int64_t>(1, *std::max_element(lens.begin(), lens.end())));
  std::string padded = mine;
  padded.resize(width, ' ');
  std::string all(width * lens.size(), ' ');
  c.all_gather(padded.data(), all.data(), width, comm::dtype::u8).wait();
  if (c.rank() != 0) return;
  std::vector<std::string> others;
  for (std::size_t r = 1; r < lens.size(); ++r) others.push_back(all.substr(r * width, static_cast<std::size_t>(lens[r])));
  t.write(path, others);
}

/// Checks that `ranks` fits recipe R's mesh, in the words a user needs: how the rank count
/// is chosen differs by backend (--ranks on threads; mpirun's -np under --backend mpi).
template <class R>
typename R::mesh bind_mesh(std::int64_t ranks, bool mpi = false) {
  using M = typename R::mesh;
  try {
    return M(ranks);
  } catch (const error& e) {
    std::string fix = "change --ranks";
    if (mpi) {
      fix = "under --backend mpi the ranks are mpirun's processes: start ";
      if constexpr (M::is_always_static())
        fix += "mpirun -np " + std::to_string(tessera::world_size(M::static_shape));
      else
        fix += "mpirun -np N with an N the mesh fits";
    }
    throw error("recipe " + std::string(R::name) + " cannot run on " + std::to_string(ranks) + " ranks: " + e.what() +
                "; " + fix);
  }
}

/// The global batch: `global` when set (> 0), else `local` per data-parallel rank. Checks
/// the pipeline's microbatches and context parallel's rule on `seq_len` before anything is written.
template <class R>
std::int64_t global_batch(const typename R::mesh& m, std::int64_t local, std::int64_t global, std::int64_t seq_len) {
  constexpr parallel_spec ps = recipe_traits<R>::spec;
  if constexpr (ps.cp >= 0) {
    const std::string problem =
        parallel::cp_seq_problem(seq_len, m.size(ps.cp), ps.context.balance, parallel::cp_tp_split(ps, m.shape()));
    if (!problem.empty()) throw error("recipe " + std::string(R::name) + ": " + problem + " (--seq-len)");
  }
  std::int64_t dp = 1;
  for (int a = 0; a < R::mesh::ndim; ++a)
    if ((recipe_traits<R>::spec.batch_mask() >> a) & 1u) dp *= m.size(a);
  const std::int64_t batch = global > 0 ? global : local * dp;
  if constexpr (recipe_traits<R>::spec.pp >= 0) {  // checked before anything is written
    const int mb = recipe_traits<R>::pipeline(static_cast<int>(m.size(recipe_traits<R>::spec.pp))).m;
    const std::string problem = parallel::pp_batch_problem(batch, dp, mb);
    if (!problem.empty()) throw error("recipe " + std::string(R::name) + ": " + problem);
  }
  return batch;
}

/// One rank's run of recipe R on backend K over communicator `c` (recorded by `flight`, when
/// tracing, so that its collectives enter the trace); rank 0 prints and writes files.
template <class R, class K, class C, class F>
void train_rank(C& c, F* flight, typename R::mesh mesh, const run_inputs& in) {
  using model_t = train::parallel_llama<R, K>;
  device_mesh<typename R::mesh> dm = [&] {
    if constexpr (std::is_same_v<F, C>) return device_mesh<typename R::mesh>(mesh, c);
    else return device_mesh<typename R::mesh>(mesh, *flight);
  }();
  const int rank = dm.rank();
  trace::bind traced(in.trace, rank, 0);  // this rank's scopes go to its compute track
  std::uint64_t since = 0;  // the first flight entry not yet in the trace
  if (in.trace) {
    dm.world().barrier().wait();
    in.trace->set_origin(trace::now_us());  // time 0: every rank leaves this barrier
    if constexpr (!std::is_same_v<F, C>) since = flight->recorded();
  }
  model_t pm(dm);
  const llama_config& cfg = pm.config();
  if (in.init_from.empty() || names_checkpoint(in.init_from)) {  // (a checkpoint: the checkpointer's)
    pm.init_weights(in.seed);
  } else {
    // this rank's blocks only, one tensor at a time: a rank reads and holds its share of the
    // checkpoint, not all of it (405B: 812 GB in bf16 on each of 512 ranks otherwise)
    const std::uint64_t read = io::load_hf_checkpoint_blocks(
        cfg, [&](std::int64_t i) { return pm.storage_box(i); },
        [&](std::int64_t i, const float* v) { K::to_device(pm.stored(i), v, pm.storage_box(i).numel()); },
        in.init_from);
    if (rank == 0)
      std::printf("--init-from: rank 0 read %.2f MiB of the checkpoint's tensors (its blocks)\n",
                  static_cast<double>(read) / (1 << 20));
  }
  const bool lead = dm.rank() == 0;
  if (lead)
    std::printf("recipe %s: mesh %s, %s; rank 0 stores %.2f MiB of parameters and gradients\n",
                std::string(R::name).c_str(), dm.mesh().str().c_str(), c.size() == 1 ? "1 rank" : "ranks in step",
                static_cast<double>(pm.stored_bytes()) / (1 << 20));
  if constexpr (recipe_traits<R>::spec.pp >= 0) {
    if (lead)
      std::printf("pipeline %s, %d microbatches per step:\n%s",
                  pm.stage_layout().plan.table ? "(user table)"
                                               : std::string(pipeline::schedule_name(pm.stage_layout().plan.kind)).c_str(),
                  pm.stage_layout().microbatches(), pm.stage_layout().describe().c_str());
  }
  {
    if (lead)
      std::printf("memory estimate for rank 0 (global batch %lld x seq %lld; its \"local batch x seq\" is rank 0's "
                  "share: its rows under data parallel, its part of the sequence under sequence parallel):\n%s",
                  static_cast<long long>(in.batch), static_cast<long long>(in.seq_len),
                  estimate_memory<R>(dm.shape(), in.batch, in.seq_len, dm.coords()).to_string().c_str());
    if (lead && in.checkpoint.mode == train::async_mode::async && !in.checkpoint.folder.empty())
      std::printf("  %-34s %12.3f GiB  (kept from the first checkpoint on; not in the peak above)\n",
                  "async checkpoint staging arena", static_cast<double>(estimate_checkpoint_staging<R>(dm.shape(), dm.coords())) / (1 << 30));
    if (lead)
      std::printf("%s", estimate_traffic<R>(dm.shape(), in.batch, in.seq_len, in.accum, dm.coords())
                            .to_string(R::mesh::names)
                            .c_str());
  }
  train::batch_loader loader(in.tokens, in.batch, in.seq_len, in.seed, in.shuffle);
  // The MFU denominator: the peak of the hardware the job uses, measured once per host for
  // the whole job (a collective; train::job_peak_flops).
  train::basic_trainer<model_t> tr(pm, loader, in.steps, in.accum, in.opt);
  const int local_ranks = in.local_ranks;
  if (lead)
    std::printf("peak of the job's hardware: %.1f GFLOP/s %s, the estimate above is per rank\n", tr.peak_flops() / 1e9,
                hardware_words<K>(local_ranks).c_str());
  train::jsonl_writer jsonl;
  if (lead && !in.metrics.empty()) jsonl = train::jsonl_writer(in.metrics);
  train::checkpointer<model_t> ckpt(pm, tr, loader, in.checkpoint);
  for (std::int64_t s = resume_run(ckpt, tr, lead); s < in.steps; ++s) {  // (collective)
    const auto m = tr.train_step();
    save_if_due(ckpt, m.step, in.steps, lead);
    if constexpr (!std::is_same_v<F, C>) {
      if (in.trace) {
        const auto entries = flight->entries();
        const std::uint64_t now = flight->recorded();
        if (now - since > entries.size())
          std::fprintf(stderr, "train_llama: warning: rank %d: the trace lacks %llu collectives of step %lld (the "
                       "flight recorder keeps the last %zu)\n", rank,
                       static_cast<unsigned long long>(now - since - entries.size()), static_cast<long long>(m.step),
                       entries.size());
        comm::add_to_trace(*in.trace, entries, rank, 1, since);
        since = now;
      }
    }
    if (!lead) continue;
    std::printf("%s\n", train::progress_line(m).c_str());
    std::fflush(stdout);
    jsonl.write(m);
  }
  ckpt.finish();  // the last asynchronous save is committed before the run ends
  if (!in.checkpoint.folder.empty() && lead) std::printf("checkpoints in %s\n", in.checkpoint.folder.c_str());
  if (!in.save_weights.empty()) {  // each tensor gathered (a collective) and written by rank 0 before the next
    if (lead) {
      train::save_hf_checkpoint_streamed(
          cfg, [&](std::int64_t i) { return pm.full_param(i); }, in.save_weights,
          in.save_dtype == "bf16" ? train::safetensors::dtype::bf16 : train::safetensors::dtype::f32);
      std::printf("saved weights to %s\n", in.save_weights.c_str());
    } else {
      for (std::int64_t i = 0; i < pm.model().n_tensors(); ++i) (void)pm.full_param(i);
    }
  }
}

/// One rank's run of recipe R on backend K over communicator `c`: recorded by a flight
/// recorder when the run is traced. `host` is a communicator of the same ranks that moves
/// host buffers (the trace is gathered through it; `c` itself on the CPU).
template <class R, class K = cpu_kernels, class C, class H>
void run_rank(C& c, H& host, typename R::mesh mesh, const run_inputs& in) {
  if (in.trace) {
    comm::flight_recorder flight(c, {.capacity = 1 << 14, .dump_on_error = false});  // >= one step's calls
    train_rank<R, K>(c, &flight, mesh, in);
    if (in.gather_trace) gather_and_write_trace(host, *in.trace, in.trace_file);
  } else {
    train_rank<R, K>(c, static_cast<C*>(nullptr), mesh, in);
  }
}

/// The half of the shipped recipes R is compiled in, so that two units compile them side by
/// side (cpu_recipe_half.hpp on the CPU, cuda_recipe_half.hpp on GPUs): 1 for the recipes with
/// a pipeline or context parallel (the heaviest to compile), 0 for the others.
template <class R>
constexpr int recipe_half() {
  constexpr parallel_spec ps = recipe_traits<R>::spec;
  return ps.pp >= 0 || ps.cp >= 0 ? 1 : 0;
}

/// Runs recipe R on `ranks` threads (on the CPU kernels).
template <class R>
void run_threads(std::int64_t ranks, run_inputs in) {
  const auto mesh = bind_mesh<R>(ranks);
  in.local_ranks = static_cast<int>(ranks);
  comm::run_threads(static_cast<int>(ranks), [&](comm::threads_communicator& c) { run_rank<R>(c, c, mesh, in); });
}

}  // namespace train_llama_cli
