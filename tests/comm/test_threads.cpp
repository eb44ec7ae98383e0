#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <tessera/comm/threads.hpp>
#include <vector>

#include "checks.hpp"

using namespace tessera::comm;
using namespace std::chrono_literals;

#include "failure.hpp"  // tests/support

namespace {
std::string failure_of(int ranks, auto fn, std::chrono::milliseconds timeout = 2000ms) {
  try {
    run_threads(ranks, fn, options{timeout});
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
using testing_support::has;
}  // namespace

TEST_CASE("threads: every collective on 1 to 8 ranks, all sizes, dtypes and ops") {
  for (int n : {1, 2, 3, 4, 8}) {
    CAPTURE(n);
    // The three data paths: counts 1 and 37 are staged at issue (eager), 5000 floats are
    // over detail::eager_bytes and pulled by their owner, and 70000 floats are two 256 KiB
    // chunks per block (all_gather, all_reduce, broadcast; all_to_all on 4 and 8 ranks);
    // all_to_all and reduce_scatter are pulled up to a larger output, so 300000 floats
    // chunk them on 2 and 3 ranks too.
    static_assert(37 * 8 * 8 <= detail::eager_bytes && 5000 * 4 > detail::eager_bytes);
    static_assert(70'000 * 4 > detail::pull_bytes && 70'000 * 4 * 4 > detail::pull_exchange_bytes &&
                  300'000 * 4 > detail::pull_exchange_bytes);
    CHECK_NOTHROW(run_threads(n, [n](threads_communicator& c) {
      checks::everything(c, 5'000);
      checks::everything(c, 70'000);
      if (n == 2 || n == 3) checks::everything(c, 300'000);
    }));
  }
}

TEST_CASE("threads: asynchronous calls, many in flight, waited in any order") {
  CHECK_NOTHROW(run_threads(4, [](threads_communicator& c) {
    constexpr int calls = 3 * detail::slots_per_group + 1;  // more than the slots
    std::vector<std::vector<float>> bufs(calls, std::vector<float>(1000));
    std::vector<threads_request> reqs;
    for (int k = 0; k < calls; ++k) {
      std::fill(bufs[static_cast<std::size_t>(k)].begin(), bufs[static_cast<std::size_t>(k)].end(),
                static_cast<float>(k + c.rank()));
      reqs.push_back(all_reduce(c, std::span(bufs[static_cast<std::size_t>(k)])));
    }
    for (int k = calls - 1; k >= 0; --k) reqs[static_cast<std::size_t>(k)].wait();
    for (int k = 0; k < calls; ++k)
      EXPECT(bufs[static_cast<std::size_t>(k)][999] == static_cast<float>(4 * k + 6),
                     "in-flight all_reduce " + std::to_string(k));
    // test() polls without blocking and completes
    std::vector<float> x(10, 1.0f);
    auto r = all_reduce(c, std::span(x));
    while (!r.test()) {}
    EXPECT(x[0] == 4.0f, "polled all_reduce");
    // a pulled call polled once (it may have done this rank's part), then left while more
    // calls than the slots are issued: the later issue finishes it without redoing it
    std::vector<float> in(5000, static_cast<float>(c.rank())), out(4 * 5000);
    auto g = all_gather(c, std::span<const float>(in), std::span(out));
    (void)g.test();
    for (int k = 0; k < detail::slots_per_group; ++k) all_reduce(c, std::span(x)).wait();
    g.wait();
    for (int q = 0; q < 4; ++q) EXPECT(out[static_cast<std::size_t>(q) * 5000 + 4999] == static_cast<float>(q), "gather after slots reused");
  }));
}

TEST_CASE("threads: sub-communicators of mesh rows, columns and any ordered list") {
  CHECK_NOTHROW(run_threads(8, [](threads_communicator& c) {
    const int r = c.rank();
    // a 2 x 4 mesh: rows {0..3}, {4..7}; columns {0,4}, {1,5}, ...
    std::vector<int> row, col;
    for (int j = 0; j < 4; ++j) row.push_back(r / 4 * 4 + j);
    col = {r % 4, r % 4 + 4};
    auto rc = split(c, row), cc = split(c, col);
    EXPECT(rc.size() == 4 && rc.rank() == r % 4, "row rank");
    EXPECT(cc.size() == 2 && cc.rank() == r / 4, "column rank");
    checks::everything(rc, 5000);
    checks::everything(cc, 5000);
    // reversed order: group rank 0 is world rank 7
    std::vector<int> rev{7, 6, 5, 4, 3, 2, 1, 0};
    auto rv = split(c, rev);
    EXPECT(rv.rank() == 7 - r && rv.world_ranks()[0] == 7, "reversed group");
    std::vector<int> mine{rv.rank()}, all(8);
    all_gather(rv, std::span<const int>(mine), std::span(all)).wait();
    for (int i = 0; i < 8; ++i) EXPECT(all[static_cast<std::size_t>(i)] == i, "reversed gather");
    // a split of a split, and a group of the even ranks only
    if (r % 2 == 0) {
      auto ev = split(c, {0, 2, 4, 6});
      auto pair = split(ev, {ev.rank() / 2 * 2, ev.rank() / 2 * 2 + 1});
      EXPECT(pair.world_ranks()[0] == r / 4 * 4, "nested split");
      checks::everything(pair, 300);
    }
  }));
}

TEST_CASE("threads: errors name the rank, the group and the call") {
  SUBCASE("mismatched sizes") {
    auto e = failure_of(2, [](threads_communicator& c) {
      std::vector<float> x(c.rank() == 0 ? 8 : 9);
      all_reduce(c, std::span(x)).wait();
    });
    CHECK(has(e, "mismatched collective #0 of group [0,1]"));
    CHECK(has(e, "all_reduce(count=8, f32, sum)"));
    CHECK(has(e, "all_reduce(count=9, f32, sum)"));
    CHECK(has(e, "test_threads.cpp:"));
  }
  SUBCASE("different calls") {
    auto e = failure_of(3, [](threads_communicator& c) {
      std::vector<float> x(4), y(12);
      if (c.rank() == 1) all_gather(c, std::span<const float>(x), std::span(y)).wait();
      else all_reduce(c, std::span(x)).wait();
    });
    CHECK(has(e, "all_gather(count=4, f32)"));
    CHECK(has(e, "all_reduce(count=4, f32, sum)"));
  }
  SUBCASE("a rank that never joins: timeout names it") {
    auto e = failure_of(3, [](threads_communicator& c) {
      std::vector<float> x(4);
      if (c.rank() != 2) all_reduce(c, std::span(x)).wait();
    }, 200ms);
    CHECK(has(e, "timed out after 200 ms"));
    CHECK(has(e, "rank(s) 2 did not join this call"));
    CHECK(has(e, "of group [0,1,2]"));
  }
  SUBCASE("send with no matching recv") {
    auto e = failure_of(2, [](threads_communicator& c) {
      std::vector<float> x(4);
      if (c.rank() == 0) send(c, std::span<const float>(x), 1, 5).wait();
    }, 200ms);
    CHECK(has(e, "rank 0 of group [0,1]: send(count=4, f32, peer=1, tag=5)"));
    CHECK(has(e, "rank 1 posted no matching recv"));
  }
  SUBCASE("send and recv of different sizes") {
    auto e = failure_of(2, [](threads_communicator& c) {
      std::vector<float> x(4 + static_cast<std::size_t>(c.rank()));
      if (c.rank() == 0) send(c, std::span<const float>(x), 1).wait();
      else recv(c, std::span(x), 0).wait();
    });
    CHECK(has(e, "does not match"));
  }
  SUBCASE("a rank outside the group") {
    auto e = failure_of(2, [](threads_communicator& c) {
      std::vector<float> x(4);
      send(c, std::span<const float>(x), 2).wait();
    });
    CHECK(has(e, "rank 2 is outside this group of 2 ranks"));
    auto s = failure_of(4, [](threads_communicator& c) { (void)split(c, {0, 1}); });
    CHECK(has(s, "this rank is not in the list"));
    auto d = failure_of(2, [](threads_communicator& c) { (void)split(c, {0, 1, 0}); });
    CHECK(has(d, "rank 0 is listed twice"));
  }
  SUBCASE("helper size checks before any byte moves") {
    auto e = failure_of(2, [](threads_communicator& c) {
      std::vector<float> x(4), y(7);
      all_gather(c, std::span<const float>(x), std::span(y)).wait();
    });
    CHECK(has(e, "the output has 7 elements, expected 8"));
  }
  SUBCASE("a failing rank aborts the others instead of leaving them hanging") {
    auto e = failure_of(4, [](threads_communicator& c) {
      if (c.rank() == 3) throw std::runtime_error("model diverged");
      c.barrier().wait();
    }, 60000ms);
    CHECK(e == "model diverged");
  }
}

#include <tessera/comm/detail/tcp_rendezvous.hpp>

TEST_CASE("tcp rendezvous (the nccl backend's torchrun-style bootstrap) hands rank 0's blob to all") {
  const int port = 29500 + static_cast<int>(::getpid() % 2000);
  std::vector<std::vector<char>> got(4);
  std::vector<std::thread> ts;
  for (int r = 0; r < 4; ++r)
    ts.emplace_back([&, r] {
      std::vector<char> blob;
      if (r == 0) blob = {'t', 'e', 's', 's', 'e', 'r', 'a', '!'};
      got[static_cast<std::size_t>(r)] =
          detail::tcp_rendezvous(r, 4, "127.0.0.1", port, blob, 8, 5000ms);
    });
  for (auto& t : ts) t.join();
  for (auto& g : got) CHECK(std::string(g.begin(), g.end()) == "tessera!");
  // a rank whose rank 0 never comes names what to check
  CHECK_THROWS_WITH(detail::tcp_rendezvous(1, 2, "127.0.0.1", port + 1, {}, 8, 100ms),
                    doctest::Contains("check MASTER_ADDR/MASTER_PORT"));
}
