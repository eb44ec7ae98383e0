// The CUDA attention kernels' device code run on the host by the CUDA emulation of
// tests/support/cuda_emulation.hpp (every block's threads as host threads, mma.sync on each
// lane's registers in the PTX ISA's layout): the f32 kernels (kernels/cuda/attention_kernels.cuh:
// what cuda_kernels runs) against the CPU kernels, and the tensor-core kernels
// (attention_tc_kernels.cuh: what cuda_bf16_kernels runs, on operands staged as bf16 rows and
// transposed tiles) against references exact about where they round. What it checks
// is the kernels' own logic -- tiling, the masks (causal, and context parallel's spans with
// documents and tile skipping), GQA's head groups, indices, shared memory, barriers,
// accumulation, the merge --, not the hardware's fragments or speed
// (tests/gpu/test_cuda_attention.cu, on a GPU).
//
// f32: the CPU's tolerances on a GPU (tests/gpu/test_cuda_attention.cu): 1e-5 for out, lse
// and D, 1e-4 for dq, dk, dv (the same f32 operations in other orders).
// Tensor cores:
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include <tessera/kernels/cpu/attention.hpp>
#include <tessera/kernels/cpu/ring_attention.hpp>
#include <tessera/kernels/pointwise.hpp>
#include <tessera/tensor/dtype.hpp>

#include <head_tail_split.hpp>

#define TESSERA_CUDA_EMULATION 1
#include <cuda_emulation.hpp>
#include <tessera/kernels/cuda/attention_kernels.cuh>
#include <tessera/kernels/cuda/attention_tc_kernels.cuh>
#include <tessera/kernels/cuda/attention_tc_wide.cuh>

using namespace tessera;
namespace tc = tessera::cuda::detail::tc;
namespace emu = tessera::cuda::emulation;

namespace {
std::vector<float> rounded_randn(std::size_t n, unsigned seed) {  // values bf16 holds exactly
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(bf16(d(g)));
  return v;
}
float r16(float x) { return static_cast<float>(bf16(x)); }

/// Largest |a - b| / max(1, |b|).
double worst(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double w = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i]) && a[i] == b[i]) continue;
    w = std::max(w, std::abs(static_cast<double>(a[i]) - b[i]) / std::max(1.0, std::abs(static_cast<double>(b[i]))));
  }
  return w;
}

struct shape {
  std::int64_t B, Tq, Tk, NH, NKV;
};

/// x [B, T, N, HD] staged as the entry points stage it (attention_tc.cuh: its rows, its
/// transpose, or both), into host buffers that start as NaN (a tile read from where the
/// staging wrote nothing shows); what is not staged is null, as there.
struct staging {
  std::vector<bf16> rows, t;
  template <int HD>
  tc::staged of(const float* x, std::int64_t B, std::int64_t T, std::int64_t N, bool rows_too, bool transposed) {
    const std::int64_t Tp = tc::staged_length(T);
    const auto n = static_cast<std::size_t>(B * Tp * N * HD);
    rows.assign(rows_too ? n : 0, bf16::from_bits(0x7FC0));
    t.assign(transposed ? n : 0, bf16::from_bits(0x7FC0));
    bf16* r = rows_too ? rows.data() : nullptr;
    bf16* tt = transposed ? t.data() : nullptr;
    emu::launch({static_cast<unsigned>(Tp / tc::cols), static_cast<unsigned>(N), static_cast<unsigned>(B)}, tc::threads,
                tc::stage_bytes<HD>, [&] { tc::stage_k<HD>(r, tt, x, T, Tp, N); });
    return {r, tt, Tp};
  }
};

/// The forward as attention_tc.cuh launches it: forward_k, and (`wide`) forward_wide_k, whose
/// out and lse must be the same bits.
template <int HD, class Mask>
void emulated_forward(float* out, float* lse, const float* q, const float* k, const float* v, Mask m, shape s,
                      bool wide = true) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  staging sk, sv;
  const tc::staged ks = sk.of<HD>(k, s.B, s.Tk, s.NKV, true, false), vs = sv.of<HD>(v, s.B, s.Tk, s.NKV, false, true);
  emu::launch(tc::tc_grid(s.Tq, s.NH, s.B), tc::threads, tc::forward_bytes<HD>,
              [&] { tc::forward_k<HD, Mask>(out, lse, q, ks, vs, m, s.Tq, s.Tk, s.NH, s.NKV, scale); });
  if (!wide) return;
  const auto nq = static_cast<std::size_t>(s.B * s.Tq * s.NH * HD), nl = static_cast<std::size_t>(s.B * s.NH * s.Tq);
  std::vector<float> wo(nq, 7.0f), wl(nl, 7.0f);
  emu::launch(tc::wide_grid(s.Tq, s.NH, s.B), tc::threads, tc::wide_forward_bytes<HD>, [&] {
    tc::forward_wide_k<HD, Mask>(wo.data(), wl.data(), q, ks, vs, m, s.Tq, s.Tk, s.NH, s.NKV, scale);
  });
  CHECK(std::equal(wo.begin(), wo.end(), out, [](float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }));
  CHECK(std::equal(wl.begin(), wl.end(), lse, [](float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }));
}
/// The backward as attention_tc.cuh launches it: `fused`, dkv_k adding dq in turns; else dq_k
/// beside dkv_k.
template <int HD, class Mask, bool Accumulate>
void emulated_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                       const float* v, const float* lse, const float* D, Mask m, shape s, bool fused) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  staging sk, sv, sq, sg;
  // rows only: the backward's kernels read every operand's fragments from its rows
  const tc::staged qs = sq.of<HD>(q, s.B, s.Tq, s.NH, true, false), gs = sg.of<HD>(dout, s.B, s.Tq, s.NH, true, false);
  if (fused) {
    std::vector<int> turns(static_cast<std::size_t>(s.B * s.NH * tc::dq_turns(s.Tq)), 0);
    if (!Accumulate && Mask::skips_tiles) std::fill(dq, dq + s.B * s.Tq * s.NH * HD, 0.0f);
    emu::launch(tc::tc_grid(s.Tk, s.NKV, s.B), tc::threads, tc::dkvq_bytes<HD>, [&] {
      tc::dkv_k<HD, Mask, Accumulate, true>(dk, dv, dq, turns.data(), gs, qs, k, v, lse, D, m, s.Tq, s.Tk, s.NH, s.NKV,
                                            scale);
    });
    return;
  }
  const tc::staged ks = sk.of<HD>(k, s.B, s.Tk, s.NKV, true, false), vs = sv.of<HD>(v, s.B, s.Tk, s.NKV, true, false);
  emu::launch(tc::tc_grid(s.Tq, s.NH, s.B), tc::threads, tc::dq_bytes<HD>, [&] {
    tc::dq_k<HD, Mask, Accumulate>(dq, dout, q, ks, vs, lse, D, m, s.Tq, s.Tk, s.NH, s.NKV, scale);
  });
  emu::launch(tc::tc_grid(s.Tk, s.NKV, s.B), tc::threads, tc::dkv_bytes<HD>, [&] {
    tc::dkv_k<HD, Mask, Accumulate>(dk, dv, nullptr, nullptr, gs, qs, k, v, lse, D, m, s.Tq, s.Tk, s.NH, s.NKV, scale);
  });
}

// The f32 kernels, launched as attention.cuh and ring_attention.cuh launch them.
namespace f32 {
namespace k = cuda::detail;
/// attention.cuh's grid for the f32 kernels: (block of attention_rows rows, head, batch).
dim3 grid(std::int64_t rows, std::int64_t heads, std::int64_t B) {
  return {static_cast<unsigned>((rows + k::attention_rows - 1) / k::attention_rows), static_cast<unsigned>(heads),
          static_cast<unsigned>(B)};
}
template <int HD, class Mask>
void forward(float* out, float* lse, const float* q, const float* kk, const float* v, Mask m, shape s) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  emu::launch(grid(s.Tq, s.NH, s.B), k::attention_rows, k::kv_tile_bytes<HD>,
              [&] { k::attention_forward_k<HD, Mask>(out, lse, q, kk, v, m, s.Tq, s.Tk, s.NH, s.NKV, scale); });
}
template <int HD, class Mask, bool Accumulate>
void backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* kk, const float* v,
              const float* lse, const float* D, Mask m, shape s) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  emu::launch(grid(s.Tq, s.NH, s.B), k::attention_rows, k::kv_tile_bytes<HD>, [&] {
    k::attention_dq_k<HD, Mask, Accumulate>(dq, dout, q, kk, v, lse, D, m, s.Tq, s.Tk, s.NH, s.NKV, scale);
  });
  emu::launch(grid(s.Tk, s.NKV, s.B), k::attention_rows, k::q_tile_bytes<HD>, [&] {
    k::attention_dkv_k<HD, Mask, Accumulate>(dk, dv, dout, q, kk, v, lse, D, m, s.Tq, s.Tk, s.NH, s.NKV, scale);
  });
}
// the row-wise kernels: two blocks of 256 threads, so that their grid-stride loops stride
template <int HD>
void delta(float* D, const float* dout, const float* out, shape s) {
  emu::launch({2, 1, 1}, 256, 0, [&] { k::attention_delta_k<HD>(D, dout, out, s.B, s.Tq, s.NH); });
}
void merge(float* out, float* lse, const float* out_b, const float* lse_b, shape s, std::int64_t HD) {
  emu::launch({2, 1, 1}, 256, 0, [&] { k::merge_k(out, lse, out_b, lse_b, s.B, s.Tq, s.NH, HD); });
}
}  // namespace f32

/// The backward's contribution with bf16 P and dS where the kernels round them, added to
/// dq, dk, dv; `sees(t, s)` the mask.
void reference_backward(std::vector<float>& dq, std::vector<float>& dk, std::vector<float>& dv,
                        const std::vector<float>& dout, const std::vector<float>& q, const std::vector<float>& k,
                        const std::vector<float>& v, const std::vector<float>& lse, const std::vector<float>& D,
                        const std::function<bool(std::int64_t, std::int64_t)>& sees, shape s, std::int64_t HD) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  std::vector<double> aq(dq.size()), ak(dk.size()), av(dv.size());
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.NH; ++h) {
      const std::int64_t g = h / (s.NH / s.NKV);
      for (std::int64_t t = 0; t < s.Tq; ++t) {
        const std::int64_t qo = ((b * s.Tq + t) * s.NH + h) * HD, r = (b * s.NH + h) * s.Tq + t;
        for (std::int64_t j = 0; j < s.Tk; ++j) {
          if (!sees(t, j)) continue;
          const std::int64_t ko = ((b * s.Tk + j) * s.NKV + g) * HD;
          double x = 0, dp = 0;
          for (std::int64_t d = 0; d < HD; ++d) x += double(q[qo + d]) * k[ko + d], dp += double(dout[qo + d]) * v[ko + d];
          const float p = pointwise::fast_exp(static_cast<float>(x) * scale - lse[r]);
          const double ds = r16(p * (static_cast<float>(dp) - D[r])), pr = r16(p);
          for (std::int64_t d = 0; d < HD; ++d) {
            aq[qo + d] += ds * k[ko + d];
            ak[ko + d] += ds * q[qo + d];
            av[ko + d] += pr * dout[qo + d];
          }
        }
      }
    }
  for (std::size_t i = 0; i < dq.size(); ++i) dq[i] += static_cast<float>(aq[i] * scale);
  for (std::size_t i = 0; i < dk.size(); ++i) dk[i] += static_cast<float>(ak[i] * scale), dv[i] += static_cast<float>(av[i]);
}

/// Which ways causal_case runs the backward: dq from dq_k (the default), dq added in turns
/// inside dkv_k, or both.
enum class ways { separate, fused, both };
template <int HD>
void causal_case(shape s, ways run) {
  CAPTURE(HD);
  CAPTURE(s.Tq);
  const std::size_t nq = static_cast<std::size_t>(s.B * s.Tq * s.NH * HD), nk = static_cast<std::size_t>(s.B * s.Tk * s.NKV * HD),
                    nl = static_cast<std::size_t>(s.B * s.NH * s.Tq);
  const auto q = rounded_randn(nq, 1), k = rounded_randn(nk, 2), v = rounded_randn(nk, 3), dy = rounded_randn(nq, 4);
  std::vector<float> out(nq), lse(nl), want(nq), want_lse(nl);
  // q = 0: exact P
  const std::vector<float> zero(nq, 0.0f);
  emulated_forward<HD>(out.data(), lse.data(), zero.data(), k.data(), v.data(), cuda::detail::causal_mask{}, s);
  cpu::attention_forward(want.data(), want_lse.data(), zero.data(), k.data(), v.data(), s.B, s.Tq, s.NH, s.NKV, HD);
  CHECK(worst(out, want) <= 1e-5);
  CHECK(worst(lse, want_lse) <= 1e-5);
  // random q: P rounded
  emulated_forward<HD>(out.data(), lse.data(), q.data(), k.data(), v.data(), cuda::detail::causal_mask{}, s);
  cpu::attention_forward(want.data(), want_lse.data(), q.data(), k.data(), v.data(), s.B, s.Tq, s.NH, s.NKV, HD);
  CHECK(worst(out, want) <= 8e-3);
  CHECK(worst(lse, want_lse) <= 2e-3);
  CHECK(worst(out, want) > 0);  // the rounding of P is there
  // backward (writes), from the kernels' own out and lse: dq from its own kernel, and added
  // inside dkv_k in turns
  std::vector<float> D(nl), rq(nq, 0.0f), rk(nk, 0.0f), rv(nk, 0.0f);
  cpu::attention_delta(D.data(), dy.data(), out.data(), s.B, s.Tq, s.NH, HD);
  reference_backward(rq, rk, rv, dy, q, k, v, lse, D, [](std::int64_t t, std::int64_t j) { return j <= t; }, s, HD);
  std::vector<float> dqs;
  for (const bool fused : {false, true}) {
    CAPTURE(fused);
    if (run != ways::both && fused != (run == ways::fused)) continue;
    std::vector<float> dq(nq, 7.0f), dk(nk, 7.0f), dv(nk, 7.0f);
    emulated_backward<HD, cuda::detail::causal_mask, false>(dq.data(), dk.data(), dv.data(), dy.data(), q.data(),
                                                            k.data(), v.data(), lse.data(), D.data(), {}, s, fused);
    CHECK(worst(dq, rq) <= 1e-4);
    CHECK(worst(dk, rk) <= 1e-4);
    CHECK(worst(dv, rv) <= 1e-4);
    if (fused && run == ways::both) CHECK(worst(dq, dqs) <= 1e-5);  // the same sums of dS K, in another order
    dqs = dq;
  }
}
}  // namespace

TEST_CASE("tensor-core attention (emulated): causal forward and backward, head dims 16, 64 and 128") {
  const shape s{1, 130, 130, 2, 1};  // 130: tiles of 64 leave 2; a GQA group of 2
  // the backward both ways; at head dim 128 the default (dq_k) alone (the fused kernel's code
  // is the same at every head dim; the threads executor's runs under the sanitizers are what
  // this costs)
  causal_case<16>(s, ways::both);
  causal_case<64>(s, ways::both);
  causal_case<128>(s, ways::separate);
  // 5 key blocks (the fused backward's turns pass down a chain of up to 5), 2 batches
  causal_case<16>({2, 300, 300, 2, 1}, ways::fused);
}

TEST_CASE("tensor-core attention (emulated): context parallel's blocks -- spans, documents, tile skipping, accumulation") {
  // rank 0 of a head-tail split over cp = 2 (chunks 0 and 3 of 4, 80 tokens each) against
  // rank 1's block (chunks 1 and 2), documents of 23 tokens: chunk 0's queries see none of
  // the block (out 0, lse -inf), chunk 3's see the tokens of their own document in it, and
  // whole tiles go unseen by a thread block (skipped)
  constexpr int HD = 32;
  const std::int64_t Tl = 160;
  const shape s{1, Tl, Tl, 4, 2};
  const testing::head_tail_split split(Tl);
  const cpu::token_span qs = split.rank0(), ks = split.rank1();
  const auto mask = cuda::detail::mask_of(qs, ks);
  const auto sees = [&](std::int64_t t, std::int64_t j) { return split.sees(t, j); };
  const std::size_t nq = static_cast<std::size_t>(Tl * s.NH * HD), nk = static_cast<std::size_t>(Tl * s.NKV * HD),
                    nl = static_cast<std::size_t>(s.NH * Tl);
  const auto q = rounded_randn(nq, 11), k = rounded_randn(nk, 12), v = rounded_randn(nk, 13), dy = rounded_randn(nq, 14);
  std::vector<float> out(nq), lse(nl), want(nq), want_lse(nl);
  const std::vector<float> zero(nq, 0.0f);
  emulated_forward<HD>(out.data(), lse.data(), zero.data(), k.data(), v.data(), mask, s);
  cpu::attention_block_forward(want.data(), want_lse.data(), zero.data(), k.data(), v.data(), qs, ks, 1, s.NH, s.NKV, HD);
  CHECK(worst(out, want) <= 1e-5);
  CHECK(worst(lse, want_lse) <= 1e-5);
  CHECK(std::isinf(lse[0]));  // chunk 0's first query sees nothing of rank 1's block
  CHECK(out[0] == 0.0f);
  emulated_forward<HD>(out.data(), lse.data(), q.data(), k.data(), v.data(), mask, s);
  cpu::attention_block_forward(want.data(), want_lse.data(), q.data(), k.data(), v.data(), qs, ks, 1, s.NH, s.NKV, HD);
  CHECK(worst(out, want) <= 8e-3);
  CHECK(worst(lse, want_lse) <= 2e-3);
  // the block backward ACCUMULATES; lse and D as context parallel passes them (this block's
  // here; rows that see nothing have lse -inf and must add nothing)
  std::vector<float> D(nl);
  cpu::attention_delta(D.data(), dy.data(), out.data(), 1, Tl, s.NH, HD);
  const auto dq0 = rounded_randn(nq, 15), dk0 = rounded_randn(nk, 16), dv0 = rounded_randn(nk, 17);
  std::vector<float> rq = dq0, rk = dk0, rv = dv0;
  reference_backward(rq, rk, rv, dy, q, k, v, lse, D, sees, s, HD);
  for (const bool fused : {false, true}) {
    CAPTURE(fused);
    std::vector<float> dq = dq0, dk = dk0, dv = dv0;
    emulated_backward<HD, cuda::detail::span_mask, true>(dq.data(), dk.data(), dv.data(), dy.data(), q.data(),
                                                         k.data(), v.data(), lse.data(), D.data(), mask, s, fused);
    CHECK(worst(dq, rq) <= 1e-4);
    CHECK(worst(dk, rk) <= 1e-4);
    CHECK(worst(dv, rv) <= 1e-4);
    CHECK(dq[0] == dq0[0]);  // a query that sees nothing of the block: its dq unchanged
  }
}

TEST_CASE("tensor-core attention (emulated): the fused backward's turns under context parallel's own block") {
  // rank 0's queries against its own keys (chunks 0 and 3 of a head-tail split, 160 tokens
  // each, documents of 23): a query tile gets dq from up to two key blocks, which need not be
  // neighbours -- the key blocks between them see none of its rows (no turn of theirs)
  constexpr int HD = 16;
  const std::int64_t Tl = 320;
  const shape s{1, Tl, Tl, 2, 1};
  const testing::head_tail_split split(Tl);
  const cpu::token_span qs = split.rank0();
  const auto mask = cuda::detail::mask_of(qs, qs);
  const auto sees = [&](std::int64_t t, std::int64_t j) { return split.p0[j] <= split.p0[t] && split.d0[t] == split.d0[j]; };
  const std::size_t nq = static_cast<std::size_t>(Tl * s.NH * HD), nl = static_cast<std::size_t>(s.NH * Tl);
  const auto q = rounded_randn(nq, 31), k = rounded_randn(nq, 32), v = rounded_randn(nq, 33), dy = rounded_randn(nq, 34);
  std::vector<float> out(nq), lse(nl), D(nl);
  emulated_forward<HD>(out.data(), lse.data(), q.data(), k.data(), v.data(), mask, s);
  cpu::attention_delta(D.data(), dy.data(), out.data(), 1, Tl, s.NH, HD);
  const auto d0 = rounded_randn(nq, 35);
  std::vector<float> rq = d0, rk = d0, rv = d0;
  reference_backward(rq, rk, rv, dy, q, k, v, lse, D, sees, s, HD);
  std::vector<float> dq = d0, dk = d0, dv = d0;
  emulated_backward<HD, cuda::detail::span_mask, true>(dq.data(), dk.data(), dv.data(), dy.data(), q.data(), k.data(),
                                                       v.data(), lse.data(), D.data(), mask, s, true);
  CHECK(worst(dq, rq) <= 1e-4);
  CHECK(worst(dk, rk) <= 1e-4);
  CHECK(worst(dv, rv) <= 1e-4);
}

TEST_CASE("tensor-core attention: every kernel's shared memory fits an H100 block at head dim 128") {
  CHECK(tc::forward_bytes<128> <= emu::max_shared_bytes);
  CHECK(tc::wide_forward_bytes<128> <= emu::max_shared_bytes);
  CHECK(2 * (tc::wide_forward_bytes<128> + 1024) <= 228 * 1024);  // the wide forward: two blocks an SM
  CHECK(tc::dq_bytes<128> <= emu::max_shared_bytes);
  CHECK(tc::dkv_bytes<128> <= emu::max_shared_bytes);
  CHECK(tc::dkv_bytes<128> <= 166912);  // and an A100's (163 KiB)
  // the backward's kernels double-buffer their streamed tiles and still fit two blocks an SM
  // (an H100's SM: 228 KiB, 1 KiB of it reserved per block)
  CHECK(2 * (tc::dq_bytes<128> + 1024) <= 228 * 1024);
  CHECK(2 * (tc::dkv_bytes<128> + 1024) <= 228 * 1024);
  CHECK(2 * (tc::dkvq_bytes<128> + 1024) <= 228 * 1024);  // and with dq fused into dkv_k
}

namespace {
template <int HD>
void f32_causal_case() {
  CAPTURE(HD);
  const shape s{2, 100, 100, 4, 2};  // 100: no tile divides it; GQA groups of 2
  const std::size_t nq = static_cast<std::size_t>(s.B * s.Tq * s.NH * HD), nk = static_cast<std::size_t>(s.B * s.Tk * s.NKV * HD),
                    nl = static_cast<std::size_t>(s.B * s.NH * s.Tq);
  const auto q = rounded_randn(nq, 21), k = rounded_randn(nk, 22), v = rounded_randn(nk, 23), dy = rounded_randn(nq, 24);
  std::vector<float> out(nq), lse(nl), want(nq), want_lse(nl), D(nl), want_D(nl);
  f32::forward<HD>(out.data(), lse.data(), q.data(), k.data(), v.data(), cuda::detail::causal_mask{}, s);
  cpu::attention_forward(want.data(), want_lse.data(), q.data(), k.data(), v.data(), s.B, s.Tq, s.NH, s.NKV, HD);
  CHECK(worst(out, want) <= 1e-5);
  CHECK(worst(lse, want_lse) <= 1e-5);
  f32::delta<HD>(D.data(), dy.data(), want.data(), s);
  cpu::attention_delta(want_D.data(), dy.data(), want.data(), s.B, s.Tq, s.NH, HD);
  CHECK(worst(D, want_D) <= 1e-5);
  std::vector<float> dq(nq, 7.0f), dk(nk, 7.0f), dv(nk, 7.0f), eq(nq), ek(nk), ev(nk);  // written, not added
  f32::backward<HD, cuda::detail::causal_mask, false>(dq.data(), dk.data(), dv.data(), dy.data(), q.data(), k.data(),
                                                      v.data(), want_lse.data(), want_D.data(), {}, s);
  cpu::attention_backward(eq.data(), ek.data(), ev.data(), dy.data(), q.data(), k.data(), v.data(), want.data(),
                          want_lse.data(), s.B, s.Tq, s.NH, s.NKV, HD);
  CHECK(worst(dq, eq) <= 1e-4);
  CHECK(worst(dk, ek) <= 1e-4);
  CHECK(worst(dv, ev) <= 1e-4);
}
}  // namespace

TEST_CASE("f32 attention (emulated): causal forward, D and backward against the CPU kernels, head dims 16 and 64") {
  f32_causal_case<16>();
  f32_causal_case<64>();
}

TEST_CASE("f32 attention (emulated): context parallel's blocks, merged and accumulated, against the CPU kernels") {
  // rank 0 of a head-tail split over cp = 2 with documents of 23 tokens, against its own
  // block and rank 1's (as tests/gpu/test_cuda_attention.cu): 160 tokens, so that a thread
  // block of 64 rows skips whole tiles of 32
  constexpr int HD = 16;
  const std::int64_t Tl = 160;
  const shape s{2, Tl, Tl, 4, 2};
  const testing::head_tail_split split(Tl);
  const cpu::token_span qs = split.rank0(), ks = split.rank1();
  const std::size_t nq = static_cast<std::size_t>(s.B * Tl * s.NH * HD), nk = static_cast<std::size_t>(s.B * Tl * s.NKV * HD),
                    nl = static_cast<std::size_t>(s.B * s.NH * Tl);
  const auto q = rounded_randn(nq, 31), k0 = rounded_randn(nk, 32), v0 = rounded_randn(nk, 33), k1 = rounded_randn(nk, 34),
             v1 = rounded_randn(nk, 35), dy = rounded_randn(nq, 36);
  // the CPU
  std::vector<float> out(nq, 0.0f), lse(nl, -INFINITY), ob(nq), lb(nl), D(nl), dq(nq, 0.0f), dk0(nk, 0.0f),
      dv0(nk, 0.0f), dk1(nk, 0.0f), dv1(nk, 0.0f);
  cpu::attention_block_forward(ob.data(), lb.data(), q.data(), k0.data(), v0.data(), qs, qs, s.B, s.NH, s.NKV, HD);
  cpu::attention_merge(out.data(), lse.data(), ob.data(), lb.data(), s.B, Tl, s.NH, HD);
  cpu::attention_block_forward(ob.data(), lb.data(), q.data(), k1.data(), v1.data(), qs, ks, s.B, s.NH, s.NKV, HD);
  cpu::attention_merge(out.data(), lse.data(), ob.data(), lb.data(), s.B, Tl, s.NH, HD);
  cpu::attention_delta(D.data(), dy.data(), out.data(), s.B, Tl, s.NH, HD);
  cpu::attention_block_backward(dq.data(), dk0.data(), dv0.data(), dy.data(), q.data(), k0.data(), v0.data(),
                                lse.data(), D.data(), qs, qs, s.B, s.NH, s.NKV, HD);
  cpu::attention_block_backward(dq.data(), dk1.data(), dv1.data(), dy.data(), q.data(), k1.data(), v1.data(),
                                lse.data(), D.data(), qs, ks, s.B, s.NH, s.NKV, HD);
  // the emulated kernels
  std::vector<float> gout(nq, 0.0f), glse(nl, -INFINITY), gob(nq), glb(nl), gD(nl), gdq(nq, 0.0f), gdk0(nk, 0.0f),
      gdv0(nk, 0.0f), gdk1(nk, 0.0f), gdv1(nk, 0.0f);
  const auto own = cuda::detail::mask_of(qs, qs), other = cuda::detail::mask_of(qs, ks);
  f32::forward<HD>(gob.data(), glb.data(), q.data(), k0.data(), v0.data(), own, s);
  f32::merge(gout.data(), glse.data(), gob.data(), glb.data(), s, HD);
  f32::forward<HD>(gob.data(), glb.data(), q.data(), k1.data(), v1.data(), other, s);
  f32::merge(gout.data(), glse.data(), gob.data(), glb.data(), s, HD);
  f32::delta<HD>(gD.data(), dy.data(), gout.data(), s);
  f32::backward<HD, cuda::detail::span_mask, true>(gdq.data(), gdk0.data(), gdv0.data(), dy.data(), q.data(), k0.data(),
                                                   v0.data(), glse.data(), gD.data(), own, s);
  f32::backward<HD, cuda::detail::span_mask, true>(gdq.data(), gdk1.data(), gdv1.data(), dy.data(), q.data(), k1.data(),
                                                   v1.data(), glse.data(), gD.data(), other, s);
  CHECK(worst(gout, out) <= 1e-5);
  CHECK(worst(glse, lse) <= 1e-5);
  CHECK(worst(gdq, dq) <= 1e-4);
  CHECK(worst(gdk0, dk0) <= 1e-4);
  CHECK(worst(gdv0, dv0) <= 1e-4);
  CHECK(worst(gdk1, dk1) <= 1e-4);
  CHECK(worst(gdv1, dv1) <= 1e-4);
}
