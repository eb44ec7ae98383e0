// train::check_host_memory: a training step that needs more host memory than is available
// is refused with one message naming the sizes and the fix; enough memory, or an unknown
// amount (0), passes.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <tessera/core/error.hpp>
#include <tessera/core/host_memory.hpp>
#include <tessera/train/memory_check.hpp>
#include <tessera/train/recipes.hpp>

#include "failure.hpp"
#include "launcher_env.hpp"

namespace {
using namespace tessera;
using testing_support::failure_of;
using testing_support::has;

constexpr std::int64_t GiB = std::int64_t{1} << 30;

mesh_shape dp(std::int64_t n) {
  mesh_shape m;
  m.ndim = 1;
  m.size[0] = n;
  return m;
}
}  // namespace

TEST_CASE("check_host_memory refuses a step that does not fit, naming the sizes and the fix") {
  using R = recipes::debug_fsdp;
  const std::int64_t each = estimate_memory<R>(dp(2), 8, 100000).peak();
  REQUIRE(each > 40 * GiB);  // debugmodel's activations at seq 100000: tens of GiB per rank
  const std::string why = failure_of<error>([&] { train::check_host_memory<R>(dp(2), 8, 100000, 2, 8 * GiB); });
  INFO(why);
  CHECK(has(why, "seq_len 100000 x global batch 8: one training step of recipe debug_fsdp needs about "));
  CHECK(has(why, " on this host (2 ranks here, "));
  CHECK(has(why, "of which activations "));  // the largest part: what to shrink
  CHECK(has(why, "but 8.0 GiB is available; give a smaller seq_len or global batch, more hosts, or a recipe with "
                 "activation checkpointing"));
  // the need is both ranks' peak
  CHECK(has(why, train::detail::size_text(2 * each) + " on this host"));
  CHECK(has(why, train::detail::size_text(each) + " each"));

  // enough memory for both ranks: no error; one rank here needs half
  CHECK_NOTHROW(train::check_host_memory<R>(dp(2), 8, 100000, 2, 2 * each));
  CHECK(!failure_of<error>([&] { train::check_host_memory<R>(dp(2), 8, 100000, 2, 2 * each - 1); }).empty());
  CHECK_NOTHROW(train::check_host_memory<R>(dp(2), 8, 100000, 1, each));
  // unknown available memory: no check
  CHECK_NOTHROW(train::check_host_memory<R>(dp(2), 8, 100000, 2, 0));
  // what the tests train fits in a few MiB... GiB
  CHECK_NOTHROW(train::check_host_memory<R>(dp(2), 8, 64, 2, 1 * GiB));
}

TEST_CASE("check_host_memory names the parameters' fix when the model is what does not fit") {
  using R = recipes::llama3_8b_fsdp;
  // llama3_8b over 8 ranks, one on this host: an eighth of its 8B f32 parameters, gradients and
  // two AdamW moments (about 15 GiB) and a tiny batch
  const std::string why = failure_of<error>([&] { train::check_host_memory<R>(dp(8), 8, 16, 1, 8 * GiB); });
  INFO(why);
  CHECK(has(why, "of which optimizer states "));
  CHECK(has(why, "shard the model over more ranks (FSDP, TP or PP axes) on more hosts, or run fewer ranks on this host"));
}

TEST_CASE("check_host_memory under a pipeline takes the stage that needs most") {
  using R = recipes::debug_pp;  // the last stage holds the output layer and the loss
  mesh_shape m = dp(2);
  coords_t last{};
  last[0] = 1;
  const std::int64_t worst = std::max(estimate_memory<R>(m, 4, 4096).peak(), estimate_memory<R>(m, 4, 4096, last).peak());
  CHECK_NOTHROW(train::check_host_memory<R>(m, 4, 4096, 2, 2 * worst));
  CHECK(!failure_of<error>([&] { train::check_host_memory<R>(m, 4, 4096, 2, 2 * worst - 1); }).empty());
}

TEST_CASE("ranks_on_this_host: every thread rank; MPI: the launcher's local count") {
  CHECK(train::ranks_on_this_host("threads", 8) == 8);
  CHECK(train::ranks_on_this_host("mpi", 8) >= 1);
  CHECK(host_available_memory() >= 0);
  testing::launcher_env env;
  CHECK(train::ranks_on_this_host("mpi", 8) == 1);  // no launcher says: one process a node
  // srun with no --ntasks-per-node (sbatch -N 2 -n 6): Slurm's step counts by node
  env.set("SLURM_STEP_TASKS_PER_NODE", "4,2").set("SLURM_NODEID", "1");
  CHECK(train::ranks_on_this_host("mpi", 6) == 2);
  env.set("SLURM_NODEID", "0");
  CHECK(train::ranks_on_this_host("mpi", 6) == 4);
  CHECK(train::ranks_on_this_host("mpi", 3) == 3);  // never more than the job's
  CHECK(train::ranks_on_this_host("threads", 8) == 8);
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "5");  // mpirun's own count wins over the Slurm job's
  CHECK(train::ranks_on_this_host("mpi", 6) == 5);
}

namespace {
/// A fake /proc and /sys/fs/cgroup under a fresh temporary folder.
struct fake_host {
  std::filesystem::path root = std::filesystem::temp_directory_path() /
                               ("tessera_host_memory_" + std::to_string(reinterpret_cast<std::uintptr_t>(this)));
  fake_host() {
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root / "proc/self");
    put("proc/meminfo", "MemTotal:       32000000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n");
  }
  ~fake_host() { std::filesystem::remove_all(root); }
  void put(const std::string& file, const std::string& text) {
    std::filesystem::create_directories((root / file).parent_path());
    std::ofstream(root / file) << text;
  }
  std::int64_t available() { return host_available_memory((root / "proc").string(), (root / "cgroup").string()); }
};
constexpr std::int64_t meminfo_bytes = 20000000LL * 1024;
}  // namespace

TEST_CASE("host_available_memory: MemAvailable, or the cgroup's memory limit when smaller") {
  {
    fake_host h;  // no /proc/self/cgroup
    CHECK(h.available() == meminfo_bytes);
  }
  {
    fake_host h;  // cgroup v2, a job's limit of 4 GiB
    h.put("proc/self/cgroup", "0::/job/42\n");
    h.put("cgroup/job/42/memory.max", "4294967296\n");
    CHECK(h.available() == 4 * GiB);
    h.put("cgroup/job/42/memory.max", "max\n");  // no limit
    CHECK(h.available() == meminfo_bytes);
    h.put("cgroup/job/42/memory.max", "107374182400\n");  // a limit above MemAvailable
    CHECK(h.available() == meminfo_bytes);
  }
  {
    fake_host h;  // cgroup v1 with other controllers, the group mounted at the root (a container)
    h.put("proc/self/cgroup", "5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/\n");
    h.put("cgroup/memory/memory.limit_in_bytes", "2147483648\n");
    CHECK(h.available() == 2 * GiB);
    h.put("cgroup/memory/docker/abc/memory.limit_in_bytes", "1073741824\n");  // the group's own path
    CHECK(h.available() == GiB);
    h.put("cgroup/memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");  // v1: no limit
    CHECK(h.available() == 2 * GiB);  // the root's
  }
  {
    fake_host h;  // unreadable or malformed limits are no limit; no meminfo and a limit: the limit
    h.put("proc/self/cgroup", "0::/a\n");
    h.put("cgroup/a/memory.max", "lots\n");
    CHECK(h.available() == meminfo_bytes);
    std::filesystem::remove(h.root / "proc/meminfo");
    CHECK(h.available() == 0);
    h.put("cgroup/a/memory.max", "4294967296\n");
    CHECK(h.available() == 4 * GiB);
  }
}

namespace {
/// TESSERA_HOST_MEMORY set for one scope (unset before and after)
struct budget_env {
  explicit budget_env(const char* v) { ::setenv("TESSERA_HOST_MEMORY", v, 1); }
  ~budget_env() { ::unsetenv("TESSERA_HOST_MEMORY"); }
};
}  // namespace

TEST_CASE("TESSERA_HOST_MEMORY: a size that replaces what Linux says; a wrong one is refused by name") {
  CHECK(parse_byte_size("4096", "X") == 4096);
  CHECK(parse_byte_size("4096B", "X") == 4096);
  CHECK(parse_byte_size("512MiB", "X") == 512LL << 20);
  CHECK(parse_byte_size("512M", "X") == 512LL << 20);
  CHECK(parse_byte_size("1.5TiB", "X") == 3LL << 39);
  CHECK(parse_byte_size("64G", "X") == 64 * GiB);
  CHECK(parse_byte_size("2K", "X") == 2048);
  CHECK(parse_byte_size("0", "X") == 0);
  for (const char* bad : {"", "lots", "64GB", "-1G", "1.5", "64 GiB", "nan", "1e30G"}) {
    const std::string why = failure_of<error>([&] { (void)parse_byte_size(bad, "TESSERA_HOST_MEMORY"); });
    INFO(bad, ": ", why);
    CHECK(has(why, std::string("TESSERA_HOST_MEMORY=") + bad + ": not a size; write a number of bytes or one with a "
                                                                 "binary unit (512MiB, 64GiB, 1.5TiB;"));
  }
  ::unsetenv("TESSERA_HOST_MEMORY");
  CHECK(!host_memory_budget_given());
  // unset: what Linux says (MemAvailable moves between two reads while other programs run,
  // so the two are not compared for equality)
  if (host_available_memory() > 0) CHECK(host_memory_budget() > 0);
  {
    budget_env e("3GiB");
    CHECK(host_memory_budget_given());
    CHECK(host_memory_budget() == 3 * GiB);
    // the default of check_host_memory: a refusal names the variable as the budget
    const std::string why = failure_of<error>(
        [&] { train::check_host_memory<recipes::debug_fsdp>(dp(2), 8, 100000, 2); });
    INFO(why);
    CHECK(has(why, "but 3.0 GiB is available (TESSERA_HOST_MEMORY); give a smaller seq_len"));
    // an explicit amount that is not the variable's is not named as it
    CHECK(!has(failure_of<error>([&] { train::check_host_memory<recipes::debug_fsdp>(dp(2), 8, 100000, 2, GiB); }),
               "TESSERA_HOST_MEMORY"));
  }
  {
    budget_env e("0");  // the checks off
    CHECK(host_memory_budget() == 0);
    CHECK_NOTHROW(train::check_host_memory<recipes::debug_fsdp>(dp(2), 8, 100000, 2));
  }
  {
    budget_env e("12 parsecs");
    CHECK(has(failure_of<error>([&] { train::check_host_memory<recipes::debug_fsdp>(dp(2), 8, 64, 2); }),
              "TESSERA_HOST_MEMORY=12 parsecs: not a size"));
  }
}

TEST_CASE("device_memory_problem: a rank's step beyond its GPU's free memory, named with the GPU and the fix") {
  using R = recipes::debug_fsdp;
  // the rank's estimate and its CUDA backend's workspace (model/cuda_workspace.hpp) for the
  // rank's dims: 32 of the 64 sequences
  const memory_estimate est = estimate_memory<R>(dp(2), 64, 100000);
  CHECK(est.dims.B == 32);
  CHECK(est.dims.T == 100000);
  const std::int64_t workspace = cuda::llama_workspace(est.dims, false, true).total(), each = est.peak() + workspace;
  CHECK(workspace == cuda::blas_workspace_bytes + 4 * (32 * 16 * 100000 + 32 * 100000 + 3200000 / 256 * 256));
  const std::string why = train::device_memory_problem<R>(dp(2), 64, 100000, 80 * GiB, "GPU 1 (NVIDIA H100)");
  INFO(why);
  CHECK(has(why, "seq_len 100000 x global batch 64: one training step of recipe debug_fsdp needs about " +
                     train::detail::size_text(each) + " on each GPU (of which activations "));
  CHECK(has(why, "; the CUDA kernels' workspace " + train::detail::size_text(workspace) + "), but"));
  CHECK(has(why, "), but GPU 1 (NVIDIA H100) has 80.0 GiB free; give a smaller seq_len or global batch, more GPUs, or "
                 "a recipe with activation checkpointing"));
  // the rank's own need, not the host's: what fits one GPU passes, a byte less does not
  CHECK(train::device_memory_problem<R>(dp(2), 64, 100000, each, "GPU 0").empty());
  CHECK(!train::device_memory_problem<R>(dp(2), 64, 100000, each - 1, "GPU 0").empty());
  CHECK(train::device_memory_problem<R>(dp(2), 64, 100000, 0, "GPU 0").empty());  // unknown: no check
  // ranks sharing a GPU (comm::cuda_staged): each rank's memory, on the one GPU
  CHECK(train::device_memory_problem<R>(dp(2), 64, 100000, 2 * each, "GPU 0", false, {}, 2).empty());
  const std::string shared = train::device_memory_problem<R>(dp(2), 64, 100000, 2 * each - 1, "GPU 0", false, {}, 2);
  CHECK(has(shared, "needs about " + train::detail::size_text(2 * each) + " on a GPU its 2 ranks share (of which "));
  CHECK(has(shared, "; the CUDA kernels' workspace " + train::detail::size_text(workspace) + "; each rank's), but"));
  // bf16 GEMM operands (cuda_bf16_kernels): their slots and the tensor-core attention's staging
  // on top -- what fits the f32 backend does not fit it
  const std::int64_t bf16_more = cuda::llama_workspace(est.dims, true, true).total() - workspace;
  CHECK(bf16_more > 0);
  CHECK(!train::device_memory_problem<R>(dp(2), 64, 100000, each, "GPU 0", true).empty());
  CHECK(train::device_memory_problem<R>(dp(2), 64, 100000, each + bf16_more, "GPU 0", true).empty());
  // cuDNN's attention (TESSERA_ATTENTION=cudnn; kernels/cuda/attention_cudnn.cuh) in place of
  // the tensor cores': its 8 bf16 buffers (q, out, dout, dq of the query heads; k, v, dk, dv of
  // the KV heads, unpadded) and its workspace, in whole floats; no D in the scratch
  const auto tc = cuda::llama_workspace(est.dims, true, true), dnn = cuda::llama_workspace(est.dims, true, true,
                                                                                            0, 1001);
  const std::int64_t q = 32 * 100000 * est.dims.Hq(), kv = 32 * 100000 * est.dims.Hk();
  CHECK(dnn.attention == 2 * (4 * q + 4 * kv) + 1004);
  CHECK(tc.scratch - dnn.scratch == 4 * 32 * est.dims.heads * 100000);
  CHECK(dnn.operands == tc.operands);
  CHECK(cuda::llama_workspace(est.dims, false, true, 0, 1001).total() == workspace);  // f32: none
  // ... as device_memory_problem counts it, cuDNN asked for the rank's dims (its 32 sequences)
  std::int64_t asked_B = 0;
  const train::cudnn_workspace_query ask = [&](const llama_dims& d) {
    asked_B = d.B;
    return std::int64_t{1001};
  };
  const std::int64_t with_cudnn = est.peak() + dnn.total();
  CHECK(with_cudnn != est.peak() + tc.total());
  CHECK(train::device_memory_problem<R>(dp(2), 64, 100000, with_cudnn, "GPU 0", true, ask).empty());
  CHECK(asked_B == 32);
  CHECK(!train::device_memory_problem<R>(dp(2), 64, 100000, with_cudnn - 1, "GPU 0", true, ask).empty());
  asked_B = 0;  // f32 operands: tessera's f32 attention, cuDNN not asked
  CHECK(train::device_memory_problem<R>(dp(2), 64, 100000, each, "GPU 0", false, ask).empty());
  CHECK(asked_B == 0);
  // one GPU, no recipe (train_llama --device cuda): the model's own step
  mesh_shape one = dp(1);
  const std::string single = train::device_memory_problem(debugmodel::config, parallel_spec{}, "model debugmodel", one,
                                                          64, 100000, 80 * GiB, "GPU 0 (NVIDIA H100)");
  CHECK(has(single, "one training step of model debugmodel needs about "));
  CHECK(has(single, " on its GPU (of which activations "));
  CHECK(has(single, "has 80.0 GiB free; give a smaller seq_len or global batch"));
  CHECK(!has(single, "more GPUs"));
  // ... with bf16 operands: device_llama's kept rounded weights (kernels/rounded_weights.hpp)
  // on top, in place of the operand slots' room for weights
  const auto e1 = train::detail::largest_rank_estimate(debugmodel::config, parallel_spec{}, one, 64, 100000);
  CHECK(e1.kept_weights == bf16_weight_elements(e1.dims, debugmodel::config.n_layers));  // all of its linears
  const std::int64_t kept = e1.peak() + cuda::llama_workspace(e1.dims, true, true, e1.kept_weights).total();
  CHECK(kept > e1.peak() + cuda::llama_workspace(e1.dims, true, true).total());
  CHECK(train::device_memory_problem(debugmodel::config, parallel_spec{}, "model debugmodel", one, 64, 100000, kept,
                                     "GPU 0", true)
            .empty());
  CHECK(!train::device_memory_problem(debugmodel::config, parallel_spec{}, "model debugmodel", one, 64, 100000,
                                      kept - 1, "GPU 0", true)
             .empty());
  // a recipe whose runtime keeps the weights computed on their stored blocks (TP: all of its
  // linears' shards), and one that gathers them (FSDP: none kept; est above)
  CHECK(est.kept_weights == 0);
  using TP = recipes::debug_tp;
  mesh_shape tp2 = dp(2);
  const memory_estimate etp = estimate_memory<TP>(tp2, 4, 4096);
  CHECK(etp.kept_weights == bf16_weight_elements(etp.dims, recipe_traits<TP>::config.n_layers));
  const std::int64_t tp_need = etp.peak() + cuda::llama_workspace(etp.dims, true, true, etp.kept_weights).total();
  CHECK(train::device_memory_problem<TP>(tp2, 4, 4096, tp_need, "GPU 0", true).empty());
  CHECK(!train::device_memory_problem<TP>(tp2, 4, 4096, tp_need - 1, "GPU 0", true).empty());
  // FSDP gathering bf16 parameters: with bf16 operands the units hold their linears' gathers as
  // bf16 codes (parallel/fsdp.hpp's gathered_operands), 2 bytes an element less than in f32 --
  // the two blocks and the root gathered at the peak, all their linears; f32 gathers hold none
  CHECK(est.gathered_operands == 0);
  using B16 = recipes::debug_fsdp_bf16;
  const memory_estimate eb = estimate_memory<B16>(dp(2), 64, 100000);
  CHECK(eb.gathered_operands == bf16_weight_elements(eb.dims, 2));
  CHECK(eb.gathered == est.gathered);
  const std::int64_t b16_ws = cuda::llama_workspace(eb.dims, true, true, eb.kept_weights).total(),
                     b16_need = eb.peak() - 2 * eb.gathered_operands + b16_ws;
  CHECK(train::device_memory_problem<B16>(dp(2), 64, 100000, b16_need, "GPU 0", true).empty());
  CHECK(!train::device_memory_problem<B16>(dp(2), 64, 100000, b16_need - 1, "GPU 0", true).empty());
  // the model itself too large for one GPU: the parameters' fix
  const std::string big = train::device_memory_problem(llama3_8b::config, parallel_spec{}, "model llama3_8b", one, 1,
                                                       16, 80 * GiB, "GPU 0 (NVIDIA H100)");
  CHECK(has(big, "of which optimizer states "));
  CHECK(has(big, "a smaller model, or a recipe that shards it over several GPUs"));
  using R8 = recipes::llama3_8b_fsdp;
  CHECK(has(train::device_memory_problem<R8>(dp(2), 2, 16, 40 * GiB, "GPU 0"),
            "shard the model over more GPUs (FSDP, TP or PP axes)"));
}
