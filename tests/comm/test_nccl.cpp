// The nccl backend on device buffers. Needs a GPU per rank: without any, it prints
// SKIPPED and exits with ctest's skip code (77); it never reports a pass without running.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <tessera/comm/nccl.hpp>
#include <tessera/comm/threads.hpp>
#include <vector>

using namespace tessera::comm;

namespace {
int g_ranks = 1;

struct device_buffer {
  explicit device_buffer(std::size_t n) : n(n) { REQUIRE(cudaMalloc(&p, n * sizeof(float) + 1) == cudaSuccess); }
  ~device_buffer() { cudaFree(p); }
  void put(const std::vector<float>& v) { REQUIRE(cudaMemcpy(p, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess); }
  std::vector<float> get() const {
    std::vector<float> v(n);
    cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost);
    return v;
  }
  float* f() { return static_cast<float*>(p); }
  void* p = nullptr;
  std::size_t n;
};

void check(bool ok, const char* what) {
  if (!ok) throw tessera::error(std::string("check failed: ") + what);
}
}  // namespace

TEST_CASE("nccl: collectives and p2p on device buffers, bootstrapped through threads") {
  CHECK_NOTHROW(run_threads(g_ranks, [](threads_communicator& boot) {
    auto c = nccl_communicator::bootstrap(boot);
    const int n = c.size(), r = c.rank();
    const std::size_t cnt = 1000;
    device_buffer a(cnt * static_cast<std::size_t>(n)), b(cnt * static_cast<std::size_t>(n));
    a.put(std::vector<float>(cnt * static_cast<std::size_t>(n), static_cast<float>(r + 1)));
    c.all_reduce(a.p, b.p, cnt, dtype::f32, reduce_op::sum).wait();
    check(b.get()[cnt - 1] == static_cast<float>(n * (n + 1) / 2), "all_reduce sum");
    c.all_reduce(a.p, b.p, cnt, dtype::f32, reduce_op::max).wait();
    check(b.get()[0] == static_cast<float>(n), "all_reduce max");
    c.all_gather(a.p, b.p, cnt, dtype::f32).wait();
    auto g = b.get();
    for (int p = 0; p < n; ++p) check(g[static_cast<std::size_t>(p) * cnt] == static_cast<float>(p + 1), "all_gather");
    c.reduce_scatter(a.p, b.p, cnt, dtype::f32, reduce_op::avg).wait();
    check(b.get()[0] == static_cast<float>(n + 1) / 2, "reduce_scatter avg");
    c.all_to_all(a.p, b.p, cnt, dtype::f32).wait();
    g = b.get();
    for (int p = 0; p < n; ++p) check(g[static_cast<std::size_t>(p) * cnt] == static_cast<float>(p + 1), "all_to_all");
    c.broadcast(a.p, cnt, dtype::f32, n - 1).wait();
    check(a.get()[0] == static_cast<float>(n), "broadcast");
    c.group_start();
    auto s = c.send(a.p, cnt, dtype::f32, (r + 1) % n);
    auto q = c.recv(b.p, cnt, dtype::f32, (r + n - 1) % n);
    c.group_end();
    s.wait();
    q.wait();
    c.barrier().wait();
    std::vector<int> all;
    for (int i = n - 1; i >= 0; --i) all.push_back(i);
    auto rev = c.split(all);
    check(rev.rank() == n - 1 - r, "split rank");
    rev.all_reduce(a.p, b.p, cnt, dtype::f32, reduce_op::sum).wait();
  }));
}

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device is visible; the nccl tests need a GPU\n");
    return 77;
  }
  g_ranks = devices < 4 ? devices : 4;
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
