// safetensors (io/safetensors.hpp): any file gives a reader or tessera::error naming the
// file; every tensor of a reader reads (its data lies in the file); what the writer writes
// from the tensors read (F32 as F32, BF16 as BF16, F16 as F32) reads back equal: names,
// shapes, metadata and values (NaNs as NaNs).
#include <cmath>
#include <cstring>
#include <vector>

#include <tessera/io/safetensors.hpp>

#include "fuzz_support.hpp"

namespace st = tessera::io::safetensors;

namespace {
bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = fuzz_support::write_input("in.safetensors", data, size);
  std::unique_ptr<st::reader> r;
  if (!fuzz_support::value_or_error([&] { r = std::make_unique<st::reader>(path); }, path.string())) return 0;
  st::writer w;
  std::vector<std::vector<float>> values;
  for (const auto& t : r->tensors()) {
    std::vector<float> v(static_cast<std::size_t>(t.numel()));
    fuzz_support::require(fuzz_support::value_or_error([&] { r->read_f32(t.name, t.shape, v); }),
                          "a tensor the reader accepted does not read: " + t.name);
    w.add(t.name, t.shape, v, t.type == st::dtype::bf16 ? st::dtype::bf16 : st::dtype::f32);
    values.push_back(std::move(v));
  }
  for (const auto& [k, v] : r->metadata()) w.add_metadata(k, v);
  const auto back_path = fuzz_support::scratch() / "back.safetensors";
  w.write(back_path);
  st::reader back(back_path);
  fuzz_support::require(back.tensors().size() == r->tensors().size(), "the round trip changed the tensor count");
  fuzz_support::require(back.metadata() == r->metadata(), "the round trip changed the metadata");
  for (std::size_t i = 0; i < r->tensors().size(); ++i) {
    const auto& a = r->tensors()[i];
    const auto& b = back.tensors()[i];
    fuzz_support::require(a.name == b.name && a.shape == b.shape, "the round trip changed tensor " + a.name);
    std::vector<float> v(values[i].size());
    back.read_f32(b.name, b.shape, v);
    for (std::size_t j = 0; j < v.size(); ++j)
      fuzz_support::require(same(v[j], values[i][j]), "the round trip changed a value of " + a.name);
  }
  return 0;
}
