// tessera/train/tokenizer.hpp: moved to tessera/io/tokenizer.hpp (namespace tessera::io);
// this header keeps the old path and names working.
// tessera-requires: sentencepiece
#pragma once

#include <tessera/io/tokenizer.hpp>

namespace tessera::train {
using io::default_fortunes_dir;
using io::read_fortunes;
using io::read_text_documents;
using io::tokenizer;
using io::train_bpe_once;
}  // namespace tessera::train
