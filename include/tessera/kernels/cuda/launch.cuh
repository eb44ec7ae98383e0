// tessera/kernels/cuda/launch.cuh: TESSERA_LAUNCH(grid, block, shared_bytes, stream, kernel)(args...)
// is kernel<<<grid, block, shared_bytes, stream>>>(args...). The kernels' launches are spelled
// as this macro so that a host compiler runs them too, through the CUDA emulation of
// tests/support/cuda_emulation.hpp, which defines the macro before this header is included
// (docs/cuda.md, "Device code on the host"). The kernel comes last because a template-id's
// commas would otherwise split the macro's arguments.
// tessera-requires: cuda (compiled by nvcc, or a host compiler under the emulation)
#pragma once

#ifndef TESSERA_LAUNCH
#define TESSERA_LAUNCH(grid, block, shared_bytes, stream, ...) __VA_ARGS__<<<grid, block, shared_bytes, stream>>>
#endif
