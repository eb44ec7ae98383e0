// tessera/core/cuda_block_cache.hpp: the device blocks cuda_space frees, kept for reuse.
// tessera-requires: cuda
//
// PyTorch's caching allocator in its simplest form: blocks kept by device and exact size
// (sizes recur from step to step). cudaFree waits for the whole device and cudaMalloc is slow,
// so a runtime that gathers and frees a unit's buffers every step (FSDP) would stall the GPU
// at each free and lose the overlap of its prefetched gathers; with the cache a step after the
// first allocates no device memory (tensor/cuda_memory.hpp allocates through it).
//
// Streams: a block is handed out again on the legacy default stream, which orders it after
// the kernels queued there. Work another stream still has queued on a block when it is freed
// is waited for as PyTorch's record_stream does: a communicator that queues a call on its own
// stream records the buffers' blocks with that stream (record_stream; comm/nccl.hpp does), the
// free records an event on each such stream, and the block's next allocation makes the legacy
// stream wait for those events (cudaStreamWaitEvent: the GPU waits, the host does not).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace tessera::detail {

class cuda_block_cache {
 public:
  /// The process's cache; never destroyed (a static that holds device tensors may free them
  /// during exit), its blocks freed by the driver at exit.
  static cuda_block_cache& get() {
    static cuda_block_cache* c = new cuda_block_cache;
    return *c;
  }

  /// A kept block of `bytes` on `device`, the legacy default stream ordered after what other
  /// streams had queued on it when it was freed; nullptr when there is none.
  void* take(int device, std::size_t bytes) {
    std::lock_guard lock(m_);
    auto it = free_.find({device, bytes});
    if (it == free_.end() || it->second.empty()) {
      ++misses_;
      return nullptr;
    }
    kept k = std::move(it->second.back());
    it->second.pop_back();
    for (cudaEvent_t e : k.after) {
      (void)cudaStreamWaitEvent(nullptr, e, 0);
      (void)cudaEventDestroy(e);
    }
    ++hits_;
    live_[address(k.p)] = block{bytes, device, {}};
    return k.p;
  }
  /// A block `bytes` long that cudaMalloc just made on `device`.
  void track(void* p, std::size_t bytes, int device) {
    std::lock_guard lock(m_);
    live_[address(p)] = block{bytes, device, {}};
  }
  /// Stream `s` has queued work on the bytes at `p` (nothing when p is in no block of the
  /// cache's: memory allocated otherwise).
  void record_stream(const void* p, cudaStream_t s) {
    if (!p) return;
    std::lock_guard lock(m_);
    auto it = live_.upper_bound(address(p));
    if (it == live_.begin()) return;
    --it;
    if (address(p) >= it->first + it->second.bytes) return;
    auto& st = it->second.streams;
    for (cudaStream_t x : st)
      if (x == s) return;
    st.push_back(s);
  }
  /// Keeps the block at `p` for reuse (cudaFree when it is not one of the cache's).
  void give(void* p, std::size_t bytes) {
    std::lock_guard lock(m_);
    const auto it = live_.find(address(p));
    if (it == live_.end()) {
      (void)cudaFree(p);
      return;
    }
    kept k{p, {}};
    for (cudaStream_t s : it->second.streams) {  // what those streams have queued on it so far
      cudaEvent_t e = nullptr;
      if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess ||
          cudaEventRecord(e, s) != cudaSuccess) {  // cannot order the reuse: wait here, as cudaFree did
        if (e) (void)cudaEventDestroy(e);
        (void)cudaStreamSynchronize(s);
        continue;
      }
      k.after.push_back(e);
    }
    const int device = it->second.device;
    live_.erase(it);
    free_[{device, bytes}].push_back(std::move(k));
  }
  /// cudaFree of every kept block of `device` (-1: of every device); the bytes freed.
  std::size_t release(int device = -1) {
    std::lock_guard lock(m_);
    std::size_t n = 0;
    for (auto& [key, blocks] : free_)
      if (device < 0 || key.first == device) {
        for (kept& k : blocks) {
          for (cudaEvent_t e : k.after) (void)cudaEventDestroy(e);
          (void)cudaFree(k.p);  // (waits for the device, the events' work included)
        }
        n += key.second * blocks.size();
        blocks.clear();
      }
    return n;
  }
  /// Allocations served from the cache, and those that went to cudaMalloc.
  std::pair<std::int64_t, std::int64_t> counts() {
    std::lock_guard lock(m_);
    return {hits_, misses_};
  }

 private:
  struct block {  // a block handed out
    std::size_t bytes = 0;
    int device = 0;
    std::vector<cudaStream_t> streams;  // other streams that queued work on it
  };
  struct kept {  // a block kept for reuse
    void* p = nullptr;
    std::vector<cudaEvent_t> after;  // what the legacy stream waits for before reusing it
  };
  static std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

  cuda_block_cache() = default;
  std::mutex m_;
  std::map<std::pair<int, std::size_t>, std::vector<kept>> free_;
  std::map<std::uintptr_t, block> live_;
  std::int64_t hits_ = 0, misses_ = 0;
};

}  // namespace tessera::detail
