// tessera/comm/detail/sync.hpp: spin-then-block waiting for the threads backend.
//
// A waiter first spins (cheap when every rank has its own core and messages are small),
// then yields, then blocks on a condition variable with its deadline. Notifiers pay for
// the mutex only when someone is blocked, and otherwise only read a counter that stays in
// every core's cache (no read-modify-write on a line shared by all ranks).
//
// Protocol (no lost wake-up): a notifier changes the state that predicates read with a
// seq_cst store or read-modify-write, then calls notify(); a predicate reads that state
// with seq_cst loads. A blocking waiter increments `waiters_` (seq_cst) before it checks
// its predicate under the mutex. In the single total order of seq_cst operations either
// the notifier's read of `waiters_` follows the increment (it sees the waiter and passes
// through the mutex before notify_all), or it precedes it, and then the state change
// precedes the waiter's check, which sees it.
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
  explicit waitset(bool oversubscribed) noexcept : oversubscribed_(oversubscribed) {}

  /// Wakes every blocked waiter; call after changing state that a predicate reads.
  void notify() {
    notify_if([] { return true; });
  }
  /// notify() only if `complete()` holds after this change: for a state that waiters need
  /// only once every rank has changed its part (all posted, all left). Each rank changes
  /// its part and then reads the others' (seq_cst), so the rank whose change comes last
  /// in the single total order sees the state complete; if no waiter was counted by then,
  /// every waiter counted later checks its predicate after the last change and sees it.
  template <class Complete>
  void notify_if(Complete&& complete) {
    if (waiters_.load(std::memory_order_seq_cst) > 0 && complete()) {
      { std::lock_guard<std::mutex> lock(m_); }
      cv_.notify_all();
    }
  }

  /// Waits until pred() holds (true) or the deadline passes (false, pred() still false).
  /// The spin budget adapts: it grows while spinning pays off (peers run on other cores
  /// and answer within it) and shrinks while it does not (peers share our core).
  /// The spin budget is the calling thread's own (no shared line written on every wait).
  template <class Pred>
  bool wait_until(Pred&& pred, clock::time_point deadline) {
    int& spins = spin_budget();
    const int budget = oversubscribed_ ? 0 : spins;
    for (int i = 0; i < budget; ++i) {
      if (pred()) {
        if (budget < max_spins) spins = std::min(max_spins, budget + budget / 4 + 16);
        return true;
      }
      cpu_relax();
    }
    if (budget > min_spins) spins = budget / 2;
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
  static int& spin_budget() noexcept {
    thread_local int budget = 256;
    return budget;
  }
  bool oversubscribed_;
  alignas(64) std::atomic<int> waiters_{0};
  std::mutex m_;
  std::condition_variable cv_;
};

}  // namespace tessera::comm::detail
