#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <tessera/comm/flight_analyzer.hpp>
#include <tessera/comm/flight_recorder.hpp>
#include <tessera/comm/threads.hpp>
#include <vector>

using namespace tessera::comm;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

#include "failure.hpp"  // tests/support

namespace {
using recorder = flight_recorder<threads_communicator>;

fs::path fresh_dir(const std::string& name) {
  static std::atomic<int> n{0};
  auto d = fs::temp_directory_path() /
           ("tessera_flight_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

/// Runs `body` on `ranks` recorded ranks (fault injected inside), every rank dumps, and
/// returns the analyzer's report over all dumps.
template <class F>
flight_report run_and_analyze(int ranks, const std::string& name, F body) {
  const auto dir = fresh_dir(name);
  try {
    run_threads(ranks, [&](threads_communicator& c) {
      recorder rec(c, {.capacity = 64, .dump_dir = dir.string()});
      try {
        body(rec);
      } catch (...) {
        rec.dump();
        throw;
      }
      rec.dump();
    }, options{300ms});
  } catch (const error&) {  // the injected fault makes the job fail: that is the point
  }
  std::vector<flight_dump> dumps;
  for (const auto& f : fs::directory_iterator(dir)) dumps.push_back(load_flight_dump(f.path().string()));
  CHECK(dumps.size() == static_cast<std::size_t>(ranks));
  fs::remove_all(dir);
  return analyze_flight(dumps);
}

using testing_support::has;
std::string first(const flight_report& r) { return r.problems.empty() ? "" : r.problems.front(); }
}  // namespace

TEST_CASE("flight recorder: records op, group, sizes, sequence and caller location") {
  run_threads(2, [](threads_communicator& c) {
    recorder rec(c);
    std::vector<float> x(16, 1.0f), y(32);
    all_reduce(rec, std::span(x)).wait();
    all_gather(rec, std::span<const float>(x), std::span(y)).wait();
    auto sub = split(rec, {1, 0});
    all_reduce(sub, std::span(x), reduce_op::max).wait();
    const auto es = rec.entries();
    CHECK(es.size() == 3);
    CHECK(es[0].desc.str() == "all_reduce(count=16, f32, sum)");
    CHECK(es[0].seq == 0);
    CHECK(es[1].seq == 1);
    CHECK(es[1].desc.kind == call_kind::all_gather);
    CHECK(es[2].group == std::vector<int>{1, 0});
    CHECK(es[2].seq == 0);
    CHECK(es[2].desc.op == reduce_op::max);
    CHECK(es[0].state == "completed");
    CHECK(es[0].end_us >= es[0].start_us);
    CHECK(es[0].start_us >= es[0].enqueue_us);
    CHECK(has(es[0].file, "test_flight.cpp"));
    // the dump parses back to the same entries
    const auto d = parse_flight_dump(rec.json(), "mem");
    CHECK(d.rank == c.rank());
    CHECK(d.entries.size() == 3);
    CHECK(d.entries[2].group == std::vector<int>{1, 0});
    CHECK(d.entries[1].line == es[1].line);
  });
}

TEST_CASE("flight recorder: the ring keeps the newest entries") {
  run_threads(2, [](threads_communicator& c) {
    recorder rec(c, {.capacity = 4});
    std::vector<float> x(4);
    for (int i = 0; i < 10; ++i) all_reduce(rec, std::span(x)).wait();
    const auto es = rec.entries();
    CHECK(es.size() == 4);
    CHECK(es.front().seq == 6);
    CHECK(es.back().seq == 9);
    const auto d = parse_flight_dump(rec.json(), "mem");
    CHECK(d.dropped());
  });
}

TEST_CASE("flight analyzer: a clean run has no problem") {
  auto rep = run_and_analyze(3, "clean", [](recorder& rec) {
    std::vector<float> x(8);
    for (int i = 0; i < 5; ++i) all_reduce(rec, std::span(x)).wait();
    rec.barrier().wait();
  });
  CHECK(rep.ok());
  CHECK(rep.notes.empty());
}

TEST_CASE("flight analyzer: a rank skips the last all_reduce") {
  auto rep = run_and_analyze(4, "skip_last", [](recorder& rec) {
    std::vector<float> x(256);
    for (int i = 0; i < 3; ++i)
      if (i < 2 || rec.rank() != 2) all_reduce(rec, std::span(x)).wait();
  });
  CHECK(has(first(rep), "rank(s) 2 did not join collective #2 of group [0,1,2,3]: all_reduce(count=256, f32, sum)"));
  CHECK(has(first(rep), "called by rank(s) 0,1,3 at"));
}

TEST_CASE("flight analyzer: a rank skips an all_reduce and goes on") {
  auto rep = run_and_analyze(4, "skip_mid", [](recorder& rec) {
    std::vector<float> x(256), y(1024);
    if (rec.rank() != 1) all_reduce(rec, std::span(x)).wait();
    all_gather(rec, std::span<const float>(x), std::span(y)).wait();
  });
  // the backend stops the others at the mismatch, so only rank 1's next call is known
  CHECK(has(first(rep), "rank 1 disagrees with rank(s) 0,2,3 on collective #0 of group [0,1,2,3]: "
                        "it called all_gather(count=256, f32)"));
  CHECK(has(first(rep), "where they called all_reduce(count=256, f32, sum)"));
  CHECK(has(first(rep), "did rank 1 skip that all_reduce?"));
}

TEST_CASE("flight analyzer: a rank skips a collective that the others get past") {
  // Dumps as a backend without mismatch detection leaves them (NCCL: the others' all_gather
  // ran on a later call): rank 1 skipped all_reduce #1, so its #1 is the others' #2.
  std::vector<flight_dump> dumps;
  for (int r = 0; r < 3; ++r) {
    flight_dump d;
    d.rank = r;
    d.source = "rank" + std::to_string(r);
    d.capacity = 64;
    auto add = [&](call_kind k, std::uint64_t seq) {
      flight_entry e;
      e.group = {0, 1, 2};
      e.seq = seq;
      e.desc = {k, 8, dtype::f32};
      e.state = "completed";
      e.file = "train.cpp";
      e.line = static_cast<std::uint32_t>(10 + static_cast<int>(k));
      d.entries.push_back(e);
    };
    add(call_kind::all_reduce, 0);
    if (r != 1) add(call_kind::all_reduce, 1);
    add(call_kind::all_gather, r != 1 ? 2 : 1);
    d.recorded = d.entries.size();
    dumps.push_back(d);
  }
  auto rep = analyze_flight(dumps);
  CHECK(first(rep) == "rank 1 did not join collective #1 of group [0,1,2]: all_reduce(count=8, f32, sum), "
                      "called by rank(s) 0,2 at train.cpp:12; rank 1 went on to all_gather(count=8, f32) "
                      "at train.cpp:10");
}

TEST_CASE("flight analyzer: two ranks swap the order of two collectives") {
  auto rep = run_and_analyze(4, "swap", [](recorder& rec) {
    std::vector<float> x(64), y(256);
    auto ar = [&] { all_reduce(rec, std::span(x)).wait(); };
    auto ag = [&] { all_gather(rec, std::span<const float>(x), std::span(y)).wait(); };
    rec.barrier().wait();
    if (rec.rank() < 2) { ar(); ag(); } else { ag(); ar(); }
  });
  CHECK(has(first(rep), "ranks disagree on collective #1 of group [0,1,2,3]"));
  CHECK(has(first(rep), "rank(s) 0,1 called all_reduce(count=64, f32, sum)"));
  CHECK(has(first(rep), "rank(s) 2,3 called all_gather(count=64, f32)"));
}

TEST_CASE("flight analyzer: a pipeline send with no matching recv") {
  auto rep = run_and_analyze(3, "p2p", [](recorder& rec) {
    // a 3-stage pipeline: activations flow 0 -> 1 -> 2, two microbatches; stage 2
    // forgets the second recv from stage 1
    std::vector<float> act(128);
    const int r = rec.rank();
    for (int mb = 0; mb < 2; ++mb) {
      if (r > 0 && !(r == 2 && mb == 1)) recv(rec, std::span(act), r - 1).wait();
      if (r < 2) send(rec, std::span<const float>(act), r + 1).wait();
    }
  });
  CHECK(has(first(rep), "send #1 from rank 1 to rank 2 (tag 0, group [0,1,2]), send(count=128, f32, peer=2, tag=0)"));
  CHECK(has(first(rep), "has no matching recv on rank 2"));
  bool stuck = false;
  for (auto& n : rep.notes) stuck = stuck || has(n, "rank 1: send(count=128, f32, peer=2, tag=0) #1");
  CHECK(stuck);
}

TEST_CASE("flight analyzer: bad dumps are named") {
  CHECK_THROWS_WITH(parse_flight_dump("{\"rank\": 0", "r0.json"), doctest::Contains("r0.json: invalid JSON"));
  CHECK_THROWS_WITH(parse_flight_dump("{\"ranks\": 0}", "r1.json"),
                    doctest::Contains("r1.json: field \"rank\" is missing"));
  CHECK_THROWS_WITH(load_flight_dump("/nonexistent/flight_rank0.json"), doctest::Contains("cannot open"));
  flight_dump a, b;
  a.source = "a.json";
  b.source = "b.json";
  CHECK_THROWS_WITH(analyze_flight({a, b}), doctest::Contains("a second dump of rank 0"));
}
