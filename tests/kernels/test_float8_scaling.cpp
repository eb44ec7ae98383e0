// kernels/cpu/float8.hpp: torchao's dynamic Float8 scaling. The scale rules (tensorwise
// 448/amax and 57344/amax, the 1e-12 amax floor, power-of-two round-down), which group
// shares a scale, the largest element landing on the format's max, the quantize-dequantize
// error bound, NaN, and the recipes' casts per GEMM operand.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cpu/float8.hpp>

namespace {

using namespace tessera::cpu;
using tessera::dtype;
using tessera::f8_e4m3fn;
using tessera::f8_e5m2;

std::vector<float> random_matrix(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::uniform_real_distribution<float> e(-12.0f, 6.0f);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  // Rows of very different magnitudes, so per-row and per-tensor scales differ.
  for (std::int64_t r = 0; r < rows; ++r) {
    const float row_scale = std::exp2(e(rng));
    for (std::int64_t c = 0; c < cols; ++c) x[static_cast<std::size_t>(r * cols + c)] = n(rng) * row_scale;
  }
  return x;
}

bool is_power_of_two(float s) {
  int e = 0;
  return std::frexp(s, &e) == 0.5f;
}

// ---- recipes (torchao's Float8LinearConfig.from_recipe_name) ------------------------------
constexpr f8_cast e4_tensor{dtype::f8_e4m3fn, f8_granularity::tensorwise, f8_scale_rounding::none};
constexpr f8_cast e5_tensor{dtype::f8_e5m2, f8_granularity::tensorwise, f8_scale_rounding::none};
constexpr f8_cast e4_row{dtype::f8_e4m3fn, f8_granularity::per_row, f8_scale_rounding::power_of_two};
constexpr f8_cast e4_col{dtype::f8_e4m3fn, f8_granularity::per_column, f8_scale_rounding::power_of_two};
constexpr f8_cast e4_tensor_pow2{dtype::f8_e4m3fn, f8_granularity::tensorwise,
                                 f8_scale_rounding::power_of_two};

constexpr f8_linear_casts tw = f8_linear_casts_of(f8_recipe::tensorwise);
static_assert(tw.input == e4_tensor && tw.weight == e4_tensor && tw.grad_output == e5_tensor);
static_assert(tw.weight_for_grad_input == e4_tensor && tw.grad_output_for_grad_weight == e5_tensor &&
              tw.input_for_grad_weight == e4_tensor);

// rowwise: each operand along its GEMM's reduction dim; in [rows, cols] storage
// x [N, C], W [OC, C], dy [N, OC]: output reduces C (x, W per row), grad_input reduces OC
// (dy per row, W per column), grad_weight reduces N (dy, x per column). All e4m3.
constexpr f8_linear_casts rw = f8_linear_casts_of(f8_recipe::rowwise);
static_assert(rw.input == e4_row && rw.weight == e4_row && rw.grad_output == e4_row);
static_assert(rw.weight_for_grad_input == e4_col && rw.grad_output_for_grad_weight == e4_col &&
              rw.input_for_grad_weight == e4_col);

// rowwise_with_gw_hp: grad_input uses a tensorwise weight; grad_weight stays f32.
constexpr f8_linear_casts hp = f8_linear_casts_of(f8_recipe::rowwise_with_gw_hp);
static_assert(hp.input == e4_row && hp.weight == e4_row && hp.grad_output == e4_row);
static_assert(hp.weight_for_grad_input == e4_tensor_pow2);
static_assert(!hp.grad_output_for_grad_weight && !hp.input_for_grad_weight);

static_assert(f8_max_finite(dtype::f8_e4m3fn) == 448.0f && f8_max_finite(dtype::f8_e5m2) == 57344.0f);
static_assert(f8_scale_count(f8_granularity::tensorwise, 3, 5) == 1 &&
              f8_scale_count(f8_granularity::per_row, 3, 5) == 3 &&
              f8_scale_count(f8_granularity::per_column, 3, 5) == 5);

}  // namespace

TEST_CASE("float8 scale: max_finite / max(amax, 1e-12), in double then float") {
  const auto none = f8_scale_rounding::none;
  CHECK(f8_scale_from_amax(3.5f, dtype::f8_e4m3fn, none) == 128.0f);
  CHECK(f8_scale_from_amax(3.5f, dtype::f8_e5m2, none) == 16384.0f);
  CHECK(f8_scale_from_amax(3.0f, dtype::f8_e4m3fn, none) == static_cast<float>(448.0 / 3.0));
  CHECK(f8_scale_from_amax(0.1f, dtype::f8_e5m2, none) ==
        static_cast<float>(57344.0 / static_cast<double>(0.1f)));
  // The floor: amax 0 (an all-zero tensor) and anything below 1e-12 give 448 / 1e-12.
  const float floor_scale = static_cast<float>(448.0 / 1e-12);
  CHECK(f8_scale_from_amax(0.0f, dtype::f8_e4m3fn, none) == floor_scale);
  CHECK(f8_scale_from_amax(1e-13f, dtype::f8_e4m3fn, none) == floor_scale);
  CHECK(f8_scale_from_amax(2e-12f, dtype::f8_e4m3fn, none) ==
        static_cast<float>(448.0 / static_cast<double>(2e-12f)));
  CHECK(std::isnan(f8_scale_from_amax(NAN, dtype::f8_e4m3fn, none)));
  CHECK_THROWS_AS(f8_scale_from_amax(1.0f, dtype::bf16, none), tessera::error);
}

TEST_CASE("float8 scale: power-of-two rounding is 2^floor(log2(scale))") {
  const auto p2 = f8_scale_rounding::power_of_two;
  CHECK(f8_scale_from_amax(3.0f, dtype::f8_e4m3fn, p2) == 128.0f);     // 149.3 -> 128
  CHECK(f8_scale_from_amax(448.0f, dtype::f8_e4m3fn, p2) == 1.0f);     // exactly 1
  CHECK(f8_scale_from_amax(449.0f, dtype::f8_e4m3fn, p2) == 0.5f);     // 0.998 -> 0.5
  CHECK(f8_scale_from_amax(0.001f, dtype::f8_e4m3fn, p2) == 262144.0f);  // 448000 -> 2^18
  CHECK(f8_scale_from_amax(1.0f, dtype::f8_e5m2, p2) == 32768.0f);     // 57344 -> 2^15
  CHECK(f8_scale_from_amax(0.0f, dtype::f8_e4m3fn, p2) == 0x1p48f);    // 4.48e14 -> 2^48
  CHECK(f8_scale_from_amax(1e6f, dtype::f8_e4m3fn, p2) == 0x1p-12f);   // 4.48e-4 -> 2^-12
  // As torchao computes it (log2 on the float): a scale one float below 2^10 has a
  // float log2 of exactly 10, so it stays 2^10 (libm's correctly rounded log2f).
  CHECK(f8_round_scale_down_to_power_of_two(std::nextafter(1024.0f, 0.0f)) == 1024.0f);
  CHECK(f8_round_scale_down_to_power_of_two(1000.0f) == 512.0f);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> e(-30.0f, 30.0f);
  for (int i = 0; i < 1000; ++i) {
    const float amax = std::exp2(e(rng));
    const float exact = f8_scale_from_amax(amax, dtype::f8_e4m3fn, f8_scale_rounding::none);
    const float s = f8_scale_from_amax(amax, dtype::f8_e4m3fn, p2);
    CAPTURE(amax);
    CHECK(is_power_of_two(s));
    CHECK(s <= exact * (1.0f + 0x1p-20f));
    CHECK(s > exact / 2);
  }
}

TEST_CASE("float8 scales: one per tensor, per row (amax over columns), per column (amax over rows)") {
  const std::int64_t R = 37, C = 70;
  const auto x = random_matrix(R, C, 1);
  std::vector<float> xt(x.size());  // transpose [C, R]
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t c = 0; c < C; ++c) xt[static_cast<std::size_t>(c * R + r)] = x[static_cast<std::size_t>(r * C + c)];
  for (auto target : {dtype::f8_e4m3fn, dtype::f8_e5m2})
    for (auto rounding : {f8_scale_rounding::none, f8_scale_rounding::power_of_two}) {
      float s_t = 0;
      f8_scales(&s_t, x.data(), R, C, {target, f8_granularity::tensorwise, rounding});
      float amax = 0;
      for (float v : x) amax = std::max(amax, std::fabs(v));
      CHECK(s_t == f8_scale_from_amax(amax, target, rounding));
      std::vector<float> rows(R), cols(C), rows_of_t(C);
      f8_scales(rows.data(), x.data(), R, C, {target, f8_granularity::per_row, rounding});
      f8_scales(cols.data(), x.data(), R, C, {target, f8_granularity::per_column, rounding});
      f8_scales(rows_of_t.data(), xt.data(), C, R, {target, f8_granularity::per_row, rounding});
      CHECK(cols == rows_of_t);  // per column of x = per row of x^T
      for (std::int64_t r = 0; r < R; ++r) {
        float m = 0;
        for (std::int64_t c = 0; c < C; ++c) m = std::max(m, std::fabs(x[static_cast<std::size_t>(r * C + c)]));
        CHECK(rows[static_cast<std::size_t>(r)] == f8_scale_from_amax(m, target, rounding));
      }
    }
  // abs_max over more than one chunk of the parallel reduction.
  std::vector<float> big(100000, 1.0f);
  big[77777] = -9.5f;
  CHECK(abs_max(big.data(), static_cast<std::int64_t>(big.size())) == 9.5f);
}

TEST_CASE("float8 cast: the largest element of each group scales exactly to the format's max") {
  const std::int64_t R = 16, C = 48;
  const auto x = random_matrix(R, C, 2);
  for (auto target : {dtype::f8_e4m3fn, dtype::f8_e5m2}) {
    const std::uint8_t max_code = target == dtype::f8_e4m3fn ? 0x7E : 0x7B;
    for (auto g : {f8_granularity::tensorwise, f8_granularity::per_row, f8_granularity::per_column}) {
      const f8_cast c{target, g, f8_scale_rounding::none};
      std::vector<float> s(static_cast<std::size_t>(f8_scale_count(g, R, C)));
      std::vector<std::uint8_t> bits(x.size());
      f8_scales(s.data(), x.data(), R, C, c);
      f8_quantize(bits.data(), x.data(), s.data(), R, C, c);
      // For each group, the element with the largest |x| becomes +-max (x * scale is within
      // rounding of max; anything past max saturates), and no code exceeds max.
      const std::int64_t groups = static_cast<std::int64_t>(s.size());
      for (std::int64_t k = 0; k < groups; ++k) {
        float m = -1;
        std::size_t arg = 0;
        for (std::int64_t r = 0; r < R; ++r)
          for (std::int64_t j = 0; j < C; ++j) {
            const bool in = g == f8_granularity::tensorwise || (g == f8_granularity::per_row ? r == k : j == k);
            const auto i = static_cast<std::size_t>(r * C + j);
            if (in && std::fabs(x[i]) > m) m = std::fabs(x[i]), arg = i;
          }
        CAPTURE(k);
        CHECK((bits[arg] & 0x7F) == max_code);
      }
      for (std::uint8_t b : bits) CHECK((b & 0x7F) <= max_code);
    }
  }
  // Exactly: amax 3.5 -> scale 128 -> 3.5 * 128 = 448 = 0x7E; an element past the max of
  // its group cannot exist, but a scale that overshoots (power of two near 2^k) saturates.
  const float two[2] = {3.5f, -1.0f};
  std::uint8_t b[2];
  float s = 0;
  f8_scales(&s, two, 1, 2, {dtype::f8_e4m3fn});
  f8_quantize(b, two, &s, 1, 2, {dtype::f8_e4m3fn});
  CHECK(s == 128.0f);
  CHECK(b[0] == 0x7E);
  CHECK(b[1] == 0xF0);  // -128 = -2^7
  const float big = 1e30f;
  f8_quantize(b, &big, &s, 1, 1, {dtype::f8_e4m3fn});
  CHECK(b[0] == 0x7E);  // saturates instead of NaN
}

TEST_CASE("float8 quantize-dequantize: relative error <= 2^-4 (e4m3) and 2^-3 (e5m2) for normals") {
  const std::int64_t R = 64, C = 96;
  const auto x = random_matrix(R, C, 4);
  for (auto target : {dtype::f8_e4m3fn, dtype::f8_e5m2}) {
    const float bound = target == dtype::f8_e4m3fn ? 0x1p-4f : 0x1p-3f;
    const float min_normal = target == dtype::f8_e4m3fn ? f8_e4m3fn::min_normal : f8_e5m2::min_normal;
    for (auto g : {f8_granularity::tensorwise, f8_granularity::per_row, f8_granularity::per_column})
      for (auto rounding : {f8_scale_rounding::none, f8_scale_rounding::power_of_two}) {
        const f8_cast c{target, g, rounding};
        std::vector<float> out(x.size()), deq(x.size());
        std::vector<float> s(static_cast<std::size_t>(f8_scale_count(g, R, C)));
        std::vector<std::uint8_t> bits(x.size());
        f8_quantize_dequantize(out.data(), x.data(), R, C, c, {bits.data(), s.data()});
        // The raw cast equals the separate steps, and dequantizing it gives `out`.
        std::vector<float> s2(s.size());
        std::vector<std::uint8_t> bits2(x.size());
        f8_scales(s2.data(), x.data(), R, C, c);
        f8_quantize(bits2.data(), x.data(), s2.data(), R, C, c);
        CHECK(s == s2);
        CHECK(bits == bits2);
        f8_dequantize(deq.data(), bits.data(), s.data(), R, C, c);
        CHECK(deq == out);
        // Without the raw outputs the values come from round_to_f8: the same floats.
        std::vector<float> fast(x.size());
        f8_quantize_dequantize(fast.data(), x.data(), R, C, c);
        CHECK(fast == out);
        int normals = 0;
        for (std::int64_t r = 0; r < R; ++r)
          for (std::int64_t j = 0; j < C; ++j) {
            const auto i = static_cast<std::size_t>(r * C + j);
            const float sc = s[static_cast<std::size_t>(g == f8_granularity::tensorwise ? 0 : (g == f8_granularity::per_row ? r : j))];
            // Definition: F8(x * scale) / scale, the product and the quotient in float.
            const float expect = target == dtype::f8_e4m3fn ? float(f8_e4m3fn(x[i] * sc)) / sc
                                                            : float(f8_e5m2(x[i] * sc)) / sc;
            REQUIRE(out[i] == expect);
            if (std::fabs(x[i] * sc) >= min_normal) {
              ++normals;
              CAPTURE(x[i]);
              REQUIRE(std::fabs(out[i] - x[i]) <= bound * std::fabs(x[i]));
            }
          }
        CHECK(normals > R * C / 2);
      }
  }
  // In place.
  auto y = x;
  std::vector<float> out(x.size());
  f8_quantize_dequantize(out.data(), x.data(), R, C, rw.input_for_grad_weight.value());
  f8_quantize_dequantize(y.data(), y.data(), R, C, rw.input_for_grad_weight.value());
  CHECK(y == out);
}

TEST_CASE("float8 cast: all-zero groups, NaN and a bad target") {
  std::vector<float> z(12, 0.0f), out(12, 1.0f);
  f8_quantize_dequantize(out.data(), z.data(), 3, 4, {dtype::f8_e4m3fn});
  for (float v : out) CHECK(v == 0.0f);
  // A NaN makes its group's scale NaN (torch.max propagates it) and so the whole group;
  // other rows keep their values.
  std::vector<float> x = {1, 2, 3, 4, 5, NAN, 7, 8, -0.5f, 0.25f, 1, 2};
  f8_quantize_dequantize(out.data(), x.data(), 3, 4, e4_row);
  for (int j = 0; j < 4; ++j) CHECK(std::isnan(out[static_cast<std::size_t>(4 + j)]));
  CHECK(out[0] == 1.0f);
  CHECK(out[8] == -0.5f);
  f8_quantize_dequantize(out.data(), x.data(), 3, 4, e4_tensor);
  for (float v : out) CHECK(std::isnan(v));
  CHECK_THROWS_AS(f8_quantize_dequantize(out.data(), x.data(), 3, 4, {dtype::f32}), tessera::error);
}
