// Layout strings (layout/parse.hpp): the first byte picks the tensor rank (0..8) and the
// mesh (1..4 axes); the rest is the text. It gives a layout or tessera::error quoting the
// text; a layout printed in either notation parses back equal.
#include <tessera/layout/parse.hpp>
#include <tessera/layout/print.hpp>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int rank = data[0] % 9;
  const std::size_t axes = 1 + (data[0] / 9) % 4;
  static constexpr std::string_view all_names[] = {"dp", "tp", "pp", "cp"};
  const std::span<const std::string_view> names(all_names, axes);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  tessera::layout_spec s;
  if (!fuzz_support::value_or_error([&] { s = tessera::parse_layout(text, names, rank); }, "layout '")) return 0;
  const std::string canonical = tessera::to_canonical_string(s, names);
  const std::string dtensor = tessera::to_dtensor_string(s);
  tessera::layout_spec a, b;
  fuzz_support::require(fuzz_support::value_or_error([&] { a = tessera::parse_layout(canonical, names, rank); }),
                        "the canonical print does not parse: " + canonical);
  fuzz_support::require(a == s, "canonical print then parse changed the layout: " + canonical);
  fuzz_support::require(fuzz_support::value_or_error([&] { b = tessera::parse_layout(dtensor, names, rank); }),
                        "the DTensor print does not parse: " + dtensor);
  fuzz_support::require(b == s, "DTensor print then parse changed the layout: " + dtensor);
  return 0;
}
