// CSV and grid in PyTorch's formats; SVG output; atomic writes.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <tessera/pipeline/pipeline.hpp>

using namespace tessera::pipeline;

TEST_CASE("CSV round trip, lowered and FSDP actions included") {
  for (schedule_kind k : all_schedule_kinds) {
    const schedule s = lower(generate(k, 4, 2, 5), {.fsdp = true});
    const schedule back = read_csv(to_csv(s));
    CHECK(back.actions == s.actions);
    CHECK(back.stage_rank == s.stage_rank);
    CHECK(back.place == s.place);
  }
}

TEST_CASE("CSV: PyTorch's idle cells, overlap pairs and WAIT actions parse") {
  const schedule s = read_csv(",1F0,(1F1;2B0)OVERLAP_F_B,1WAIT_SEND_F0,,\r\n0F0,0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n");
  REQUIRE(s.ranks == 2);
  CHECK(s.actions[0].size() == 4);
  CHECK(s.actions[0][1] == action{op::F, 1, 1});
  CHECK(s.actions[0][2] == action{op::B, 2, 0});
  CHECK(s.actions[1][2] == action{op::WAIT_REDUCE_GRAD, 0, -1});
}

TEST_CASE("CSV: bad cells are named") {
  try {
    (void)read_csv("0F0,0B0\n1F0,1Q0\n");
    FAIL("expected an error");
  } catch (const schedule_error& e) {
    const std::string what = e.what();
    CHECK(what.find("line 2 (rank 1), cell 2") != std::string::npos);
  }
  CHECK_THROWS_AS((void)read_csv(""), schedule_error);
}

TEST_CASE("grid: PyTorch's _format_pipeline_order layout") {
  const schedule s = read_csv("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  // Strings printed by PyTorch 2.15's _format_pipeline_order for the same orders.
  const std::string expected =
      "        Rank 0 Rank 1\nStep 0: 0F0    1F0   \nStep 1: 0F1    1B0   \nStep 2: 0B0    1F1   \n"
      "Step 3: 0B1    1B1   \n";
  const schedule t = read_csv("0F0,0SEND_F0,0F1,0B0\n1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3,1F4,1B4,1F5\n");
  CHECK(format_grid(t) ==
        "         Rank 0   Rank 1 \nStep 00: 0F0      1F0    \nStep 01: 0SEND_F0 1B0    \nStep 02: 0F1      1F1    \n"
        "Step 03: 0B0      1B1    \nStep 04:          1F2    \nStep 05:          1B2    \nStep 06:          1F3    \n"
        "Step 07:          1B3    \nStep 08:          1F4    \nStep 09:          1B4    \nStep 10:          1F5    \n");
  CHECK(format_grid(s) == expected);
}

TEST_CASE("SVG: one box per compute action, written atomically") {
  const schedule s = dualpipe_v(2, 4);
  const simulation sim = simulate(s);
  const std::string svg = to_svg(s, sim, "DualPipeV p=2 m=4");
  std::size_t boxes = 0;
  for (std::size_t at = svg.find("<rect x="); at != std::string::npos; at = svg.find("<rect x=", at + 1)) ++boxes;
  CHECK(boxes == s.size());
  const auto dir = std::filesystem::temp_directory_path() / "tessera_pipeline_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "t.svg").string();
  write_file_atomic(path, svg);
  CHECK(read_file(path) == svg);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  const std::string bad = (dir / "no/such/folder/x.svg").string();
  CHECK_THROWS_AS(write_file_atomic(bad, svg), schedule_error);
  // the path and the failure, without a tool's name (tessera-schedule adds its own)
  const std::string why = "writing " + bad + ": cannot create '" + bad + ".tmp.";
  CHECK_THROWS_WITH(write_file_atomic(bad, svg), doctest::Contains(why.c_str()));
  std::filesystem::remove_all(dir);
}
