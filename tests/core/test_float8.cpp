// core/float8.hpp: the OCP FP8 types. Decoding against the OFP8 definition written out
// here with ldexp, every code's round trip, values named in the spec, ties to even at
// several exponents and in the subnormals, saturation, signed zero, NaN, monotonic
// rounding to the nearest value, and a table of conversions made by ml_dtypes
// (float8_reference.inc, written by make_float8_reference.py). round_to_f8, the bit-level
// float(F8(x)) of the CPU's quantize-dequantize, is checked against the cast on every input
// here (and was checked on every float bit pattern once, see docs/kernels.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <tessera/core/float8.hpp>

namespace {

using tessera::f8_e4m3fn;
using tessera::f8_e5m2;

// ---- constant evaluation ------------------------------------------------------------------
static_assert(f8_e4m3fn(448.0f).bits == 0x7E && f8_e5m2(57344.0f).bits == 0x7B);
static_assert(float(f8_e4m3fn::from_bits(0x38)) == 1.0f && float(f8_e5m2::from_bits(0x3C)) == 1.0f);
static_assert(tessera::to_f8_nonsat<f8_e5m2>(1e6f).bits == 0x7C);
static_assert(tessera::to_f8_sat<f8_e4m3fn>(-1e6f).bits == 0xFE);

/// The OFP8 definition, independent of core/float8.hpp: E exponent bits, M mantissa bits,
/// bias 2^(E-1) - 1; exponent field 0 is subnormal. Returns NaN for NaN codes and inf for
/// e5m2's infinities.
template <class F8>
double reference_decode(std::uint8_t c) {
  constexpr int E = F8::format::exponent_bits, M = F8::format::mantissa_bits;
  constexpr int bias = (1 << (E - 1)) - 1;
  const int s = c >> 7, e = (c >> M) & ((1 << E) - 1), m = c & ((1 << M) - 1);
  const double sign = s ? -1.0 : 1.0;
  if (e == (1 << E) - 1) {
    if (F8::format::has_inf) return m == 0 ? sign * INFINITY : NAN;  // IEEE-like
    if (m == (1 << M) - 1) return NAN;                               // E4M3: S.1111.111 only
  }
  if (e == 0) return sign * std::ldexp(m, 1 - bias - M);
  return sign * std::ldexp((1 << M) + m, e - bias - M);
}

template <class F8>
void check_every_code() {
  int nans = 0, infs = 0;
  for (int i = 0; i < 256; ++i) {
    const auto c = static_cast<std::uint8_t>(i);
    const F8 v = F8::from_bits(c);
    const float f = static_cast<float>(v);
    const double ref = reference_decode<F8>(c);
    CAPTURE(i);
    if (std::isnan(ref)) {
      ++nans;
      CHECK(std::isnan(f));
      CHECK(v.is_nan());
      // NaN re-encodes to the format's one canonical NaN of that sign.
      const std::uint8_t canonical = static_cast<std::uint8_t>((c & 0x80u) | F8::format::nan_code);
      CHECK(F8(f).bits == canonical);
      CHECK(tessera::to_f8_nonsat<F8>(f).bits == canonical);
      continue;
    }
    CHECK(!v.is_nan());
    CHECK(static_cast<double>(f) == ref);
    CHECK(std::signbit(f) == ((c & 0x80) != 0));
    CHECK(tessera::to_f8_nonsat<F8>(f).bits == c);  // every value, inf included, round-trips
    if (std::isinf(ref)) {
      ++infs;
      CHECK(F8(f).bits == ((c & 0x80u) | F8::format::max_code));  // saturating: inf -> max
    } else {
      CHECK(F8(f).bits == c);
    }
  }
  CHECK(nans == (F8::format::has_inf ? 6 : 2));
  CHECK(infs == (F8::format::has_inf ? 2 : 0));
}

float bits_f(std::uint32_t u) { return std::bit_cast<float>(u); }

}  // namespace

TEST_CASE("float8: one byte, trivially copyable; every code decodes as OFP8 defines it and re-encodes to itself") {
  static_assert(sizeof(f8_e4m3fn) == 1 && std::is_trivially_copyable_v<f8_e4m3fn>);
  static_assert(sizeof(f8_e5m2) == 1 && std::is_trivially_copyable_v<f8_e5m2>);
  check_every_code<f8_e4m3fn>();
  check_every_code<f8_e5m2>();
}

TEST_CASE("float8 e4m3fn: the values the OFP8 spec names") {
  CHECK(float(f8_e4m3fn::from_bits(0x7E)) == 448.0f);     // max normal S.1111.110
  CHECK(float(f8_e4m3fn::from_bits(0xFE)) == -448.0f);
  CHECK(float(f8_e4m3fn::from_bits(0x78)) == 256.0f);     // S.1111.000 is finite (no inf)
  CHECK(float(f8_e4m3fn::from_bits(0x08)) == 0x1p-6f);    // min normal S.0001.000
  CHECK(float(f8_e4m3fn::from_bits(0x07)) == 0x1.cp-7f);  // max subnormal 0.875 * 2^-6
  CHECK(float(f8_e4m3fn::from_bits(0x01)) == 0x1p-9f);    // min subnormal
  CHECK(f8_e4m3fn::from_bits(0x7F).is_nan());
  CHECK(f8_e4m3fn::from_bits(0xFF).is_nan());
  CHECK(f8_e4m3fn::max_finite == 448.0f);
  CHECK(f8_e4m3fn::min_normal == 0x1p-6f);
  CHECK(f8_e4m3fn::min_subnormal == 0x1p-9f);
}

TEST_CASE("float8 e5m2: the values the OFP8 spec names") {
  CHECK(float(f8_e5m2::from_bits(0x7B)) == 57344.0f);    // max normal S.11110.11
  CHECK(float(f8_e5m2::from_bits(0xFB)) == -57344.0f);
  CHECK(float(f8_e5m2::from_bits(0x04)) == 0x1p-14f);    // min normal S.00001.00
  CHECK(float(f8_e5m2::from_bits(0x03)) == 0x1.8p-15f);  // max subnormal 0.75 * 2^-14
  CHECK(float(f8_e5m2::from_bits(0x01)) == 0x1p-16f);    // min subnormal
  CHECK(float(f8_e5m2::from_bits(0x7C)) == INFINITY);    // S.11111.00
  CHECK(float(f8_e5m2::from_bits(0xFC)) == -INFINITY);
  for (std::uint8_t c : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}) CHECK(f8_e5m2::from_bits(c).is_nan());
  CHECK(f8_e5m2::max_finite == 57344.0f);
  CHECK(f8_e5m2::min_normal == 0x1p-14f);
  CHECK(f8_e5m2::min_subnormal == 0x1p-16f);
}

TEST_CASE("float8: round to nearest, ties to even, at several exponents and in the subnormals") {
  struct tie { float x; std::uint8_t code; };
  // e4m3fn: 8 values per binade; a tie goes to the even mantissa.
  for (const tie& t : std::vector<tie>{
           {1.0625f, 0x38},   // 1 (m=000) | 1.125 (001) -> 1
           {1.1875f, 0x3A},   // 1.125 (001) | 1.25 (010) -> 1.25
           {1.9375f, 0x40},   // 1.875 (111) | 2 -> 2 (carry into the exponent)
           {272.0f, 0x78},    // 256 | 288 -> 256
           {304.0f, 0x7A},    // 288 | 320 -> 320
           {0x1.1p-6f, 0x08}, // min normal | next -> min normal
           {0x1p-10f, 0x00},  // 0 | min subnormal -> 0
           {0x1.8p-9f, 0x02}, // 2^-9 (001) | 2^-8 (010) -> 2^-8
           {0x1.ep-7f, 0x08}, // max subnormal 0x07 | min normal 0x08 -> 0x08
           {-1.1875f, 0xBA},
       }) {
    CAPTURE(t.x);
    CHECK(f8_e4m3fn(t.x).bits == t.code);
  }
  // Just beside a tie the nearest value wins.
  CHECK(f8_e4m3fn(std::nextafter(1.0625f, 2.0f)).bits == 0x39);
  CHECK(f8_e4m3fn(std::nextafter(1.1875f, 0.0f)).bits == 0x39);
  CHECK(f8_e4m3fn(std::nextafter(0x1p-10f, 1.0f)).bits == 0x01);
  // e5m2: 4 values per binade.
  for (const tie& t : std::vector<tie>{
           {1.125f, 0x3C},     // 1 (00) | 1.25 (01) -> 1
           {1.375f, 0x3E},     // 1.25 (01) | 1.5 (10) -> 1.5
           {1152.0f, 0x64},    // 1024 | 1280 -> 1024
           {1408.0f, 0x66},    // 1280 | 1536 -> 1536
           {0x1p-17f, 0x00},   // 0 | min subnormal -> 0
           {0x1.8p-16f, 0x02}, // 2^-16 (01) | 2^-15 (10) -> 2^-15
           {0x1.cp-15f, 0x04}, // max subnormal 0x03 | min normal -> min normal
           {-1.375f, 0xBE},
       }) {
    CAPTURE(t.x);
    CHECK(f8_e5m2(t.x).bits == t.code);
  }
  CHECK(f8_e5m2(std::nextafter(1.125f, 2.0f)).bits == 0x3D);
  CHECK(f8_e5m2(std::nextafter(0x1p-17f, 1.0f)).bits == 0x01);
  // f32 subnormals are far below half an FP8 ulp.
  CHECK(f8_e4m3fn(1e-40f).bits == 0x00);
  CHECK(f8_e5m2(-1e-40f).bits == 0x80);
}

TEST_CASE("float8: saturation, signed zero and NaN") {
  // e4m3fn: 464 is the midpoint between 448 (even) and the next virtual value 480.
  CHECK(f8_e4m3fn(464.0f).bits == 0x7E);
  CHECK(tessera::to_f8_nonsat<f8_e4m3fn>(464.0f).bits == 0x7E);
  CHECK(f8_e4m3fn(std::nextafter(464.0f, 1e9f)).bits == 0x7E);
  CHECK(tessera::to_f8_nonsat<f8_e4m3fn>(std::nextafter(464.0f, 1e9f)).bits == 0x7F);  // NaN
  CHECK(f8_e4m3fn(1e30f).bits == 0x7E);
  CHECK(f8_e4m3fn(-1e30f).bits == 0xFE);
  CHECK(f8_e4m3fn(INFINITY).bits == 0x7E);
  CHECK(f8_e4m3fn(-INFINITY).bits == 0xFE);
  CHECK(tessera::to_f8_nonsat<f8_e4m3fn>(INFINITY).bits == 0x7F);
  // e5m2: 61440 is the midpoint between 57344 (odd mantissa 11) and 65536: ties to inf.
  CHECK(f8_e5m2(61440.0f).bits == 0x7B);
  CHECK(tessera::to_f8_nonsat<f8_e5m2>(61440.0f).bits == 0x7C);
  CHECK(tessera::to_f8_nonsat<f8_e5m2>(std::nextafter(61440.0f, 0.0f)).bits == 0x7B);
  CHECK(f8_e5m2(INFINITY).bits == 0x7B);
  CHECK(f8_e5m2(-INFINITY).bits == 0xFB);
  CHECK(tessera::to_f8_nonsat<f8_e5m2>(-INFINITY).bits == 0xFC);
  // Signed zero.
  CHECK(f8_e4m3fn(-0.0f).bits == 0x80);
  CHECK(f8_e5m2(-0.0f).bits == 0x80);
  CHECK(std::signbit(float(f8_e4m3fn::from_bits(0x80))));
  CHECK(float(f8_e5m2::from_bits(0x80)) == 0.0f);
  CHECK(f8_e4m3fn(-0x1p-11f).bits == 0x80);  // underflow keeps the sign
  CHECK(!(f8_e4m3fn(0.0f) == f8_e4m3fn(-0.0f)));  // bitwise equality
  // NaN stays NaN, sign kept, in both modes; payloads become the canonical NaN.
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  const float payload = bits_f(0x7F800001u);  // signalling NaN with payload 1
  CHECK(f8_e4m3fn(qnan).bits == 0x7F);
  CHECK(f8_e4m3fn(-qnan).bits == 0xFF);
  CHECK(f8_e4m3fn(payload).bits == 0x7F);
  CHECK(f8_e5m2(qnan).bits == 0x7E);
  CHECK(f8_e5m2(-qnan).bits == 0xFE);
  CHECK(tessera::to_f8_nonsat<f8_e5m2>(payload).bits == 0x7E);
  CHECK(f8_e4m3fn(qnan) == f8_e4m3fn(qnan));
}

namespace {
/// Sorted sweep of floats in [-limit, limit]: every 4093rd bit pattern of each sign plus
/// every FP8 value and its neighbours.
template <class F8>
void check_monotonic_and_nearest(float limit) {
  std::vector<float> xs;
  for (std::uint32_t u = 0; u < 0x7F800000u; u += 4093u) {
    const float f = bits_f(u);
    if (f > limit) break;
    xs.push_back(f);
    xs.push_back(-f);
  }
  std::vector<float> values;  // the finite FP8 values, ascending
  for (int i = 0; i < 256; ++i) {
    const float v = float(F8::from_bits(static_cast<std::uint8_t>(i)));
    if (std::isfinite(v)) values.push_back(v);
  }
  std::sort(values.begin(), values.end());
  for (float v : values) {
    xs.push_back(v);
    xs.push_back(std::nextafter(v, INFINITY));
    xs.push_back(std::nextafter(v, -INFINITY));
  }
  std::sort(xs.begin(), xs.end());
  float prev = -INFINITY;
  for (float x : xs) {
    const float y = float(F8(x));
    CAPTURE(x);
    // round_to_f8 (the CPU's quantize-dequantize) gives the same float, bit for bit.
    REQUIRE(std::bit_cast<std::uint32_t>(tessera::round_to_f8<F8>(x)) == std::bit_cast<std::uint32_t>(y));
    REQUIRE(y >= prev);  // monotonic
    prev = y;
    // Nearest: no finite FP8 value is strictly closer (beyond max, saturation gives max).
    const auto it = std::lower_bound(values.begin(), values.end(), x);
    double best = INFINITY;
    if (it != values.end()) best = std::min(best, std::fabs(double(*it) - x));
    if (it != values.begin()) best = std::min(best, std::fabs(double(*(it - 1)) - x));
    REQUIRE(std::fabs(double(y) - x) == best);
  }
}
}  // namespace

TEST_CASE("float8: the saturating cast is monotonic and picks the nearest value") {
  check_monotonic_and_nearest<f8_e4m3fn>(1000.0f);
  check_monotonic_and_nearest<f8_e5m2>(1e5f);
}

TEST_CASE("float8: conversions equal ml_dtypes' (float8_reference.inc)") {
  struct row { std::uint32_t f; std::uint8_t e4_sat, e4_nonsat, e5_sat, e5_nonsat; };
  static const row table[] = {
#include "float8_reference.inc"
  };
  int rows = 0, mismatches = 0;
  for (const row& r : table) {
    const float x = bits_f(r.f);
    ++rows;
    // round_to_f8 equals the decoded saturating cast, NaN included (bit for bit).
    CHECK(std::bit_cast<std::uint32_t>(tessera::round_to_f8<f8_e4m3fn>(x)) ==
          std::bit_cast<std::uint32_t>(float(f8_e4m3fn::from_bits(r.e4_sat))));
    CHECK(std::bit_cast<std::uint32_t>(tessera::round_to_f8<f8_e5m2>(x)) ==
          std::bit_cast<std::uint32_t>(float(f8_e5m2::from_bits(r.e5_sat))));
    const bool ok = f8_e4m3fn(x).bits == r.e4_sat &&
                    tessera::to_f8_nonsat<f8_e4m3fn>(x).bits == r.e4_nonsat &&
                    f8_e5m2(x).bits == r.e5_sat && tessera::to_f8_nonsat<f8_e5m2>(x).bits == r.e5_nonsat;
    if (!ok && ++mismatches <= 10) {
      CAPTURE(x);
      CAPTURE(r.f);
      CHECK(int(f8_e4m3fn(x).bits) == int(r.e4_sat));
      CHECK(int(tessera::to_f8_nonsat<f8_e4m3fn>(x).bits) == int(r.e4_nonsat));
      CHECK(int(f8_e5m2(x).bits) == int(r.e5_sat));
      CHECK(int(tessera::to_f8_nonsat<f8_e5m2>(x).bits) == int(r.e5_nonsat));
    }
  }
  CHECK(rows > 3000);
  CHECK(mismatches == 0);
}
