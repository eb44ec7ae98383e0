// The JSON reader (core/json.hpp): any bytes give a value or tessera::error naming the
// source; a value written by json::dump reads back equal; json::quote of any string reads
// back as that string.
#include <tessera/core/json.hpp>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  tessera::json::value v;
  if (fuzz_support::value_or_error([&] { v = tessera::json::parse(text, "fuzz.json"); }, "fuzz.json: invalid JSON at byte ")) {
    const std::string again = tessera::json::dump(v);
    tessera::json::value w;
    fuzz_support::require(fuzz_support::value_or_error([&] { w = tessera::json::parse(again, "dump"); }),
                          "json::dump wrote what json::parse refuses: " + again.substr(0, 200));
    fuzz_support::require(w == v, "json::dump then json::parse changed the value: " + again.substr(0, 200));
  }
  const tessera::json::value s = tessera::json::parse(tessera::json::quote(text), "quote");
  fuzz_support::require(s.is_string() && s.str == text, "json::quote then json::parse changed the string");
  return 0;
}
