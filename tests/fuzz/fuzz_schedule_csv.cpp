// Pipeline schedule CSV (pipeline/io.hpp): any text gives a schedule or schedule_error;
// read_csv(to_csv(s)) equals s (ranks, actions, stage placement); verify, simulate and
// format_grid run on it within memory bounded by read_csv's pair limit.
#include <tessera/pipeline/pipeline.hpp>

#include "fuzz_support.hpp"

namespace tp = tessera::pipeline;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  tp::schedule s;
  if (!fuzz_support::value_or_error([&] { s = tp::read_csv(text); }, "schedule CSV")) return 0;
  const std::string csv = tp::to_csv(s);
  tp::schedule back;
  fuzz_support::require(fuzz_support::value_or_error([&] { back = tp::read_csv(csv); }), "to_csv wrote what read_csv refuses");
  fuzz_support::require(back.ranks == s.ranks && back.actions == s.actions && back.stage_rank == s.stage_rank &&
                            back.stages == s.stages && back.microbatches == s.microbatches && back.place == s.place,
                        "read_csv(to_csv(s)) differs from s");
  fuzz_support::value_or_error([&] {
    const tp::verify_result v = tp::verify(s);
    if (v.ok) (void)tp::simulate(s, tp::costs{});
    (void)tp::format_grid(s);
  });
  return 0;
}
