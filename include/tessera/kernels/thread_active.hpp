// tessera/kernels/thread_active.hpp: one object of type T active on each thread, made so by a
// scope -- how a model hands the backends' kernels its stores without a parameter through every
// layer between (rounded_weights.hpp's kept bf16 weights, pending_gradients.hpp's gradients).
#pragma once

namespace tessera {

/// Base of T (CRTP): T::active() is the thread's active T (nullptr: none); a T::scope makes one
/// active until it ends, then the one before.
template <class T>
class thread_active {
 public:
  static T*& active() noexcept {
    thread_local T* a = nullptr;
    return a;
  }
  class scope {
   public:
    explicit scope(T* s) noexcept : prev_(active()) { active() = s; }
    ~scope() { active() = prev_; }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

   private:
    T* prev_;
  };
};

}  // namespace tessera
