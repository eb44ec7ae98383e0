// tessera/core/float8.hpp: the two OCP FP8 formats as one-byte value types.
//
//   f8_e4m3fn   E4M3: 1 sign, 4 exponent (bias 7), 3 mantissa bits. No infinities; the one
//               NaN per sign is S.1111.111. Largest finite 448 (S.1111.110), smallest
//               normal 2^-6, smallest subnormal 2^-9. torch.float8_e4m3fn.
//   f8_e5m2     E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa bits, IEEE-like: inf is
//               S.11111.00, NaN S.11111.{01,10,11}. Largest finite 57344 (S.11110.11),
//               smallest normal 2^-14, smallest subnormal 2^-16. torch.float8_e5m2.
//
// Source: OCP 8-bit Floating Point Specification (OFP8), Revision 1.0 (2023), tables 1
// and 2; Micikevicius et al., "FP8 Formats for Deep Learning" (arXiv:2209.05433).
//
// Conversions from float round to nearest, ties to even, subnormals included. Two overflow
// behaviours (the OFP8 spec's saturation mode and its non-saturating mode):
//   saturating:      finite values beyond the largest finite one, and +-inf, become
//                    +-largest finite (NVIDIA's satfinite; torchao clamps to +-max before
//                    its casts, which gives the same codes); NaN stays NaN.
//   non-saturating:  overflow gives +-inf for e5m2 and NaN for e4m3fn (it has no inf).
// The constructor from float saturates (Float8 training's cast after scaling); NaN inputs
// become the format's canonical quiet NaN (sign kept), so payloads are not preserved.
// Conversion to float is exact.
//
// Every per-element function is constexpr, allocation-free and TESSERA_HOST_DEVICE, so a
// CUDA kernel can share it. tensor/dtype.hpp maps these types to the dtype tags.
#pragma once

#include <cstdint>
#include <type_traits>

#include <tessera/core/config.hpp>

namespace tessera {

namespace detail {

/// std::bit_cast through the builtin it wraps (GCC, Clang, MSVC and nvcc all have it): a
/// builtin has no CUDA execution space, so __host__ __device__ code may call it.
template <class To, class From>
TESSERA_HOST_DEVICE constexpr To bit_cast(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From));
  return __builtin_bit_cast(To, from);
}

/// f32 -> narrow float with M mantissa bits and exponent bias `bias`, round to nearest
/// even. Only for formats whose smallest subnormal is far above f32's normal range (f8).
/// Takes |f| as bits; returns the code without sign, or `overflow` when the rounded
/// magnitude exceeds `max_code`.
TESSERA_HOST_DEVICE constexpr std::uint32_t narrow_rne_abs(std::uint32_t abs_bits, int M,
                                                           int bias, std::uint32_t max_code,
                                                           std::uint32_t overflow) noexcept {
  const int emin = 1 - bias;
  int shift = 23 - M;
  if (abs_bits >= static_cast<std::uint32_t>(emin + 127) << 23) {
    // A normal result (or overflow), in 32 bits: round the f32 mantissa to M bits in place,
    // ties to even (the carry of a mantissa that rounds up moves into the exponent field),
    // then rebias the exponent.
    const std::uint32_t r = abs_bits + ((1u << (shift - 1)) - 1u) + ((abs_bits >> shift) & 1u);
    const std::uint32_t code = (r >> shift) - (static_cast<std::uint32_t>(127 - bias) << M);
    return code > max_code ? overflow : code;
  }
  // A subnormal result (|f| < 2^emin): the 24 significant bits shifted down to it.
  if (abs_bits < 0x00800000u) return 0;  // f32 zero or subnormal: far below half an f8 ulp
  const int e = static_cast<int>(abs_bits >> 23) - 127;
  const std::uint64_t mant = (abs_bits & 0x7FFFFFu) | 0x800000u;  // 24 significant bits
  shift += emin - e;
  if (shift > 40) return 0;  // below half the smallest subnormal
  std::uint64_t q = mant >> shift;
  const std::uint64_t rem = mant & ((std::uint64_t{1} << shift) - 1);
  const std::uint64_t half = std::uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  // one that rounds up to 2^emin is the smallest normal's code, 1 << M
  return static_cast<std::uint32_t>(q);
}

}  // namespace detail

/// One OCP FP8 format: E exponent bits, M mantissa bits, with or without infinities.
/// (Without infinities means OFP8's E4M3 rule: only S.1111.111 is NaN, S.1111.000 to
/// S.1111.110 are finite.)
template <int E, int M, bool HasInf>
struct f8_base {
  static constexpr int exponent_bits = E;
  static constexpr int mantissa_bits = M;
  static constexpr int bias = (1 << (E - 1)) - 1;
  static constexpr bool has_inf = HasInf;
  /// Largest finite code (without sign): 0x7E for e4m3fn, 0x7B for e5m2.
  static constexpr std::uint32_t max_code = HasInf ? ((((1u << E) - 2u) << M) | ((1u << M) - 1u))
                                                   : 0x7Eu;
  /// The canonical NaN (without sign) that conversions produce: 0x7F, 0x7E for e5m2.
  static constexpr std::uint32_t nan_code = HasInf ? (((1u << E) - 1u) << M) | (1u << (M - 1))
                                                   : 0x7Fu;
  static constexpr std::uint32_t inf_code = ((1u << E) - 1u) << M;  // e5m2 only

  TESSERA_HOST_DEVICE static constexpr bool is_nan_code(std::uint8_t c) noexcept {
    const std::uint32_t a = c & 0x7Fu;
    return HasInf ? (a > inf_code) : (a == 0x7Fu);
  }
  /// Exact decoding (every FP8 value is a float).
  TESSERA_HOST_DEVICE static constexpr float to_f32(std::uint8_t c) noexcept {
    const std::uint32_t sign = (c & 0x80u) ? 0x80000000u : 0u;
    const std::uint32_t a = c & 0x7Fu;
    const std::uint32_t ex = a >> M, man = a & ((1u << M) - 1u);
    if (is_nan_code(c)) return detail::bit_cast<float>(sign | 0x7FC00000u);
    if (HasInf && a == inf_code) return detail::bit_cast<float>(sign | 0x7F800000u);
    if (ex == 0) {  // subnormal: man * 2^(1 - bias - M), exact in float
      const float v = static_cast<float>(man) / static_cast<float>(1u << (bias - 1 + M));
      return sign ? -v : v;
    }
    return detail::bit_cast<float>(sign | ((ex - bias + 127u) << 23) | (man << (23 - M)));
  }
  /// Round to nearest even; `saturate` picks the overflow behaviour (see the top).
  TESSERA_HOST_DEVICE static constexpr std::uint8_t from_f32(float f, bool saturate) noexcept {
    const std::uint32_t u = detail::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (u >> 24) & 0x80u;
    const std::uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return static_cast<std::uint8_t>(sign | nan_code);
    const std::uint32_t overflow = saturate ? max_code : (HasInf ? inf_code : nan_code);
    if (a == 0x7F800000u) return static_cast<std::uint8_t>(sign | overflow);
    return static_cast<std::uint8_t>(sign | detail::narrow_rne_abs(a, M, bias, max_code, overflow));
  }
};

/// An OCP FP8 value of format F (an f8_base): one byte, trivially copyable. The float
/// constructor saturates.
template <class F>
struct f8 {
  using format = F;
  std::uint8_t bits = 0;
  TESSERA_HOST_DEVICE static constexpr f8 from_bits(std::uint8_t b) noexcept {
    f8 r;
    r.bits = b;
    return r;
  }
  constexpr f8() noexcept = default;
  TESSERA_HOST_DEVICE constexpr explicit f8(float f) noexcept : bits(format::from_f32(f, true)) {}
  TESSERA_HOST_DEVICE constexpr explicit operator float() const noexcept {
    return format::to_f32(bits);
  }
  /// 448 for e4m3fn, 57344 for e5m2.
  static constexpr float max_finite = format::to_f32(static_cast<std::uint8_t>(format::max_code));
  /// Smallest positive normal: 2^-6 for e4m3fn, 2^-14 for e5m2.
  static constexpr float min_normal = format::to_f32(static_cast<std::uint8_t>(1u << F::mantissa_bits));
  /// Smallest positive subnormal: 2^-9 for e4m3fn, 2^-16 for e5m2.
  static constexpr float min_subnormal = format::to_f32(std::uint8_t{1});
  TESSERA_HOST_DEVICE constexpr bool is_nan() const noexcept { return format::is_nan_code(bits); }
  /// Bitwise equality (so +0 != -0 and a NaN equals itself), unlike float's ==.
  friend constexpr bool operator==(f8 a, f8 b) noexcept { return a.bits == b.bits; }
};

/// OCP FP8 E4M3 (no inf; torch.float8_e4m3fn).
using f8_e4m3fn = f8<f8_base<4, 3, false>>;
/// OCP FP8 E5M2 (IEEE-like; torch.float8_e5m2).
using f8_e5m2 = f8<f8_base<5, 2, true>>;

static_assert(sizeof(f8_e4m3fn) == 1 && sizeof(f8_e5m2) == 1);
static_assert(std::is_trivially_copyable_v<f8_e4m3fn> && std::is_trivially_copyable_v<f8_e5m2>);
static_assert(f8_e4m3fn::max_finite == 448.0f && f8_e5m2::max_finite == 57344.0f);
static_assert(f8_e4m3fn::min_normal == 0x1p-6f && f8_e5m2::min_normal == 0x1p-14f);
static_assert(f8_e4m3fn::min_subnormal == 0x1p-9f && f8_e5m2::min_subnormal == 0x1p-16f);

/// float(F8(x)) computed on the float's bits, without forming the byte: the saturating
/// round to nearest even onto F8's values (NaN gives the same quiet NaN as float(F8(x))).
/// Free of branches, so loops over it vectorize; the CPU's quantize-dequantize uses it.
/// Normals round on the bits (a carry into the exponent is the right result); below the
/// smallest normal, adding and subtracting 2^23 quanta rounds to a multiple of the
/// smallest subnormal in float arithmetic (exact without -ffast-math).
template <class F8>
TESSERA_HOST_DEVICE constexpr float round_to_f8(float x) noexcept {
  constexpr std::uint32_t drop = 23u - static_cast<std::uint32_t>(F8::format::mantissa_bits);
  constexpr std::uint32_t max_bits = detail::bit_cast<std::uint32_t>(F8::max_finite);
  constexpr std::uint32_t min_normal_bits = detail::bit_cast<std::uint32_t>(F8::min_normal);
  constexpr float magic = F8::min_subnormal * 8388608.0f;  // its ulp is min_subnormal
  const std::uint32_t u = detail::bit_cast<std::uint32_t>(x);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  const std::uint32_t normal =
      (a + ((1u << (drop - 1u)) - 1u) + ((a >> drop) & 1u)) & ~((1u << drop) - 1u);
  const float af = detail::bit_cast<float>(a);
  const std::uint32_t subnormal = detail::bit_cast<std::uint32_t>((af + magic) - magic);
  std::uint32_t r = a < min_normal_bits ? subnormal : normal;
  r = r > max_bits ? max_bits : r;        // saturate (+-inf included)
  r = a > 0x7F800000u ? 0x7FC00000u : r;  // NaN
  return detail::bit_cast<float>(r | (u & 0x80000000u));
}
static_assert(round_to_f8<f8_e4m3fn>(1.0625f) == 1.0f && round_to_f8<f8_e4m3fn>(1000.0f) == 448.0f);
static_assert(round_to_f8<f8_e5m2>(0x1.8p-16f) == 0x1p-15f && round_to_f8<f8_e5m2>(-1e9f) == -57344.0f);

/// Explicit conversions, named by overflow behaviour.
template <class F8>
TESSERA_HOST_DEVICE constexpr F8 to_f8_sat(float f) noexcept {
  return F8::from_bits(F8::format::from_f32(f, true));
}
template <class F8>
TESSERA_HOST_DEVICE constexpr F8 to_f8_nonsat(float f) noexcept {
  return F8::from_bits(F8::format::from_f32(f, false));
}

/// torchao's three Float8 training recipes (Float8LinearRecipeName): which casts each
/// GEMM operand of a linear gets is kernels/cpu/float8.hpp's f8_linear_casts_of.
enum class f8_recipe : std::uint8_t { tensorwise, rowwise, rowwise_with_gw_hp };

}  // namespace tessera
