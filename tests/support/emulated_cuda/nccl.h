// NCCL under the host emulation (tests/support/nccl_emulation.hpp).
#pragma once
#include <nccl_emulation.hpp>
