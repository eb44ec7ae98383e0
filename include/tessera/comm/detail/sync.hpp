// tessera/comm/detail/sync.hpp: spin-then-block waiting for the threads backend.
//
// A waiter first spins (cheap when every rank has its own core and messages are small),
// then yields, then blocks on a condition variable with its deadline. Notifiers pay for
// the mutex only when someone is blocked: both sides make a read-modify-write on
// `waiters_`, and the notifier then passes through the mutex, so a wake-up cannot be lost.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tessera::comm::detail {

using clock = std::chrono::steady_clock;

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

class waitset {
 public:
  /// `oversubscribed`: more ranks than cores, so spinning only steals their time.
  explicit waitset(bool oversubscribed) noexcept
      : oversubscribed_(oversubscribed), spins_(oversubscribed ? 0 : 256) {}

  /// Wakes every blocked waiter; call after changing state that a predicate reads.
  void notify() {
    // a read-modify-write, so that it reads the latest count and orders the state change
    // before it (no fence: ThreadSanitizer does not model fences)
    if (waiters_.fetch_add(0, std::memory_order_seq_cst) > 0) {
      { std::lock_guard<std::mutex> lock(m_); }
      cv_.notify_all();
    }
  }

  /// Waits until pred() holds (true) or the deadline passes (false, pred() still false).
  /// The spin budget adapts: it grows while spinning pays off (peers run on other cores
  /// and answer within it) and shrinks while it does not (peers share our core).
  template <class Pred>
  bool wait_until(Pred&& pred, clock::time_point deadline) {
    const int budget = spins_.load(std::memory_order_relaxed);
    for (int i = 0; i < budget; ++i) {
      if (pred()) {
        if (!oversubscribed_ && budget < max_spins)
          spins_.store(std::min(max_spins, budget + budget / 4 + 16), std::memory_order_relaxed);
        return true;
      }
      cpu_relax();
    }
    if (budget > min_spins) spins_.store(budget / 2, std::memory_order_relaxed);
    for (int i = 0; i < yields; ++i) {
      if (pred()) return true;
      std::this_thread::yield();
    }
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    bool ok = true;
    {
      std::unique_lock<std::mutex> lock(m_);
      while (!pred()) {
        if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
          ok = pred();
          break;
        }
      }
    }
    waiters_.fetch_sub(1, std::memory_order_seq_cst);
    return ok;
  }

 private:
  static constexpr int max_spins = 20000, min_spins = 16, yields = 16;
  bool oversubscribed_;
  std::atomic<int> spins_;
  std::atomic<int> waiters_{0};
  std::mutex m_;
  std::condition_variable cv_;
};

}  // namespace tessera::comm::detail
