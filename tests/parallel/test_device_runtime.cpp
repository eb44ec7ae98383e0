// The parallel runtime on a kernel backend whose memory is not the host's: parallel_llama<R,
// staged_kernels> (the CPU kernels on a memory space the library reaches only through the
// space's operations; tests/support/staged_kernels.hpp) runs the FSDP and TP plans in that
// space, pipeline parallel's stages with the tensors between them and context parallel's ring
// attention there, as it runs
// them in device memory over NCCL with cuda_kernels. Every recipe it takes
// trains as parallel_llama<R> on the host does, bit for bit: the same kernels on the same
// data, moved by the same plans through the space's copies, fences and host transfers.
#include <doctest/doctest.h>

#include <recipe_steps.hpp>
#include <staged_kernels.hpp>

#include "recipes_tiny.hpp"

using namespace tessera;
using testing::staged_kernels;

namespace {

template <class R>
void same_on_both(int world, const char* what) {
  CAPTURE(what);
  const auto host = testing::recipe_steps_on_threads<R, cpu_kernels>(world);
  const auto staged = testing::recipe_steps_on_threads<R, staged_kernels>(world);
  CHECK(host.losses == staged.losses);
  CHECK(host.norms == staged.norms);
  CHECK(host.params == staged.params);
  // Not trivially equal: real gradients flowed, and the evaluation ran (losses[3]).
  CHECK(host.norms.front() > 0.1f);
  CHECK(host.losses.size() == 4);
  CHECK(host.losses[3] > 1.0f);
  CHECK(memory_tracker<staged::space>::current_bytes() == 0);  // every block, scratch and buffer freed
}

struct tiny_f8_ac {
  using model = tiny_recipes::tiny;
  using mesh = tessera::mesh<axis<"dp", 2>, axis<"tp", 2>>;
  using parallelize = tessera::parallelize<fsdp<"dp">, tensor_parallel<"tp", sequence_parallel>,
                                           float8<fp8::rowwise>, activation_checkpointing<ac::full>>;
};

}  // namespace

TEST_CASE("parallel runtime in a non-host memory space: FSDP, HSDP and mixed precision equal the host's, bit for bit") {
  same_on_both<tiny_recipes::fsdp_never>(2, "fsdp, reshard never");
  same_on_both<tiny_recipes::hsdp_2x2>(4, "hsdp 2 x 2");
  same_on_both<tiny_recipes::fsdp_dyn>(2, "fsdp, prefetched gathers");
}

TEST_CASE("parallel runtime in a non-host memory space: TP, SP, loss parallel, 2-D, bf16 gathers equal the host's") {
  same_on_both<tiny_recipes::tp_sp_lp>(2, "tp + sp + loss parallel");
  same_on_both<tiny_recipes::tp_plain>(2, "tp, logits gathered");
  same_on_both<tiny_recipes::fsdp_tp_2d>(4, "fsdp x tp");
  same_on_both<tiny_recipes::fsdp_tp_bf16>(4, "fsdp (bf16 gathers) x tp");
  same_on_both<tiny_f8_ac>(4, "fsdp x tp, Float8 rowwise, full AC");
  same_on_both<tiny_recipes::f8_2d_tw_ag_op>(4, "fsdp x tp, Float8 tensorwise with the FP8 all-gather, selective op AC");
  same_on_both<tiny_recipes::fsdp_tp_async_op>(4, "fsdp x tp async (the ring in the space), selective op AC");
  same_on_both<tiny_recipes::pp_zbv_tp_async>(4, "ZBV x tp async");
}

TEST_CASE("parallel runtime in a non-host memory space: pipeline schedules, split backward and evaluation equal the host's") {
  same_on_both<tiny_recipes::pp_fsdp_bf16>(4, "1F1B x fsdp (bf16 gathers)");
  same_on_both<tiny_recipes::pp_zbv_op>(4, "ZBV zero bubble (I and W apart) x tp + sp, selective op AC");
  same_on_both<tiny_recipes::f8_pp_zbv_tp_tw>(4, "ZBV x tp + sp, Float8 tensorwise");
  same_on_both<tiny_recipes::pp_table>(2, "a user's schedule table");
}

TEST_CASE("parallel runtime in a non-host memory space: context parallel's ring attention equals the host's") {
  using tiny_recipes::cp_only, tiny_recipes::cp_docs;
  same_on_both<cp_only<cp_rotate::allgather, cp_balancing::head_tail>>(2, "cp all-gather, head-tail");
  same_on_both<cp_only<cp_rotate::ring, cp_balancing::none>>(2, "cp ring, contiguous chunks");
  same_on_both<tiny_recipes::cp_fsdp_ring>(4, "fsdp x cp ring, full AC");
  same_on_both<cp_docs<cp_rotate::ring, cp_balancing::per_document>>(2, "cp ring, documents balanced per document");
  same_on_both<tiny_recipes::cp_docs_pp>(4, "pipeline 1F1B x cp ring with documents");
  same_on_both<tiny_recipes::cp_fsdp_f8>(4, "fsdp x cp, Float8 with the FP8 all-gather");
}
