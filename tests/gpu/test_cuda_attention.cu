// Attention on the GPU against the CPU's, through the kernel backends: cuda_kernels' f32
// kernels (kernels/cuda/attention.cuh, ring_attention.cuh) against cpu_kernels, and
// cuda_bf16_kernels' tensor-core kernels (kernels/cuda/attention_tc.cuh) against
// cpu_bf16_kernels -- the causal attention forward and backward (GQA, head dims 16, 64 and
// 128, a length no tile divides) and context parallel's block kernels (rank 0's queries of a
// head-tail split over cp = 2 with packed documents, against its own block and rank 1's,
// merged, then both blocks' backward, accumulating; 160 tokens a rank, so that thread blocks
// skip whole tiles). The tensor-core backward both ways: dq added inside the dk/dv kernel in
// turns (cuda::dq_path::fused; run twice, its dq must be the same bits: the order of its sums
// is fixed) and from its own kernel (cuda::dq_path::separate, what cuda_bf16_kernels runs by
// default); TESSERA_DQ_PATH's values, which choose between them. The tensor-core forward both
// ways too: forward_k (64 rows a block, the default) and forward_wide_k (cuda::forward_path::wide,
// 128 rows a block), whose out and lse must be forward_k's bits; TESSERA_ATTENTION_FORWARD's
// values. cuDNN's fused attention (cuda::attention_forward_cudnn / _backward_cudnn, what
// cuda_bf16_kernels runs under TESSERA_ATTENTION=cudnn) against cpu_bf16_kernels as well, its
// backward run twice for the same bits (cuDNN's deterministic algorithm), where the program
// was built with tessera::cudnn and cuDNN 9 is found (else one line says why it did not run);
// TESSERA_ATTENTION's values. Without a GPU the test prints why and exits 77 (skipped).
//
// Tolerances (largest |gpu - cpu| / max(1, |cpu|)):
//   f32   1e-5 for out and lse, 1e-4 for dq, dk, dv: the same operands, sums over up to T
//         keys or queries in other orders;
//   bf16  both sides round q, k, v and dout to bf16; the tensor cores also round P and
//         dS = P (dP - D) to bf16 (2^-9 relative each) before they multiply, which the
//         CPU does not: 1e-2 for out, 2e-3 for lse, 2e-2 for dq, dk, dv (a weighted sum of
//         terms each off by up to 2^-9; a wrong mask, head or scale is off by far more).
//         cuDNN's: the same, and out, dq, dk, dv rounded to bf16 once more (cuDNN writes
//         bf16; 2^-9 relative), within the same tolerances.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include <tessera/kernels/backend.hpp>
#include <tessera/kernels/cuda/backend.cuh>
#include <tessera/tensor/cuda_memory.hpp>

#include "cuda_checks.cuh"
#include "head_tail_split.hpp"

using namespace tessera;

namespace {
using namespace tessera::testing;

struct tolerances {
  double out, lse, grad;
};
constexpr tolerances f32_tol{1e-5, 1e-5, 1e-4}, bf16_tol{1e-2, 2e-3, 2e-2};

/// cuda_bf16_kernels with dq from its own kernel beside the dk/dv kernel (dq_path::separate)
/// instead of the fused backward.
struct bf16_separate_dq : cuda_bf16_kernels {
  static void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                                 const float* v, const float* out, const float* lse, std::int64_t B, std::int64_t T,
                                 std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    dvec D{std::vector<float>(static_cast<std::size_t>(B * NH * T))};
    cuda::attention_backward_bf16(dq, dk, dv, dout, q, k, v, out, lse, D.get(), B, T, NH, NKV, HD, nullptr,
                                  cuda::dq_path::separate);
  }
  static void attention_block_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                       const float* k, const float* v, const float* lse, const float* D,
                                       const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                       std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cuda::attention_block_backward_bf16(dq, dk, dv, dout, q, k, v, lse, D, qs, ks, B, NH, NKV, HD, nullptr,
                                        cuda::dq_path::separate);
  }
};

/// cuda_bf16_kernels with the wide forward (forward_path::wide, 128 rows a block).
struct bf16_wide_forward : bf16_separate_dq {
  static void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, std::int64_t B,
                                std::int64_t T, std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cuda::attention_forward_bf16(out, lse, q, k, v, B, T, NH, NKV, HD, nullptr, cuda::forward_path::wide);
  }
  static void attention_block_forward(float* out_b, float* lse_b, const float* q, const float* k, const float* v,
                                      const cpu::token_span& qs, const cpu::token_span& ks, std::int64_t B,
                                      std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cuda::attention_block_forward_bf16(out_b, lse_b, q, k, v, qs, ks, B, NH, NKV, HD, nullptr, cuda::forward_path::wide);
  }
};

/// cuda_bf16_kernels with cuDNN's fused attention, whatever TESSERA_ATTENTION says.
struct bf16_cudnn : cuda_bf16_kernels {
  static void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, std::int64_t B,
                                std::int64_t T, std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cuda::attention_forward_cudnn(out, lse, q, k, v, B, T, NH, NKV, HD);
  }
  static void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                                 const float* v, const float* out, const float* lse, std::int64_t B, std::int64_t T,
                                 std::int64_t NH, std::int64_t NKV, std::int64_t HD) {
    cuda::attention_backward_cudnn(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, HD);
  }
};

/// The wide forward's out and lse are forward_k's, bit for bit (each row's arithmetic in the
/// same order), causal at head dims 16, 64 and 128 over a length no block divides.
void wide_forward_bits() {
  for (const std::int64_t HD : {16, 64, 128}) {
    const std::int64_t B = 2, T = 200, NH = 4, NKV = 2;
    const std::size_t nq = static_cast<std::size_t>(B * T * NH * HD), nk = static_cast<std::size_t>(B * T * NKV * HD),
                      nl = static_cast<std::size_t>(B * NH * T);
    dvec q(randn(nq, 70)), k(randn(nk, 71)), v(randn(nk, 72)), o1{std::vector<float>(nq)}, l1{std::vector<float>(nl)},
        o2{std::vector<float>(nq, 7.0f)}, l2{std::vector<float>(nl, 7.0f)};
    cuda::attention_forward_bf16(o1.get(), l1.get(), q.get(), k.get(), v.get(), B, T, NH, NKV, HD, nullptr,
                                 cuda::forward_path::narrow);
    cuda::attention_forward_bf16(o2.get(), l2.get(), q.get(), k.get(), v.get(), B, T, NH, NKV, HD, nullptr,
                                 cuda::forward_path::wide);
    const bool same = o1.host() == o2.host() && l1.host() == l2.host();
    std::printf("%-40s %s\n", ("wide forward: forward_k's bits (head dim " + std::to_string(HD) + ")").c_str(),
                same ? "PASS" : "FAIL");
    failures += same ? 0 : 1;
  }
}

template <class CpuK, class GpuK>
void attention(const char* name, tolerances tol) {
  for (const std::int64_t HD : {16, 64, 128}) {
    const std::int64_t B = 2, T = 200, NH = 4, NKV = 2;  // T: no tile divides it; GQA groups of 2
    const std::size_t nq = static_cast<std::size_t>(B * T * NH * HD), nk = static_cast<std::size_t>(B * T * NKV * HD),
                      nl = static_cast<std::size_t>(B * NH * T);
    const auto q = randn(nq, 20), k = randn(nk, 21), v = randn(nk, 22), dy = randn(nq, 23);
    std::vector<float> out(nq), lse(nl), dq(nq), dk(nk), dv(nk);
    CpuK::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, HD);
    CpuK::attention_backward(dq.data(), dk.data(), dv.data(), dy.data(), q.data(), k.data(), v.data(), out.data(),
                             lse.data(), B, T, NH, NKV, HD);
    dvec gq(q), gk(k), gv(v), gdy(dy), gout{std::vector<float>(nq)}, glse{std::vector<float>(nl)},
        gdq{std::vector<float>(nq)}, gdk{std::vector<float>(nk)}, gdv{std::vector<float>(nk)};
    GpuK::attention_forward(gout.get(), glse.get(), gq.get(), gk.get(), gv.get(), B, T, NH, NKV, HD);
    GpuK::attention_backward(gdq.get(), gdk.get(), gdv.get(), gdy.get(), gq.get(), gk.get(), gv.get(), gout.get(),
                             glse.get(), B, T, NH, NKV, HD);
    const std::string at = std::string(" (") + name + ", head dim " + std::to_string(HD) + ")";
    expect_close(("attention out" + at).c_str(), gout.host(), out, tol.out);
    expect_close(("attention lse" + at).c_str(), glse.host(), lse, tol.lse);
    expect_close(("attention dq" + at).c_str(), gdq.host(), dq, tol.grad);
    expect_close(("attention dk" + at).c_str(), gdk.host(), dk, tol.grad);
    expect_close(("attention dv" + at).c_str(), gdv.host(), dv, tol.grad);
    // the default backward's dq and cuDNN's deterministic backward: the same bits again
    if constexpr (std::is_same_v<GpuK, cuda_bf16_kernels> || std::is_same_v<GpuK, bf16_cudnn>) {
      dvec again{std::vector<float>(nq)};
      GpuK::attention_backward(again.get(), gdk.get(), gdv.get(), gdy.get(), gq.get(), gk.get(), gv.get(), gout.get(),
                               glse.get(), B, T, NH, NKV, HD);
      const bool same = again.host() == gdq.host();
      std::printf("%-40s %s\n", ("attention dq run twice, the same bits" + at).c_str(), same ? "PASS" : "FAIL");
      failures += same ? 0 : 1;
    }
  }
}

template <class CpuK, class GpuK>
void ring_attention(const char* name, tolerances tol) {
  for (const std::int64_t HD : {16, 128}) {
    const std::int64_t B = 2, Tl = 160, NH = 4, NKV = 2;
    const head_tail_split split(Tl);
    const auto &p0 = split.p0, &p1 = split.p1;
    const auto &d0 = split.d0, &d1 = split.d1;
    const std::size_t nq = static_cast<std::size_t>(B * Tl * NH * HD), nk = static_cast<std::size_t>(B * Tl * NKV * HD),
                      nl = static_cast<std::size_t>(B * NH * Tl);
    const auto q = randn(nq, 60), k0 = randn(nk, 61), v0 = randn(nk, 62), k1 = randn(nk, 63), v1 = randn(nk, 64),
               dy = randn(nq, 65);
    // one side's run: K the backend, the spans in its memory, the tensors by `make`
    auto run = [&]<class K>(const cpu::token_span& qs, const cpu::token_span& ks1, auto make, auto host) {
      auto out = make(std::vector<float>(nq, 0.0f)), lse = make(std::vector<float>(nl, -INFINITY));
      auto ob = make(std::vector<float>(nq)), lb = make(std::vector<float>(nl)), D = make(std::vector<float>(nl));
      auto dq = make(std::vector<float>(nq, 0.0f)), dk0 = make(std::vector<float>(nk, 0.0f)),
           dv0 = make(std::vector<float>(nk, 0.0f)), dk1 = make(std::vector<float>(nk, 0.0f)),
           dv1 = make(std::vector<float>(nk, 0.0f));
      auto cq = make(q), ck0 = make(k0), cv0 = make(v0), ck1 = make(k1), cv1 = make(v1), cdy = make(dy);
      K::attention_block_forward(ob.get(), lb.get(), cq.get(), ck0.get(), cv0.get(), qs, qs, B, NH, NKV, HD);
      K::attention_merge(out.get(), lse.get(), ob.get(), lb.get(), B, Tl, NH, HD);
      K::attention_block_forward(ob.get(), lb.get(), cq.get(), ck1.get(), cv1.get(), qs, ks1, B, NH, NKV, HD);
      K::attention_merge(out.get(), lse.get(), ob.get(), lb.get(), B, Tl, NH, HD);
      K::attention_delta(D.get(), cdy.get(), out.get(), B, Tl, NH, HD);
      K::attention_block_backward(dq.get(), dk0.get(), dv0.get(), cdy.get(), cq.get(), ck0.get(), cv0.get(), lse.get(),
                                  D.get(), qs, qs, B, NH, NKV, HD);
      K::attention_block_backward(dq.get(), dk1.get(), dv1.get(), cdy.get(), cq.get(), ck1.get(), cv1.get(), lse.get(),
                                  D.get(), qs, ks1, B, NH, NKV, HD);
      return std::vector<std::vector<float>>{host(out), host(lse), host(dq), host(dk0), host(dv0), host(dk1), host(dv1)};
    };
    struct hvec {  // a host vector with dvec's interface
      std::vector<float> v;
      float* get() { return v.data(); }
    };
    const auto on_cpu = run.template operator()<CpuK>(
        split.rank0(), split.rank1(),
        [](std::vector<float> x) { return hvec{std::move(x)}; }, [](const hvec& x) { return x.v; });
    space_vector<std::int64_t, cuda_space> gp0(p0.size()), gp1(p1.size());
    copy_to_device(gp0.data(), p0.data(), p0.size() * sizeof(std::int64_t));
    copy_to_device(gp1.data(), p1.data(), p1.size() * sizeof(std::int64_t));
    const device_ids gd0(d0), gd1(d1);
    const auto on_gpu = run.template operator()<GpuK>(
        cpu::token_span{gp0.data(), gd0.get(), Tl}, cpu::token_span{gp1.data(), gd1.get(), Tl},
        [](const std::vector<float>& x) { return dvec(x); }, [](const dvec& x) { return x.host(); });
    const char* what[] = {"merged out", "merged lse", "dq (both blocks)", "dk, own block", "dv, own block",
                          "dk, rank 1's block", "dv, rank 1's block"};
    for (std::size_t i = 0; i < 7; ++i) {
      const std::string label =
          std::string("ring attention: ") + what[i] + " (" + name + ", head dim " + std::to_string(HD) + ")";
      expect_close(label.c_str(), on_gpu[i], on_cpu[i], i == 0 ? tol.out : i == 1 ? tol.lse : tol.grad);
    }
  }
}
/// TESSERA_DQ_PATH's values (cuda::dq_path_named, what cuda::default_dq_path reads once): the
/// two paths, unset or empty for the separate one, and anything else refused with a message that
/// names the variable and both values.
void dq_path_names() {
  const auto expect = [](const char* what, bool ok) {
    std::printf("%-40s %s\n", what, ok ? "PASS" : "FAIL");
    failures += ok ? 0 : 1;
  };
  expect("TESSERA_DQ_PATH unset: separate", cuda::dq_path_named(nullptr) == cuda::dq_path::separate);
  expect("TESSERA_DQ_PATH='': separate", cuda::dq_path_named("") == cuda::dq_path::separate);
  expect("TESSERA_DQ_PATH=fused", cuda::dq_path_named("fused") == cuda::dq_path::fused);
  expect("TESSERA_DQ_PATH=separate", cuda::dq_path_named("separate") == cuda::dq_path::separate);
  std::string message;
  try {
    (void)cuda::dq_path_named("Separate");
  } catch (const error& e) {
    message = e.what();
  }
  expect("TESSERA_DQ_PATH=Separate: refused", message.find("TESSERA_DQ_PATH is 'Separate'") != std::string::npos &&
                                                  message.find("'fused'") != std::string::npos &&
                                                  message.find("'separate'") != std::string::npos);
  // TESSERA_ATTENTION_FORWARD (cuda::forward_path_named, what cuda::default_forward_path reads)
  expect("TESSERA_ATTENTION_FORWARD unset: narrow", cuda::forward_path_named(nullptr) == cuda::forward_path::narrow);
  expect("TESSERA_ATTENTION_FORWARD=wide", cuda::forward_path_named("wide") == cuda::forward_path::wide);
  expect("TESSERA_ATTENTION_FORWARD=narrow", cuda::forward_path_named("narrow") == cuda::forward_path::narrow);
  // TESSERA_ATTENTION (cuda::attention_library_named): "cudnn" only where it is linked -- by
  // the component's host unit, registered before main, exactly where this program was built
  // with tessera::cudnn (its macro TESSERA_HAS_CUDNN)
#if defined(TESSERA_HAS_CUDNN)
  constexpr bool built_with_cudnn = true;
#else
  constexpr bool built_with_cudnn = false;
#endif
  expect(built_with_cudnn ? "cuDNN's attention linked (built with tessera::cudnn)"
                          : "cuDNN's attention not linked (built without tessera::cudnn)",
         cuda::cudnn_linked() == built_with_cudnn);
  expect("TESSERA_ATTENTION unset: tessera", cuda::attention_library_named(nullptr) == cuda::attention_library::tessera);
  expect("TESSERA_ATTENTION=tessera", cuda::attention_library_named("tessera") == cuda::attention_library::tessera);
  message.clear();
  try {
    const bool named = cuda::attention_library_named("cudnn") == cuda::attention_library::cudnn;
    expect("TESSERA_ATTENTION=cudnn (built with cuDNN)", cuda::cudnn_linked() && named);
  } catch (const error& e) {
    expect("TESSERA_ATTENTION=cudnn refused: built without cuDNN",
           !cuda::cudnn_linked() && std::string(e.what()).find("built without cuDNN's attention") != std::string::npos);
  }
  try {
    (void)cuda::attention_library_named("CUDNN");
  } catch (const error& e) {
    message = e.what();
  }
  expect("TESSERA_ATTENTION=CUDNN: refused", message.find("TESSERA_ATTENTION is 'CUDNN'") != std::string::npos);
  message.clear();
  try {
    (void)cuda::forward_path_named("128");
  } catch (const error& e) {
    message = e.what();
  }
  expect("TESSERA_ATTENTION_FORWARD=128: refused", message.find("TESSERA_ATTENTION_FORWARD is '128'") != std::string::npos &&
                                                       message.find("'wide'") != std::string::npos);
}
}  // namespace

int main() {
  // the switches' names first: host code, so they are checked without a GPU too -- in a program
  // built with tessera::cudnn, that the component's host unit registered cuDNN's attention for
  // this nvcc unit before main
  try {
    dq_path_names();
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  if (failures) {
    std::printf("FAILED: %d check(s)\n", failures);
    return 1;
  }
  if (no_cuda_device()) return 77;
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("device 0: %s (sm_%d%d); tensor-core attention %s\n", prop.name, prop.major, prop.minor,
              cuda::tc_attention_supported(64) ? "runs" : "not supported here (the bf16 rows run the f32 kernels)");
  try {
    attention<cpu_kernels, cuda_kernels>("f32", f32_tol);
    attention<cpu_bf16_kernels, cuda_bf16_kernels>("bf16 tensor cores", bf16_tol);
    attention<cpu_bf16_kernels, bf16_separate_dq>("bf16 tensor cores, dq_k", bf16_tol);
    attention<cpu_bf16_kernels, bf16_wide_forward>("bf16 tensor cores, wide forward", bf16_tol);
    wide_forward_bits();
    ring_attention<cpu_kernels, cuda_kernels>("f32", f32_tol);
    ring_attention<cpu_bf16_kernels, cuda_bf16_kernels>("bf16 tensor cores", bf16_tol);
    ring_attention<cpu_bf16_kernels, bf16_separate_dq>("bf16 tensor cores, dq_k", bf16_tol);
    ring_attention<cpu_bf16_kernels, bf16_wide_forward>("bf16 tensor cores, wide forward", bf16_tol);
    if (const std::string why = cuda::cudnn_attention_unavailable(); why.empty())
      attention<cpu_bf16_kernels, bf16_cudnn>("cuDNN", bf16_tol);
    else
      std::printf("cuDNN's attention: not run here (%s)\n", why.c_str());
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  std::printf(failures ? "FAILED: %d check(s)\n" : "PASSED\n", failures);
  return failures ? 1 : 0;
}
