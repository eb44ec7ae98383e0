// tessera's generators against PyTorch's (torch.distributed.pipelining, 2.15), on the
// orders dumped by dump_pytorch_schedules.py into data/: p in {2,4,8}, stages per rank in
// {1,2,4}, m in 1..4p. Costs F=1, B=2, I=W=1 per full stage, divided by stages per rank.
#include <doctest/doctest.h>

#include <string>
#include <tessera/pipeline/pipeline.hpp>

#include "pytorch_cases.hpp"

using namespace tessera::pipeline;

TEST_CASE("PyTorch comparison: valid where PyTorch raises, memory and makespan no worse") {
  int compared = 0, torch_raised_ours_valid = 0, torch_invalid = 0;
  for (schedule_kind k : all_schedule_kinds) {
    const auto cases = tessera_test::read_pytorch_cases(tessera_test::data_file(TESSERA_PIPELINE_DATA, k));
    REQUIRE_MESSAGE(cases.size() == 3 * (8 + 16 + 32), "missing or truncated test data for " << schedule_name(k));
    for (const auto& c : cases) {
      INFO(schedule_name(k) << " p=" << c.p << " v=" << c.v << " m=" << c.m);
      const tessera_test::comparison r = tessera_test::compare(k, c);
      // We reject only what PyTorch rejects too (V shapes need 2 stages per rank).
      if (!r.ours_accepts) {
        CHECK(c.raises);
        continue;
      }
      REQUIRE(r.ours_valid);
      if (c.raises) {
        ++torch_raised_ours_valid;
        continue;
      }
      if (!r.torch_valid) {  // PyTorch 2.15's single-stage 1F1B order for the last rank
        ++torch_invalid;
        CHECK(k == schedule_kind::one_f_one_b);
        CHECK(r.ours_makespan == doctest::Approx(3.0 * (c.m + c.p - 1)));
        continue;
      }
      ++compared;
      CHECK(r.peak_no_worse);
      CHECK(r.ours_makespan <= r.torch_makespan + 1e-9);
    }
  }
  CHECK(compared > 400);
  CHECK(torch_raised_ours_valid > 300);
  CHECK(torch_invalid > 0);
}
