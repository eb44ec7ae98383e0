// tessera/comm/flight_recorder.hpp: a decorator over any communicator that records every
// collective and point-to-point call in a fixed-size ring buffer, and dumps it as JSON per
// rank on failure (timeout, mismatch) or on request. tessera/comm/flight_analyzer.hpp (and
// the `tessera-flight` tool) reads the dumps of all ranks and names the first mismatch.
//
//   auto rec = tessera::comm::flight_recorder(comm, {.dump_dir = "/tmp/run42"});
//   tessera::comm::all_reduce(rec, std::span(grads)).wait();   // recorded, then forwarded
//   rec.dump();                                                 // /tmp/run42/flight_rank0.json
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <tessera/core/atomic_file.hpp>
#include <tessera/core/clock.hpp>
#include <tessera/core/source_location.hpp>
#include <span>
#include <string>
#include <tessera/comm/communicator.hpp>
#include <tessera/comm/types.hpp>
#include <tessera/core/json.hpp>
#include <tuple>
#include <utility>
#include <vector>

namespace tessera::comm {

/// One recorded call. Times are microseconds of std::chrono::steady_clock.
struct flight_entry {
  std::uint64_t id = 0;      // per rank, in issue order
  std::vector<int> group;    // world ranks of the group
  std::uint64_t seq = 0;     // collectives: n-th of the group; p2p: n-th on (group, peer, tag, kind)
  call_desc desc{};          // desc.peer: world rank of the root or peer
  std::string state = "scheduled";  // scheduled, started, completed, failed
  std::string error;
  std::int64_t enqueue_us = 0, start_us = -1, end_us = -1;
  std::string file, function;
  std::uint32_t line = 0;
};

/// One entry as the dump's JSON writes it (the reader is parse_flight_dump).
inline std::string flight_entry_json(const flight_entry& e) {
  using json::quote;
  std::string s = "{\"id\":" + std::to_string(e.id) + ",\"group\":[";
  for (std::size_t i = 0; i < e.group.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(e.group[i]);
  }
  s += "],\"seq\":" + std::to_string(e.seq) + ",\"kind\":\"" + std::string(name_of(e.desc.kind)) +
       "\",\"count\":" + std::to_string(e.desc.count) + ",\"dtype\":\"" +
       std::string(short_name(e.desc.type)) + "\",\"bytes\":" +
       std::to_string(e.desc.count * size_of(e.desc.type)) + ",\"op\":\"" +
       std::string(name_of(e.desc.op)) + "\",\"peer\":" + std::to_string(e.desc.peer) +
       ",\"tag\":" + std::to_string(e.desc.tag) + ",\"state\":" + quote(e.state) +
       ",\"error\":" + quote(e.error) + ",\"enqueue_us\":" + std::to_string(e.enqueue_us) +
       ",\"start_us\":" + std::to_string(e.start_us) + ",\"end_us\":" + std::to_string(e.end_us) +
       ",\"file\":" + quote(e.file) + ",\"line\":" + std::to_string(e.line) +
       ",\"function\":" + quote(e.function) + "}";
  return s;
}

/// The dump's fields before its entries: `{"version":1,...,"entries":[`.
inline std::string flight_dump_json_head(int rank, int world_size, std::string_view backend,
                                         std::size_t capacity, std::uint64_t recorded) {
  return "{\"version\":1,\"rank\":" + std::to_string(rank) + ",\"world_size\":" +
         std::to_string(world_size) + ",\"backend\":" + json::quote(backend) +
         ",\"capacity\":" + std::to_string(capacity) + ",\"recorded\":" + std::to_string(recorded) +
         ",\"entries\":[";
}

/// Bytes this rank moves in a recorded call, as nccl-tests counts "bus bytes" (and as
/// tessera's cost model does, plan/cost_model.hpp): with n ranks in the group and S the
/// call's buffer (the gathered output, the reduce-scatter input, the all-to-all buffer),
/// S (n-1)/n, and 2 S (n-1)/n for all_reduce; a broadcast moves its buffer, a send its
/// message; receives, barriers and groups of one rank move nothing.
inline std::int64_t bus_bytes(const flight_entry& e) {
  const auto n = static_cast<std::int64_t>(e.group.size());
  const auto b = static_cast<std::int64_t>(e.desc.count * size_of(e.desc.type));
  if (n <= 1) return 0;
  switch (e.desc.kind) {
    case call_kind::all_gather:
    case call_kind::reduce_scatter:
    case call_kind::all_to_all: return b * (n - 1);  // S = n * count elements
    case call_kind::all_reduce: return b * 2 * (n - 1) / n;
    case call_kind::broadcast:
    case call_kind::send: return b;
    case call_kind::recv:
    case call_kind::barrier: return 0;
  }
  return 0;
}

struct flight_settings {
  std::size_t capacity = 2048;       // entries kept per rank (the oldest are dropped)
  std::string dump_dir = ".";        // where dump() writes flight_rank<R>.json
  bool dump_on_error = true;         // dump when a recorded call fails or times out
};

namespace detail {
inline std::int64_t now_us() { return steady_now_us(); }  // core/clock.hpp, the trace's clock too

/// The per-rank ring buffer shared by a recorder and every recorder split from it.
struct flight_ring {
  std::mutex m;
  flight_settings settings;
  int world_rank = 0, world_size = 1;
  std::string backend;
  std::uint64_t next_id = 0;
  std::vector<flight_entry> ring;
  std::map<std::tuple<std::vector<int>, int, int, int>, std::uint64_t> p2p_seq;

  flight_entry* find(std::uint64_t id) {
    if (id + ring.size() < next_id || ring.empty()) return nullptr;  // overwritten
    auto& e = ring[id % ring.size()];
    return e.id == id ? &e : nullptr;
  }

  std::string json() {
    std::lock_guard<std::mutex> lock(m);
    std::string s = flight_dump_json_head(world_rank, world_size, backend, ring.size(), next_id);
    const std::uint64_t first = next_id > ring.size() ? next_id - ring.size() : 0;
    for (std::uint64_t id = first; id < next_id; ++id) {
      const auto& e = ring[id % ring.size()];
      if (id != first) s += ",\n";
      s += flight_entry_json(e);
    }
    return s + "]}\n";
  }

  /// Writes the JSON to `path` (or dump_dir/flight_rank<R>.json) via a temporary + rename.
  std::string dump(std::string path) {
    if (path.empty())
      path = (std::filesystem::path(settings.dump_dir) /
              ("flight_rank" + std::to_string(world_rank) + ".json"))
                 .string();
    const std::string text = json();
    try {
      write_text_atomically(path, text, "tessera::comm::flight_recorder");
    } catch (const error& e) {
      throw error("tessera::comm::flight_recorder: rank " + std::to_string(world_rank) + ": " + e.what() +
                  "; check that the dump directory exists and is writable");
    }
    return path;
  }
};
}  // namespace detail

/// The request of a recorded call: forwards to the backend's request and records
/// start, end, state and error.
template <class Inner>
class flight_request {
 public:
  flight_request(Inner inner, std::shared_ptr<detail::flight_ring> ring, std::uint64_t id)
      : inner_(std::move(inner)), ring_(std::move(ring)), id_(id) {}

  void wait() {
    if (done_) return;
    mark("started");
    try {
      inner_.wait();
    } catch (const std::exception& e) {
      fail(e.what());
      throw;
    }
    mark("completed");
  }
  bool test() {
    if (done_) return true;
    mark("started");
    bool ok = false;
    try {
      ok = inner_.test();
    } catch (const std::exception& e) {
      fail(e.what());
      throw;
    }
    if (ok) mark("completed");
    return ok;
  }

 private:
  void mark(const char* state) {
    std::lock_guard<std::mutex> lock(ring_->m);
    if (auto* e = ring_->find(id_)) {
      if (std::string_view(state) == "started") {
        if (e->start_us < 0) e->start_us = detail::now_us(), e->state = state;
      } else {
        e->end_us = detail::now_us();
        e->state = state;
      }
    }
    if (std::string_view(state) == "completed") done_ = true;
  }
  void fail(const std::string& what) {
    {
      std::lock_guard<std::mutex> lock(ring_->m);
      if (auto* e = ring_->find(id_)) {
        e->end_us = detail::now_us();
        e->state = "failed";
        e->error = what;
      }
    }
    done_ = true;
    if (ring_->settings.dump_on_error) {
      try {
        ring_->dump("");
      } catch (...) {  // the original failure matters more than a failed dump
      }
    }
  }

  Inner inner_;
  std::shared_ptr<detail::flight_ring> ring_;
  std::uint64_t id_;
  bool done_ = false;
};

template <communicator C>
class flight_recorder {
 public:
  using request_type = flight_request<decltype(std::declval<C&>().barrier())>;

  /// Wraps the world communicator `inner` of this rank.
  explicit flight_recorder(C inner, flight_settings settings = {})
      : inner_(std::move(inner)), ring_(std::make_shared<detail::flight_ring>()) {
    ring_->settings = settings;
    ring_->ring.resize(std::max<std::size_t>(1, settings.capacity));
    ring_->world_rank = inner_.world_ranks()[static_cast<std::size_t>(inner_.rank())];
    ring_->world_size = inner_.size();
    if constexpr (requires { inner_.backend(); }) ring_->backend = inner_.backend();
  }

  int rank() const { return inner_.rank(); }
  int size() const { return inner_.size(); }
  std::span<const int> world_ranks() const { return inner_.world_ranks(); }
  C& inner() noexcept { return inner_; }
  std::string backend() const { return ring_->backend; }

  using loc_t = tessera::source_location;
  request_type all_gather(const void* in, void* out, std::size_t n, dtype t, loc_t l = loc_t::current()) {
    auto id = record({call_kind::all_gather, n, t}, l);
    return {inner_.all_gather(in, out, n, t, l), ring_, id};
  }
  request_type reduce_scatter(const void* in, void* out, std::size_t n, dtype t, reduce_op op,
                              loc_t l = loc_t::current()) {
    auto id = record({call_kind::reduce_scatter, n, t, op}, l);
    return {inner_.reduce_scatter(in, out, n, t, op, l), ring_, id};
  }
  request_type all_reduce(const void* in, void* out, std::size_t n, dtype t, reduce_op op,
                          loc_t l = loc_t::current()) {
    auto id = record({call_kind::all_reduce, n, t, op}, l);
    return {inner_.all_reduce(in, out, n, t, op, l), ring_, id};
  }
  request_type all_to_all(const void* in, void* out, std::size_t n, dtype t, loc_t l = loc_t::current()) {
    auto id = record({call_kind::all_to_all, n, t}, l);
    return {inner_.all_to_all(in, out, n, t, l), ring_, id};
  }
  request_type broadcast(void* buf, std::size_t n, dtype t, int root, loc_t l = loc_t::current()) {
    auto id = record({call_kind::broadcast, n, t, reduce_op::sum, world_of(root)}, l);
    return {inner_.broadcast(buf, n, t, root, l), ring_, id};
  }
  request_type barrier(loc_t l = loc_t::current()) {
    auto id = record({call_kind::barrier}, l);
    return {inner_.barrier(l), ring_, id};
  }
  request_type send(const void* buf, std::size_t n, dtype t, int peer, int tag = 0,
                    loc_t l = loc_t::current()) {
    auto id = record({call_kind::send, n, t, reduce_op::sum, world_of(peer), tag}, l);
    return {inner_.send(buf, n, t, peer, tag, l), ring_, id};
  }
  request_type recv(void* buf, std::size_t n, dtype t, int peer, int tag = 0,
                    loc_t l = loc_t::current()) {
    auto id = record({call_kind::recv, n, t, reduce_op::sum, world_of(peer), tag}, l);
    return {inner_.recv(buf, n, t, peer, tag, l), ring_, id};
  }
  void group_start() { inner_.group_start(); }
  void group_end() { inner_.group_end(); }

  /// A recorder of the sub-communicator, writing into this rank's same ring buffer.
  flight_recorder split(std::span<const int> ranks, loc_t l = loc_t::current()) {
    return flight_recorder(inner_.split(ranks, l), ring_);
  }

  /// Writes this rank's dump (default dump_dir/flight_rank<R>.json); returns its path.
  std::string dump(const std::string& path = "") { return ring_->dump(path); }
  /// The dump as a JSON string.
  std::string json() const { return ring_->json(); }
  /// How many calls this rank has recorded (the id the next one gets).
  std::uint64_t recorded() const {
    std::lock_guard<std::mutex> lock(ring_->m);
    return ring_->next_id;
  }
  /// The entries still in the ring, oldest first.
  std::vector<flight_entry> entries() const {
    std::lock_guard<std::mutex> lock(ring_->m);
    std::vector<flight_entry> v;
    const auto cap = ring_->ring.size();
    for (auto id = ring_->next_id > cap ? ring_->next_id - cap : 0; id < ring_->next_id; ++id)
      v.push_back(ring_->ring[id % cap]);
    return v;
  }

 private:
  flight_recorder(C inner, std::shared_ptr<detail::flight_ring> ring)
      : inner_(std::move(inner)), ring_(std::move(ring)) {}

  int world_of(int r) const {
    return r >= 0 && r < inner_.size() ? inner_.world_ranks()[static_cast<std::size_t>(r)] : r;
  }

  std::uint64_t record(const call_desc& d, const tessera::source_location& l) {
    std::lock_guard<std::mutex> lock(ring_->m);
    const std::uint64_t id = ring_->next_id++;
    auto& e = ring_->ring[id % ring_->ring.size()];
    e.id = id;
    e.group.assign(inner_.world_ranks().begin(), inner_.world_ranks().end());
    if (is_p2p(d.kind))
      e.seq = ring_->p2p_seq[{e.group, d.peer, d.tag, static_cast<int>(d.kind)}]++;
    else
      e.seq = (*coll_seq_)++;
    e.desc = d;
    e.state = "scheduled";
    e.error.clear();
    e.enqueue_us = detail::now_us();
    e.start_us = e.end_us = -1;
    e.file = l.file_name();
    e.function = l.function_name();
    e.line = l.line();
    return id;
  }

  C inner_;
  std::shared_ptr<detail::flight_ring> ring_;
  std::shared_ptr<std::uint64_t> coll_seq_ = std::make_shared<std::uint64_t>(0);
};

}  // namespace tessera::comm
