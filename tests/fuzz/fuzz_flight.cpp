// Flight-recorder dumps (comm/flight_analyzer.hpp): any text gives a dump or tessera::error
// naming the source; to_json of a dump reads back equal; analyze_flight on the dump (and on
// a second one, when the input holds two separated by a NUL byte) returns a report or
// tessera::error, in time proportional to the entries (no loop over sequence numbers).
#include <tessera/comm/flight_analyzer.hpp>

#include "fuzz_support.hpp"

using namespace tessera::comm;

namespace {
bool same(const flight_dump& a, const flight_dump& b) {
  if (a.rank != b.rank || a.world_size != b.world_size || a.backend != b.backend || a.recorded != b.recorded ||
      a.capacity != b.capacity || a.entries.size() != b.entries.size())
    return false;
  for (std::size_t i = 0; i < a.entries.size(); ++i) {
    const auto& x = a.entries[i];
    const auto& y = b.entries[i];
    if (x.id != y.id || x.group != y.group || x.seq != y.seq || !(x.desc == y.desc) || x.state != y.state ||
        x.error != y.error || x.enqueue_us != y.enqueue_us || x.start_us != y.start_us || x.end_us != y.end_us ||
        x.file != y.file || x.line != y.line || x.function != y.function)
      return false;
  }
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t cut = all.find('\0');
  std::vector<flight_dump> dumps;
  for (const std::string_view text : {all.substr(0, cut), cut == std::string_view::npos ? std::string_view{} : all.substr(cut + 1)}) {
    if (!dumps.empty() && cut == std::string_view::npos) break;
    const std::string source = "rank" + std::to_string(dumps.size()) + ".json";
    flight_dump d;
    if (!fuzz_support::value_or_error([&] { d = parse_flight_dump(text, source); }, source)) return 0;
    const flight_dump back = parse_flight_dump(to_json(d), source);
    fuzz_support::require(same(d, back), "to_json then parse_flight_dump changed the dump");
    dumps.push_back(std::move(d));
  }
  fuzz_support::value_or_error([&] { (void)analyze_flight(dumps); });
  return 0;
}
