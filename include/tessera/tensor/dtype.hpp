// tessera/tensor/dtype.hpp: the element types tessera computes with.
//
//   f32         IEEE binary32 (float)
//   bf16        bfloat16: 1 sign, 8 exponent (bias 127), 7 mantissa bits; inf and NaN
//   f8_e4m3fn   OCP FP8 E4M3 "fn": 4 exponent (bias 7), 3 mantissa; no inf,
//               NaN = S.1111.111, largest finite 448 (defined in core/float8.hpp)
//   f8_e5m2     OCP FP8 E5M2: 5 exponent (bias 15), 2 mantissa; IEEE-like inf and NaN,
//               largest finite 57344 (defined in core/float8.hpp)
//
// Conversions from f32 round to nearest, ties to even. Two overflow behaviours:
//   saturating (`_sat`): a finite value beyond the largest finite one, and +-inf, become
//                        +-max finite (NVIDIA's satfinite); NaN stays NaN.
//   non-saturating:      overflow gives +-inf where the format has inf (bf16, e5m2) and NaN
//                        for e4m3fn (it has no inf); inf stays inf (NaN for e4m3fn).
// The default constructor from float is non-saturating for bf16 (as torch's .to(bfloat16))
// and saturating for the f8 types (as Float8 training casts after scaling).
// Every conversion is constexpr (a bit cast: core/float8.hpp's detail::bit_cast), so the
// tables in tests are checked against a definition that does not share this code.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include <tessera/comm/types.hpp>
#include <tessera/core/dtype.hpp>
#include <tessera/core/float8.hpp>

namespace tessera {

// The element-type tags (dtype, size_of, name_of: "float32", "bfloat16", ...) are
// core/dtype.hpp's, shared with the communicators and the formats, and the FP8 types are
// core/float8.hpp's; this header defines bf16 and which C++ type each tag names.

// ---- bf16 ---------------------------------------------------------------------------------

/// bfloat16. `bits` is the raw encoding; arithmetic goes through float. The conversions are
/// TESSERA_HOST_DEVICE: CUDA kernels round to bf16 with this code (kernels/cuda/pointwise.cuh).
struct bf16 {
  std::uint16_t bits = 0;

  TESSERA_HOST_DEVICE static constexpr bf16 from_bits(std::uint16_t b) noexcept { return bf16{b, 0}; }
  constexpr bf16() noexcept = default;
  /// Round to nearest even; overflow gives inf (non-saturating, as torch).
  TESSERA_HOST_DEVICE constexpr explicit bf16(float f) noexcept : bits(from_f32(f)) {}
  TESSERA_HOST_DEVICE constexpr explicit operator float() const noexcept { return to_f32(bits); }

  TESSERA_HOST_DEVICE static constexpr std::uint16_t from_f32(float f) noexcept {
    std::uint32_t u = detail::bit_cast<std::uint32_t>(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)  // NaN: keep sign and payload top, force quiet
      return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>(u >> 16);
  }
  TESSERA_HOST_DEVICE static constexpr std::uint16_t from_f32_sat(float f) noexcept {
    const std::uint16_t b = from_f32(f);
    if ((b & 0x7FFFu) == 0x7F80u) return static_cast<std::uint16_t>((b & 0x8000u) | 0x7F7Fu);
    return b;
  }
  TESSERA_HOST_DEVICE static constexpr float to_f32(std::uint16_t b) noexcept {
    return detail::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
  }
  friend constexpr bool operator==(bf16 a, bf16 b) noexcept { return a.bits == b.bits; }

 private:
  TESSERA_HOST_DEVICE constexpr bf16(std::uint16_t b, int) noexcept : bits(b) {}
};

/// Saturating f32 -> bf16 (+-inf and overflow become +-max finite; NaN stays NaN).
constexpr bf16 to_bf16_sat(float f) noexcept { return bf16::from_bits(bf16::from_f32_sat(f)); }

// ---- f8 -----------------------------------------------------------------------------------
// f8_e4m3fn, f8_e5m2, to_f8_sat and to_f8_nonsat are core/float8.hpp's (per-element code
// that CUDA kernels share).

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
