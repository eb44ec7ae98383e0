// tessera/comm/types.hpp: the vocabulary shared by every communicator backend: element
// types, reduce operations, collective kinds, options, and the error a failed call throws.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <tessera/core/source_location.hpp>
#include <span>
#include <string>
#include <string_view>
#include <tessera/core/dtype.hpp>
#include <tessera/core/error.hpp>
#include <tessera/core/reduce.hpp>
#include <type_traits>

namespace tessera::comm {

// Element types (dtype, size_of, short_name) and reduce ops (reduce_op, name_of) are the
// library's one vocabulary of core/dtype.hpp and core/reduce.hpp.
using tessera::dtype;
using tessera::name_of;
using tessera::reduce_op;
using tessera::short_name;
using tessera::size_of;

/// True when a reduction over `t` is defined (8-bit floats and f16 only move).
constexpr bool reducible(dtype t) noexcept {
  return t != dtype::f8e4m3 && t != dtype::f8e5m2 && t != dtype::f16;
}

/// The dtype of a C++ element type. Types of higher layers (bf16, f8) specialize
/// `dtype_traits` next to their definition: `static constexpr dtype value = ...`.
template <class T>
struct dtype_traits {};
template <> struct dtype_traits<std::uint8_t> { static constexpr dtype value = dtype::u8; };
template <> struct dtype_traits<std::byte> { static constexpr dtype value = dtype::u8; };
template <> struct dtype_traits<std::int32_t> { static constexpr dtype value = dtype::i32; };
template <> struct dtype_traits<std::int64_t> { static constexpr dtype value = dtype::i64; };
template <> struct dtype_traits<float> { static constexpr dtype value = dtype::f32; };
template <> struct dtype_traits<double> { static constexpr dtype value = dtype::f64; };

template <class T>
concept element = requires { dtype_traits<std::remove_cv_t<T>>::value; } &&
                  std::is_trivially_copyable_v<T>;

template <element T>
inline constexpr dtype dtype_of = dtype_traits<std::remove_cv_t<T>>::value;

/// What a call does; the flight recorder and error messages name calls by it.
enum class call_kind : std::uint8_t {
  all_gather, reduce_scatter, all_reduce, all_to_all, broadcast, barrier, send, recv
};

constexpr std::string_view name_of(call_kind k) noexcept {
  switch (k) {
    case call_kind::all_gather: return "all_gather";
    case call_kind::reduce_scatter: return "reduce_scatter";
    case call_kind::all_reduce: return "all_reduce";
    case call_kind::all_to_all: return "all_to_all";
    case call_kind::broadcast: return "broadcast";
    case call_kind::barrier: return "barrier";
    case call_kind::send: return "send";
    case call_kind::recv: return "recv";
  }
  return "?";
}

constexpr bool is_p2p(call_kind k) noexcept { return k == call_kind::send || k == call_kind::recv; }

/// Options every backend honours.
struct options {
  /// A call that has not completed this long after it was issued fails with comm::error.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

/// A failed communication call: the message names the rank, the group and the call.
class error : public tessera::error {
 public:
  using tessera::error::error;
};

/// Thrown on ranks that were waiting when another rank of the job failed.
class aborted : public error {
 public:
  using error::error;
};

/// "[0,2,4]": a group as the list of its world ranks.
inline std::string group_string(std::span<const int> ranks) {
  std::string s = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ranks[i]);
  }
  return s + "]";
}

/// One call described for messages: "all_reduce(count=1024, f32, sum)".
struct call_desc {
  call_kind kind{};
  std::size_t count = 0;
  dtype type = dtype::u8;
  reduce_op op = reduce_op::sum;
  int peer = -1;  // root of broadcast, peer of send/recv
  int tag = 0;

  friend constexpr bool operator==(const call_desc&, const call_desc&) = default;

  std::string str() const {
    std::string s(name_of(kind));
    if (kind == call_kind::barrier) return s + "()";
    s += "(count=" + std::to_string(count) + ", " + std::string(short_name(type));
    if (kind == call_kind::reduce_scatter || kind == call_kind::all_reduce)
      s += ", " + std::string(name_of(op));
    if (kind == call_kind::broadcast) s += ", root=" + std::to_string(peer);
    if (is_p2p(kind)) s += ", peer=" + std::to_string(peer) + ", tag=" + std::to_string(tag);
    return s + ")";
  }
};

}  // namespace tessera::comm
