// tessera/tessera.hpp: everything in tessera that needs no external library.
// Backends that need MPI, NCCL, CUDA or OpenBLAS have their own headers and components.
#pragma once

#include <tessera/core/config.hpp>
#include <tessera/core/error.hpp>
#include <tessera/core/fixed_string.hpp>
