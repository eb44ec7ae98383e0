// The meshes and layout lists the dist_tensor tests run over (threads and mpi).
#pragma once

#include "dist_checks.hpp"

namespace dist_layouts {
using namespace tessera;

using M1 = mesh<axis<"x", 4>>;
using L1 = dist_checks::layouts<replicated_t<M1, 2>, layout_t<M1, 2, dim<0, "x">>, layout_t<M1, 2, dim<1, "x">>,
                                layout_t<M1, 2, partial_on<reduce::sum, "x">>,
                                layout_t<M1, 2, partial_on<reduce::max, "x">>,
                                layout_t<M1, 2, partial_on<reduce::avg, "x">>,
                                layout_t<M1, 2, partial_on<reduce::min, "x">>>;

using M2 = mesh<axis<"a", 2>, axis<"b", 3>>;
using L2 = dist_checks::layouts<
    replicated_t<M2, 2>, layout_t<M2, 2, dim<0, "a">>, layout_t<M2, 2, dim<1, "b">>,
    layout_t<M2, 2, dim<0, "a", "b">>, layout_t<M2, 2, dim<0, "b", "a">>, layout_t<M2, 2, dim<1, "a", "b">>,
    layout_t<M2, 2, dim<0, "a">, dim<1, "b">>, layout_t<M2, 2, dim<0, "b">, dim<1, "a">>,
    layout_t<M2, 2, partial_on<reduce::sum, "a">>, layout_t<M2, 2, partial_on<reduce::sum, "a", "b">>,
    layout_t<M2, 2, dim<0, "a">, partial_on<reduce::sum, "b">>>;

using M3 = mesh<axis<"p", 2>, axis<"q", 2>, axis<"r", 2>>;
using L3 = dist_checks::layouts<
    replicated_t<M3, 3>, layout_t<M3, 3, dim<0, "p", "q", "r">>, layout_t<M3, 3, dim<2, "r", "q", "p">>,
    layout_t<M3, 3, dim<0, "p">, dim<1, "q">, dim<2, "r">>, layout_t<M3, 3, dim<0, "r">, dim<1, "p">, dim<2, "q">>,
    layout_t<M3, 3, dim<1, "q", "p">, partial_on<reduce::sum, "r">>,
    layout_t<M3, 3, partial_on<reduce::sum, "p", "q", "r">>>;
}  // namespace dist_layouts

namespace dist_layouts {
// a 2 x 2 mesh for the mpi tests (run with 4 processes)
using M22 = mesh<axis<"a", 2>, axis<"b", 2>>;
using L22 = dist_checks::layouts<
    replicated_t<M22, 2>, layout_t<M22, 2, dim<0, "a", "b">>, layout_t<M22, 2, dim<0, "b", "a">>,
    layout_t<M22, 2, dim<0, "a">, dim<1, "b">>, layout_t<M22, 2, dim<1, "a", "b">>,
    layout_t<M22, 2, partial_on<reduce::sum, "a", "b">>, layout_t<M22, 2, dim<1, "a">, partial_on<reduce::sum, "b">>>;
}  // namespace dist_layouts
