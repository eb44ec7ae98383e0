// tessera/kernels/cuda/attention_library.hpp: which kernels run cuda_bf16_kernels' causal
// attention -- tessera's tensor-core kernels (attention_tc.cuh, the default) or cuDNN's fused
// attention (cudnn_attention.hpp, through attention_cudnn.cuh) -- and the environment
// switches' parsing that the attention's other choices (attention_tc.cuh: TESSERA_DQ_PATH,
// TESSERA_ATTENTION_FORWARD) share. Host code: no CUDA needed.
//
//   TESSERA_ATTENTION=cudnn bench_gpu_llama ...   # cuDNN's attention for the step
//
// cuDNN's runs only where the program was built with tessera::cudnn (the macro
// TESSERA_HAS_CUDNN; cudnn_built) and cuDNN 9 is found when it is first used; context
// parallel's block kernels are tessera's either way.
#pragma once

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

/// Whether this program was built with cuDNN's fused attention (tessera::cudnn).
#if defined(TESSERA_HAS_CUDNN)
inline constexpr bool cudnn_built = true;
#else
inline constexpr bool cudnn_built = false;
#endif

/// Which kernels run cuda_bf16_kernels' causal attention: `tessera`'s tensor-core kernels
/// (attention_tc.cuh; 236.7 and 176.6 TFLOP/s forward and backward on an H200) or `cudnn`'s
/// fused attention (cudnn_attention.hpp; q, k, v, dout rounded to bf16 as tessera's are, and
/// out, dq, dk, dv rounded to bf16 as well).
enum class attention_library { tessera, cudnn };

/// The attention_library named by `value` (TESSERA_ATTENTION's): "tessera", "cudnn", or
/// nullptr or empty for the default, tessera; anything else is refused with what to give, and
/// "cudnn" in a program built without it is refused with how to build it.
inline attention_library attention_library_named(const char* value) {
  const attention_library a = detail::choice_named<attention_library>(
      "TESSERA_ATTENTION", value, {{"tessera", attention_library::tessera}, {"cudnn", attention_library::cudnn}},
      "give 'tessera' (tessera's tensor-core kernels, the default) or 'cudnn' (cuDNN's fused attention)");
  if (a == attention_library::cudnn && !cudnn_built)
    throw error(
        "TESSERA_ATTENTION is 'cudnn', but this program was built without cuDNN's attention (tessera::cudnn: cuDNN 9 "
        "and the cuDNN frontend's headers, which bash .ci/setup.sh fetches): build it with them, or unset "
        "TESSERA_ATTENTION");
  return a;
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
