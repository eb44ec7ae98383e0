// The nccl backend on device buffers, and dist_tensor in cuda_space over it (every legal
// transition of the layout lists the host tests run, on as many GPUs as there are: 4, 2 or
// 1 ranks); the same over comm::cuda_staged with 4 ranks on one GPU (transfers staged
// through the host). Needs a GPU: without any, it prints SKIPPED and exits with ctest's skip
// code (77); it never reports a pass without running.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <tessera/comm/cuda_staged.hpp>
#include <tessera/comm/nccl.hpp>
#include <tessera/comm/threads.hpp>
#include <tessera/tensor/cuda_memory.hpp>
#include <vector>

#include "dist_layouts.hpp"

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


/// Every call on device buffers over communicator c: collectives (each reduction), p2p pairs
/// in a group, a barrier, and a split.
template <class C>
void calls_on_device(C& c) {
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
  b.put(std::vector<float>(cnt * static_cast<std::size_t>(n), -1.0f));
  c.group_start();
  auto s = c.send(a.p, cnt, dtype::f32, (r + 1) % n);
  auto q = c.recv(b.p, cnt, dtype::f32, (r + n - 1) % n);
  c.group_end();
  s.wait();
  q.wait();
  g = b.get();
  check(g[0] == static_cast<float>(n) && g[cnt - 1] == static_cast<float>(n) && g[cnt] == -1.0f, "send / recv");
  c.barrier().wait();
  std::vector<int> all;
  for (int i = n - 1; i >= 0; --i) all.push_back(i);
  auto rev = c.split(all);
  check(rev.rank() == n - 1 - r, "split rank");
  a.put(std::vector<float>(cnt, static_cast<float>(r)));
  rev.all_gather(a.p, b.p, cnt, dtype::f32).wait();
  check(b.get()[0] == static_cast<float>(n - 1), "all_gather in the split group (its rank 0 is rank n - 1)");
}
}  // namespace

TEST_CASE("nccl: collectives and p2p on device buffers, bootstrapped through threads") {
  CHECK_NOTHROW(run_threads(g_ranks, [](threads_communicator& boot) {
    auto c = nccl_communicator::bootstrap(boot);
    calls_on_device(c);
  }));
}

TEST_CASE("cuda_staged: collectives and p2p on device buffers, 4 ranks on one GPU") {
  CHECK_NOTHROW(run_threads(4, [](threads_communicator& boot) {
    cuda_staged<threads_communicator> c(boot, 0);
    check(c.backend() == "cuda-staged(threads)" && c.device() == 0, "backend and device");
    calls_on_device(c);
  }));
}

TEST_CASE("cuda_space: strided box copies on the device equal the host's") {
  using tessera::box;
  using tessera::shape_t;
  const box whole{3, {0, 0, 0}, {4, 6, 10}};  // rank, offset, size
  std::vector<float> src(240), want(240, -1.0f);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
  const box regions[] = {box{3, {0, 0, 0}, {4, 6, 10}}, box{3, {1, 0, 0}, {2, 6, 10}}, box{3, {0, 2, 0}, {4, 3, 10}},
                         box{3, {1, 1, 3}, {3, 5, 4}}, box{3, {2, 4, 1}, {1, 1, 7}}, box{3, {0, 0, 9}, {4, 6, 1}}};
  for (const box& r : regions) {
    // the region from the whole block into a block of the region's own shape, and back
    tessera::space_vector<float, tessera::cuda_space> d_src(240), d_mid(static_cast<std::size_t>(r.numel())),
        d_out(240);
    tessera::cuda_space::from_host(d_src.data(), src.data(), 240 * sizeof(float));
    std::vector<float> minus(240, -1.0f), mid(static_cast<std::size_t>(r.numel())), out(240);
    tessera::cuda_space::from_host(d_out.data(), minus.data(), 240 * sizeof(float));
    tessera::detail::copy_region<tessera::cuda_space>(d_src.data(), whole, d_mid.data(), r, r);
    tessera::detail::copy_region<tessera::cuda_space>(d_mid.data(), r, d_out.data(), whole, r);
    tessera::cuda_space::fence();
    std::vector<float> h_mid(mid.size()), h_out(240, -1.0f);
    tessera::detail::copy_region(src.data(), whole, h_mid.data(), r, r);
    tessera::detail::copy_region(h_mid.data(), r, h_out.data(), whole, r);
    tessera::cuda_space::to_host(mid.data(), d_mid.data(), mid.size() * sizeof(float));
    tessera::cuda_space::to_host(out.data(), d_out.data(), 240 * sizeof(float));
    CHECK(mid == h_mid);
    CHECK(out == h_out);
  }
}

/// Every transition of the layout lists on device meshes of `ranks` ranks over the
/// communicators make() returns (one a mesh): the pairs run.
template <class Make>
int transitions(int ranks, Make make) {
  using namespace tessera;
  int pairs = 0;
  if (ranks == 4) {
    device_mesh<dist_layouts::M1> d1(dist_layouts::M1{}, make());
    device_mesh<dist_layouts::M22> d2(dist_layouts::M22{}, make());
    for (shape_t g : {shape_t{8, 12}, shape_t{7, 5}}) {
      pairs += dist_checks::all_pairs<float, cuda_space>(d1, g, dist_layouts::L1{});
      pairs += dist_checks::all_pairs<dist_checks::bf16, cuda_space>(d1, g, dist_layouts::L1{});
      pairs += dist_checks::all_pairs<float, cuda_space>(d2, g, dist_layouts::L22{});
    }
    return pairs;
  }
  using M = mesh<axis<"x", 2>>;
  using L = dist_checks::layouts<replicated_t<M, 2>, layout_t<M, 2, dim<0, "x">>, layout_t<M, 2, dim<1, "x">>,
                                 layout_t<M, 2, partial_on<reduce::sum, "x">>,
                                 layout_t<M, 2, partial_on<reduce::max, "x">>>;
  using M1 = mesh<axis<"x", 1>>;
  using L1 = dist_checks::layouts<replicated_t<M1, 2>, layout_t<M1, 2, dim<0, "x">>, layout_t<M1, 2, dim<1, "x">>>;
  for (shape_t g : {shape_t{8, 12}, shape_t{7, 5}}) {
    if (ranks == 2) {
      device_mesh<M> dm(M{}, make());
      pairs += dist_checks::all_pairs<float, cuda_space>(dm, g, L{});
      pairs += dist_checks::all_pairs<dist_checks::bf16, cuda_space>(dm, g, L{});
    } else {
      device_mesh<M1> dm(M1{}, make());
      pairs += dist_checks::all_pairs<float, cuda_space>(dm, g, L1{});
    }
  }
  return pairs;
}

TEST_CASE("dist_tensor in cuda_space: every transition on the GPUs' mesh, even and uneven, f32 and bf16") {
  CHECK_NOTHROW(run_threads(g_ranks, [](threads_communicator& boot) {
    check(transitions(g_ranks, [&] { return nccl_communicator::bootstrap(boot); }) > 0, "no transition ran");
  }));
}

TEST_CASE("dist_tensor in cuda_space over cuda_staged: every transition, 4 ranks on one GPU") {
  CHECK_NOTHROW(run_threads(4, [](threads_communicator& boot) {
    check(transitions(4, [&] { return cuda_staged<threads_communicator>(boot, 0); }) > 0, "no transition ran");
  }));
}

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device is visible; the nccl tests need a GPU\n");
    return 77;
  }
  g_ranks = devices >= 4 ? 4 : devices >= 2 ? 2 : 1;
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
