// tessera/tessera.hpp: everything in tessera that needs no external library.
// Backends that need MPI, NCCL, CUDA or OpenBLAS have their own headers and components.
#pragma once

// core
#include <tessera/core/config.hpp>
#include <tessera/core/error.hpp>
#include <tessera/core/extents.hpp>
#include <tessera/core/fixed_string.hpp>
#include <tessera/core/source_location.hpp>

// layout
#include <tessera/layout/layout.hpp>
#include <tessera/layout/layout_spec.hpp>
#include <tessera/layout/local_shape.hpp>
#include <tessera/layout/mesh.hpp>
#include <tessera/layout/parse.hpp>
#include <tessera/layout/placement.hpp>
#include <tessera/layout/print.hpp>

// plan
#include <tessera/plan/collective.hpp>
#include <tessera/plan/cost_model.hpp>
#include <tessera/plan/plan.hpp>
#include <tessera/plan/planner.hpp>
