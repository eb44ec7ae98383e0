// Hugging Face index files (model.safetensors.index.json, io/hf_checkpoint.hpp): any text
// gives a tensor -> file map or tessera::error naming the index; every file of the map
// lies in the index's folder.
#include <tessera/io/hf_checkpoint.hpp>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::filesystem::path index = "/ckpt/model.safetensors.index.json";
  std::map<std::string, std::filesystem::path> m;
  if (!fuzz_support::value_or_error([&] { m = tessera::io::detail::index_files(text, index); }, index.string())) return 0;
  for (const auto& [name, file] : m) {
    fuzz_support::require(!name.empty(), "an empty tensor name was accepted");
    const auto rel = file.lexically_relative("/ckpt");
    fuzz_support::require(!rel.empty() && *rel.begin() != "..", "a file outside the folder was accepted: " + file.string());
  }
  return 0;
}
