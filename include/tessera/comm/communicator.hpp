// tessera/comm/communicator.hpp: the `communicator` concept every backend models, and
// typed helpers over spans that check sizes before a byte moves.
//
// A communicator is one rank's view of an ordered group of ranks. Every call is
// asynchronous: it returns a request, and the buffers it names must stay alive and
// untouched until that request's wait() returns. Calls on one communicator must be issued
// in the same order on every rank (as MPI and NCCL require); a mismatch is reported, with
// rank, group and call, as comm::error. Counts are per rank block:
//   all_gather     send: count           recv: count * size()   (blocks in rank order)
//   reduce_scatter send: count * size()  recv: count            (rank r keeps block r)
//   all_reduce     send: count           recv: count            (send may equal recv)
//   all_to_all     send: count * size()  recv: count * size()   (block q goes to rank q)
//   broadcast      buf:  count on every rank, the root's values win
//   send / recv    count elements to / from `peer` (a rank of this communicator), tag
// group_start()/group_end() bracket a batch of calls issued together (ncclGroupStart/End):
// point-to-point calls inside one group never deadlock, whatever their order.
// split(ranks) makes the sub-communicator of an ordered list of this communicator's
// ranks; it is called by exactly the ranks in the list, in the same order on each.
#pragma once

#include <concepts>
#include <cstddef>
#include <tessera/core/source_location.hpp>
#include <span>
#include <string>
#include <string_view>
#include <tessera/comm/types.hpp>
#include <vector>

namespace tessera::comm {

template <class R>
concept request = requires(R& r) {
  r.wait();
  { r.test() } -> std::convertible_to<bool>;
};

template <class C>
concept communicator = requires(C& c, const C& cc, const void* in, void* out, std::size_t n,
                                dtype t, reduce_op op, int peer, int tag,
                                std::span<const int> ranks, tessera::source_location loc) {
  { cc.rank() } -> std::convertible_to<int>;
  { cc.size() } -> std::convertible_to<int>;
  { cc.world_ranks() } -> std::convertible_to<std::span<const int>>;
  { c.all_gather(in, out, n, t, loc) } -> request;
  { c.reduce_scatter(in, out, n, t, op, loc) } -> request;
  { c.all_reduce(in, out, n, t, op, loc) } -> request;
  { c.all_to_all(in, out, n, t, loc) } -> request;
  { c.broadcast(out, n, t, peer, loc) } -> request;
  { c.send(in, n, t, peer, tag, loc) } -> request;
  { c.recv(out, n, t, peer, tag, loc) } -> request;
  { c.barrier(loc) } -> request;
  c.group_start();
  c.group_end();
  { c.split(ranks, loc) } -> std::same_as<C>;
};

/// Whether a communicator whose backend() is `backend` moves device buffers: nccl, and
/// cuda_staged over any host communicator ("cuda-staged(threads)"); the others move host buffers.
inline bool moves_device_buffers(std::string_view backend) noexcept {
  return backend == "nccl" || backend.starts_with("cuda-staged");
}

/// RAII bracket of a group of calls: `{ comm::group g(c); c.send(...); c.recv(...); }`.
template <communicator C>
class group {
 public:
  explicit group(C& c) : c_(c) { c_.group_start(); }
  group(const group&) = delete;
  group& operator=(const group&) = delete;
  ~group() noexcept(false) { c_.group_end(); }

 private:
  C& c_;
};

namespace detail {
inline void check_size(bool ok, std::string_view call, std::size_t got, std::size_t want,
                       std::string_view what, int rank, std::span<const int> ranks,
                       const tessera::source_location& loc) {
  if (ok) return;
  throw error("tessera::comm: rank " + std::to_string(rank) + " of group " +
              group_string(ranks) + ": " + std::string(call) + " at " + where(loc) + ": " +
              std::string(what) + " has " + std::to_string(got) + " elements, expected " +
              std::to_string(want) + "; size the buffer as the call's contract says");
}
}  // namespace detail

// ---- typed helpers: element type and sizes checked here, then the byte-level call ----

template <communicator C, element T>
auto all_gather(C& c, std::span<const T> in, std::span<T> out,
                tessera::source_location loc = tessera::source_location::current()) {
  const auto n = static_cast<std::size_t>(c.size());
  detail::check_size(out.size() == in.size() * n, "all_gather", out.size(), in.size() * n,
                     "the output", c.rank(), c.world_ranks(), loc);
  return c.all_gather(in.data(), out.data(), in.size(), dtype_of<T>, loc);
}

template <communicator C, element T>
auto reduce_scatter(C& c, std::span<const T> in, std::span<T> out, reduce_op op = reduce_op::sum,
                    tessera::source_location loc = tessera::source_location::current()) {
  const auto n = static_cast<std::size_t>(c.size());
  detail::check_size(in.size() == out.size() * n, "reduce_scatter", in.size(), out.size() * n,
                     "the input", c.rank(), c.world_ranks(), loc);
  return c.reduce_scatter(in.data(), out.data(), out.size(), dtype_of<T>, op, loc);
}

template <communicator C, element T>
auto all_reduce(C& c, std::span<const T> in, std::span<T> out, reduce_op op = reduce_op::sum,
                tessera::source_location loc = tessera::source_location::current()) {
  detail::check_size(out.size() == in.size(), "all_reduce", out.size(), in.size(), "the output",
                     c.rank(), c.world_ranks(), loc);
  return c.all_reduce(in.data(), out.data(), in.size(), dtype_of<T>, op, loc);
}

/// In-place all-reduce.
template <communicator C, element T>
auto all_reduce(C& c, std::span<T> buf, reduce_op op = reduce_op::sum,
                tessera::source_location loc = tessera::source_location::current()) {
  return c.all_reduce(buf.data(), buf.data(), buf.size(), dtype_of<T>, op, loc);
}

template <communicator C, element T>
auto all_to_all(C& c, std::span<const T> in, std::span<T> out,
                tessera::source_location loc = tessera::source_location::current()) {
  const auto n = static_cast<std::size_t>(c.size());
  detail::check_size(in.size() % n == 0, "all_to_all", in.size(), in.size() / n * n,
                     "the input (a multiple of the group size)", c.rank(), c.world_ranks(), loc);
  detail::check_size(out.size() == in.size(), "all_to_all", out.size(), in.size(), "the output",
                     c.rank(), c.world_ranks(), loc);
  return c.all_to_all(in.data(), out.data(), in.size() / n, dtype_of<T>, loc);
}

template <communicator C, element T>
auto broadcast(C& c, std::span<T> buf, int root,
               tessera::source_location loc = tessera::source_location::current()) {
  return c.broadcast(buf.data(), buf.size(), dtype_of<T>, root, loc);
}

template <communicator C, element T>
auto send(C& c, std::span<const T> buf, int peer, int tag = 0,
          tessera::source_location loc = tessera::source_location::current()) {
  return c.send(buf.data(), buf.size(), dtype_of<T>, peer, tag, loc);
}

template <communicator C, element T>
auto recv(C& c, std::span<T> buf, int peer, int tag = 0,
          tessera::source_location loc = tessera::source_location::current()) {
  return c.recv(buf.data(), buf.size(), dtype_of<T>, peer, tag, loc);
}

/// The sub-communicator of the given ranks of `c`, in that order.
template <communicator C>
C split(C& c, const std::vector<int>& ranks,
        tessera::source_location loc = tessera::source_location::current()) {
  return c.split(std::span<const int>(ranks), loc);
}

}  // namespace tessera::comm
