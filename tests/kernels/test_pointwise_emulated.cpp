// The CUDA kernels of kernels/cuda/pointwise_kernels.cuh, cross_entropy_kernels.cuh and
// float8_kernels.cuh run on the host by the CUDA emulation (tests/support/cuda_emulation.hpp:
// every block's threads as host threads), launched as pointwise.cuh, cross_entropy.cuh and
// float8.cuh launch them, against the CPU kernels -- the block reductions (RMSNorm,
// cross-entropy and its vocabulary-parallel phases, the sum of squares, the amaxes), the
// per-element kernels (SwiGLU, AdamW, add, scale, bf16 casts: the CPU's formulas), the
// per-column loops, RoPE's pairings, the embedding's shard and the amaxes (Float8's scales,
// casts and transposes: test_float8_emulated.cpp).
// Tolerances are tests/gpu/test_cuda_kernels.cu's (largest |emulated - cpu| / max(1, |cpu|)):
// 2e-5 for RMSNorm (row sums: a 256-thread tree against 16 lanes), 2e-6 for SwiGLU, AdamW, RoPE and
// cross-entropy's gradient, 1e-5 for its losses and the shards' statistics, 1e-12 for the
// sum of squares (double), 0 for the embedding, the amaxes, the row maxima, Float8's codes and
// their values, and the transpose.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include <tessera/kernels/cpu/adamw.hpp>
#include <tessera/kernels/cpu/cross_entropy.hpp>
#include <tessera/kernels/cpu/embedding.hpp>
#include <tessera/kernels/cpu/float8.hpp>
#include <tessera/kernels/cpu/grad_norm.hpp>
#include <tessera/kernels/cpu/rmsnorm.hpp>
#include <tessera/kernels/cpu/rope.hpp>
#include <tessera/kernels/cpu/swiglu.hpp>
#include <tessera/kernels/cpu/vocab_parallel.hpp>

#define TESSERA_CUDA_EMULATION 1
#include <cuda_emulation.hpp>
#include <tessera/kernels/cuda/cross_entropy_kernels.cuh>
#include <tessera/kernels/cuda/float8_kernels.cuh>
#include <tessera/kernels/cuda/pointwise_kernels.cuh>

#include "emulated_kernels.hpp"

using namespace tessera;
namespace k = tessera::cuda::detail;
namespace emu = tessera::cuda::emulation;

// A namespace of its own: CI compiles this program as one translation unit (TESSERA_UNITY_TESTS).
namespace pointwise_emulated_tests {
using namespace emulated_kernel_tests;
namespace {
double worst(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double w = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    w = std::max(w, std::abs(static_cast<double>(a[i]) - b[i]) / std::max(1.0, std::abs(static_cast<double>(b[i]))));
  return w;
}
/// x's elements from i on as groups of V (what the kernels that move 4 elements a thread take).
template <int V>
k::f32_group<V>* groups_of(std::vector<float>& x, std::int64_t i) {
  return reinterpret_cast<k::f32_group<V>*>(x.data() + i);
}
template <int V>
const k::f32_group<V>* groups_of(const std::vector<float>& x, std::int64_t i) {
  return reinterpret_cast<const k::f32_group<V>*>(x.data() + i);
}
/// Three blocks: a grid-stride kernel's threads stride over more than one element.
dim3 grid3_of() { return {3, 1, 1}; }
}  // namespace

TEST_CASE("emulated CUDA kernels: the per-element ones -- SwiGLU, AdamW, add, scale, bf16 casts -- over grid strides") {
  // three blocks of 256 threads over 5,001 elements: each thread strides 6 or 7 times (a grid
  // of blocks_for(n) blocks would start one host thread per element)
  const std::int64_t n = 5001;
  const dim3 grid3{3, 1, 1};
  const auto a = randn(n, 11), b = randn(n, 12), g = randn(n, 13);
  std::vector<float> y(n), e(n), d1(n), d3(n), e1(n), e3(n);
  // SwiGLU and AdamW in groups of 4 (as cuda::swiglu_* and adamw_update launch them on aligned
  // pointers), the rest one by one
  const std::int64_t groups = n / 4, rest = 4 * groups;
  emu::launch(grid3, k::threads, 0,
              [&] { k::swiglu_forward_k<4>(groups_of<4>(y, 0), groups_of<4>(a, 0), groups_of<4>(b, 0), groups); });
  emu::launch(grid3, k::threads, 0, [&] {
    k::swiglu_forward_k<1>(groups_of<1>(y, rest), groups_of<1>(a, rest), groups_of<1>(b, rest), n - rest);
  });
  cpu::swiglu_forward(e.data(), a.data(), b.data(), n);
  CHECK(worst(y, e) <= 2e-6);  // the same formula; a build that contracts a * b + c may round differently
  emu::launch(grid3, k::threads, 0, [&] {
    k::swiglu_backward_k<4>(groups_of<4>(d1, 0), groups_of<4>(d3, 0), groups_of<4>(g, 0), groups_of<4>(a, 0),
                            groups_of<4>(b, 0), groups);
  });
  emu::launch(grid3, k::threads, 0, [&] {
    k::swiglu_backward_k<1>(groups_of<1>(d1, rest), groups_of<1>(d3, rest), groups_of<1>(g, rest),
                            groups_of<1>(a, rest), groups_of<1>(b, rest), n - rest);
  });
  cpu::swiglu_backward(e1.data(), e3.data(), g.data(), a.data(), b.data(), n);
  CHECK(worst(d1, e1) <= 2e-6);
  CHECK(worst(d3, e3) <= 2e-6);
  // in place, as the feed-forward backward runs it (dh1 over its output gradient)
  std::vector<float> inplace = g, d3b(n);
  emu::launch(grid3, k::threads, 0, [&] {
    k::swiglu_backward_k<4>(groups_of<4>(inplace, 0), groups_of<4>(d3b, 0), groups_of<4>(inplace, 0),
                            groups_of<4>(a, 0), groups_of<4>(b, 0), groups);
  });
  emu::launch(grid3, k::threads, 0, [&] {
    k::swiglu_backward_k<1>(groups_of<1>(inplace, rest), groups_of<1>(d3b, rest), groups_of<1>(inplace, rest),
                            groups_of<1>(a, rest), groups_of<1>(b, rest), n - rest);
  });
  CHECK(inplace == d1);
  CHECK(d3b == d3);
  std::vector<float> p = a, m(n, 0.1f), v(n, 0.2f), ep = a, em = m, ev = v;
  const cpu::adamw_config cfg{.lr = 1e-3f};
  const pointwise::adamw_scalars sc = cpu::adamw_step_scalars(3, cfg);
  emu::launch(grid3, k::threads, 0, [&] {
    k::adamw_k<4>(groups_of<4>(p, 0), groups_of<4>(g, 0), groups_of<4>(m, 0), groups_of<4>(v, 0), groups, sc);
  });
  emu::launch(grid3, k::threads, 0, [&] {
    const std::int64_t i = 4 * groups;
    k::adamw_k<1>(groups_of<1>(p, i), groups_of<1>(g, i), groups_of<1>(m, i), groups_of<1>(v, i), n - i, sc);
  });
  cpu::adamw_update(ep.data(), g.data(), em.data(), ev.data(), static_cast<std::size_t>(n), 3, cfg);
  CHECK(worst(p, ep) <= 2e-6);
  CHECK(worst(m, em) <= 2e-6);
  CHECK(worst(v, ev) <= 2e-6);
  emu::launch(grid3, k::threads, 0, [&] { k::add_k(y.data(), a.data(), b.data(), n); });
  bool sums = true, scaled = true, casts = true;
  for (std::int64_t i = 0; i < n; ++i) sums = sums && y[i] == a[i] + b[i];
  emu::launch(grid3, k::threads, 0, [&] { k::scale_k(y.data(), n, 0.5f); });
  for (std::int64_t i = 0; i < n; ++i) scaled = scaled && y[i] == (a[i] + b[i]) * 0.5f;
  std::vector<bf16> h(n);
  // the casts in groups of 4 (as cuda::to_bf16 launches them on aligned pointers), the rest one by one
  emu::launch(grid3, k::threads, 0,
              [&] { k::to_bf16_k<4>(reinterpret_cast<k::bf16_group<4>*>(h.data()), groups_of<4>(a, 0), groups); });
  emu::launch(grid3, k::threads, 0, [&] {
    const std::int64_t i = 4 * groups;
    k::to_bf16_k<1>(reinterpret_cast<k::bf16_group<1>*>(h.data() + i), groups_of<1>(a, i), n - i);
  });
  emu::launch(grid3, k::threads, 0, [&] { k::from_bf16_k(y.data(), h.data(), n); });
  for (std::int64_t i = 0; i < n; ++i) casts = casts && y[i] == static_cast<float>(bf16(a[i]));
  CHECK(sums);
  CHECK(scaled);
  CHECK(casts);
}

TEST_CASE("emulated CUDA kernels: RMSNorm forward and backward (block reductions, per-column weight gradient)") {
  const std::int64_t N = 21, C = 300;  // C > 256: each thread strides over the row
  const auto x = randn(N * C, 1), w = randn(C, 2), g = randn(N * C, 3);
  std::vector<float> out(N * C), rstd(N), eo(N * C), er(N);
  emu::launch(rows_grid(N), k::threads, 0,
              [&] { k::rmsnorm_forward_k(out.data(), rstd.data(), x.data(), w.data(), C, 1e-5f); });
  cpu::rmsnorm_forward(eo.data(), er.data(), x.data(), w.data(), N, C, 1e-5f);
  CHECK(worst(out, eo) <= 2e-5);
  CHECK(worst(rstd, er) <= 2e-5);
  std::vector<float> dx(N * C, 0.5f), dw(C, 0.25f), ex = dx, ew = dw;  // both accumulate
  emu::launch(rows_grid(N), k::threads, 0,
              [&] { k::rmsnorm_backward_input_k(dx.data(), g.data(), x.data(), w.data(), er.data(), C); });
  // the weight gradient in two passes, as cuda::rmsnorm_backward runs it: chunks of `step`
  // rows (the last one partial) by blocks of 32 columns (the last one partial) x 8 row lanes
  const std::int64_t step = 8, chunks = (N + step - 1) / step;
  std::vector<float> part(static_cast<std::size_t>(chunks * C));
  emu::launch(k::column_chunk_grid(N, C, step), {32, 8, 1}, 0, [&] {
    k::rmsnorm_backward_weight_part_k(part.data(), g.data(), x.data(), er.data(), N, C, step);
  });
  emu::launch(stride_grid(C), k::threads, 0, [&] { k::rmsnorm_backward_weight_k(dw.data(), part.data(), chunks, C); });
  cpu::rmsnorm_backward(ex.data(), ew.data(), g.data(), x.data(), w.data(), er.data(), N, C);
  CHECK(worst(dx, ex) <= 2e-5);
  CHECK(worst(dw, ew) <= 2e-5);
}

TEST_CASE("emulated CUDA kernels: cross-entropy in place, ignored targets, and the vocabulary-parallel phases") {
  const std::int64_t N = 6, V = 700;
  const std::vector<std::int32_t> targets{3, 699, -1, 0, 350, 42};  // one ignored
  const std::int64_t count = cpu::count_targets(targets.data(), N, V);
  const float scale = 1.0f / static_cast<float>(count);
  // rows of 700 (groups of 4, 16-byte aligned) and of 701 (one by one); a row's max late in it
  // (the running sums rescaled)
  for (const std::int64_t Vr : {V, V + 1}) {
    CAPTURE(Vr);
    auto x = randn(N * Vr, 4, 3.0f);
    x[static_cast<std::size_t>(Vr - 2)] = 12.0f;
    std::vector<float> d = x, losses(N), ed(N * Vr), el(N);  // dlogits over the logits, as the model calls it
    emu::launch(rows_grid(N), k::threads, 0,
                [&] { k::cross_entropy_k(d.data(), losses.data(), d.data(), targets.data(), Vr, scale); });
    cpu::cross_entropy_forward_backward(ed.data(), el.data(), x.data(), targets.data(), N, Vr);
    CHECK(worst(d, ed) <= 2e-6);
    CHECK(worst(losses, el) <= 1e-5);
    CHECK(losses[2] == 0.0f);
  }
  const auto logits = randn(N * V, 4, 3.0f);
  // loss parallel: shards [0, 300) and [300, 700); each phase on each shard
  for (const auto& part : {std::pair<std::int64_t, std::int64_t>{0, 300}, {300, 400}}) {
    const std::int64_t v0 = part.first, Vl = part.second;  // (clang 14 captures no structured binding)
    CAPTURE(v0);
    std::vector<float> shard(N * Vl);
    for (std::int64_t i = 0; i < N; ++i)
      std::copy_n(logits.begin() + i * V + v0, Vl, shard.begin() + i * Vl);
    std::vector<float> mx(N), emx(N), st(2 * N), est(2 * N), sd = shard, esd(N * Vl), sl(N);
    emu::launch(rows_grid(N), k::threads, 0, [&] { k::ce_shard_row_max_k(mx.data(), shard.data(), Vl); });
    cpu::ce_shard_row_max(emx.data(), shard.data(), N, Vl);
    CHECK(mx == emx);
    emu::launch(rows_grid(N), k::threads, 0,
                [&] { k::ce_shard_row_stats_k(st.data(), shard.data(), emx.data(), targets.data(), v0, Vl); });
    cpu::ce_shard_row_stats(est.data(), shard.data(), emx.data(), targets.data(), N, v0, Vl);
    CHECK(worst(st, est) <= 1e-5);
    emu::launch(rows_grid(N), k::threads, 0, [&] {
      k::ce_shard_finish_k(sd.data(), sl.data(), sd.data(), emx.data(), est.data(), targets.data(), v0, Vl, scale);
    });
    cpu::ce_shard_finish(esd.data(), shard.data(), emx.data(), est.data(), targets.data(), N, V, v0, Vl, scale);
    CHECK(worst(sd, esd) <= 2e-6);
  }
}

TEST_CASE("emulated CUDA kernels: sum of squares (per-block double trees), amaxes (NaN sticking)") {
  const auto g = randn(100003, 5);
  std::vector<double> part(4);
  emu::launch({4, 1, 1}, k::threads, 0, [&] { k::sum_squares_k(part.data(), g.data(), 100003); });
  double total = 0;
  for (double p : part) total += p;
  const double want = cpu::sum_of_squares(g.data(), g.size());
  CHECK(std::abs(total - want) <= 1e-12 * want);

  const std::int64_t rows = 7, cols = 300;
  auto x = randn(rows * cols, 6);
  x[2 * cols + 17] = std::numeric_limits<float>::quiet_NaN();  // row 2, column 17
  std::vector<float> blocks(3), amax(1), by_row(rows), by_col(cols), er(rows), ec(cols);
  emu::launch({3, 1, 1}, k::threads, 0, [&] { k::abs_max_blocks_k(blocks.data(), x.data(), rows * cols); });
  emu::launch({1, 1, 1}, k::threads, 0, [&] { k::abs_max_blocks_k(amax.data(), blocks.data(), 3); });
  emu::launch(rows_grid(rows), k::threads, 0, [&] { k::abs_max_rows_k(by_row.data(), x.data(), cols); });
  emu::launch(stride_grid(cols), k::threads, 0, [&] { k::abs_max_cols_k(by_col.data(), x.data(), rows, cols); });
  cpu::abs_max_rows(er.data(), x.data(), rows, cols);
  cpu::abs_max_cols(ec.data(), x.data(), rows, cols);
  CHECK(std::isnan(amax[0]));
  CHECK(std::isnan(cpu::abs_max(x.data(), rows * cols)));
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
    return a.size() == b.size();
  };
  CHECK(same(by_row, er));
  CHECK(same(by_col, ec));
  CHECK(std::isnan(by_row[2]));
  CHECK(std::isnan(by_col[17]));
  x[2 * cols + 17] = 0.5f;  // without the NaN, the tensor's amax is the rows' largest
  emu::launch({3, 1, 1}, k::threads, 0, [&] { k::abs_max_blocks_k(blocks.data(), x.data(), rows * cols); });
  emu::launch({1, 1, 1}, k::threads, 0, [&] { k::abs_max_blocks_k(amax.data(), blocks.data(), 3); });
  CHECK(amax[0] == cpu::abs_max(x.data(), rows * cols));

  // the column amaxes in two passes, as cuda::f8_amax runs them: chunks of `step` rows (the
  // last one partial) by blocks of 32 columns (the last one partial) x 8 row lanes, then the
  // chunks' amaxes
  const std::int64_t tall = 75, step = 16, chunks = (tall + step - 1) / step, wide = 40;
  auto y = randn(tall * wide, 7);
  y[70 * wide + 33] = std::numeric_limits<float>::quiet_NaN();  // the last chunk, the last column block
  y[3 * wide + 5] = -90.0f;                                      // a largest magnitude, negative
  std::vector<float> parts(static_cast<std::size_t>(chunks * wide)), col2(wide), ey(wide);
  emu::launch(k::column_chunk_grid(tall, wide, step), {32, 8, 1}, 0,
              [&] { k::abs_max_cols_part_k(parts.data(), y.data(), tall, wide, step); });
  emu::launch(stride_grid(wide), k::threads, 0, [&] { k::abs_max_cols_k(col2.data(), parts.data(), chunks, wide); });
  cpu::abs_max_cols(ey.data(), y.data(), tall, wide);
  CHECK(same(col2, ey));
  CHECK(std::isnan(col2[33]));
  CHECK(col2[5] == 90.0f);
}

TEST_CASE("emulated CUDA kernels: the embedding on a vocabulary shard, RoPE in both pairings") {
  const std::int64_t N = 9, V = 40, v0 = 10, Vl = 20, C = 24;
  const std::vector<std::int32_t> ids{0, 10, 29, 30, 15, 15, 39, 12, 10};  // in and out of the shard, repeats
  const auto table = randn(Vl * C, 7), dy = randn(N * C, 8);
  std::vector<float> out(N * C, 9.0f), eo(N * C), dt(Vl * C, 0.5f), edt = dt;
  emu::launch(stride_grid(N * C), k::threads, 0,
              [&] { k::embedding_forward_k(out.data(), ids.data(), table.data(), N, v0, Vl, C); });
  cpu::embedding_shard_forward(eo.data(), ids.data(), table.data(), N, V, v0, Vl, C);
  CHECK(out == eo);
  cpu::embedding_shard_backward(edt.data(), dy.data(), ids.data(), N, V, v0, Vl, C);
  for (const std::int64_t parts : {1, 4}) {  // the rows by their index's low bits: the same bits
    CAPTURE(parts);
    std::vector<float> d = dt;
    emu::launch(stride_grid(C * parts), k::threads, 0,
                [&] { k::embedding_backward_k(d.data(), dy.data(), ids.data(), N, v0, Vl, C, parts); });
    CHECK(d == edt);
  }

  // RoPE: two pairs a thread with 32-bit indices (what cuda::rope_apply launches for a head
  // dim that is a multiple of 4 on aligned tensors), one pair a thread with 64-bit ones (an odd
  // number of pairs, HD 6, or tensors past 2^32 elements), in both pairings and both directions;
  // three blocks, so that threads stride
  const std::int64_t B = 2, T = 11, NH = 3;
  for (const std::int64_t HD : {16, 6})
    for (const cpu::rope_style style : {cpu::rope_style::interleaved, cpu::rope_style::half})
      for (const bool inverse : {false, true}) {
        CAPTURE(HD);
        CAPTURE(inverse);
        std::vector<float> cs(static_cast<std::size_t>(T * HD / 2)), sn(cs.size());
        cpu::rope_table(cs.data(), sn.data(), T, HD);
        const auto x = randn(B * T * NH * HD, 9);
        std::vector<float> y(x.size()), e(x.size()), z = x;
        const bool il = style == cpu::rope_style::interleaved;
        const float sign = inverse ? -1.0f : 1.0f;
        if (HD % 4 == 0)
          emu::launch(grid3_of(), k::threads, 0, [&] {
            k::rope_k<std::uint32_t, 2>(y.data(), x.data(), cs.data(), sn.data(), B * T, T, NH, HD, il, sign);
          });
        else
          emu::launch(grid3_of(), k::threads, 0, [&] {
            k::rope_k<std::int64_t, 1>(y.data(), x.data(), cs.data(), sn.data(), B * T, T, NH, HD, il, sign);
          });
        // 64-bit, one pair a thread, in place
        emu::launch(grid3_of(), k::threads, 0, [&] {
          k::rope_k<std::int64_t, 1>(z.data(), z.data(), cs.data(), sn.data(), B * T, T, NH, HD, il, sign);
        });
        if (inverse)
          cpu::rope_backward(e.data(), x.data(), cs.data(), sn.data(), B, T, NH, HD, style);
        else
          cpu::rope_forward(e.data(), x.data(), cs.data(), sn.data(), B, T, NH, HD, style);
        CHECK(worst(y, e) <= 2e-6);
        CHECK(worst(z, e) <= 2e-6);
      }
}

TEST_CASE("the emulation refuses a launch it should not run: too many threads, too much shared memory") {
  // a launch's threads are host threads under the threads executor (the sanitizer builds'),
  // which caps them; fibers take any grid
  const emu::executor was = emu::current_executor.exchange(emu::executor::threads);
  CHECK_THROWS_WITH_AS(emu::launch({100, 1, 1}, 256, 0, [] {}), doctest::Contains("threads in all"),
                       std::invalid_argument);
  emu::current_executor = was;
  CHECK_THROWS_WITH_AS(emu::launch({1, 1, 1}, 128, emu::max_shared_bytes + 1, [] {}),
                       doctest::Contains("more than an H100 gives"), std::invalid_argument);
  CHECK_THROWS_AS(emu::launch({1, 1, 1}, 100, 0, [] {}), std::invalid_argument);  // not whole warps
}
}  // namespace pointwise_emulated_tests
