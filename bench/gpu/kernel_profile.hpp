// bench/gpu/kernel_profile.hpp: GPU time by kernel over a stretch of a program, through CUPTI's
// activity records (the tracing nsys is built on), so that a GPU machine without Nsight Systems
// still says where a training step's time goes. bench_gpu_llama --profile runs one step of each
// row under it and prints the table (docs/performance.md, "On GPUs").
//
//   kernel_profile p;
//   p.start();  ...work...;  cudaDeviceSynchronize();
//   auto rows = p.stop();   // by kernel name, the most GPU time first
//
// Kernels are grouped by their demangled name without the argument list (template arguments
// kept: attention's tile shapes, a cast's target type); cuBLAS's kernels by their own names.
// Copies and fills are rows of their own ("[memcpy DtoH]", "[memset]"). One profile at a time
// in a process (CUPTI's callbacks are global). Needs CUPTI (CUDA::cupti); bench only.
#pragma once

#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera_bench {

class kernel_profile {
 public:
  struct row {
    std::string name;
    std::uint64_t ns = 0;   // GPU time, summed over the calls
    std::int64_t calls = 0;
  };
  struct result {
    std::vector<row> rows;       // the most time first
    std::uint64_t busy_ns = 0;   // the rows' sum
    std::uint64_t span_ns = 0;   // first start to last end: busy plus the GPU's idle gaps
  };

  void start() {
    state& s = global();
    const std::lock_guard lock(s.mu);
    s.by_name.clear();
    s.first = UINT64_MAX;
    s.last = 0;
    check(cuptiActivityRegisterCallbacks(&requested, &completed), "cuptiActivityRegisterCallbacks");
    for (const CUpti_ActivityKind k : kinds) check(cuptiActivityEnable(k), "cuptiActivityEnable");
  }

  /// Flushes the records (call after the device has finished the work) and returns the table.
  result stop() {
    check(cuptiActivityFlushAll(1), "cuptiActivityFlushAll");
    for (const CUpti_ActivityKind k : kinds) check(cuptiActivityDisable(k), "cuptiActivityDisable");
    state& s = global();
    const std::lock_guard lock(s.mu);
    result r;
    for (auto& [name, e] : s.by_name) r.rows.push_back(e), r.busy_ns += e.ns;
    std::sort(r.rows.begin(), r.rows.end(), [](const row& a, const row& b) { return a.ns > b.ns; });
    r.span_ns = s.last > s.first ? s.last - s.first : 0;
    return r;
  }

  /// The table as Markdown: the `top` largest rows, then the rest in one row.
  static void print(const result& r, double step_seconds, std::size_t top = 30) {
    std::printf("| kernel | calls | GPU ms | share of GPU time | share of the step |\n|---|---|---|---|---|\n");
    const double step_ms = step_seconds * 1e3;
    std::uint64_t rest = 0;
    std::int64_t rest_calls = 0;
    for (std::size_t i = 0; i < r.rows.size(); ++i) {
      const row& e = r.rows[i];
      if (i >= top) {
        rest += e.ns, rest_calls += e.calls;
        continue;
      }
      std::printf("| `%s` | %lld | %.2f | %.1f%% | %.1f%% |\n", e.name.c_str(), static_cast<long long>(e.calls),
                  static_cast<double>(e.ns) / 1e6, 100.0 * static_cast<double>(e.ns) / static_cast<double>(r.busy_ns),
                  static_cast<double>(e.ns) / 1e4 / step_ms);
    }
    if (rest_calls > 0)
      std::printf("| %zu other kernels | %lld | %.2f | %.1f%% | %.1f%% |\n", r.rows.size() - top,
                  static_cast<long long>(rest_calls), static_cast<double>(rest) / 1e6,
                  100.0 * static_cast<double>(rest) / static_cast<double>(r.busy_ns),
                  static_cast<double>(rest) / 1e4 / step_ms);
    std::printf("\nGPU busy %.2f ms of a %.2f ms span (first kernel's start to the last one's end) and a %.2f ms "
                "step: %.1f%% of the step the GPU ran nothing.\n",
                static_cast<double>(r.busy_ns) / 1e6, static_cast<double>(r.span_ns) / 1e6, step_ms,
                100.0 * (1.0 - static_cast<double>(r.busy_ns) / 1e6 / step_ms));
  }

 private:
  static constexpr CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                                 CUPTI_ACTIVITY_KIND_MEMSET};
  struct state {
    std::mutex mu;
    std::map<std::string, row> by_name;
    std::uint64_t first = UINT64_MAX, last = 0;
  };
  static state& global() {
    static state s;
    return s;
  }
  static void check(CUptiResult r, const char* what) {
    if (r == CUPTI_SUCCESS) return;
    const char* msg = nullptr;
    cuptiGetResultString(r, &msg);
    throw std::runtime_error(std::string(what) + ": " + (msg ? msg : "unknown CUPTI error"));
  }

  /// "void ns::kernel<A, B>(args)" -> "ns::kernel<A, B>", at most 110 characters.
  static std::string short_name(const char* mangled) {
    int status = 0;
    const std::unique_ptr<char, decltype(&std::free)> d(abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                                        &std::free);
    std::string n = status == 0 && d ? d.get() : mangled;
    if (n.rfind("void ", 0) == 0) n.erase(0, 5);
    // the argument list: the last top-level parenthesis group
    int depth = 0;
    for (std::size_t i = 0; i < n.size(); ++i) {
      if (n[i] == '<') ++depth;
      else if (n[i] == '>') --depth;
      else if (n[i] == '(' && depth == 0 && i > 0) {
        n.erase(i);
        break;
      }
    }
    for (const char* ns : {"tessera::cuda::detail::", "tessera::cuda::", "tessera::"})
      for (std::size_t p; (p = n.find(ns)) != std::string::npos;) n.erase(p, std::char_traits<char>::length(ns));
    if (n.size() > 110) n = n.substr(0, 107) + "...";
    return n;
  }

  static void add(std::string name, std::uint64_t start, std::uint64_t end) {
    state& s = global();
    const std::lock_guard lock(s.mu);
    row& e = s.by_name[name];
    if (e.name.empty()) e.name = std::move(name);
    e.ns += end - start;
    ++e.calls;
    s.first = std::min(s.first, start);
    s.last = std::max(s.last, end);
  }

  static void CUPTIAPI requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
    constexpr std::size_t bytes = 8 << 20;
    *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, bytes));
    *size = *buffer ? bytes : 0;
    *max_records = 0;
  }

  static void CUPTIAPI completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid) {
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      switch (rec->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
          add(short_name(k->name), k->start, k->end);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
          const char* kind = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? "HtoD"
                             : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? "DtoH"
                             : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ? "DtoD"
                                                                              : "other";
          add(std::string("[memcpy ") + kind + "]", m->start, m->end);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
          add("[memset]", m->start, m->end);
          break;
        }
        default:
          break;
      }
    }
    std::free(buffer);
  }
};

}  // namespace tessera_bench
