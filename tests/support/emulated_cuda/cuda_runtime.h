// The CUDA runtime header under the host emulation (tests/support/cuda_runtime_emulation.hpp).
#pragma once
#include <cuda_runtime_emulation.hpp>
