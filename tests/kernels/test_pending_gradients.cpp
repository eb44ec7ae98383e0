// kernels/pending_gradients.hpp: gradients zeroed in name, written by their first GEMM.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include <tessera/kernels/backend.hpp>
#include <tessera/kernels/pending_gradients.hpp>

#include "fd.hpp"

using namespace tessera;

namespace {
bool all_nan(const float* p, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    if (!std::isnan(p[i])) return false;
  return true;
}
}  // namespace

TEST_CASE("pending gradients: exactly a pending tensor is taken; inside one, it is zeroed; outside, nothing") {
  std::vector<float> arena(40, std::nanf(""));
  pending_gradients p;
  p.cover(arena.data(), {0, 16, 32}, {12, 16, 8});  // padding at 12..15
  const auto zero = [](float* x, std::int64_t n) { std::fill(x, x + n, 0.0f); };
  CHECK(!p.any());
  CHECK(!p.take(arena.data(), 12, zero));  // nothing pending yet
  p.defer_all();
  CHECK(p.any());
  CHECK(p.take(arena.data(), 12, zero));  // tensor 0, whole: the GEMM writes it
  CHECK(!p.pending(0));
  CHECK(all_nan(arena.data(), 12));  // untouched
  CHECK(!p.take(arena.data(), 12, zero));  // taken once
  CHECK(!p.take(arena.data() + 20, 4, zero));  // inside tensor 1: zeroed, then added to
  CHECK(!p.pending(1));
  for (int i = 16; i < 32; ++i) CHECK(arena[static_cast<std::size_t>(i)] == 0.0f);
  CHECK(!p.take(arena.data() + 13, 2, zero));  // padding: not a tensor
  CHECK(std::isnan(arena[13]));
  CHECK(p.pending(2));
  p.settle_all(zero);
  CHECK(!p.any());
  for (int i = 32; i < 40; ++i) CHECK(arena[static_cast<std::size_t>(i)] == 0.0f);
}

TEST_CASE("pending gradients: a backend's weight-gradient GEMM writes a pending tensor, inside its scope only") {
  const std::int64_t N = 6, C = 8, OC = 5;
  const auto inp = tt::randn(N * C, 1), w = tt::randn(OC * C, 2), dout = tt::randn(N * OC, 3);
  for (const bool bf16 : {false, true}) {
    CAPTURE(bf16);
    const auto backward = [&](float* dw) {
      if (bf16) cpu_bf16_kernels::matmul_backward(nullptr, dw, dout.data(), inp.data(), w.data(), N, C, OC);
      else cpu_kernels::matmul_backward(nullptr, dw, dout.data(), inp.data(), w.data(), N, C, OC);
    };
    std::vector<float> want(OC * C, 0.0f);
    backward(want.data());
    std::vector<float> dw(OC * C, std::nanf(""));
    pending_gradients p;
    p.cover(dw.data(), std::vector<std::int64_t>{0}, std::vector<std::int64_t>{OC * C});
    p.defer_all();
    backward(dw.data());  // no scope: it adds to the NaNs
    CHECK(all_nan(dw.data(), OC * C));
    {
      pending_gradients::scope s(&p);
      backward(dw.data());  // written
      CHECK(dw == want);
      backward(dw.data());  // then added to
    }
    for (std::size_t i = 0; i < dw.size(); ++i) CHECK(dw[i] == doctest::Approx(2 * want[i]).epsilon(1e-6));
  }
  CHECK(pending_gradients::active() == nullptr);  // the scope restored none
}
