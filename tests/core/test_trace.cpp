// core/trace.hpp: scopes record only when bound, on the bound track, nested in time;
// the JSON is the Chrome trace event format; comm/flight_trace.hpp adds a rank's calls.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <tessera/comm/flight_trace.hpp>
#include <tessera/comm/threads.hpp>
#include <tessera/core/trace.hpp>

#include "failure.hpp"

namespace {
using namespace tessera;
using testing_support::has;

void work(int block) {
  trace::scope s("forward", "block", block);
  std::this_thread::sleep_for(std::chrono::microseconds(200));
}
}  // namespace

TEST_CASE("trace: a scope records nothing when no recorder is bound") {
  CHECK(!trace::enabled());
  trace::recorder r;
  { trace::scope s("step"); }
  work(0);
  CHECK(r.size() == 0);
  {
    trace::bind b(&r, 2, 0);
    CHECK(trace::enabled());
  }
  CHECK(!trace::enabled());  // the binding ends with its scope
  { trace::scope s("after"); }
  CHECK(r.size() == 0);
}

TEST_CASE("trace: bound scopes record on their track, nested in time, with their argument") {
  trace::recorder r;
  {
    trace::bind b(&r, 3, 1);
    trace::scope step("step", "step", 7);
    work(0);
    work(1);
  }
  const auto ev = r.events();
  REQUIRE(ev.size() == 3);
  // Events are added as scopes end: the blocks first, then the step that encloses them.
  CHECK(ev[0].name == "forward");
  CHECK(ev[0].cat == "block");
  REQUIRE(ev[0].args.size() == 1);
  CHECK(ev[0].args[0] == std::pair<std::string, std::int64_t>{"block", 0});
  CHECK(ev[1].args[0].second == 1);
  CHECK(ev[2].name == "step");
  CHECK(ev[2].args[0].second == 7);
  for (const auto& e : ev) {
    CHECK(e.pid == 3);
    CHECK(e.tid == 1);
  }
  CHECK(ev[0].dur_us >= 200);
  CHECK(ev[1].ts_us >= ev[0].ts_us + ev[0].dur_us);
  CHECK(ev[2].ts_us <= ev[0].ts_us);
  CHECK(ev[2].ts_us + ev[2].dur_us >= ev[1].ts_us + ev[1].dur_us);
}

TEST_CASE("trace: threads bound to different tracks record into one recorder") {
  trace::recorder r;
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 4; ++rank)
    ranks.emplace_back([&r, rank] {
      trace::bind b(&r, rank, 0);
      for (int i = 0; i < 10; ++i) work(i);
    });
  for (auto& t : ranks) t.join();
  const auto ev = r.events();
  REQUIRE(ev.size() == 40);
  int per_rank[4] = {};
  for (const auto& e : ev) ++per_rank[e.pid];
  for (int n : per_rank) CHECK(n == 10);
}

TEST_CASE("trace: the JSON has the track names, the events relative to the origin, escaped text") {
  trace::recorder r;
  r.name_track(0, -1, "rank 0");
  r.name_track(0, 0, "compute");
  r.set_origin(1000);
  r.add({"a \"quoted\"\\name\n", "compute", 0, 0, 1500, 25, {{"block", 3}}, {{"where", "x.cpp:1"}}});
  const std::string j = r.json({"{\"ph\": \"X\", \"name\": \"other\", \"pid\": 1, \"tid\": 0, \"ts\": 0, \"dur\": 1}"});
  CHECK(has(j, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n"));
  CHECK(has(j, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, \"args\": {\"name\": \"rank 0\"}}"));
  CHECK(has(j, "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": 0, \"args\": {\"name\": \"compute\"}}"));
  CHECK(has(j, "{\"ph\": \"X\", \"name\": \"a \\\"quoted\\\"\\\\name\\n\", \"cat\": \"compute\", \"pid\": 0, \"tid\": 0, "
               "\"ts\": 500, \"dur\": 25, \"args\": {\"block\": 3, \"where\": \"x.cpp:1\"}}"));
  CHECK(has(j, "\"name\": \"other\""));  // merged from another process
  CHECK(j.substr(j.size() - 4) == "\n]}\n");
  CHECK(json::quote(std::string("\x01", 1)) == "\"\\u0001\"");  // the writer trace::recorder uses
}

TEST_CASE("trace: write goes through a temporary name; a missing folder is a clear error") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "tessera_test_trace";
  fs::create_directories(dir);
  trace::recorder r;
  r.add({"step", "step", 0, 0, 10, 5, {}, {}});
  r.write(dir / "t.json");
  std::stringstream text;
  text << std::ifstream(dir / "t.json").rdbuf();
  CHECK(text.str() == r.json());
  for (const auto& f : fs::directory_iterator(dir)) CHECK(f.path().filename() == "t.json");  // no temporary left
  CHECK(has(testing_support::failure_of<error>([&] { r.write(dir / "missing" / "t.json"); }),
            "trace: cannot create"));
  fs::remove_all(dir);
}

TEST_CASE("trace: a rank's recorded collectives become events on its track") {
  trace::recorder r;
  comm::run_threads(2, [&](comm::threads_communicator& c) {
    comm::flight_recorder rec(c, {.capacity = 64, .dump_on_error = false});
    std::vector<float> x(8, 1.0f), y(16);
    rec.all_gather(x.data(), y.data(), 8, comm::dtype::f32).wait();
    const std::uint64_t since = rec.recorded();
    rec.all_reduce(x.data(), x.data(), 8, comm::dtype::f32, comm::reduce_op::sum).wait();
    rec.barrier().wait();
    comm::add_to_trace(r, rec.entries(), c.rank(), 1, since);  // the all_gather is before `since`
  });
  const auto ev = r.events();
  REQUIRE(ev.size() == 4);
  for (const auto& e : ev) {
    CHECK(e.tid == 1);
    CHECK(e.cat == "collective");
    CHECK((e.name == "all_reduce" || e.name == "barrier"));
    CHECK(e.dur_us >= 0);
    if (e.name == "all_reduce") {
      CHECK(e.args[0] == std::pair<std::string, std::int64_t>{"count", 8});
      CHECK(e.args[2] == std::pair<std::string, std::int64_t>{"bus_bytes", 32});  // 2 S (n-1)/n
      bool op = false;
      for (const auto& [k, v] : e.text) op = op || (k == "op" && v == "sum");
      CHECK(op);
    }
  }
}
