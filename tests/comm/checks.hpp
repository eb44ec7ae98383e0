// Backend-independent checks of the communicator contract: each function runs on every
// rank of `c` and throws tessera::error naming the first wrong element. Used by the
// threads tests (run_threads) and the mpi tests (under mpirun).
#pragma once

#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <tessera/comm/communicator.hpp>
#include <tessera/comm/detail/reduce.hpp>
#include <vector>

namespace checks {

using namespace tessera::comm;

[[noreturn]] inline void fail(const std::string& what) { throw tessera::error("check failed: " + what); }
// The message is built only when the check fails.
#define EXPECT(cond, msg)              \
  do {                                 \
    if (!(cond)) ::checks::fail(msg);  \
  } while (0)

/// A value every rank can compute: element i of rank r's block, exactly representable.
inline double val(int r, std::size_t i) { return static_cast<double>((r * 7 + static_cast<int>(i % 97)) % 64); }

template <class T> T to(double v) {
  if constexpr (sizeof(T) == 2) return T{detail::float_to_bf16(static_cast<float>(v))};
  else return static_cast<T>(v);
}
template <class T> double from(T v) {
  if constexpr (sizeof(T) == 2) return detail::bf16_to_float(v);
  else return static_cast<double>(v);
}

/// bf16 is moved as its 16-bit pattern in these checks.
template <class T> constexpr dtype dt() {
  if constexpr (std::is_same_v<T, std::uint16_t>) return dtype::bf16;
  else return dtype_of<T>;
}

template <class C, class T>
void all_gather(C& c, std::size_t count, bool in_place) {
  const int n = c.size(), r = c.rank();
  std::vector<T> out(count * static_cast<std::size_t>(n), to<T>(-1));
  std::vector<T> in(count);
  for (std::size_t i = 0; i < count; ++i) in[i] = to<T>(val(r, i));
  const void* src = in.data();
  if (in_place) {
    std::copy(in.begin(), in.end(), out.begin() + static_cast<std::ptrdiff_t>(count * static_cast<std::size_t>(r)));
    src = out.data() + count * static_cast<std::size_t>(r);
  }
  c.all_gather(src, out.data(), count, dt<T>()).wait();
  for (int p = 0; p < n; ++p)
    for (std::size_t i = 0; i < count; ++i)
      EXPECT(from(out[static_cast<std::size_t>(p) * count + i]) == val(p, i),
             "all_gather count " + std::to_string(count) + " block " + std::to_string(p) +
                 " element " + std::to_string(i) + " on rank " + std::to_string(r));
}

inline double fold(reduce_op op, int n, std::size_t i, int block) {
  double acc = val(0, i + static_cast<std::size_t>(block));
  for (int p = 1; p < n; ++p) {
    const double v = val(p, i + static_cast<std::size_t>(block));
    acc = op == reduce_op::max ? std::max(acc, v) : op == reduce_op::min ? std::min(acc, v) : acc + v;
  }
  return op == reduce_op::avg ? acc / n : acc;
}

template <class C, class T>
void reduce_scatter(C& c, std::size_t count, reduce_op op) {
  const int n = c.size(), r = c.rank();
  std::vector<T> in(count * static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = to<T>(val(r, i));
  std::vector<T> out(count, to<T>(-1));
  c.reduce_scatter(in.data(), out.data(), count, dt<T>(), op).wait();
  for (std::size_t i = 0; i < count; ++i) {
    const double want = fold(op, n, i + count * static_cast<std::size_t>(r), 0);
    EXPECT(from(out[i]) == from(to<T>(want)),
           "reduce_scatter " + std::string(name_of(op)) + " count " + std::to_string(count) +
               " element " + std::to_string(i) + " on rank " + std::to_string(r) + ": got " +
               std::to_string(from(out[i])) + ", want " + std::to_string(want));
  }
}

template <class C, class T>
void all_reduce(C& c, std::size_t count, reduce_op op, bool in_place) {
  const int r = c.rank();
  std::vector<T> in(count), out(count, to<T>(-1));
  for (std::size_t i = 0; i < count; ++i) in[i] = to<T>(val(r, i));
  T* dst = in_place ? in.data() : out.data();
  c.all_reduce(in.data(), dst, count, dt<T>(), op).wait();
  for (std::size_t i = 0; i < count; ++i) {
    const double want = fold(op, c.size(), i, 0);
    EXPECT(from(dst[i]) == from(to<T>(want)),
           "all_reduce " + std::string(name_of(op)) + " count " + std::to_string(count) +
               " element " + std::to_string(i) + " on rank " + std::to_string(r) + ": got " +
               std::to_string(from(dst[i])) + ", want " + std::to_string(want));
  }
}

template <class C, class T>
void all_to_all(C& c, std::size_t count) {
  const int n = c.size(), r = c.rank();
  const auto nn = static_cast<std::size_t>(n);
  std::vector<T> in(count * nn), out(count * nn, to<T>(-1));
  // block q of rank r holds val(r * n + q, i)
  for (std::size_t q = 0; q < nn; ++q)
    for (std::size_t i = 0; i < count; ++i) in[q * count + i] = to<T>(val(r * n + static_cast<int>(q), i));
  c.all_to_all(in.data(), out.data(), count, dt<T>()).wait();
  for (std::size_t p = 0; p < nn; ++p)
    for (std::size_t i = 0; i < count; ++i)
      EXPECT(from(out[p * count + i]) == val(static_cast<int>(p) * n + r, i),
             "all_to_all count " + std::to_string(count) + " block " + std::to_string(p) +
                 " on rank " + std::to_string(r));
}

template <class C>
void broadcast(C& c, std::size_t count, int root) {
  std::vector<float> buf(count);
  for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(val(c.rank(), i));
  c.broadcast(buf.data(), count, dtype::f32, root).wait();
  for (std::size_t i = 0; i < count; ++i)
    EXPECT(buf[i] == static_cast<float>(val(root, i)), "broadcast from " + std::to_string(root));
}

/// Ring exchange in a group: send to r+1 and receive from r-1, issued in either order.
template <class C>
void ring(C& c, std::size_t count, bool recv_first) {
  const int n = c.size(), r = c.rank();
  std::vector<std::int32_t> out(count), in(count, -1);
  for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<std::int32_t>(val(r, i));
  c.group_start();
  auto a = recv_first ? c.recv(in.data(), count, dtype::i32, (r + n - 1) % n, 3)
                      : c.send(out.data(), count, dtype::i32, (r + 1) % n, 3);
  auto b = recv_first ? c.send(out.data(), count, dtype::i32, (r + 1) % n, 3)
                      : c.recv(in.data(), count, dtype::i32, (r + n - 1) % n, 3);
  c.group_end();
  a.wait();
  b.wait();
  for (std::size_t i = 0; i < count; ++i)
    EXPECT(in[i] == static_cast<std::int32_t>(val((r + n - 1) % n, i)), "ring recv on rank " + std::to_string(r));
}

/// Every collective, several sizes (empty, tiny, uneven, over several chunks), dtypes, ops.
template <class C>
void everything(C& c, std::size_t big) {
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{37}, big}) {
    all_gather<C, float>(c, count, false);
    all_gather<C, float>(c, count, true);
    all_gather<C, std::uint16_t>(c, count, false);
    all_gather<C, std::int64_t>(c, count, false);
    all_to_all<C, float>(c, count);
    all_to_all<C, std::uint16_t>(c, count);
    for (auto op : {reduce_op::sum, reduce_op::avg, reduce_op::max, reduce_op::min}) {
      reduce_scatter<C, float>(c, count, op);
      all_reduce<C, float>(c, count, op, false);
    }
    reduce_scatter<C, std::uint16_t>(c, count, reduce_op::sum);
    reduce_scatter<C, double>(c, count, reduce_op::max);
    all_reduce<C, float>(c, count, reduce_op::sum, true);
    all_reduce<C, std::uint16_t>(c, count, reduce_op::sum, false);
    all_reduce<C, std::int32_t>(c, count, reduce_op::min, true);
    broadcast(c, count, c.size() - 1);
    ring(c, count, false);
    ring(c, count, true);
    c.barrier().wait();
  }
}

}  // namespace checks
