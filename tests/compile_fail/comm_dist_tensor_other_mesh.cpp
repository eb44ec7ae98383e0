// expect: tessera::dist_tensor::redistribute<L>: L must be a layout on this tensor's mesh
// max-errors: 1
#include <tessera/tensor/dist_tensor.hpp>
using namespace tessera;
// The target layout names a mesh with a "cp" axis; the tensor lives on (dp, tp): one message,
// not a "no matching function" wall from the result's constructor.
using M = mesh<axis<"dp", 2>, axis<"tp", 2>>;
using M2 = mesh<axis<"dp", 2>, axis<"cp", 2>>;
using A = layout_t<M, 2, shard<0>, replicate>;
using B = layout_t<M2, 2, shard<0>, replicate>;
void f(dist_tensor<float, A>& t) { auto u = t.redistribute<B>(); (void)u; }
