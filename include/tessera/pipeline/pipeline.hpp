// tessera/pipeline/pipeline.hpp: the whole pipeline layer (IR, generators, verifier,
// simulator, lowering, compile-time entry points, text and SVG output).
#pragma once

#include <tessera/pipeline/action.hpp>
#include <tessera/pipeline/checked.hpp>
#include <tessera/pipeline/generators.hpp>
#include <tessera/pipeline/io.hpp>
#include <tessera/pipeline/lower.hpp>
#include <tessera/pipeline/schedule.hpp>
#include <tessera/pipeline/simulate.hpp>
#include <tessera/pipeline/svg.hpp>
#include <tessera/pipeline/verify.hpp>
