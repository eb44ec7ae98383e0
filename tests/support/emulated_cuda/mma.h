// WMMA under the host emulation: nvcuda::wmma (tests/support/cuda_emulation.hpp).
#pragma once
#include <cuda_emulation.hpp>
