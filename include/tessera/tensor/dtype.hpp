// tessera/tensor/dtype.hpp: the element types tessera computes with.
//
//   f32         IEEE binary32 (float)
//   bf16        bfloat16: 1 sign, 8 exponent (bias 127), 7 mantissa bits; inf and NaN
//   f8_e4m3fn   OCP FP8 E4M3 "fn": 4 exponent (bias 7), 3 mantissa; no inf, NaN = S.1111.111,
//               largest finite 448
//   f8_e5m2     OCP FP8 E5M2: 5 exponent (bias 15), 2 mantissa; IEEE-like inf and NaN,
//               largest finite 57344
//
// Conversions from f32 round to nearest, ties to even. Two overflow behaviours:
//   saturating (`_sat`): a finite value beyond the largest finite one, and +-inf, become
//                        +-max finite (NVIDIA's satfinite); NaN stays NaN.
//   non-saturating:      overflow gives +-inf where the format has inf (bf16, e5m2) and NaN
//                        for e4m3fn (it has no inf); inf stays inf (NaN for e4m3fn).
// The default constructor from float is non-saturating for bf16 (as torch's .to(bfloat16))
// and saturating for the f8 types (as Float8 training casts after scaling).
// Every conversion is constexpr (std::bit_cast), so the tables in tests are checked against
// a definition that does not share this code.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include <tessera/comm/types.hpp>
#include <tessera/core/dtype.hpp>

namespace tessera {

// The element-type tags (dtype, size_of, name_of: "float32", "bfloat16", ...) are
// core/dtype.hpp's, shared with the communicators and the formats; this header defines the
// narrow float types and which C++ type each tag names.

namespace detail {

/// f32 -> narrow float with E exponent bits, M mantissa bits, round to nearest even.
/// Only for formats whose smallest subnormal is far above f32's normal range (f8 here).
/// Returns the code without sign, or `overflow` when the rounded magnitude exceeds
/// `max_code`.
constexpr std::uint32_t narrow_rne_abs(std::uint32_t abs_bits, int M, int bias,
                                       std::uint32_t max_code, std::uint32_t overflow) noexcept {
  if (abs_bits < 0x00800000u) return 0;  // f32 zero or subnormal: far below half an f8 ulp
  const int e = static_cast<int>(abs_bits >> 23) - 127;
  const std::uint64_t mant = (abs_bits & 0x7FFFFFu) | 0x800000u;  // 24 significant bits
  const int emin = 1 - bias;
  int shift = 23 - M;
  std::uint32_t biased = 0;
  if (e < emin) {
    shift += emin - e;
    if (shift > 40) return 0;  // below half the smallest subnormal
  } else {
    biased = static_cast<std::uint32_t>(e + bias);
  }
  std::uint64_t q = mant >> shift;
  const std::uint64_t rem = mant & ((std::uint64_t{1} << shift) - 1);
  const std::uint64_t half = std::uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  // q holds the implicit bit for normals; a carry out of the mantissa bumps the exponent.
  const std::uint64_t code =
      biased == 0 ? q : (std::uint64_t{biased} << M) + q - (std::uint64_t{1} << M);
  return code > max_code ? overflow : static_cast<std::uint32_t>(code);
}

}  // namespace detail

// ---- bf16 ---------------------------------------------------------------------------------

/// bfloat16. `bits` is the raw encoding; arithmetic goes through float.
struct bf16 {
  std::uint16_t bits = 0;

  static constexpr bf16 from_bits(std::uint16_t b) noexcept { return bf16{b, 0}; }
  constexpr bf16() noexcept = default;
  /// Round to nearest even; overflow gives inf (non-saturating, as torch).
  constexpr explicit bf16(float f) noexcept : bits(from_f32(f)) {}
  constexpr explicit operator float() const noexcept { return to_f32(bits); }

  static constexpr std::uint16_t from_f32(float f) noexcept {
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)  // NaN: keep sign and payload top, force quiet
      return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>(u >> 16);
  }
  static constexpr std::uint16_t from_f32_sat(float f) noexcept {
    const std::uint16_t b = from_f32(f);
    if ((b & 0x7FFFu) == 0x7F80u) return static_cast<std::uint16_t>((b & 0x8000u) | 0x7F7Fu);
    return b;
  }
  static constexpr float to_f32(std::uint16_t b) noexcept {
    return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
  }
  friend constexpr bool operator==(bf16 a, bf16 b) noexcept { return a.bits == b.bits; }

 private:
  constexpr bf16(std::uint16_t b, int) noexcept : bits(b) {}
};

/// Saturating f32 -> bf16 (+-inf and overflow become +-max finite; NaN stays NaN).
constexpr bf16 to_bf16_sat(float f) noexcept { return bf16::from_bits(bf16::from_f32_sat(f)); }

// ---- f8 -----------------------------------------------------------------------------------

/// Shared code of the two OCP FP8 formats. E exponent bits, M mantissa bits.
template <int E, int M, bool HasInf>
struct f8_base {
  static constexpr int exponent_bits = E;
  static constexpr int mantissa_bits = M;
  static constexpr int bias = (1 << (E - 1)) - 1;
  static constexpr bool has_inf = HasInf;
  /// Largest finite code (without sign): 0x7E for e4m3fn, 0x7B for e5m2.
  static constexpr std::uint32_t max_code = HasInf ? ((((1u << E) - 2u) << M) | ((1u << M) - 1u))
                                                   : 0x7Eu;
  static constexpr std::uint32_t nan_code = HasInf ? (((1u << E) - 1u) << M) | (1u << (M - 1))
                                                   : 0x7Fu;
  static constexpr std::uint32_t inf_code = ((1u << E) - 1u) << M;  // e5m2 only

  static constexpr bool is_nan_code(std::uint8_t c) noexcept {
    const std::uint32_t a = c & 0x7Fu;
    return HasInf ? (a > inf_code) : (a == 0x7Fu);
  }
  static constexpr float to_f32(std::uint8_t c) noexcept {
    const std::uint32_t sign = (c & 0x80u) ? 0x80000000u : 0u;
    const std::uint32_t a = c & 0x7Fu;
    const std::uint32_t ex = a >> M, man = a & ((1u << M) - 1u);
    if (is_nan_code(c)) return std::bit_cast<float>(sign | 0x7FC00000u);
    if (HasInf && a == inf_code) return std::bit_cast<float>(sign | 0x7F800000u);
    if (ex == 0) {  // subnormal: man * 2^(1 - bias - M), exact in float
      const float v = static_cast<float>(man) / static_cast<float>(1u << (bias - 1 + M));
      return sign ? -v : v;
    }
    return std::bit_cast<float>(sign | ((ex - bias + 127u) << 23) | (man << (23 - M)));
  }
  static constexpr std::uint8_t from_f32(float f, bool saturate) noexcept {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (u >> 24) & 0x80u;
    const std::uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return static_cast<std::uint8_t>(sign | nan_code);
    const std::uint32_t overflow = saturate ? max_code : (HasInf ? inf_code : nan_code);
    if (a == 0x7F800000u) return static_cast<std::uint8_t>(sign | overflow);
    return static_cast<std::uint8_t>(sign | detail::narrow_rne_abs(a, M, bias, max_code, overflow));
  }
};

/// An OCP FP8 value of format F (an f8_base). The float constructor saturates.
template <class F>
struct f8 {
  using format = F;
  std::uint8_t bits = 0;
  static constexpr f8 from_bits(std::uint8_t b) noexcept {
    f8 r;
    r.bits = b;
    return r;
  }
  constexpr f8() noexcept = default;
  constexpr explicit f8(float f) noexcept : bits(format::from_f32(f, true)) {}
  constexpr explicit operator float() const noexcept { return format::to_f32(bits); }
  /// 448 for e4m3fn, 57344 for e5m2.
  static constexpr float max_finite = format::to_f32(static_cast<std::uint8_t>(format::max_code));
  friend constexpr bool operator==(f8 a, f8 b) noexcept { return a.bits == b.bits; }
};

/// OCP FP8 E4M3 (no inf; torch.float8_e4m3fn).
using f8_e4m3fn = f8<f8_base<4, 3, false>>;
/// OCP FP8 E5M2 (IEEE-like; torch.float8_e5m2).
using f8_e5m2 = f8<f8_base<5, 2, true>>;
static_assert(f8_e4m3fn::max_finite == 448.0f && f8_e5m2::max_finite == 57344.0f);

/// Explicit conversions, named by overflow behaviour.
template <class F8>
constexpr F8 to_f8_sat(float f) noexcept { return F8::from_bits(F8::format::from_f32(f, true)); }
template <class F8>
constexpr F8 to_f8_nonsat(float f) noexcept {
  return F8::from_bits(F8::format::from_f32(f, false));
}

// ---- type <-> tag -------------------------------------------------------------------------

template <class T> struct dtype_traits;  // defined for the four element types only
template <> struct dtype_traits<float> { static constexpr dtype value = dtype::f32; };
template <> struct dtype_traits<bf16> { static constexpr dtype value = dtype::bf16; };
template <> struct dtype_traits<f8_e4m3fn> { static constexpr dtype value = dtype::f8_e4m3fn; };
template <> struct dtype_traits<f8_e5m2> { static constexpr dtype value = dtype::f8_e5m2; };

template <class T>
concept element_type = requires { dtype_traits<T>::value; };

/// The dtype tag of an element type: dtype_of<bf16> == dtype::bf16.
template <element_type T>
inline constexpr dtype dtype_of = dtype_traits<T>::value;

/// float from any element type.
template <element_type T>
constexpr float to_f32(T x) noexcept {
  if constexpr (std::is_same_v<T, float>) return x; else return static_cast<float>(x);
}

/// Converts n floats to T (bf16: round to nearest even; f8: saturating) and back.
template <element_type T>
void convert(T* out, const float* in, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = T(in[i]);
}
template <element_type T>
  requires(!std::is_same_v<T, float>)
void convert(float* out, const T* in, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = to_f32(in[i]);
}

}  // namespace tessera

// The communicators move (and, for bf16, reduce) these types.
template <>
struct tessera::comm::dtype_traits<tessera::bf16> {
  static constexpr dtype value = dtype::bf16;
};
template <>
struct tessera::comm::dtype_traits<tessera::f8_e4m3fn> {
  static constexpr dtype value = dtype::f8e4m3;
};
template <>
struct tessera::comm::dtype_traits<tessera::f8_e5m2> {
  static constexpr dtype value = dtype::f8e5m2;
};
