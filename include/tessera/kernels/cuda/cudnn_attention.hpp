// tessera/kernels/cuda/cudnn_attention.hpp: cuDNN's fused attention (scaled dot-product
// attention, flash-style, on Hopper's wgmma and TMA) through the cuDNN frontend's graph API,
// for the causal attention of cuda_bf16_kernels when TESSERA_ATTENTION=cudnn
// (kernels/cuda/attention_library.hpp). Host C++: device pointers in, work on a stream out.
//   q, o, dq, do [B, T, NH, HD] bf16;  k, v, dk, dv [B, T, NKV, HD] bf16;  stats [B, NH, T] f32
// -- tessera's layouts (attention.cuh), given to cuDNN as strides, so nothing is copied; the
// stats are the log-sum-exp of each query row's scaled scores (natural log), tessera's lse.
// tessera-requires: cudnn
//
// Why a library: cuDNN's kernels use Hopper's own instructions (wgmma, TMA), which tessera's
// tensor-core attention does not (attention_tc.cuh: mma.sync); PyTorch's SDPA measured them
// at 556 and 482 TFLOP/s (forward, backward) on an H200 where tessera's ran 237 and 177
// (docs/performance.md, "On GPUs"). The frontend (NVIDIA's MIT-licensed header-only C++ over
// cuDNN's backend API) lowers one `sdpa` node to the graph cuDNN's engines match; writing
// that lowering here would repeat it.
//
// cuDNN is opened when first used (the frontend's dynamic loading: libcudnn.so.9, else
// libcudnn_graph.so.9, on the loader's path), so a program built with this header starts
// on a machine without cuDNN and says so only when asked for this attention. Each host
// thread keeps a cuDNN handle, the graphs built for the shapes it ran (built once: cuDNN's
// heuristics, then its kernels compiled) and one workspace, as large as the forward's and
// the backward's of the first shape (workspace_bytes); later shapes grow it.
// The backward is cuDNN's deterministic algorithm (set_deterministic_algorithm), as
// tessera's kernels are deterministic.
//
// How a program links it: one unit compiled by the host compiler includes this header (the
// component tessera::cudnn adds cmake/cudnn_attention_unit.cpp to each target that links it),
// which registers the functions below with attention_library.hpp's table before main; nvcc's
// units call them through it (attention_cudnn.cuh). Not from nvcc: the frontend's lambdas
// capture `this` implicitly, which nvcc and g++ lay out differently (docs/cuda.md, "nvcc and
// g++ units in one program"), and its headers cost nvcc about 55 s a unit.
//
// `support_problem` asks cuDNN, without a GPU, whether an engine takes a graph on a device
// described by a DeviceProperties (deviceless ahead-of-time compilation, cuDNN 9.8 and
// newer): tests/kernels/test_cudnn_attention.cpp asks it for an H100's properties.
#pragma once

#if defined(__CUDACC__)
// (one diagnostic: the rest of the header is not compiled)
#error "kernels/cuda/cudnn_attention.hpp is compiled by the host compiler, never by nvcc (the cuDNN frontend's lambdas capture `this`, which nvcc and g++ lay out differently, and the component's own host unit compiles it too): run cuDNN's attention from CUDA units through kernels/cuda/attention_cudnn.cuh (cuda_bf16_kernels), and link tessera::cudnn, whose cmake/cudnn_attention_unit.cpp compiles this header"
#else

#include <dlfcn.h>

#include <cuda_runtime.h>

#include <cudnn_frontend.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <tessera/core/error.hpp>
#include <tessera/kernels/cuda/attention_library.hpp>
#include <tessera/tensor/cuda_memory.hpp>
#include <tessera/tensor/tensor.hpp>

// The frontend's dynamic loading reads cuDNN's functions from this handle, which the program
// defines (cudnn::load_library opens it). A program that defines it itself cannot include
// this header.
namespace cudnn_frontend {
inline void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace tessera::cuda::cudnn {

namespace fe = cudnn_frontend;

/// The forward (o and stats from q, k, v) or the backward (dq, dk, dv from q, k, v, o, do, stats).
enum class pass { forward, backward };

/// The tensors' ids in a graph (the variant pack's keys).
enum uid : std::int64_t { q_uid = 1, k_uid, v_uid, o_uid, stats_uid, do_uid, dq_uid, dk_uid, dv_uid };

/// Opens cuDNN once per process (libcudnn.so.9, else libcudnn_graph.so.9) for the frontend, or
/// throws what is missing and what to do.
inline void load_library() {
  static const std::string problem = [] {
    // the frontend's own CUDA runtime calls (the device, its properties) through the runtime
    // this program was built against -- the one already loaded --, not the first of
    // libcudart.so.12 / .13 that the loader finds (unless the caller named one)
    const std::string cudart = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
    setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", cudart.c_str(), 0);
    for (const char* name : {"libcudnn.so.9", "libcudnn_graph.so.9"})
      if ((fe::cudnn_dlhandle = dlopen(name, RTLD_NOW | RTLD_GLOBAL))) break;
    if (!fe::cudnn_dlhandle)
      return std::string("cuDNN's fused attention: cannot open cuDNN 9 (libcudnn.so.9 or libcudnn_graph.so.9): put "
                         "its folder on LD_LIBRARY_PATH, or unset TESSERA_ATTENTION to run tessera's attention");
    if (fe::detail::get_backend_version() < 90500)
      return "cuDNN's fused attention: cuDNN " + std::to_string(fe::detail::get_backend_version()) +
             " is too old (9.5 or newer runs its deterministic backward with GQA): put a newer one on "
             "LD_LIBRARY_PATH, or unset TESSERA_ATTENTION";
    return std::string();
  }();
  if (!problem.empty()) throw error(problem);
}

namespace detail {
/// Throws the frontend's message for step `what` of shape s, unless e is good.
inline void check(fe::error_t e, const char* what, const sdpa_shape& s) {
  if (e.is_good()) return;
  throw error(std::string("cuDNN's fused attention (") + to_string(s) + "): " + what + " failed: " + e.get_message() +
              "; unset TESSERA_ATTENTION to run tessera's attention");
}
}  // namespace detail

/// The graph of pass p for shape s, described and validated, not yet built: bf16 tensors in
/// tessera's layouts, f32 intermediates and compute, the causal mask (each query sees the keys
/// up to its own position), scale 1 / sqrt(HD) as tessera's kernels. With `props` (and `sm`,
/// its compute capability x 10), for a device that need not be there.
inline std::shared_ptr<fe::graph::Graph> sdpa_graph(pass p, const sdpa_shape& s,
                                                    std::shared_ptr<const fe::DeviceProperties> props = nullptr,
                                                    int sm = 0) {
  check(s.B > 0 && s.T > 0 && s.NKV > 0 && s.HD > 0 && s.NH % s.NKV == 0,
        "cuda::cudnn::sdpa_graph: bad sizes (" + to_string(s) + "; NH must be a multiple of NKV)");
  auto g = std::make_shared<fe::graph::Graph>();
  if (props) g->set_device_properties(props).set_sm_version(sm);
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  // [B, heads, T, HD] over tessera's [B, T, heads, HD]
  const auto rows = [&](const char* name, std::int64_t id, std::int64_t heads) {
    return fe::graph::Tensor_attributes()
        .set_name(name)
        .set_uid(id)
        .set_dim({s.B, heads, s.T, s.HD})
        .set_stride({s.T * heads * s.HD, s.HD, heads * s.HD, 1});
  };
  const auto stats = [&] {
    return fe::graph::Tensor_attributes()
        .set_name("stats")
        .set_uid(stats_uid)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim({s.B, s.NH, s.T, 1})
        .set_stride({s.NH * s.T, s.T, 1, 1});
  };
  const auto output = [&](const std::shared_ptr<fe::graph::Tensor_attributes>& t, const char* name, std::int64_t id,
                          std::int64_t heads) {
    t->set_output(true).set_uid(id).set_name(name).set_dim({s.B, heads, s.T, s.HD}).set_stride(
        {s.T * heads * s.HD, s.HD, heads * s.HD, 1});
  };
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.HD));
  auto q = g->tensor(rows("q", q_uid, s.NH)), k = g->tensor(rows("k", k_uid, s.NKV)),
       v = g->tensor(rows("v", v_uid, s.NKV));
  if (p == pass::forward) {
    auto [o, lse] = g->sdpa(
        q, k, v,
        fe::graph::SDPA_attributes().set_name("attention").set_generate_stats(true).set_causal_mask(true).set_attn_scale(
            scale));
    output(o, "o", o_uid, s.NH);
    lse->set_output(true).set_uid(stats_uid).set_name("stats").set_data_type(fe::DataType_t::FLOAT).set_dim(
        {s.B, s.NH, s.T, 1}).set_stride({s.NH * s.T, s.T, 1, 1});
  } else {
    auto o = g->tensor(rows("o", o_uid, s.NH)), dout = g->tensor(rows("do", do_uid, s.NH)), lse = g->tensor(stats());
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, lse,
                                         fe::graph::SDPA_backward_attributes()
                                             .set_name("attention_backward")
                                             .set_causal_mask(true)
                                             .set_attn_scale(scale)
                                             .set_deterministic_algorithm(true));
    output(dq, "dq", dq_uid, s.NH);
    output(dk, "dk", dk_uid, s.NKV);
    output(dv, "dv", dv_uid, s.NKV);
  }
  detail::check(g->validate(), p == pass::forward ? "validating the forward" : "validating the backward", s);
  return g;
}

/// Whether cuDNN has an engine for pass p at shape s on the device that `props` describes
/// (compute capability sm / 10), asked without the device: "" when it has, else cuDNN's reason.
/// Needs cuDNN (load_library) and, for the engines cuDNN compiles at run time, the CUDA driver
/// library or its stub (libcuda.so.1) and NVRTC on the loader's path.
inline std::string support_problem(pass p, const sdpa_shape& s, std::shared_ptr<const fe::DeviceProperties> props,
                                   int sm) {
  load_library();
  try {
    auto g = sdpa_graph(p, s, std::move(props), sm);
    for (fe::error_t e :
         {g->build_operation_graph(), g->create_execution_plans({fe::HeurMode_t::A}), g->check_support()})
      if (!e.is_good()) return e.get_message();
  } catch (const error& e) {
    return e.what();
  }
  return {};
}

namespace detail {
/// A graph built for this thread's handle, and the workspace its plan needs.
struct built {
  std::shared_ptr<fe::graph::Graph> graph;
  std::int64_t workspace = 0;
};
/// This host thread's cuDNN handle (created on the current device by the first call), its
/// built graphs by shape and its workspace.
struct thread_state {
  cudnnHandle_t handle = nullptr;
  std::vector<std::pair<std::pair<pass, sdpa_shape>, built>> graphs;
  tensor<float, cuda_space> workspace;
  thread_state() = default;
  thread_state(const thread_state&) = delete;
  thread_state& operator=(const thread_state&) = delete;
  ~thread_state() {
    graphs.clear();
    if (handle) fe::detail::destroy_handle(handle);
  }
};
/// This thread's state, its handle not yet created where no attention ran.
inline thread_state& raw_state() {
  thread_local thread_state t;
  return t;
}
inline thread_state& state() {
  thread_state& t = raw_state();
  if (!t.handle) {
    load_library();
    const cudnnStatus_t st = fe::detail::create_handle(&t.handle);
    if (st != CUDNN_STATUS_SUCCESS) {
      t.handle = nullptr;
      throw error(std::string("cuDNN's fused attention: cudnnCreate failed: ") + fe::detail::get_error_string(st));
    }
  }
  return t;
}
/// The graph of pass p at shape s built for this thread's handle (built on the first call).
inline const built& graph_for(pass p, const sdpa_shape& s) {
  thread_state& t = state();
  for (const auto& [key, b] : t.graphs)
    if (key.first == p && key.second == s) return b;
  built b{sdpa_graph(p, s), 0};
  check(b.graph->build_operation_graph(t.handle), "building the operation graph", s);
  check(b.graph->create_execution_plans({fe::HeurMode_t::A}), "choosing an engine (cuDNN's heuristics)", s);
  check(b.graph->check_support(), "checking the engine's support", s);
  check(b.graph->build_plans(), "building the plan (compiling its kernels)", s);
  check(b.graph->get_workspace_size(b.workspace), "asking the workspace size", s);
  t.graphs.emplace_back(std::pair{p, s}, std::move(b));
  return t.graphs.back().second;
}
/// This thread's workspace, at least as large as the forward's and the backward's at shape s.
inline void* workspace_for(const sdpa_shape& s) {
  const std::int64_t bytes = std::max(graph_for(pass::forward, s).workspace, graph_for(pass::backward, s).workspace);
  thread_state& t = state();
  const std::int64_t floats = (bytes + 3) / 4;
  if (static_cast<std::int64_t>(t.workspace.numel()) < floats) {
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (cuDNN attention's workspace)");
    t.workspace = tensor<float, cuda_space>();  // the old one freed before the new one is made
    t.workspace = tensor<float, cuda_space>({floats});
  }
  return floats ? t.workspace.data() : nullptr;
}
inline void execute(pass p, const sdpa_shape& s, std::unordered_map<std::int64_t, void*> pack, cudaStream_t st) {
  void* ws = workspace_for(s);
  const built& b = graph_for(p, s);
  const cudnnStatus_t set = fe::detail::set_stream(state().handle, st);
  if (set != CUDNN_STATUS_SUCCESS)
    throw error(std::string("cuDNN's fused attention: cudnnSetStream failed: ") + fe::detail::get_error_string(set));
  check(b.graph->execute(state().handle, pack, ws), p == pass::forward ? "running the forward" : "running the backward",
        s);
}
}  // namespace detail

/// Frees this thread's workspace (the next call makes it again).
inline void release_workspace() {
  detail::thread_state& t = detail::raw_state();
  if (t.workspace.numel()) cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (cuDNN attention's workspace)");
  t.workspace = tensor<float, cuda_space>();
}

/// Bytes of device workspace this thread keeps for shape s (the larger of the forward's and the
/// backward's; builds both graphs, so it needs the GPU).
inline std::int64_t workspace_bytes(const sdpa_shape& s) {
  return std::max(detail::graph_for(pass::forward, s).workspace, detail::graph_for(pass::backward, s).workspace);
}

/// o and stats (the rows' log-sum-exp) of causal attention over q, k, v; bf16 as __nv_bfloat16
/// or tessera's bf16 (2 bytes each).
inline void sdpa_forward(void* o, float* stats, const void* q, const void* k, const void* v, const sdpa_shape& s,
                         cudaStream_t st = nullptr) {
  detail::execute(pass::forward, s,
                  {{q_uid, const_cast<void*>(q)},
                   {k_uid, const_cast<void*>(k)},
                   {v_uid, const_cast<void*>(v)},
                   {o_uid, o},
                   {stats_uid, stats}},
                  st);
}

/// dq, dk, dv (written) of sdpa_forward's o given its output's gradient dout and its stats.
inline void sdpa_backward(void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k, const void* v,
                          const void* o, const float* stats, const sdpa_shape& s, cudaStream_t st = nullptr) {
  detail::execute(pass::backward, s,
                  {{q_uid, const_cast<void*>(q)},
                   {k_uid, const_cast<void*>(k)},
                   {v_uid, const_cast<void*>(v)},
                   {o_uid, const_cast<void*>(o)},
                   {do_uid, const_cast<void*>(dout)},
                   {stats_uid, const_cast<float*>(stats)},
                   {dq_uid, dq},
                   {dk_uid, dk},
                   {dv_uid, dv}},
                  st);
}

namespace detail {
/// This header's functions, as attention_library.hpp's table holds them (streams as void*).
inline constexpr linked_functions functions{
    &load_library, &workspace_bytes, &release_workspace,
    [](void* o, float* stats, const void* q, const void* k, const void* v, const sdpa_shape& s, void* st) {
      sdpa_forward(o, stats, q, k, v, s, static_cast<cudaStream_t>(st));
    },
    [](void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k, const void* v, const void* o,
       const float* stats, const sdpa_shape& s, void* st) {
      sdpa_backward(dq, dk, dv, dout, q, k, v, o, stats, s, static_cast<cudaStream_t>(st));
    }};
/// Registered before main by each unit that includes this header (the same table each time).
inline bool link() {
  tessera::cuda::cudnn::detail::linked_slot() = &functions;
  return true;
}
namespace {
[[maybe_unused]] const bool linked_here = link();
}  // namespace
}  // namespace detail

}  // namespace tessera::cuda::cudnn

#endif  // !defined(__CUDACC__)
