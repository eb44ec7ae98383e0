// tessera/train/safetensors.hpp: moved to tessera/io/safetensors.hpp (namespace
// tessera::io::safetensors); this header keeps the old path and name working.
#pragma once

#include <tessera/io/safetensors.hpp>

namespace tessera::train {
namespace safetensors = ::tessera::io::safetensors;
}  // namespace tessera::train
