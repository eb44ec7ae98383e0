// Token files (io/token_file.hpp): the first byte picks the vocabulary size (0: unchecked,
// else 1..255), the rest is the file. It gives the tokens or tessera::error naming the
// file; write_token_file of what was read reads back equal.
#include <tessera/io/token_file.hpp>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::int64_t vocab = data[0];
  const auto path = fuzz_support::write_input("tokens.bin", data + 1, size - 1);
  std::vector<std::int32_t> t;
  if (!fuzz_support::value_or_error([&] { t = tessera::io::read_token_file(path, vocab); }, path.string())) return 0;
  fuzz_support::require(t.size() * 4 == size - 1, "the token count does not match the file size");
  const auto back_path = fuzz_support::scratch() / "back.bin";
  tessera::io::write_token_file(back_path, t);
  fuzz_support::require(tessera::io::read_token_file(back_path, vocab) == t, "write then read changed the tokens");
  return 0;
}
