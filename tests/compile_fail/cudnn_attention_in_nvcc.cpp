// expect: kernels/cuda/cudnn_attention.hpp is compiled by the host compiler, never by nvcc
// expect-also: link tessera::cudnn, whose cmake/cudnn_attention_unit.cpp compiles this header
// max-errors: 1
// A CUDA unit (nvcc defines __CUDACC__) that includes cuDNN's attention itself: refused, since
// the component's host unit compiles the same header with another layout of its lambdas.
#define __CUDACC__ 1
#include <tessera/kernels/cuda/cudnn_attention.hpp>
