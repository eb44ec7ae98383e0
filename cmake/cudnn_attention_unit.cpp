// The unit of a program that compiles cuDNN's fused attention (kernels/cuda/cudnn_attention.hpp)
// with the host compiler and registers it before main, so that cuda_bf16_kernels can run it
// (TESSERA_ATTENTION=cudnn; kernels/cuda/attention_library.hpp). The CMake component
// tessera::cudnn adds this file to each target that links it; a program built without CMake
// compiles one unit that includes the header.
#include <tessera/kernels/cuda/cudnn_attention.hpp>
