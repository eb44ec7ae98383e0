// A recipe's forward and backward on thread ranks against one rank's (reference.hpp): the
// loss and every gradient (relative to the tensor's largest entry) and the gradient norm.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include <tessera/comm/threads.hpp>
#include <tessera/train/parallel_llama.hpp>

#include "reference.hpp"

namespace equivalence {

/// Runs forward + backward of recipe R on `world` thread ranks of mesh `mesh_value`; every
/// rank checks the loss (to `loss_tol` relative), every gathered gradient and the norm (to
/// `tol`) against one rank's `ref`.
template <class R>
void check_recipe_against(const reference& ref, int world, const batch& b, double tol, typename R::mesh mesh_value,
                          double loss_tol = -1, const std::string& what = "") {
  if (loss_tol < 0) loss_tol = tol;
  comm::run_threads(world, [&](comm::threads_communicator& c) {
    device_mesh<typename R::mesh> dm(mesh_value, c);
    train::parallel_llama<R> pm(dm);
    pm.init_weights(11);
    pm.zero_grad();
    const float loss = pm.forward(b.in, b.tg, b.B, b.T);
    pm.backward();
    INFO(what, ": rank ", c.rank());
    CHECK(std::abs(loss - ref.loss) <= loss_tol * std::abs(ref.loss));
    double worst = 0;
    for (std::int64_t i = 0; i < pm.model().n_tensors(); ++i)
      worst = std::max(worst, max_rel(pm.full_grad(i), ref.grads[static_cast<std::size_t>(i)]));
    CHECK(worst <= tol);
    // the norm over the stored blocks equals the single-rank norm
    double sq = 0;
    for (const auto& g : ref.grads)
      for (float x : g) sq += static_cast<double>(x) * x;
    CHECK(std::abs(pm.grad_norm() - std::sqrt(sq)) <= tol * std::sqrt(sq));
  });
}
/// check_recipe_against the plain model on one rank.
template <class R>
void check_recipe(int world, const batch& b, double tol, typename R::mesh mesh_value, double loss_tol = -1,
                  const std::string& what = "") {
  check_recipe_against<R>(serial(R::model::config, b), world, b, tol, mesh_value, loss_tol, what);
}

}  // namespace equivalence
