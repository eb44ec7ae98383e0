// cuBLASLt under the host emulation (tests/support/cublaslt_emulation.hpp).
#pragma once
#include <cublaslt_emulation.hpp>
