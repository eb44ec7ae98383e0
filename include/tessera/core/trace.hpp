// tessera/core/trace.hpp: timed events of a run, written as a Chrome / Perfetto trace.
//
// A trace::recorder collects complete events (a name, a start and a duration) on tracks
// (pid, tid); `json()` is the Chrome trace event format that chrome://tracing and
// https://ui.perfetto.dev open. Code at any layer marks a region with an RAII scope:
//
//   void block_forward(std::int64_t u, ...) {
//     tessera::trace::scope s("forward", "block", u);   // event "forward", args {"block": u}
//     ...
//   }
//
// A scope records into the recorder this thread is bound to (`trace::bind`, set up once per
// rank by whoever owns the run: train_llama binds each rank's thread to track pid = rank);
// when no recorder is bound, a scope costs one thread_local load and a null check, and
// allocates nothing. Names and categories are string literals (kept as pointers until the
// event is recorded). Times are microseconds of std::chrono::steady_clock, the flight
// recorder's clock (comm/flight_recorder.hpp), so collectives and compute line up.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <unistd.h>

#include <tessera/core/atomic_file.hpp>
#include <tessera/core/clock.hpp>
#include <tessera/core/error.hpp>
#include <tessera/core/json.hpp>

namespace tessera::trace {

/// Microseconds of std::chrono::steady_clock (core/clock.hpp, the flight recorder's clock).
inline std::int64_t now_us() { return steady_now_us(); }

/// One complete event ("ph": "X") of track (pid, tid).
struct event {
  std::string name;
  std::string cat;  ///< category: "step", "compute", "block", "collective", ...
  int pid = 0, tid = 0;
  std::int64_t ts_us = 0, dur_us = 0;
  std::vector<std::pair<std::string, std::int64_t>> args;  ///< integer arguments
  std::vector<std::pair<std::string, std::string>> text;   ///< text arguments
};

/// Events of a run, from any number of threads.
class recorder {
 public:
  /// Adds one event (thread-safe).
  void add(event e) {
    std::lock_guard<std::mutex> lock(m_);
    events_.push_back(std::move(e));
  }
  /// Names track group `pid` ("rank 3") and, when tid >= 0, track (pid, tid) ("compute").
  void name_track(int pid, int tid, std::string name) {
    std::lock_guard<std::mutex> lock(m_);
    names_.push_back({pid, tid, std::move(name)});
  }
  /// A copy of the events recorded so far, in the order they ended.
  std::vector<event> events() const {
    std::lock_guard<std::mutex> lock(m_);
    return events_;
  }
  std::size_t size() const {
    std::lock_guard<std::mutex> lock(m_);
    return events_.size();
  }

  /// Times in the trace are relative to `origin_us` (a now_us() value, e.g. taken by every
  /// rank right after a barrier, so that ranks on different hosts line up); by default
  /// relative to the earliest event.
  void set_origin(std::int64_t origin_us) {
    std::lock_guard<std::mutex> lock(m_);
    origin_ = origin_us;
    has_origin_ = true;
  }

  /// The events alone, as JSON objects separated by ",\n" (to merge the events of other
  /// processes into one trace: json(fragments)).
  std::string events_json() const {
    std::lock_guard<std::mutex> lock(m_);
    std::int64_t t0 = origin_;
    if (!has_origin_)
      for (std::size_t i = 0; i < events_.size(); ++i)
        if (i == 0 || events_[i].ts_us < t0) t0 = events_[i].ts_us;
    std::string s;
    for (const auto& e : events_) {
      if (!s.empty()) s += ",\n";
      s += "{\"ph\": \"X\", \"name\": " + json::quote(e.name) + ", \"cat\": " + json::quote(e.cat) +
           ", \"pid\": " + std::to_string(e.pid) + ", \"tid\": " + std::to_string(e.tid) +
           ", \"ts\": " + std::to_string(e.ts_us - t0) + ", \"dur\": " + std::to_string(e.dur_us);
      if (!e.args.empty() || !e.text.empty()) {
        s += ", \"args\": {";
        bool a1 = true;
        for (const auto& [k, v] : e.args) {
          if (!a1) s += ", ";
          s += json::quote(k);
          s += ": ";
          s += std::to_string(v);
          a1 = false;
        }
        for (const auto& [k, v] : e.text) {
          if (!a1) s += ", ";
          s += json::quote(k);
          s += ": ";
          s += json::quote(v);
          a1 = false;
        }
        s += "}";
      }
      s += "}";
    }
    return s;
  }

  /// The Chrome trace event format: {"displayTimeUnit": "ms", "traceEvents": [...]}: the
  /// track names, these events, and the events_json() of other recorders (`more`).
  std::string json(const std::vector<std::string>& more = {}) const {
    std::string s = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
    bool first = true;
    auto sep = [&] {
      if (!first) s += ",\n";
      first = false;
    };
    {
      std::lock_guard<std::mutex> lock(m_);
      for (const auto& n : names_) {
        sep();
        const bool process = n.tid < 0;
        s += std::string("{\"ph\": \"M\", \"name\": \"") + (process ? "process_name" : "thread_name") +
             "\", \"pid\": " + std::to_string(n.pid) +
             (process ? std::string() : ", \"tid\": " + std::to_string(n.tid)) + ", \"args\": {\"name\": " +
             json::quote(n.name) + "}}";
        if (process) {
          sep();
          s += "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": " + std::to_string(n.pid) +
               ", \"args\": {\"sort_index\": " + std::to_string(n.pid) + "}}";
        }
      }
    }
    std::vector<std::string> parts{events_json()};
    parts.insert(parts.end(), more.begin(), more.end());
    for (const auto& f : parts) {
      if (f.empty()) continue;
      sep();
      s += f;
    }
    return s + "\n]}\n";
  }

  /// Writes json(more) to `path`, through a temporary name and a rename (a reader never sees
  /// half a trace, an old trace stays whole if writing fails).
  void write(const std::filesystem::path& path, const std::vector<std::string>& more = {}) const {
    write_file_atomically(path, [&, this](std::ofstream& out) { out << json(more); }, "trace");
  }

 private:
  struct track_name {
    int pid, tid;
    std::string name;
  };
  mutable std::mutex m_;
  std::int64_t origin_ = 0;
  bool has_origin_ = false;
  std::vector<event> events_;
  std::vector<track_name> names_;
};

/// Where this thread's scopes go: a recorder (nullptr: tracing off) and a track.
struct target {
  recorder* rec = nullptr;
  int pid = 0, tid = 0;
};

/// This thread's target.
inline target& current() noexcept {
  thread_local target t;
  return t;
}

/// Binds this thread's scopes to track (pid, tid) of `rec` (nullptr: off) until destroyed,
/// then restores the previous binding. One per rank thread, around its training loop.
class bind {
 public:
  bind(recorder* rec, int pid, int tid) noexcept : saved_(current()) { current() = {rec, pid, tid}; }
  ~bind() { current() = saved_; }
  bind(const bind&) = delete;
  bind& operator=(const bind&) = delete;

 private:
  target saved_;
};

/// Records the enclosing block as one event on this thread's track, when a recorder is
/// bound. `name`, `cat` and `arg_name` must be string literals (or outlive the scope).
class scope {
 public:
  /// An event `name` of category `cat`.
  explicit scope(const char* name, const char* cat = "compute") noexcept
      : t_(current()), name_(name), cat_(cat) {
    if (t_.rec) t0_ = now_us();
  }
  /// An event `name` of one numbered unit, e.g. scope("forward", "block", u): category
  /// "block", args {"block": u}.
  scope(const char* name, const char* unit, std::int64_t index) noexcept
      : t_(current()), name_(name), cat_(unit), arg_name_(unit), arg_(index) {
    if (t_.rec) t0_ = now_us();
  }
  ~scope() {
    if (!t_.rec) return;
    event e{name_, cat_, t_.pid, t_.tid, t0_, now_us() - t0_, {}, {}};
    if (arg_name_) e.args.emplace_back(arg_name_, arg_);
    try {
      t_.rec->add(std::move(e));
    } catch (...) {  // out of memory while tracing: drop the event, never the run
    }
  }
  scope(const scope&) = delete;
  scope& operator=(const scope&) = delete;

 private:
  target t_;
  const char* name_;
  const char* cat_;
  const char* arg_name_ = nullptr;
  std::int64_t arg_ = 0;
  std::int64_t t0_ = 0;
};

/// True when this thread's scopes are recorded.
inline bool enabled() noexcept { return current().rec != nullptr; }

}  // namespace tessera::trace
