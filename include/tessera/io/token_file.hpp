// tessera/io/token_file.hpp: token files, raw little-endian int32 ids (llm.c's and
// nanoGPT's .bin data without a header). Readers check the size and every id and throw
// tessera::error naming the file; the writer writes to a temporary name, then renames.
#pragma once

#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include <tessera/core/atomic_file.hpp>
#include <tessera/core/error.hpp>

namespace tessera::io {

/// Reads a file of raw little-endian int32 tokens. Throws on a missing, empty or
/// odd-sized file, and on negative ids or ids >= vocab_size (when vocab_size > 0).
inline std::vector<std::int32_t> read_token_file(const std::filesystem::path& path,
                                                 std::int64_t vocab_size = 0) {
  check(std::endian::native == std::endian::little,
        "tokens: tessera reads token files on little-endian hosts only");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw error("tokens: cannot open '" + path.string() + "': no such file");
  const auto bytes = std::filesystem::file_size(path, ec);
  if (bytes == 0) throw error("tokens: '" + path.string() + "' is empty");
  if (bytes % 4 != 0)
    throw error("tokens: '" + path.string() + "' has " + std::to_string(bytes) +
                " bytes, not a multiple of 4; expected raw little-endian int32 tokens");
  std::vector<std::int32_t> out(bytes / 4);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(bytes));
  if (!in) throw error("tokens: reading '" + path.string() + "' failed");
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] < 0 || (vocab_size > 0 && out[i] >= vocab_size))
      throw error("tokens: '" + path.string() + "': token " + std::to_string(i) + " is " +
                  std::to_string(out[i]) + ", outside the vocabulary [0, " +
                  std::to_string(vocab_size) + ")");
  }
  return out;
}

/// Writes tokens as raw little-endian int32 (to a temporary name, then renamed).
inline void write_token_file(const std::filesystem::path& path,
                             std::span<const std::int32_t> tokens) {
  write_file_atomically(path, [&](std::ofstream& out) {
    out.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size_bytes()));
  }, "tokens");
}

}  // namespace tessera::io
