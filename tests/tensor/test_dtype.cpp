// Exhaustive tests of tessera's element types against their bit-level definitions.
//
// The reference here shares no code with dtype.hpp: it decodes every code of a format with
// std::ldexp from (sign, exponent, mantissa), sorts the finite values, and rounds a double
// to the nearest of them (ties to the even code) with one virtual value past the largest
// finite one standing for "overflow" (the next value of an unbounded exponent range).
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <ios>
#include <vector>

#include <tessera/tensor/dtype.hpp>

using namespace tessera;

namespace {

struct format_def {
  int E, M, bias;
  bool ieee_inf;   // top exponent is inf/NaN (bf16, e5m2)
  bool fn;         // e4m3fn: only S.1111.111 is NaN
};
constexpr format_def bf16_def{8, 7, 127, true, false};
constexpr format_def e4m3_def{4, 3, 7, false, true};
constexpr format_def e5m2_def{5, 2, 15, true, false};

enum class kind { finite, inf, nan };

// Decodes code (without sign handling beyond the top bit) as the definition says.
double decode(const format_def& f, std::uint32_t code, kind* k) {
  const std::uint32_t bits = 1 + f.E + f.M;
  const bool neg = (code >> (bits - 1)) & 1;
  const std::uint32_t e = (code >> f.M) & ((1u << f.E) - 1), m = code & ((1u << f.M) - 1);
  const std::uint32_t emax = (1u << f.E) - 1;
  *k = kind::finite;
  if (f.ieee_inf && e == emax) {
    *k = m == 0 ? kind::inf : kind::nan;
    return m == 0 ? (neg ? -INFINITY : INFINITY) : NAN;
  }
  if (f.fn && e == emax && m == (1u << f.M) - 1) {
    *k = kind::nan;
    return NAN;
  }
  double v = e == 0 ? std::ldexp(static_cast<double>(m), 1 - f.bias - f.M)
                    : std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -f.M),
                                 static_cast<int>(e) - f.bias);
  return neg ? -v : v;
}

struct reference {
  format_def f;
  std::vector<double> vals;           // non-negative finite values, increasing
  std::vector<std::uint32_t> codes;   // their codes
  std::uint32_t sign_bit, inf_code;   // inf_code: e5m2/bf16 only
  std::uint32_t max_code;

  explicit reference(format_def d) : f(d) {
    const std::uint32_t bits = 1 + f.E + f.M;
    sign_bit = 1u << (bits - 1);
    for (std::uint32_t c = 0; c < sign_bit; ++c) {
      kind k;
      const double v = decode(f, c, &k);
      if (k == kind::finite) {
        vals.push_back(v);
        codes.push_back(c);
      } else if (k == kind::inf) {
        inf_code = c;
      }
    }
    REQUIRE(std::is_sorted(vals.begin(), vals.end()));
    max_code = codes.back();
    // the virtual next value: max + one ulp of max's binade, code max_code + 1
    vals.push_back(vals.back() + (vals.back() - vals[vals.size() - 2]));
    codes.push_back(max_code + 1);
  }

  // Expected code of float x, or -1 for "any NaN".
  std::int64_t round(float x, bool saturate) const {
    if (std::isnan(x)) return -1;
    const std::uint32_t s = std::signbit(x) ? sign_bit : 0u;
    const double a = std::fabs(static_cast<double>(x));
    std::uint32_t c;
    if (std::isinf(x)) {
      c = max_code + 1;  // overflow
    } else {
      const auto it = std::upper_bound(vals.begin(), vals.end(), a);
      if (it == vals.end()) {
        c = max_code + 1;
      } else {
        const std::size_t hi = static_cast<std::size_t>(it - vals.begin()), lo = hi - 1;
        const double dl = a - vals[lo], dh = vals[hi] - a;
        c = dl < dh ? codes[lo] : dh < dl ? codes[hi] : ((codes[lo] & 1u) ? codes[hi] : codes[lo]);
      }
    }
    if (c == max_code + 1) {  // overflow
      if (saturate) c = max_code;
      else if (f.ieee_inf) c = inf_code;
      else return -1;  // e4m3fn: NaN
    }
    return s | c;
  }
};

// Inputs: a strided sweep of all 2^32 float patterns plus, for every pair of neighbouring
// representable values, the values, the midpoint and their float neighbours.
std::vector<float> inputs_for(const reference& r, std::uint32_t stride) {
  std::vector<float> in;
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFull; u += stride)
    in.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(u)));
  auto around = [&](float f) {
    in.push_back(f);
    in.push_back(std::nextafter(f, INFINITY));
    in.push_back(std::nextafter(f, -INFINITY));
  };
  for (std::size_t i = 0; i + 1 < r.vals.size(); ++i) {
    const double lo = r.vals[i], hi = r.vals[i + 1];
    for (double v : {lo, (lo + hi) / 2}) {
      if (v > 3.4e38) continue;
      around(static_cast<float>(v));
      around(-static_cast<float>(v));
    }
  }
  for (float f : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-45f, -1e-45f, 1.17549435e-38f,
                  3.4028235e38f, -3.4028235e38f, std::bit_cast<float>(0x7F800001u),
                  std::bit_cast<float>(0xFFC00001u)})
    in.push_back(f);
  return in;
}

template <class F8>
void check_f8(const format_def& d) {
  const reference r(d);
  // every code decodes as the definition says and round-trips
  for (std::uint32_t c = 0; c < 256; ++c) {
    kind k;
    const double want = decode(d, c, &k);
    const float got = float(F8::from_bits(static_cast<std::uint8_t>(c)));
    if (k == kind::nan) {
      CHECK(std::isnan(got));
      CHECK(std::isnan(float(F8::from_bits(to_f8_sat<F8>(got).bits))));
      continue;
    }
    CHECK(static_cast<double>(got) == want);
    CHECK(std::signbit(got) == bool(c & 0x80u));
    if (k == kind::finite) CHECK(to_f8_sat<F8>(got).bits == c);  // sat(inf) = max by design
    CHECK(to_f8_nonsat<F8>(got).bits == c);
  }
  std::size_t n = 0;
  for (float x : inputs_for(r, 4099)) {
    for (bool sat : {true, false}) {
      const std::int64_t want = r.round(x, sat);
      const std::uint8_t got = sat ? to_f8_sat<F8>(x).bits : to_f8_nonsat<F8>(x).bits;
      if (want < 0) {
        if (!F8::format::is_nan_code(got)) FAIL_CHECK("x=" << x << " sat=" << sat << " got " << int(got) << " want NaN");
      } else if (got != want) {
        FAIL_CHECK("x=" << x << " (0x" << std::hex << std::bit_cast<std::uint32_t>(x) << ") sat=" << sat
                        << " got 0x" << int(got) << " want 0x" << want);
      }
      ++n;
    }
  }
  CHECK(n > 2'000'000);
}

}  // namespace

TEST_CASE("dtype: tags, sizes and names") {
  static_assert(dtype_of<float> == dtype::f32 && dtype_of<bf16> == dtype::bf16);
  static_assert(dtype_of<f8_e4m3fn> == dtype::f8_e4m3fn && dtype_of<f8_e5m2> == dtype::f8_e5m2);
  static_assert(size_of(dtype::bf16) == 2 && size_of(dtype::f8_e5m2) == 1 && size_of(dtype::f32) == 4);
  static_assert(sizeof(bf16) == 2 && sizeof(f8_e4m3fn) == 1 && sizeof(f8_e5m2) == 1);
  CHECK(name_of(dtype::f8_e4m3fn) == "float8_e4m3fn");
  // constexpr conversions
  static_assert(bf16(1.0f).bits == 0x3F80 && float(bf16::from_bits(0x4049)) == 3.140625f);
  static_assert(f8_e4m3fn(448.0f).bits == 0x7E && f8_e4m3fn(-1e9f).bits == 0xFE);
  static_assert(f8_e5m2(57344.0f).bits == 0x7B && to_f8_nonsat<f8_e5m2>(61440.0f).bits == 0x7C);
  static_assert(to_f8_nonsat<f8_e4m3fn>(464.0f).bits == 0x7E);   // tie at max: to even (448)
  static_assert(to_f8_nonsat<f8_e4m3fn>(464.01f).bits == 0x7F);  // beyond: NaN
  static_assert(float(f8_e4m3fn::from_bits(0x01)) == 0.001953125f);  // 2^-9, smallest subnormal
  static_assert(float(f8_e5m2::from_bits(0x01)) == 1.52587890625e-05f);  // 2^-16
}

TEST_CASE("bf16: all 2^16 codes decode by definition and round-trip") {
  for (std::uint32_t c = 0; c < 65536; ++c) {
    kind k;
    const double want = decode(bf16_def, c, &k);
    const float got = float(bf16::from_bits(static_cast<std::uint16_t>(c)));
    if (k == kind::nan) {
      REQUIRE(std::isnan(got));
      // NaN stays NaN, sign kept, quiet bit set
      CHECK(bf16(got).bits == (c | 0x40u));
      continue;
    }
    REQUIRE(static_cast<double>(got) == want);
    REQUIRE(std::signbit(got) == bool(c & 0x8000u));
    REQUIRE(bf16(got).bits == c);
    if (k == kind::finite) REQUIRE(to_bf16_sat(got).bits == c);
  }
}

TEST_CASE("bf16: f32 -> bf16 matches the reference (strided sweep, ties, boundaries)") {
  const reference r(bf16_def);
  std::vector<float> in = inputs_for(r, 4099);
  // every upper half with the low halves that decide rounding
  for (std::uint32_t hi = 0; hi < 65536; ++hi)
    for (std::uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu})
      in.push_back(std::bit_cast<float>((hi << 16) | lo));
  std::size_t bad = 0;
  for (float x : in) {
    for (bool sat : {false, true}) {
      const std::int64_t want = r.round(x, sat);
      const std::uint16_t got = sat ? to_bf16_sat(x).bits : bf16(x).bits;
      const bool ok = want < 0 ? std::isnan(bf16::to_f32(got)) : got == want;
      if (!ok && ++bad < 10)
        FAIL_CHECK("x=0x" << std::hex << std::bit_cast<std::uint32_t>(x) << " sat=" << sat << " got 0x"
                          << got << " want 0x" << want);
    }
  }
  CHECK(bad == 0);
  CHECK(in.size() > 1'000'000);
}

TEST_CASE("f8 e4m3fn: all codes, and f32 -> e4m3fn against the reference") {
  check_f8<f8_e4m3fn>(e4m3_def);
}

TEST_CASE("f8 e5m2: all codes, and f32 -> e5m2 against the reference") {
  check_f8<f8_e5m2>(e5m2_def);
}

TEST_CASE("saturating vs non-saturating overflow") {
  CHECK(to_bf16_sat(INFINITY).bits == 0x7F7F);
  CHECK(to_bf16_sat(-3.4028235e38f).bits == 0xFF7F);
  CHECK(bf16(3.4028235e38f).bits == 0x7F80);  // rounds past max: inf
  CHECK(to_f8_sat<f8_e5m2>(-INFINITY).bits == 0xFB);
  CHECK(to_f8_nonsat<f8_e5m2>(-INFINITY).bits == 0xFC);
  CHECK(to_f8_nonsat<f8_e4m3fn>(INFINITY).bits == 0x7F);
  CHECK(to_f8_sat<f8_e4m3fn>(INFINITY).bits == 0x7E);
  CHECK(f8_e5m2::format::is_nan_code(to_f8_sat<f8_e5m2>(NAN).bits));
}

TEST_CASE("bulk convert") {
  const float in[4] = {1.0f, -2.5f, 1000.0f, 0.0f};
  f8_e4m3fn f8[4];
  float back[4];
  convert(f8, in, 4);
  convert(back, f8, 4);
  CHECK(back[0] == 1.0f);
  CHECK(back[1] == -2.5f);
  CHECK(back[2] == 448.0f);
  CHECK(back[3] == 0.0f);
}
