// Recipes on GPUs: parallel_llama<R, cuda_kernels> -- ranks as threads of this process, a
// device mesh over NCCL with one GPU a rank where there are as many GPUs as ranks, else over
// comm::cuda_staged (ranks sharing the GPUs, transfers staged through the host; NCCL refuses two
// ranks on one GPU), so that every case runs on a machine with one GPU -- against
// parallel_llama<R> on the CPU (thread ranks), the same 3 trainer steps (accumulation 2,
// clipping) and an evaluation forward. On 4 ranks: FSDP, FSDP with Float8 tensorwise and the
// FP8 all-gather, FSDP x TP with bf16 gathers, FSDP x async TP, pipelines (1F1B x FSDP; ZBV
// zero bubble, I and W apart, x TP), context parallel (ring, head-tail), and the compositions
// tests/parallel/test_device_runtime.cpp runs in a staged space (HSDP, pipelines with FSDP,
// async TP and CP, CP with FSDP and AC, Float8 with FSDP x TP, async TP, ZBV and CP); on 2
// (the tiny model's 2 KV heads): tensor parallel with sequence parallel (the logits gathered)
// and with loss parallel (the vocabulary-parallel cross-entropy), Float8 rowwise under TP
// (+ SP + loss parallel, whole and under async TP; with full AC), a user's schedule table,
// context parallel's all-gather rotation and packed documents. Float8 recipes within 2^-6 (FP8
// GEMMs on sm_89 and newer against the CPU's emulation). And distributed checkpoints (sync and
// async) of FSDP on 4, TP with Float8 rowwise on 2 and 1F1B x FSDP on 4: saved on the GPUs,
// resumed there and on the CPU, and the CPU's resumed on the GPUs, within 2^-8 of the CPU's
// steps without a break. With bf16 operands (parallel_llama<R, cuda_bf16_kernels>: the GEMMs
// and the attention on the tensor cores, what `train_llama --device cuda --compute-dtype bf16
// --recipe` runs) against the CPU's same rounding (cpu_bf16_kernels): FSDP, FSDP x TP (f32 and
// bf16 gathers), FSDP x async TP, the ZBV pipeline x TP, CP ring and 1F1B x FSDP with bf16
// gathers, where each rank keeps the bf16 copies of the weights computed on its stored blocks
// (TP, PP, CP) that memory_estimate::kept_weights counts, each rounded once in the 3 steps, and
// multiplies the bf16 codes FSDP gathers as they are, no f32 copy of them
// (testing::kept_weights_problem checks both on every rank). Without a GPU it prints why and
// exits 77 (ctest: skipped, never passed). Tolerance as gpu.cuda_llama's: every loss and
// gradient norm within 2^-8 of the CPU's, relative (f32 on both sides, sums in another order;
// bf16 operands rounded alike).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <recipe_steps.hpp>
#include <tessera/comm/cuda_staged.hpp>
#include <tessera/comm/nccl.hpp>
#include <tessera/comm/threads.hpp>
#include <tessera/kernels/cuda/backend.cuh>
#include <tessera/tensor/cuda_memory.hpp>
#include <tessera/train/checkpoint.hpp>
#include <tessera/train/trainer.hpp>

#include "../checkpoint/scratch.hpp"
#include "../parallel/recipes_tiny.hpp"

using namespace tessera;

namespace {
struct tiny {
  static constexpr llama_config config{.name = "tiny", .dim = 64, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                                       .vocab_size = 97, .multiple_of = 32};
};
struct fsdp_all {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp">>;
};
struct tp_all {
  using model = tiny;
  using mesh = tessera::mesh<axis<"tp">>;
  using parallelize = tessera::parallelize<tensor_parallel<"tp", sequence_parallel>>;
};
struct tp_loss_parallel {
  using model = tiny;
  using mesh = tessera::mesh<axis<"tp">>;
  using parallelize = tessera::parallelize<tensor_parallel<"tp", sequence_parallel, loss_parallel>>;
};
/// Async TP: the ring's sends on NCCL, the parts' GEMMs on the device, the placement copies.
struct fsdp_tp_async {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp">, axis<"tp", 2>>;
  using parallelize =
      tessera::parallelize<fsdp<"dp">, tensor_parallel<"tp", sequence_parallel, loss_parallel, async_tp>>;
};
struct fsdp_tp_bf16 {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp">, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp", mixed_precision<bf16, float>>, tensor_parallel<"tp", loss_parallel>>;
};

struct fsdp_f8_all_gather {
  using model = tiny;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp">, float8<fp8::tensorwise, fp8::all_gather>>;
};
/// Float8 rowwise under TP + SP + loss parallel (the TP-split operands' amaxes all-reduced
/// over NCCL in device memory); its async TP twin is tiny_recipes::tp_async_f8_rowwise.
struct tp_f8_rowwise {
  using model = tiny;
  using mesh = tessera::mesh<axis<"tp", 2>>;
  using parallelize =
      tessera::parallelize<tensor_parallel<"tp", sequence_parallel, loss_parallel>, float8<fp8::rowwise>>;
};
struct cp_ring {
  using model = tiny;
  using mesh = tessera::mesh<axis<"cp">>;
  using parallelize = tessera::parallelize<context_parallel<"cp", cp_rotation<cp_rotate::ring>>>;
};
struct tiny4 {
  static constexpr llama_config config{.name = "tiny4", .dim = 64, .n_layers = 4, .n_heads = 4, .n_kv_heads = 2,
                                       .vocab_size = 97, .multiple_of = 32};
};
struct pp_1f1b_fsdp {
  using model = tiny4;
  using mesh = tessera::mesh<axis<"pp", 2>, axis<"dp">>;
  using parallelize =
      tessera::parallelize<pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::one_f_one_b>>, fsdp<"dp">>;
};
struct pp_zbv_tp {
  using model = tiny4;
  using mesh = tessera::mesh<axis<"pp", 2>, axis<"tp">>;
  using parallelize =
      tessera::parallelize<pipeline_parallel<"pp", pp_schedule<pipeline::schedule_kind::zbv_zero_bubble>>,
                           tensor_parallel<"tp", sequence_parallel, loss_parallel>>;
};

/// The cases run: those whose names match the program's argument (an ECMAScript regular
/// expression, the whole name), or every one.
std::optional<std::regex> selection;
int cases_run = 0;
bool selected(const char* what) {
  const bool yes = !selection || std::regex_match(what, *selection);
  return cases_run += yes ? 1 : 0, yes;
}

/// Runs f(c) on each of `world` thread ranks, c a communicator over device buffers: NCCL's, one
/// GPU a rank, where `world` GPUs are visible; else comm::cuda_staged over the thread ranks --
/// ranks sharing GPUs (rank modulo the GPUs), every transfer staged through the host --, since
/// NCCL refuses two ranks on one GPU.
template <class F>
void on_gpus(int world, F&& f) {
  const bool nccl = cuda_device_count() >= world;
  comm::run_threads(world, [&](comm::threads_communicator& boot) {
    if (nccl) {
      auto nc = comm::nccl_communicator::bootstrap(boot);
      f(nc);
    } else {
      comm::cuda_staged<comm::threads_communicator> sc(boot);
      f(sc);
    }
  });
}
/// "2 GPU(s)", or "4 ranks on 1 GPU(s) (cuda_staged: ...)" where the ranks share GPUs.
std::string gpus_text(int world) {
  const int n = cuda_device_count();
  if (n >= world) return std::to_string(world) + " GPU(s)";
  return std::to_string(world) + " ranks on " + std::to_string(n) +
         " GPU(s) (cuda_staged: transfers through the host)";
}

/// 1 when R's steps on `world` GPUs differ from the CPU's by more than 2^-`bits` (or throw:
/// reported, and the next recipe runs).
template <class R, class CpuK = cpu_kernels, class GpuK = cuda_kernels>
int compare(int world, const char* what, int bits = 8) {
  if (!selected(what)) return 0;
  try {
    const testing::step_record cpu = testing::recipe_steps_on_threads<R, CpuK>(world, 32);
    testing::step_record gpu;
    std::atomic<int> kept_bad{0};  // ranks whose kept bf16 weights are not the estimate's
    const auto kept = [&](train::parallel_llama<R, GpuK>& pm) {
      if (const std::string problem = testing::kept_weights_problem(pm, 32); !problem.empty())
        std::printf("  %s\n", problem.c_str()), ++kept_bad;
    };
    on_gpus(world, [&](auto& c) {
      auto r = testing::recipe_steps<R, GpuK>(c, world, 32, testing::no_model_hook{}, kept);
      if (c.rank() == 0) gpu = std::move(r);
    });
    std::printf("%s on %s against the CPU on %d thread ranks:\n", what, gpus_text(world).c_str(), world);
    return testing::report_steps(cpu, gpu, std::ldexp(1.0, -bits)) | (kept_bad > 0 ? 1 : 0);
  } catch (const std::exception& e) {
    std::printf("%s on %s: FAILED: %s\n", what, gpus_text(world).c_str(), e.what());
    return 1;
  }
}

/// Steps [from, to) of recipe R on backend K over `world` ranks (on GPUs when `gpu`: on_gpus;
/// else CPU thread ranks): from 0 it initialises the weights, else it resumes from the latest
/// checkpoint in `folder` (the resumed step must be `from`); saves after step `save_at` (0:
/// never). Rank 0's losses.
template <class R, class K, bool gpu>
std::vector<double> checkpoint_run(int world, std::int64_t from, std::int64_t to, const std::string& folder,
                                   std::int64_t save_at, train::async_mode mode) {
  const auto toks = testing::recipe_tokens(static_cast<std::int32_t>(R::model::config.vocab_size));
  std::vector<double> got;
  auto steps = [&](auto& c) {
    using model_t = train::parallel_llama<R, K>;
    device_mesh<typename R::mesh> dm(typename R::mesh(world), c);
    model_t pm(dm);
    pm.init_weights(from == 0 ? 9 : 1234);  // a resumed run must overwrite every weight
    train::batch_loader loader(toks, 4, 16, 1);
    train::optimizer_options opt;
    opt.lr = 3e-3, opt.warmup = 1;
    train::basic_trainer<model_t> tr(pm, loader, 8, 1, opt, 0);
    train::checkpointer<model_t> ck(pm, tr, loader, {.folder = folder, .mode = mode});
    if (from > 0) {
      const auto s = ck.resume();
      check(s.has_value() && *s == from, "checkpoint: the resume did not find step " + std::to_string(from));
    }
    std::vector<double> losses;
    for (std::int64_t s = from; s < to; ++s) {
      losses.push_back(tr.train_step().loss);
      if (s + 1 == save_at) ck.save(s + 1);
    }
    ck.finish();
    if (c.rank() == 0) got = losses;
  };
  if constexpr (gpu) on_gpus(world, steps);
  else comm::run_threads(world, steps);
  return got;
}
/// Steps after the first allocate no device memory: R's first trainer step on `world` GPUs
/// allocates what the run needs, and steps 2 and 3 reuse it (cuda_space's cache of freed
/// blocks) -- no cudaMalloc, and no cudaFree with its wait for the whole device, while FSDP
/// gathers and frees each unit's buffers every step. 1 when a later step reached cudaMalloc.
template <class R>
int steady_state_allocations(int world, const char* what) {
  if (!selected(what)) return 0;
  try {
    const auto toks = testing::recipe_tokens(static_cast<std::int32_t>(R::model::config.vocab_size));
    std::int64_t first = 0, later = 0, reused = 0;
    on_gpus(world, [&](auto& c) {
      using model_t = train::parallel_llama<R, cuda_kernels>;
      device_mesh<typename R::mesh> dm(typename R::mesh(world), c);
      model_t pm(dm);
      pm.init_weights(9);
      train::batch_loader loader(toks, 4, 16, 1);
      train::optimizer_options opt;
      opt.lr = 3e-3, opt.warmup = 1;
      train::basic_trainer<model_t> tr(pm, loader, 8, 1, opt, 0);
      const auto counts = [] { return tessera::detail::cuda_block_cache::get().counts(); };
      tr.train_step();
      c.barrier().wait();
      std::pair<std::int64_t, std::int64_t> at{};
      if (c.rank() == 0) at = counts(), first = at.second;
      c.barrier().wait();
      tr.train_step();
      tr.train_step();
      c.barrier().wait();
      if (c.rank() == 0) later = counts().second - at.second, reused = counts().first - at.first;
    });
    std::printf("%s on %s: in steps 2 and 3, %lld device allocations reached cudaMalloc and %lld reused a freed "
                "block (each a cudaMalloc and a cudaFree without the cache)%s\n",
                what, gpus_text(world).c_str(), static_cast<long long>(later), static_cast<long long>(reused),
                later == 0 ? "" : " -- FAILED: a steady step should reuse the blocks its first step freed");
    return later == 0 && first > 0 && reused > 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("%s on %s: FAILED: %s\n", what, gpus_text(world).c_str(), e.what());
    return 1;
  }
}

/// Distributed checkpoints of R on `world` GPUs (staged through the host): 2 steps and a save
/// (sync, then async), resumed for 2 more on the GPUs and on the CPU's thread ranks, and the
/// CPU's own checkpoint resumed on the GPUs -- every loss within 2^-8 of the CPU's 4 steps
/// without a break.
template <class R>
int checkpoint_case(int world, const char* what) {
  if (!selected(what)) return 0;
  try {
    const auto straight = checkpoint_run<R, cpu_kernels, false>(world, 0, 4, "", 0, train::async_mode::disabled);
    int bad = 0;
    for (auto mode : {train::async_mode::disabled, train::async_mode::async}) {
      const std::string tag = mode == train::async_mode::async ? "async" : "sync";
      checkpoint_test::scratch g("gpu_" + tag), h("cpu_" + tag);
      auto first = checkpoint_run<R, cuda_kernels, true>(world, 0, 2, g.dir.string(), 2, mode);
      const auto on_gpu = checkpoint_run<R, cuda_kernels, true>(world, 2, 4, g.dir.string(), 0, mode);
      const auto on_cpu = checkpoint_run<R, cpu_kernels, false>(world, 2, 4, g.dir.string(), 0, mode);
      checkpoint_run<R, cpu_kernels, false>(world, 0, 2, h.dir.string(), 2, mode);
      const auto cpu_to_gpu = checkpoint_run<R, cuda_kernels, true>(world, 2, 4, h.dir.string(), 0, mode);
      first.insert(first.end(), on_gpu.begin(), on_gpu.end());
      std::printf("%s: a checkpoint (%s) on %s after step 2, steps 1-4 (the GPU's, then resumed on the GPU, "
                  "on the CPU, and the CPU's resumed on the GPU) against the CPU without a break:\n",
                  what, tag.c_str(), gpus_text(world).c_str());
      double worst = 0;
      for (const std::vector<double>* run : {&std::as_const(first), &on_cpu, &cpu_to_gpu})
        for (std::size_t i = 0; i < run->size(); ++i) {
          const double ref = straight[run == &first ? i : 2 + i];
          worst = std::max(worst, std::fabs((*run)[i] - ref) / std::fabs(ref));
        }
      const bool ok = first.size() == 4 && on_cpu.size() == 2 && cpu_to_gpu.size() == 2 && worst <= std::ldexp(1.0, -8);
      std::printf("  largest relative difference %.2e (tolerance %.1e) %s\n", worst, std::ldexp(1.0, -8),
                  ok ? "PASS" : "FAIL");
      bad += ok ? 0 : 1;
    }
    return bad;
  } catch (const std::exception& e) {
    std::printf("%s: checkpoints on %s: FAILED: %s\n", what, gpus_text(world).c_str(), e.what());
    return 1;
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc > 2) {
    std::fprintf(stderr, "usage: %s [cases: a regular expression of whole case names]\n", argv[0]);
    return 2;
  }
  if (argc == 2) {
    try {
      selection.emplace(argv[1]);
    } catch (const std::regex_error& e) {
      std::fprintf(stderr, "%s: '%s' is not a regular expression (%s); give one that matches whole case names\n",
                   argv[0], argv[1], e.what());
      return 2;
    }
  }
  if (cuda_device_count() == 0) {
    std::printf("skipped: no CUDA device is visible; the recipes on GPUs need one\n");
    return 77;
  }
  // 4 ranks: a GPU each where 4 are visible, else sharing them (on_gpus: cuda_staged)
  const int world = 4;
  int bad = 0;
  try {
    bad += compare<fsdp_all>(world, "FSDP");
    bad += compare<fsdp_f8_all_gather>(world, "FSDP with Float8 tensorwise and the FP8 all-gather");
    // a TP group of 4 does not divide the tiny model's 2 KV heads: TP alone on 2 ranks
    bad += compare<tp_all>(2, "TP + SP (logits gathered)");
    bad += compare<tp_loss_parallel>(2, "TP + SP + loss parallel");
    bad += compare<fsdp_tp_bf16>(world, "FSDP (bf16 gathers) x TP");
    bad += compare<fsdp_tp_async>(world, "FSDP x async TP (+ SP + loss parallel)");
    // Float8 (FP8 GEMMs on sm_89 and newer against the CPU's emulation: 2^-6, as gpu.cuda_llama)
    bad += compare<tp_f8_rowwise>(2, "TP + SP + loss parallel with Float8 rowwise", 6);
    bad += compare<tiny_recipes::tp_async_f8_rowwise>(2, "async TP (+ SP + loss parallel) with Float8 rowwise", 6);
    bad += compare<tiny_recipes::f8_tp_rowwise_full>(2, "TP with Float8 rowwise and full AC", 6);
    bad += compare<tiny_recipes::pp_table>(2, "pipeline of a user's schedule table");
    using tiny_recipes::cp_only, tiny_recipes::cp_docs;
    bad += compare<cp_only<cp_rotate::allgather, cp_balancing::head_tail>>(2, "context parallel (all-gather, head-tail)");
    bad += compare<cp_docs<cp_rotate::ring, cp_balancing::per_document>>(
        2, "context parallel (ring) on packed documents, balanced per document");
    bad += compare<pp_1f1b_fsdp>(world, "pipeline 1F1B x FSDP");
    bad += compare<pp_zbv_tp>(world, "pipeline ZBV zero bubble x TP + SP + loss parallel");
    bad += compare<cp_ring>(world, "context parallel (ring, head-tail)");
    bad += steady_state_allocations<fsdp_all>(world, "FSDP: steps after the first allocate no device memory");
    bad += steady_state_allocations<pp_1f1b_fsdp>(
        world, "pipeline 1F1B x FSDP: steps after the first allocate no device memory");
    bad += checkpoint_case<fsdp_all>(world, "FSDP");
    bad += checkpoint_case<tp_f8_rowwise>(2, "TP + SP + loss parallel with Float8 rowwise");
    bad += checkpoint_case<pp_1f1b_fsdp>(4, "pipeline 1F1B x FSDP");
    {  // the compositions tests/parallel/test_device_runtime.cpp runs in a staged space
      using namespace tiny_recipes;
      bad += compare<hsdp_2x2>(4, "HSDP 2 x 2");
      bad += compare<fsdp_tp_2d_op>(4, "FSDP (reshard all but the last) x TP + SP + loss parallel, selective op AC");
      bad += compare<pp_fsdp_bf16>(4, "pipeline 1F1B x FSDP (bf16 gathers)");
      bad += compare<pp_zbv_tp_async>(4, "pipeline ZBV x async TP");
      bad += compare<cp_tp_async>(4, "context parallel (ring) x async TP");
      bad += compare<cp_fsdp_ring>(4, "FSDP x context parallel (ring), full AC");
      bad += compare<cp_docs_pp>(4, "pipeline 1F1B x context parallel (ring) on packed documents");
      bad += compare<f8_2d_tw_ag_op>(4, "FSDP x TP, Float8 tensorwise with the FP8 all-gather, selective op AC", 6);
      bad += compare<fsdp_tp_async_f8_op>(4, "FSDP x async TP, Float8 rowwise, selective op AC", 6);
      bad += compare<f8_pp_zbv_tp_tw>(4, "pipeline ZBV x TP + SP, Float8 tensorwise", 6);
      bad += compare<cp_fsdp_f8>(4, "FSDP x context parallel, Float8 with the FP8 all-gather", 6);
    }
    using bf16_cpu = cpu_bf16_kernels;
    using bf16_gpu = cuda_bf16_kernels;
    bad += compare<fsdp_all, bf16_cpu, bf16_gpu>(world, "bf16 operands: FSDP");
    bad += compare<fsdp_tp_bf16, bf16_cpu, bf16_gpu>(world, "bf16 operands: FSDP (bf16 gathers) x TP");
    bad += compare<fsdp_tp_async, bf16_cpu, bf16_gpu>(world, "bf16 operands: FSDP x async TP");
    bad += compare<pp_zbv_tp, bf16_cpu, bf16_gpu>(world, "bf16 operands: pipeline ZBV x TP + SP + loss parallel");
    bad += compare<cp_ring, bf16_cpu, bf16_gpu>(world, "bf16 operands: context parallel (ring, head-tail)");
    bad += compare<tiny_recipes::pp_fsdp_bf16, bf16_cpu, bf16_gpu>(
        4, "bf16 operands: pipeline 1F1B x FSDP (bf16 gathers)");
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
  if (cases_run == 0) {
    std::printf("FAILED: no case's name matches '%s'\n", argv[1]);
    return 1;
  }
  std::printf("%s (%d cases)\n", bad ? "FAILED" : "PASSED", cases_run);
  return bad ? 1 : 0;
}
