// tessera/kernels/cuda/attention_library.hpp: which kernels run cuda_bf16_kernels' causal
// attention -- tessera's tensor-core kernels (attention_tc.cuh, the default) or cuDNN's fused
// attention (cudnn_attention.hpp, through attention_cudnn.cuh) -- and the environment
// switches' parsing that the attention's other choices (attention_tc.cuh: TESSERA_DQ_PATH,
// TESSERA_ATTENTION_FORWARD) share. Host code: no CUDA needed.
//
//   TESSERA_ATTENTION=cudnn bench_gpu_llama ...   # cuDNN's attention for the step
//   train_llama --device cuda --compute-dtype bf16 --attention cudnn ...
//
// cuDNN's runs only where a unit of the program includes cudnn_attention.hpp (linking the
// CMake component tessera::cudnn adds one: cmake/cudnn_attention_unit.cpp) and cuDNN 9 is
// found when it is first used; context parallel's block kernels are tessera's either way.
//
// How a program links it: cudnn_attention.hpp, compiled by the host compiler in one unit,
// registers its functions here before main (cudnn::linked_functions); the CUDA units that run
// the attention (attention_cudnn.cuh, compiled by nvcc) call them through that table. So the
// cuDNN frontend's headers -- 24 s of g++ a unit, 55 s more of nvcc -- are compiled once a
// program and never by nvcc, whose layout of their lambdas differs from g++'s (docs/cuda.md,
// "nvcc and g++ units in one program").
#pragma once

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include <tessera/core/error.hpp>

namespace tessera::cuda {

namespace detail {
/// The choice that environment variable `var`'s `value` names: one of `names` (the first when
/// value is null or empty); anything else is refused with `hint`, what to give.
template <class E>
E choice_named(std::string_view var, const char* value, std::initializer_list<std::pair<std::string_view, E>> names,
               std::string_view hint) {
  const std::string_view v = value ? value : "";
  if (v.empty()) return names.begin()->second;
  for (const auto& [name, e] : names)
    if (v == name) return e;
  throw error(std::string(var) + " is '" + std::string(v) + "': " + std::string(hint));
}
/// The process's setting of a choice E: what `Named` makes of environment variable `var`,
/// read once, then whatever is assigned to it (the default_* and set_default_* functions).
template <class E, E (*Named)(const char*)>
E& setting(const char* var) {
  static E e = Named(std::getenv(var));
  return e;
}
}  // namespace detail

namespace cudnn {
/// One causal attention call's sizes: batch, tokens, query heads, key/value heads, head dim.
struct sdpa_shape {
  std::int64_t B = 0, T = 0, NH = 0, NKV = 0, HD = 0;
  friend bool operator==(const sdpa_shape&, const sdpa_shape&) = default;
};
inline std::string to_string(const sdpa_shape& s) {
  return std::to_string(s.B) + " x " + std::to_string(s.T) + " tokens, " + std::to_string(s.NH) + " heads, " +
         std::to_string(s.NKV) + " kv heads, head dim " + std::to_string(s.HD);
}

/// cuDNN's fused attention as a program links it: cudnn_attention.hpp's functions (there
/// documented), registered by the unit that includes it. Streams are cudaStream_t, as void*;
/// bf16 tensors as void* (__nv_bfloat16 or tessera's bf16).
struct linked_functions {
  void (*load_library)();
  std::int64_t (*workspace_bytes)(const sdpa_shape&);
  void (*release_workspace)();
  void (*forward)(void* o, float* stats, const void* q, const void* k, const void* v, const sdpa_shape&, void* stream);
  void (*backward)(void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k, const void* v,
                   const void* o, const float* stats, const sdpa_shape&, void* stream);
};
namespace detail {
/// The registered table (constant-initialized: null before any unit registers).
inline const linked_functions*& linked_slot() {
  static const linked_functions* table = nullptr;
  return table;
}
}  // namespace detail
/// cuDNN's functions where a unit of this program includes cudnn_attention.hpp, else nullptr.
inline const linked_functions* linked() { return detail::linked_slot(); }
}  // namespace cudnn

/// Whether this program links cuDNN's fused attention (a unit includes cudnn_attention.hpp:
/// the component tessera::cudnn adds one). Valid from main on (the unit registers before it).
inline bool cudnn_linked() { return cudnn::linked() != nullptr; }

/// Which kernels run cuda_bf16_kernels' causal attention: `tessera`'s tensor-core kernels
/// (attention_tc.cuh; 236.7 and 176.6 TFLOP/s forward and backward on an H200) or `cudnn`'s
/// fused attention (cudnn_attention.hpp; q, k, v, dout rounded to bf16 as tessera's are, and
/// out, dq, dk, dv rounded to bf16 as well).
enum class attention_library { tessera, cudnn };

/// The attention_library that setting `what` (an environment variable, or a trainer's key and
/// flag) names by `value`: "tessera", "cudnn", or nullptr or empty for the default, tessera;
/// anything else is refused with what to give, and "cudnn" in a program that does not link it
/// is refused with how to build it.
inline attention_library attention_library_from(std::string_view what, const char* value) {
  const attention_library a = detail::choice_named<attention_library>(
      what, value, {{"tessera", attention_library::tessera}, {"cudnn", attention_library::cudnn}},
      "give 'tessera' (tessera's tensor-core kernels, the default) or 'cudnn' (cuDNN's fused attention)");
  if (a == attention_library::cudnn && !cudnn_linked())
    throw error(std::string(what) +
                " is 'cudnn', but this program was built without cuDNN's attention (no unit of it includes "
                "kernels/cuda/cudnn_attention.hpp: link the component tessera::cudnn, which adds one; it needs cuDNN 9 "
                "and the cuDNN frontend's headers, which bash .ci/setup.sh fetches): build it with them, or choose "
                "'tessera'");
  return a;
}
/// The attention_library named by `value`, TESSERA_ATTENTION's (attention_library_from).
inline attention_library attention_library_named(const char* value) {
  return attention_library_from("TESSERA_ATTENTION", value);
}
/// What runs attention `a`, in words (the trainers print it).
inline const char* attention_library_name(attention_library a) {
  return a == attention_library::cudnn ? "cuDNN's fused attention" : "tessera's tensor-core kernels";
}
/// The kernels cuda_bf16_kernels' causal attention runs: the environment variable
/// TESSERA_ATTENTION, read once, or what set_default_attention_library set since.
inline attention_library default_attention_library() {
  return detail::setting<attention_library, attention_library_named>("TESSERA_ATTENTION");
}
/// Sets it (bench_gpu_llama times a step both ways in one process); not synchronized: set it
/// before work is launched from several host threads.
inline void set_default_attention_library(attention_library a) {
  detail::setting<attention_library, attention_library_named>("TESSERA_ATTENTION") = a;
}

}  // namespace tessera::cuda
