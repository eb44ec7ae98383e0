// tessera/model/detail/init.hpp: seeded normal and truncated-normal fills for weight init.
//
// mt19937_64 is fully specified by the standard, and the normal deviates come from our own
// Box-Muller transform (std::normal_distribution is implementation-defined), so a seed
// gives the same weights with every compiler and standard library.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace tessera::detail {

class normal_source {
 public:
  explicit normal_source(std::uint64_t seed) : rng_(seed) {}

  double uniform() {  // in (0, 1)
    return (static_cast<double>(rng_() >> 11) + 0.5) * 0x1p-53;
  }
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = uniform(), u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * std::numbers::pi * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * std::numbers::pi * u2);
  }
  /// Normal(mean, std) restricted to [a, b] by rejection (as torch.nn.init.trunc_normal_,
  /// whose bounds a, b are absolute values, not multiples of std).
  double trunc_normal(double mean, double std, double a, double b) {
    for (;;) {
      const double x = mean + std * normal();
      if (x >= a && x <= b) return x;
    }
  }

 private:
  std::mt19937_64 rng_;
  double spare_ = 0;
  bool has_spare_ = false;
};

/// A seed per parameter tensor, so that each tensor's values depend only on (seed, index)
/// and not on the order of initialization (or on which rank initializes it).
constexpr std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace tessera::detail
