// tessera/kernels/cpu/parallel.hpp: the CPU kernels' thread pool.
//
// Why std::thread and not OpenMP: tessera is header-only, and `#pragma omp` in a header
// silently runs serially (and warns under -Werror) in any user TU built without -fopenmp;
// a pool needs no flag and behaves the same under g++, clang++ and nvcc. It also lets
// tessera own every thread: OpenBLAS is told to run single-threaded (see matmul.hpp) and
// large GEMMs are split into panels across this pool, so two thread pools never fight for
// the same cores.
//
// parallel_for(n, f) calls f(begin, end) on contiguous chunks covering [0, n), one chunk
// per thread (the caller works as thread 0). Nested calls from inside a chunk run serially.
// Threads: TESSERA_NUM_THREADS from the environment, else std::thread::hardware_concurrency.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::cpu {

class thread_pool {
 public:
  explicit thread_pool(int n) { start(n); }
  ~thread_pool() { stop(); }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int size() const noexcept { return n_; }
  void resize(int n) {
    if (n < 1) n = 1;
    if (n == n_) return;
    stop();
    start(n);
  }

  /// Runs job(tid) for tid in [0, size()) and waits; the caller runs tid 0.
  void run(const std::function<void(int)>& job) {
    if (n_ == 1 || in_worker()) {
      for (int t = 0; t < n_; ++t) job(t);
      return;
    }
    std::lock_guard<std::mutex> serial(dispatch_);  // one parallel region at a time
    {
      std::lock_guard<std::mutex> lk(m_);
      job_ = &job;
      pending_ = n_ - 1;
      ++generation_;
    }
    cv_.notify_all();
    in_worker() = true;
    job(0);
    in_worker() = false;
    std::unique_lock<std::mutex> lk(m_);
    done_.wait(lk, [&, this] { return pending_ == 0; });
    job_ = nullptr;
  }

  static bool& in_worker() noexcept {
    thread_local bool w = false;
    return w;
  }

 private:
  void start(int n) {
    n_ = n < 1 ? 1 : n;
    quit_ = false;
    const std::uint64_t g0 = generation_;  // workers wait for the first job after this
    for (int t = 1; t < n_; ++t) workers_.emplace_back([this, t, g0] { loop(t, g0); });
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lk(m_);
      quit_ = true;
      ++generation_;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }
  void loop(int tid, std::uint64_t seen) {
    in_worker() = true;
    for (;;) {
      const std::function<void(int)>* job = nullptr;
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&, this] { return generation_ != seen; });
        seen = generation_;
        if (quit_) return;
        job = job_;
      }
      (*job)(tid);
      std::lock_guard<std::mutex> lk(m_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  int n_ = 1;
  bool quit_ = false;
  std::uint64_t generation_ = 0;
  int pending_ = 0;
  const std::function<void(int)>* job_ = nullptr;
  std::mutex m_, dispatch_;
  std::condition_variable cv_, done_;
  std::vector<std::thread> workers_;
};

/// Threads the pool starts with: TESSERA_NUM_THREADS, else the hardware's.
inline int default_num_threads() {
  if (const char* e = std::getenv("TESSERA_NUM_THREADS")) {
    const int n = std::atoi(e);
    if (n > 0) return n;
  }
  const unsigned h = std::thread::hardware_concurrency();
  return h ? static_cast<int>(h) : 1;
}

/// The pool every tessera CPU kernel uses.
inline thread_pool& pool() {
  static thread_pool p(default_num_threads());
  return p;
}
inline int num_threads() { return pool().size(); }
/// Changes the number of threads (call between kernels, not inside one).
inline void set_num_threads(int n) { pool().resize(n); }

/// f(begin, end) over contiguous chunks of [0, n), at most one per thread; chunks are at
/// least `grain` long so tiny loops stay on the calling thread.
template <class F>
void parallel_for(std::int64_t n, F&& f, std::int64_t grain = 1) {
  if (n <= 0) return;
  const std::int64_t nt = std::min<std::int64_t>(num_threads(), std::max<std::int64_t>(1, n / std::max<std::int64_t>(grain, 1)));
  if (nt <= 1 || thread_pool::in_worker()) {
    f(std::int64_t{0}, n);
    return;
  }
  pool().run([&](int tid) {
    if (tid >= nt) return;
    const std::int64_t b = n * tid / nt, e = n * (tid + 1) / nt;
    if (b < e) f(b, e);
  });
}

/// f(i) for i in [0, n), handed out one at a time (for uneven work such as causal tiles).
template <class F>
void parallel_for_dynamic(std::int64_t n, F&& f) {
  if (n <= 0) return;
  if (n == 1 || num_threads() == 1 || thread_pool::in_worker()) {
    for (std::int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::atomic<std::int64_t> next{0};
  pool().run([&](int) {
    for (std::int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) f(i);
  });
}

}  // namespace tessera::cpu
