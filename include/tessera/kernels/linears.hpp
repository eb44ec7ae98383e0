// tessera/kernels/linears.hpp: a group of linears that read one input, as the kernels take it
// (kernels/backend.hpp's K::matmuls_forward / matmuls_backward, the Float8 linears' groups in
// kernels/cpu/float8_linear.hpp and kernels/cuda/float8_linear.cuh).
#pragma once

#include <cstdint>

namespace tessera {

/// One of several linears that read one input [N, C] (q, k and v read attention_norm's output;
/// w1 and w3 ffn_norm's): out [N, OC] = inp . w^T.
struct linear_out {
  float* out;
  const float* w;
  std::int64_t OC;
};
/// Its backward: dinp += dout . w (when the group's dinp is not nullptr), dw += dout^T . inp
/// (when dw is not nullptr).
struct linear_grad {
  float* dw;
  const float* dout;
  const float* w;
  std::int64_t OC;
};

}  // namespace tessera
