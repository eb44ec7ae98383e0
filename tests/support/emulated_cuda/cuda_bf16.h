// bf16 under the host emulation: __nv_bfloat16 is tessera::bf16 (tests/support/cuda_emulation.hpp).
#pragma once
#include <cuda_emulation.hpp>
