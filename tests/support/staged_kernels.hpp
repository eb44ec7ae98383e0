// The CPU kernels on the staged test space (staged_space.hpp): a kernel backend whose memory
// is not the host's as far as the library knows, so a model on it takes every branch device
// memory takes (ids, RoPE tables and initial weights copied in, results copied out, buffers
// sized through the space), while the kernels compute what the CPU kernels compute. A model
// on it must equal llama_model bit for bit and hold exactly what the estimators say in the
// space's tracker (tests/model/test_device_llama.cpp).
#pragma once

#include <cstdint>
#include <string_view>

#include <tessera/kernels/backend.hpp>

#include "staged_space.hpp"

namespace tessera::testing {

struct staged_kernels : cpu_kernels, space_transfers<staged::space> {
  using space = staged::space;
  static constexpr std::string_view name = "staged";
  using space_transfers<staged::space>::zero;
  using space_transfers<staged::space>::copy;
  using space_transfers<staged::space>::to_device;
  using space_transfers<staged::space>::to_host;
  using space_transfers<staged::space>::synchronize;
};
static_assert(kernel_backend<staged_kernels>);

}  // namespace tessera::testing
