// tessera/core/dtype.hpp: the one list of element types, shared by every layer.
//
// The communicators move them (comm/types.hpp), tensors compute with some of them
// (tensor/dtype.hpp defines bf16 and the f8 types and maps C++ types to this enum), and
// the formats read and write them (safetensors' "F32", "BF16", "F16"). Names:
//   name_of(t)     PyTorch's: "float32", "bfloat16", "float8_e4m3fn", "float16", ...
//   short_name(t)  tessera's messages and flight-recorder dumps: "f32", "bf16", "f8e4m3"
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tessera {

/// Element types. The enumerators after f16 are second spellings of earlier values.
enum class dtype : std::uint8_t {
  u8, i32, i64, f32, f64, bf16, f8e4m3, f8e5m2, f16,
  f8_e4m3fn = f8e4m3,  ///< PyTorch's float8_e4m3fn (the spelling of tensor/dtype.hpp)
  f8_e5m2 = f8e5m2,    ///< PyTorch's float8_e5m2
};

/// The last distinct value, for code that walks them all.
inline constexpr dtype last_dtype = dtype::f16;

/// Bytes per element of `t`.
constexpr std::size_t size_of(dtype t) noexcept {
  switch (t) {
    case dtype::u8: case dtype::f8e4m3: case dtype::f8e5m2: return 1;
    case dtype::bf16: case dtype::f16: return 2;
    case dtype::i32: case dtype::f32: return 4;
    case dtype::i64: case dtype::f64: return 8;
  }
  return 0;
}

/// PyTorch's name ("float32", "bfloat16", "float8_e4m3fn", "float8_e5m2", ...).
constexpr std::string_view name_of(dtype t) noexcept {
  switch (t) {
    case dtype::u8: return "uint8";
    case dtype::i32: return "int32";
    case dtype::i64: return "int64";
    case dtype::f32: return "float32";
    case dtype::f64: return "float64";
    case dtype::bf16: return "bfloat16";
    case dtype::f8e4m3: return "float8_e4m3fn";
    case dtype::f8e5m2: return "float8_e5m2";
    case dtype::f16: return "float16";
  }
  return "?";
}

/// tessera's short name ("f32", "bf16", "f8e4m3", ...): messages and flight dumps.
constexpr std::string_view short_name(dtype t) noexcept {
  switch (t) {
    case dtype::u8: return "u8";
    case dtype::i32: return "i32";
    case dtype::i64: return "i64";
    case dtype::f32: return "f32";
    case dtype::f64: return "f64";
    case dtype::bf16: return "bf16";
    case dtype::f8e4m3: return "f8e4m3";
    case dtype::f8e5m2: return "f8e5m2";
    case dtype::f16: return "f16";
  }
  return "?";
}

}  // namespace tessera
