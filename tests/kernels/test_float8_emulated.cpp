// Float8's kernels of kernels/cuda/float8_kernels.cuh run on the host by the CUDA emulation
// (tests/support/cuda_emulation.hpp), launched as float8.cuh launches them, against the CPU's
// kernels/cpu/float8.hpp: the casts to codes and back, the cast-and-transpose (a float and 4
// floats a load), the per-row codes in one pass, both rowwise casts of one tensor from two
// reads (f8_codes_both's amaxes, scales and codes), the scales from amaxes, and the byte
// transpose's 2-D tiles -- all exact (maxima, the CPU's scale function, the shared casts).
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <tessera/kernels/cpu/float8.hpp>

#define TESSERA_CUDA_EMULATION 1
#include <cuda_emulation.hpp>
#include <tessera/kernels/cuda/float8_kernels.cuh>
#include <tessera/kernels/cuda/pointwise_kernels.cuh>

#include "emulated_kernels.hpp"

using namespace tessera;

// A namespace of its own: CI compiles this program as one translation unit (TESSERA_UNITY_TESTS).
namespace float8_emulated_tests {
using namespace emulated_kernel_tests;
namespace k = tessera::cuda::detail;
namespace emu = tessera::cuda::emulation;

TEST_CASE("emulated CUDA kernels: Float8's casts to codes and back, each granularity, e4m3 and e5m2") {
  const std::int64_t rows = 6, cols = 70;
  auto x = randn(rows * cols, 10, 40.0f);
  x[5] = 1e6f;  // saturates
  for (const cpu::f8_granularity g :
       {cpu::f8_granularity::tensorwise, cpu::f8_granularity::per_row, cpu::f8_granularity::per_column})
    for (const dtype target : {dtype::f8_e4m3fn, dtype::f8_e5m2}) {
      CAPTURE(static_cast<int>(g));
      const cpu::f8_cast c{.target = target, .granularity = g};
      const std::int64_t n_scales = g == cpu::f8_granularity::tensorwise ? 1 : (g == cpu::f8_granularity::per_row ? rows : cols);
      std::vector<float> scales(static_cast<std::size_t>(n_scales));
      for (std::size_t i = 0; i < scales.size(); ++i) scales[i] = 0.5f + 0.25f * static_cast<float>(i % 5);
      std::vector<std::uint8_t> bits(rows * cols), want(rows * cols);
      std::vector<float> back(rows * cols), want_back(rows * cols);
      std::vector<std::uint8_t> bits_t(rows * cols);
      auto run = [&]<class F8>(F8) {  // a grid of 2 x 4 blocks: both loops stride
        emu::launch({2, 4, 1}, 32, 0, [&] { k::f8_quantize_k<F8>(bits.data(), x.data(), scales.data(), rows, cols, g); });
        emu::launch({2, 4, 1}, 32, 0,
                    [&] { k::f8_dequantize_k<F8>(back.data(), bits.data(), scales.data(), rows, cols, g); });
        emu::launch(k::transpose_grid(rows, cols), {32, 8, 1}, 0, [&] {
          k::transpose_k<F8>(bits_t.data(), x.data(), scales.data(), rows, cols, g, false);
        });
      };
      if (target == dtype::f8_e4m3fn)
        run(f8_e4m3fn{});
      else
        run(f8_e5m2{});
      cpu::f8_quantize(want.data(), x.data(), scales.data(), rows, cols, c);
      cpu::f8_dequantize(want_back.data(), want.data(), scales.data(), rows, cols, c);
      CHECK(bits == want);
      CHECK(back == want_back);
      bool transposed = true;  // cast and transposed in one pass: the codes, transposed
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) transposed = transposed && bits_t[c * rows + r] == want[r * cols + c];
      CHECK(transposed);
    }
}

TEST_CASE("emulated CUDA kernels: Float8's cast-and-transpose by fours, each granularity, e4m3 and e5m2") {
  // tiles partial both ways (rows and columns not multiples of 64); words where rows % 4 == 0
  for (const std::int64_t rows : {70, 72}) {
    const std::int64_t cols = 132;
    auto x = randn(rows * cols, 16, 20.0f);
    x[9] = 1e6f;  // saturates
    for (const cpu::f8_granularity g :
         {cpu::f8_granularity::tensorwise, cpu::f8_granularity::per_row, cpu::f8_granularity::per_column})
      for (const dtype target : {dtype::f8_e4m3fn, dtype::f8_e5m2}) {
        CAPTURE(rows);
        CAPTURE(static_cast<int>(g));
        const cpu::f8_cast c{.target = target, .granularity = g};
        std::vector<float> scales(static_cast<std::size_t>(cpu::f8_scale_count(g, rows, cols)));
        cpu::f8_scales(scales.data(), x.data(), rows, cols, c);
        std::vector<std::uint8_t> want(rows * cols), got(rows * cols, 0xAB);
        cpu::f8_quantize(want.data(), x.data(), scales.data(), rows, cols, c);
        auto run = [&]<class F8>(F8) {
          emu::launch(k::transpose_grid(rows, cols), {32, 8, 1}, 0, [&] {
            k::transpose_fours_k<F8>(got.data(), reinterpret_cast<const k::f32_group<4>*>(x.data()), scales.data(),
                                     rows, cols, g, rows % 4 == 0);
          });
        };
        if (target == dtype::f8_e4m3fn)
          run(f8_e4m3fn{});
        else
          run(f8_e5m2{});
        bool transposed = true;
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t j = 0; j < cols; ++j) transposed = transposed && got[j * rows + r] == want[r * cols + j];
        CHECK(transposed);
      }
  }
}

TEST_CASE("emulated CUDA kernels: Float8's per-row codes in one pass (amax, scale, codes, inverse scale)") {
  const std::int64_t rows = 5, cols = 600;  // more columns than threads: each thread strides
  auto x = randn(rows * cols, 14, 3.0f);
  x[3 * cols + 17] = 1e5f;                  // a row whose scale is far from the others
  for (std::int64_t c = 0; c < cols; ++c) x[4 * cols + c] = 0.0f;  // an all-zero row: the floor's scale
  for (const dtype target : {dtype::f8_e4m3fn, dtype::f8_e5m2})
    for (const auto rounding : {cpu::f8_scale_rounding::none, cpu::f8_scale_rounding::power_of_two}) {
      const cpu::f8_cast c{target, cpu::f8_granularity::per_row, rounding};
      std::vector<float> scales(rows), inverse(rows);
      std::vector<std::uint8_t> want(rows * cols), bits(rows * cols);
      cpu::f8_scales(scales.data(), x.data(), rows, cols, c);
      cpu::f8_quantize(want.data(), x.data(), scales.data(), rows, cols, c);
      const float mf = cpu::f8_max_finite(target);
      const bool pow2 = rounding == cpu::f8_scale_rounding::power_of_two;
      // one element at a time, and in groups of 4 (16-byte loads, 4-byte stores of codes)
      for (const int V : {1, 4}) {
        CAPTURE(V);
        std::fill(bits.begin(), bits.end(), std::uint8_t{0xAB});
        std::fill(inverse.begin(), inverse.end(), 0.0f);
        auto run = [&]<class F8>(F8) {
          emu::launch(rows_grid(rows), k::threads, 0, [&] {
            if (V == 4)
              k::f8_row_codes_k<F8, 4>(reinterpret_cast<k::u8_group<4>*>(bits.data()), inverse.data(),
                                       reinterpret_cast<const k::f32_group<4>*>(x.data()), cols / 4, mf, pow2);
            else
              k::f8_row_codes_k<F8, 1>(reinterpret_cast<k::u8_group<1>*>(bits.data()), inverse.data(),
                                       reinterpret_cast<const k::f32_group<1>*>(x.data()), cols, mf, pow2);
          });
        };
        if (target == dtype::f8_e4m3fn)
          run(f8_e4m3fn{});
        else
          run(f8_e5m2{});
        CHECK(bits == want);
        for (std::int64_t r = 0; r < rows; ++r) CHECK(inverse[r] == 1.0f / scales[r]);
      }
    }
}

TEST_CASE("emulated CUDA kernels: Float8 rowwise's two casts of one tensor from two reads (cuda::f8_codes_both)") {
  // rows over two blocks of dual_amax_rows (the last partial), columns over several blocks of
  // 32 groups (the last partial); one element at a time and in groups of 4
  const std::int64_t rows = k::dual_amax_rows + 24, cols = 200;
  auto x = randn(rows * cols, 15, 3.0f);
  x[140 * cols + 7] = -2e4f;  // a row and a column whose scales are far from the others
  for (std::int64_t c = 0; c < cols; ++c) x[3 * cols + c] = 0.0f;  // an all-zero row: the floor's scale
  std::vector<float> want_r(rows), want_c(cols);
  cpu::abs_max_rows(want_r.data(), x.data(), rows, cols);
  cpu::abs_max_cols(want_c.data(), x.data(), rows, cols);
  for (const int V : {1, 4}) {
    CAPTURE(V);
    std::vector<std::uint32_t> amax(rows + cols, 0u);
    const std::int64_t groups = cols / V;
    emu::launch(k::dual_amax_grid(rows, groups), {32, 8, 1}, 0, [&] {
      if (V == 4)
        k::f8_dual_amax_k<4>(amax.data(), reinterpret_cast<const k::f32_group<4>*>(x.data()), rows, groups);
      else
        k::f8_dual_amax_k<1>(amax.data(), reinterpret_cast<const k::f32_group<1>*>(x.data()), rows, groups);
    });
    bool same_r = true, same_c = true;
    for (std::int64_t r = 0; r < rows; ++r) same_r = same_r && std::bit_cast<float>(amax[r]) == want_r[r];
    for (std::int64_t c = 0; c < cols; ++c) same_c = same_c && std::bit_cast<float>(amax[rows + c]) == want_c[c];
    CHECK(same_r);
    CHECK(same_c);
  }
  {  // NaN sticks: above infinity as bits
    auto y = x;
    y[130 * cols + 9] = std::numeric_limits<float>::quiet_NaN();
    y[5 * cols + 9] = std::numeric_limits<float>::infinity();
    std::vector<std::uint32_t> amax(rows + cols, 0u);
    emu::launch(k::dual_amax_grid(rows, cols), {32, 8, 1}, 0, [&] {
      k::f8_dual_amax_k<1>(amax.data(), reinterpret_cast<const k::f32_group<1>*>(y.data()), rows, cols);
    });
    CHECK(std::isnan(std::bit_cast<float>(amax[130])));
    CHECK(std::isnan(std::bit_cast<float>(amax[rows + 9])));
    CHECK(std::isinf(std::bit_cast<float>(amax[5])));
  }
  for (const dtype row_target : {dtype::f8_e4m3fn, dtype::f8_e5m2})
    for (const dtype col_target : {dtype::f8_e4m3fn, dtype::f8_e5m2})
      for (const auto rounding : {cpu::f8_scale_rounding::none, cpu::f8_scale_rounding::power_of_two}) {
        const cpu::f8_cast by_row{row_target, cpu::f8_granularity::per_row, rounding},
            by_col{col_target, cpu::f8_granularity::per_column, rounding};
        const bool pow2 = rounding == cpu::f8_scale_rounding::power_of_two;
        std::vector<float> rs(rows), cs(cols);
        cpu::f8_scales(rs.data(), x.data(), rows, cols, by_row);
        cpu::f8_scales(cs.data(), x.data(), rows, cols, by_col);
        std::vector<std::uint32_t> s(rows + cols);  // the amaxes' bits, then the scales'
        for (std::int64_t r = 0; r < rows; ++r) s[r] = std::bit_cast<std::uint32_t>(want_r[r]);
        for (std::int64_t c = 0; c < cols; ++c) s[rows + c] = std::bit_cast<std::uint32_t>(want_c[c]);
        emu::launch(stride_grid(rows + cols), k::threads, 0, [&] {
          k::f8_dual_scales_k(s.data(), rows, rows + cols, cpu::f8_max_finite(row_target), pow2,
                              cpu::f8_max_finite(col_target), pow2);
        });
        std::vector<float> scales(rows + cols);
        for (std::size_t i = 0; i < s.size(); ++i) scales[i] = std::bit_cast<float>(s[i]);
        CHECK(std::equal(rs.begin(), rs.end(), scales.begin()));
        CHECK(std::equal(cs.begin(), cs.end(), scales.begin() + rows));
        std::vector<std::uint8_t> want(rows * cols), want_t(rows * cols), bits(rows * cols), bits_t(rows * cols);
        cpu::f8_quantize(want.data(), x.data(), rs.data(), rows, cols, by_row);
        cpu::f8_quantize(want_t.data(), x.data(), cs.data(), rows, cols, by_col);
        // rows % 4 == 0: byte stores, or words; element by element, or by fours
        for (const bool words : {false, true})
          for (const bool fours : {false, true}) {
            std::fill(bits.begin(), bits.end(), std::uint8_t{0xAB});
            std::fill(bits_t.begin(), bits_t.end(), std::uint8_t{0xAB});
            auto run = [&]<class R8, class C8>(R8, C8) {
              emu::launch(k::transpose_grid(rows, cols), {32, 8, 1}, 0, [&] {
                if (fours)
                  k::f8_dual_codes_fours_k<R8, C8>(reinterpret_cast<k::u8_group<4>*>(bits.data()), bits_t.data(),
                                                   reinterpret_cast<const k::f32_group<4>*>(x.data()), scales.data(),
                                                   rows, cols, words);
                else
                  k::f8_dual_codes_k<R8, C8>(bits.data(), bits_t.data(), x.data(), scales.data(), rows, cols, words);
              });
            };
            const auto with_col = [&](auto r8) {
              if (col_target == dtype::f8_e4m3fn)
                run(r8, f8_e4m3fn{});
              else
                run(r8, f8_e5m2{});
            };
            if (row_target == dtype::f8_e4m3fn)
              with_col(f8_e4m3fn{});
            else
              with_col(f8_e5m2{});
            CHECK(bits == want);
            bool transposed = true;
            for (std::int64_t r = 0; r < rows; ++r)
              for (std::int64_t c = 0; c < cols; ++c)
                transposed = transposed && bits_t[c * rows + r] == want_t[r * cols + c];
            CHECK(transposed);
          }
      }
}

TEST_CASE("emulated CUDA kernels: Float8's scales from amaxes, the CPU's bits, in place") {
  // amaxes over many decades, the floor, NaN, and amaxes whose scales land just below a power
  // of two (448 / (448 / nextafter(2^k, 0)): where log2f's rounding keeps 2^k)
  std::vector<float> amax = {0.0f, 1e-30f, 1e-12f, 2e-12f, std::nanf(""), std::numeric_limits<float>::max()};
  for (int k = -20; k <= 40; ++k) {
    const float p = std::ldexp(1.0f, k);
    for (float s : {p, std::nextafter(p, 0.0f), std::nextafter(std::nextafter(p, 0.0f), 0.0f), p * 1.3f})
      for (float mf : {448.0f, 57344.0f}) amax.push_back(static_cast<float>(static_cast<double>(mf) / s));
  }
  auto r = randn(500, 12, 30.0f);
  for (float v : r) amax.push_back(std::abs(v));
  const auto n = static_cast<std::int64_t>(amax.size());
  for (const dtype target : {dtype::f8_e4m3fn, dtype::f8_e5m2})
    for (const auto rounding : {cpu::f8_scale_rounding::none, cpu::f8_scale_rounding::power_of_two}) {
      std::vector<float> scales = amax;
      emu::launch({2, 1, 1}, 64, 0, [&] {
        k::f8_scales_k(scales.data(), scales.data(), n, cpu::f8_max_finite(target),
                       rounding == cpu::f8_scale_rounding::power_of_two);
      });
      std::int64_t same = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const float want = cpu::f8_scale_from_amax(amax[i], target, rounding);
        same += std::bit_cast<std::uint32_t>(scales[i]) == std::bit_cast<std::uint32_t>(want);
      }
      CHECK(same == n);
    }
}

TEST_CASE("emulated CUDA kernels: the byte transpose's 64 x 65 tiles on 32 x 8 thread blocks, bytes or words out") {
  // neither side a multiple of 64; words out only where every output row starts on a word
  struct sizes {
    std::int64_t rows, cols;
    bool words;
  };
  for (const sizes z : {sizes{70, 45, false}, sizes{132, 45, true}, sizes{132, 45, false}, sizes{4, 200, true}}) {
    const std::int64_t rows = z.rows, cols = z.cols;
    const bool words = z.words;
    CAPTURE(rows);
    CAPTURE(words);
    std::vector<std::uint8_t> in(rows * cols), out(rows * cols, 0xAB);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(i * 7 + 3);
    CHECK(k::transpose_words(out.data(), rows) == (rows % 4 == 0));
    emu::launch(k::transpose_grid(rows, cols), {32, 8, 1}, 0, [&] {
      k::transpose_k<std::uint8_t>(out.data(), in.data(), nullptr, rows, cols, cpu::f8_granularity::tensorwise, words);
    });
    bool ok = true;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) ok = ok && out[c * rows + r] == in[r * cols + c];
    CHECK(ok);
  }
}
}  // namespace float8_emulated_tests
