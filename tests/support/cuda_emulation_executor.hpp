// How the CUDA emulation (cuda_emulation.hpp) runs a grid: one block after the other, each
// block's threads either as host threads or as fibers on the launching host thread.
//
//   threads  every CUDA thread of a block a std::thread (made once a launch, running the
//            blocks in turn), barriers std::barrier: ThreadSanitizer sees a missing barrier as
//            a race. Slow (a launch is limited to 16,384 CUDA threads), and what the sanitizer
//            builds use.
//   fibers   every CUDA thread a Boost.Context fiber with its own stack (guard page below it),
//            run in turn on the launching thread until it ends or waits at a barrier; a barrier
//            releases its fibers when all have arrived; a barrier some threads never reach
//            (divergence) is reported as an error instead of a hang. When a launch's first
//            block reached no barrier, its other blocks' threads run as plain calls, one after
//            the other (a barrier there is an error): per-element kernels over millions of
//            elements cost about 10 ns a thread, so that whole training steps run. Needs TESSERA_EMULATION_FIBERS (Boost.Context
//            linked), and is not used under a sanitizer (they do not follow the stack switches).
//
// Launches are serialized process-wide: a kernel's __shared__ arrays are statics.
#pragma once

#include <atomic>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if !defined(TESSERA_EMULATION_SANITIZED)
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define TESSERA_EMULATION_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define TESSERA_EMULATION_SANITIZED 1
#endif
#endif
#endif

#if TESSERA_EMULATION_FIBERS
#include <sys/mman.h>

#include <boost/context/fiber.hpp>
#endif

/// A grid's or a block's extents, and a thread's or block's index (CUDA's dim3 and uint3).
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace tessera::cuda::emulation {

enum class executor { threads, fibers };
/// What launches use; fibers where they are built and no sanitizer watches.
inline std::atomic<executor> current_executor{
#if TESSERA_EMULATION_FIBERS && !TESSERA_EMULATION_SANITIZED
    executor::fibers
#else
    executor::threads
#endif
};

inline constexpr std::size_t max_shared_bytes = 232448;  // an H100's opt-in limit a block: 227 KiB
inline constexpr std::size_t max_threads = 16384;        // a launch's threads in all, as host threads

namespace detail {
/// The fiber the scheduler runs now, and what it yields to (fibers executor).
/// Suspends the running fiber until `generation` is no longer g.
void wait_until_changed(const std::uint64_t& generation, std::uint64_t g);
inline thread_local std::uint64_t barrier_calls = 0;  // under fibers
inline thread_local bool direct = false;               // threads run as plain calls: no barrier may come
[[noreturn]] inline void barrier_in_direct_block() {
  throw std::logic_error(
      "emulation: a block reached a barrier where the launch's first block reached none; the fibers executor "
      "runs such launches' other blocks as plain calls (give every block the same barriers, or run this test "
      "with executor::threads)");
}
}  // namespace detail

/// A barrier of n CUDA threads: a std::barrier (threads) or a count the fibers poll.
class barrier {
 public:
  barrier(int n, executor e) : n_(n) {
    if (e == executor::threads) threads_ = std::make_unique<std::barrier<>>(n);
  }
  void arrive_and_wait() {
    if (threads_) {
      threads_->arrive_and_wait();
      return;
    }
    if (detail::direct) detail::barrier_in_direct_block();
    ++detail::barrier_calls;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      return;
    }
    detail::wait_until_changed(generation_, generation_);
  }

 private:
  int n_;
  std::unique_ptr<std::barrier<>> threads_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
};

/// The state one block's threads share.
struct block {
  block(int threads, unsigned char* shared, executor e)
      : all(threads, e), shared(shared), exchange(static_cast<std::size_t>(threads)),
        mma_slots(static_cast<std::size_t>(threads) * 12), rows(static_cast<std::size_t>(threads) * 2),
        phase(static_cast<std::size_t>(threads)) {
    for (int w = 0; w < threads / 32; ++w) warps.push_back(std::make_unique<barrier>(32, e));
  }
  barrier all;
  std::vector<std::unique_ptr<barrier>> warps;
  std::atomic<int> any{0};
  unsigned char* shared;
  std::vector<float> exchange;  // __shfl_xor_sync's slots, one a thread
  // The warp-wide instructions' exchanges (mma_m16n8k16_bf16: six operand registers a thread;
  // ldmatrix_x4: a row address a thread), twice: a thread's calls alternate between the two
  // halves (phase), so that one barrier a call suffices -- a lane writes a half again only two
  // calls later, after the whole warp has passed the barrier of the call in between.
  std::vector<std::uint32_t> mma_slots;
  std::vector<const void*> rows;
  std::vector<std::uint8_t> phase;
};
inline thread_local block* current = nullptr;
inline thread_local unsigned thread_rank = 0;  // x fastest, as CUDA numbers a block's threads into warps

inline unsigned char* shared_memory() { return current->shared; }
inline unsigned lane() { return thread_rank % 32; }
inline barrier& warp() { return *current->warps[thread_rank / 32]; }

/// The threadIdx of a block's thread t (x fastest).
inline dim3 thread_index(unsigned t, dim3 block_dim) {
  if (block_dim.y == 1 && block_dim.z == 1) return {t, 0, 0};
  return {t % block_dim.x, t / block_dim.x % block_dim.y, t / (block_dim.x * block_dim.y)};
}

/// Makes the calling host thread (or fiber) CUDA thread t of block (x, y, z).
inline void enter(block& b, unsigned t, dim3 block_index, dim3 block_dim, dim3 grid) {
  thread_rank = t;
  threadIdx = thread_index(t, block_dim);
  blockIdx = block_index;
  blockDim = block_dim;
  gridDim = grid;
  current = &b;
}

#if TESSERA_EMULATION_FIBERS
namespace detail {
namespace ctx = boost::context;
/// Fiber stacks of 256 KiB with a guard page below each, kept for the next block.
class stack_pool {
 public:
  static constexpr std::size_t size = std::size_t{256} << 10, guard = 4096;
  ctx::stack_context allocate() {
    void* base = nullptr;
    if (free_.empty()) {
      base = ::mmap(nullptr, size + guard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (base == MAP_FAILED) throw std::bad_alloc();
      ::mprotect(base, guard, PROT_NONE);
    } else {
      base = free_.back();
      free_.pop_back();
    }
    ctx::stack_context s;
    s.size = size;
    s.sp = static_cast<char*>(base) + guard + size;
    return s;
  }
  void deallocate(ctx::stack_context& s) noexcept { free_.push_back(static_cast<char*>(s.sp) - size - guard); }

 private:
  std::vector<void*> free_;
};
/// Boost.Context's StackAllocator over the pool (copied into every fiber).
struct pooled_stack {
  stack_pool* pool;
  ctx::stack_context allocate() { return pool->allocate(); }
  void deallocate(ctx::stack_context& s) noexcept { pool->deallocate(s); }
};

/// One CUDA thread of a block run as fibers.
struct fiber_slot {
  ctx::fiber self;  // resumes the thread (empty while it runs)
  dim3 index;       // its threadIdx, computed once
  bool done = false;
  const std::uint64_t* waits = nullptr;  // the generation of the barrier it waits at, and its value then
  std::uint64_t at = 0;
  bool runnable() const { return !done && (waits == nullptr || *waits != at); }
};

/// A block's threads as fibers, and the host context that runs them (`main`). A thread that
/// waits at a barrier or ends switches straight to the next runnable thread, in round-robin
/// order from its own index (the order a scheduler looping over the threads would give), and
/// back to `main` only when none is runnable: one switch a wait instead of two through a
/// scheduler, which with the divisions of threadIdx done at every resume were half of
/// test_cuda_llama_emulated's samples at -Og (docs/performance.md, "CI").
struct fiber_block {
  std::vector<fiber_slot> slots;
  ctx::fiber main;  // resumes launch(): nothing is runnable, or a thread threw
  std::exception_ptr failure;
  /// What `s` hands the host thread to when it waits or ends: the first runnable thread after
  /// it (itself last), made the running CUDA thread, or else main.
  ctx::fiber& next_after(const fiber_slot& s);
};
inline thread_local fiber_block* scheduler = nullptr;
inline thread_local fiber_slot* running = nullptr;

inline ctx::fiber& fiber_block::next_after(const fiber_slot& s) {
  const auto t = static_cast<std::size_t>(&s - slots.data());
  for (std::size_t k = 1; k <= slots.size(); ++k) {
    const std::size_t u = t + k < slots.size() ? t + k : t + k - slots.size();
    if (fiber_slot& next = slots[u]; next.runnable()) {
      thread_rank = static_cast<unsigned>(u);
      threadIdx = next.index;
      running = &next;
      return next.self;
    }
  }
  running = nullptr;  // every other thread ended or waits (launch() reports a hang)
  return main;
}

/// Suspends the running thread, storing its continuation in its slot, and resumes `to` (a
/// thread's continuation, or main).
inline void switch_to(fiber_slot* me, ctx::fiber& to) {
  std::move(to).resume_with([me](ctx::fiber&& from) {
    me->self = std::move(from);
    return ctx::fiber{};
  });
}

inline void wait_until_changed(const std::uint64_t& generation, std::uint64_t g) {
  fiber_slot* me = running;
  fiber_block& f = *scheduler;
  me->waits = &generation;
  me->at = g;
  while (generation == g) switch_to(me, f.next_after(*me));
  me->waits = nullptr;
}

/// Runs one block's threads as fibers, each until it ends or waits at a barrier, and again
/// once that barrier has released it, until all have ended; throws what a thread threw, or
/// when every thread left waits at a barrier that will not release (some never reach it).
template <class Kernel>
void run_fibers(block& b, int threads, dim3 index, dim3 block_dim, dim3 grid, Kernel& kernel) {
  static stack_pool pool;  // under the launch lock
  fiber_block f;
  f.slots.resize(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    fiber_slot& s = f.slots[static_cast<std::size_t>(t)];
    s.index = thread_index(static_cast<unsigned>(t), block_dim);
    s.self = ctx::fiber(std::allocator_arg, pooled_stack{&pool}, [&f, &s, &kernel](ctx::fiber&&) {
      try {
        kernel();
      } catch (const ctx::detail::forced_unwind&) {
        throw;  // launch() abandons this fiber: let Boost unwind it
      } catch (...) {
        f.failure = std::current_exception();
      }
      s.done = true;
      if (f.failure) {
        running = nullptr;
        return std::move(f.main);
      }
      return std::move(f.next_after(s));
    });
  }
  fiber_block* outer = std::exchange(scheduler, &f);
  enter(b, 0, index, block_dim, grid);
  running = &f.slots.front();
  std::move(f.slots.front().self).resume_with([&f](ctx::fiber&& from) {
    f.main = std::move(from);
    return ctx::fiber{};
  });
  scheduler = outer;
  running = nullptr;
  if (f.failure) std::rethrow_exception(f.failure);  // the slots' destructors unwind the others
  for (const fiber_slot& s : f.slots)
    if (!s.done)
      throw std::logic_error("emulation: block (" + std::to_string(index.x) + ", " + std::to_string(index.y) + ", " +
                             std::to_string(index.z) +
                             ") hangs: threads wait at a barrier (__syncthreads / __syncwarp) that others never reach");
}
}  // namespace detail
#else
namespace detail {
inline void wait_until_changed(const std::uint64_t&, std::uint64_t) {
  throw std::logic_error("emulation: fibers are not built (TESSERA_EMULATION_FIBERS)");
}
}  // namespace detail
#endif

/// The lock every launch holds: a kernel's __shared__ arrays are statics, blocks run one at a time.
inline std::recursive_mutex& launch_lock() {
  static std::recursive_mutex m;
  return m;
}

/// Runs `kernel()` on every thread of a grid of blocks of block_dim threads (a multiple of 32,
/// at most 1,024), one block after the other, each with `shared_bytes` of dynamic shared
/// memory, filled with 0xff bytes (NaN in f32 and bf16: a read before a write shows).
template <class Kernel>
void launch(dim3 grid, dim3 block_dim, std::size_t shared_bytes, Kernel kernel) {
  const int threads = static_cast<int>(block_dim.x * block_dim.y * block_dim.z);
  if (threads % 32 != 0 || threads > 1024 || threads == 0)
    throw std::invalid_argument("emulation::launch: bad block size " + std::to_string(threads));
#if TESSERA_EMULATION_FIBERS
  const executor e = current_executor.load();
#else
  const executor e = executor::threads;  // the only one built
#endif
  const std::size_t all = std::size_t{grid.x} * grid.y * grid.z * static_cast<std::size_t>(threads);
  if (e == executor::threads && all > max_threads)
    throw std::invalid_argument("emulation::launch: " + std::to_string(all) +
                                " threads in all; the threads executor runs each on a host thread, slowly -- "
                                "keep a test's grid under " +
                                std::to_string(max_threads) + " threads (grid-stride kernels take any grid)");
  if (shared_bytes > max_shared_bytes)
    throw std::invalid_argument("emulation::launch: " + std::to_string(shared_bytes) +
                                " bytes of shared memory a block, more than an H100 gives (232448)");
  const std::size_t n = shared_bytes ? shared_bytes : 1;
  std::unique_ptr<unsigned char, void (*)(unsigned char*)> mem(
      static_cast<unsigned char*>(::operator new(n, std::align_val_t{128})),
      [](unsigned char* p) { ::operator delete(p, std::align_val_t{128}); });
  std::lock_guard lock(launch_lock());
  std::vector<dim3> order;  // the blocks, x fastest
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) order.push_back(dim3{x, y, z});
  // a block's state, its shared memory refilled with NaN bytes
  const auto fresh_block = [&] {
    std::memset(mem.get(), 0xff, n);
    return std::make_unique<block>(threads, mem.get(), e);
  };
  if (e == executor::threads) {
    // One host thread per CUDA thread of a block, created once for the launch: they run the
    // blocks in turn, a barrier between two blocks (whose completion makes the next block's
    // state). Creating them again for every block cost most of the threads executor's time
    // (under ThreadSanitizer: 77 s of test_kernels_emulated's run).
    auto b = fresh_block();
    std::size_t ended = 0;
    const auto next_block = [&]() noexcept {
      if (++ended < order.size()) b = fresh_block();
    };
    std::barrier<decltype(next_block)> between(threads, next_block);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        for (const dim3& index : order) {
          enter(*b, static_cast<unsigned>(t), index, block_dim, grid);
          kernel();
          between.arrive_and_wait();
        }
      });
    for (auto& t : ts) t.join();
    return;
  }
#if TESSERA_EMULATION_FIBERS
  bool first = true, barriers = true;  // whether blocks after the first need fibers
  for (const dim3& index : order) {
    const auto b = fresh_block();
    if (barriers) {
      const std::uint64_t before = detail::barrier_calls;
      detail::run_fibers(*b, threads, index, block_dim, grid, kernel);
      barriers = !first || detail::barrier_calls != before;
      first = false;
      continue;
    }
    struct plain {
      plain() { detail::direct = true; }
      ~plain() { detail::direct = false; }
    } scope;
    for (int t = 0; t < threads; ++t) {
      enter(*b, static_cast<unsigned>(t), index, block_dim, grid);
      kernel();
    }
  }
#endif
}
/// A one-dimensional block of `threads` threads.
template <class Kernel>
void launch(dim3 grid, int threads, std::size_t shared_bytes, Kernel kernel) {
  launch(grid, dim3{static_cast<unsigned>(threads)}, shared_bytes, kernel);
}

}  // namespace tessera::cuda::emulation
