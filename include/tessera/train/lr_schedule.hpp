// tessera/train/lr_schedule.hpp: learning-rate warmup and decay, as TorchTitan's
// `linear_warmup_stable_decay` (torchtitan/components/lr_scheduler.py) defines them for a
// zero-based step i: warmup factor (i + 1) / (warmup + 1) for i < warmup; afterwards
// progress p = (i - warmup) / (steps - warmup) and factor 1 (constant), 1 - p (linear) or
// (1 + cos(pi p)) / 2 (cosine), floored at min_lr_factor.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>

#include <tessera/core/error.hpp>

namespace tessera::train {

enum class lr_decay : std::uint8_t { constant, linear, cosine };

inline lr_decay parse_lr_decay(std::string_view s) {
  if (s == "constant") return lr_decay::constant;
  if (s == "linear") return lr_decay::linear;
  if (s == "cosine") return lr_decay::cosine;
  throw error("lr schedule '" + std::string(s) + "' is not one of constant|linear|cosine");
}

struct lr_schedule {
  double lr = 8e-4;
  std::int64_t warmup = 0;
  std::int64_t steps = 1;
  lr_decay decay = lr_decay::linear;
  double min_lr_factor = 0.0;

  /// Learning rate of zero-based step i.
  double at(std::int64_t i) const {
    if (i < warmup) return lr * static_cast<double>(i + 1) / static_cast<double>(warmup + 1);
    const std::int64_t decay_steps = steps - warmup;
    if (decay == lr_decay::constant || decay_steps <= 0) return lr;
    const double p = static_cast<double>(i - warmup) / static_cast<double>(decay_steps);
    double f = decay == lr_decay::linear ? 1.0 - p
                                         : 0.5 * (1.0 + std::cos(std::numbers::pi * p));
    f = min_lr_factor + (1.0 - min_lr_factor) * f;
    return lr * f;
  }
};

}  // namespace tessera::train
