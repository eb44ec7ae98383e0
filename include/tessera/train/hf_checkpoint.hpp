// tessera/train/hf_checkpoint.hpp: moved to tessera/io/hf_checkpoint.hpp (namespace
// tessera::io); this header keeps the old path and names working.
#pragma once

#include <tessera/io/hf_checkpoint.hpp>
#include <tessera/train/safetensors.hpp>

namespace tessera::train {
using io::hf_name;
using io::hf_shape;
using io::load_hf_checkpoint;
using io::load_hf_checkpoint_blocks;
using io::param_access;
using io::permute_rope_rows;
using io::save_hf_checkpoint;
using io::save_hf_checkpoint_streamed;
}  // namespace tessera::train
