// tessera/comm/flight_analyzer.hpp: reads the flight-recorder dumps of all ranks and
// names the first mismatch: a rank that did not join a collective, ranks that disagree on
// a collective's op, size or order, a send without a matching recv (or the reverse).
#pragma once

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tessera/comm/flight_recorder.hpp>
#include <tessera/comm/types.hpp>
#include <tessera/core/json.hpp>
#include <limits>
#include <vector>

namespace tessera::comm {

struct flight_dump {
  std::string source;  // file name, for messages
  int rank = 0, world_size = 0;
  std::string backend;
  std::uint64_t recorded = 0;
  std::size_t capacity = 0;
  std::vector<flight_entry> entries;
  bool dropped() const noexcept { return recorded > capacity; }
};

namespace detail {
/// The value of E (0..last) whose name (as `name_fn` gives it) is `name`.
template <class E, class NameFn>
E enum_named(std::string_view name, E last, std::string_view what, const std::string& source, NameFn name_fn) {
  for (int i = 0; i <= static_cast<int>(last); ++i)
    if (name_fn(static_cast<E>(i)) == name) return static_cast<E>(i);
  throw tessera::error(source + ": unknown " + std::string(what) + " \"" + std::string(name) + "\"");
}
}  // namespace detail

namespace detail {
/// Reads the fields of one JSON object of a dump, each checked for its type and range;
/// a missing optional field keeps its default.
struct dump_fields {
  const json::value& obj;
  const std::string& source;
  std::string where;  // "" or " in entry 3"

  [[noreturn]] void bad(const char* key, const std::string& why) const {
    throw tessera::error(source + ": field \"" + key + "\"" + where + " " + why +
                         "; is this a tessera flight-recorder dump?");
  }
  const json::value* find(const char* key, json::value::kind k, bool required) const {
    const json::value* v = obj.get(key);
    if (!v) {
      if (required) bad(key, "is missing");
      return nullptr;
    }
    if (v->k != k) bad(key, "is " + std::string(json::kind_name(v->k)) + ", expected " +
                                std::string(json::kind_name(k)));
    return v;
  }
  static std::int64_t integer_in(const json::value& v, std::int64_t lo, std::int64_t hi,
                                 const dump_fields& f, const char* key) {
    const auto n = v.as_int64();
    if (!n || *n < lo || *n > hi)
      f.bad(key, "is " + (n ? std::to_string(*n) : std::string("not an integer")) +
                     ", expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return *n;
  }
  template <class T>
  void integer(const char* key, T& out, bool required = false,
               std::int64_t lo = std::numeric_limits<T>::min() < 0 ? std::numeric_limits<std::int64_t>::min() : 0,
               std::int64_t hi = static_cast<std::int64_t>(std::min<std::uint64_t>(
                   std::numeric_limits<T>::max(), std::numeric_limits<std::int64_t>::max()))) const {
    if (const json::value* v = find(key, json::value::kind::number, required))
      out = static_cast<T>(integer_in(*v, std::max<std::int64_t>(lo, static_cast<std::int64_t>(
                                                                         std::numeric_limits<T>::min())),
                                      hi, *this, key));
  }
  void string(const char* key, std::string& out, bool required = false) const {
    if (const json::value* v = find(key, json::value::kind::string, required)) out = v->str;
  }
};

/// Sequence numbers and ids beyond this are not what a run records (2^53: exact in a
/// double, so any JSON tool reads them back unchanged).
inline constexpr std::int64_t max_flight_counter = std::int64_t{1} << 53;
}  // namespace detail

/// Parses one rank's dump; throws tessera::error naming the source (and the field) on bad
/// input: invalid JSON, a required field missing, a field of the wrong type, an integer
/// out of its range, an unknown call kind, dtype or reduce op.
inline flight_dump parse_flight_dump(std::string_view text, const std::string& source) {
  const json::value v = json::parse(text, source);
  if (!v.is_object())
    throw tessera::error(source + ": a flight-recorder dump is a JSON object, this is " +
                         std::string(json::kind_name(v.k)));
  constexpr int max_rank = std::numeric_limits<int>::max();
  const detail::dump_fields top{v, source, ""};
  flight_dump d;
  d.source = source;
  top.integer("rank", d.rank, true, 0, max_rank);
  top.integer("world_size", d.world_size, false, 0, max_rank);
  top.string("backend", d.backend);
  top.integer("recorded", d.recorded, false, 0, detail::max_flight_counter);
  top.integer("capacity", d.capacity, false, 0, detail::max_flight_counter);
  const json::value* entries = top.find("entries", json::value::kind::array, true);
  d.entries.reserve(entries->items.size());
  for (std::size_t i = 0; i < entries->items.size(); ++i) {
    const json::value& x = entries->items[i];
    if (!x.is_object())
      throw tessera::error(source + ": entry " + std::to_string(i) + " is " +
                           std::string(json::kind_name(x.k)) + ", expected an object");
    const detail::dump_fields f{x, source, " of entry " + std::to_string(i)};
    flight_entry e;
    f.integer("id", e.id, false, 0, detail::max_flight_counter);
    const json::value* g = f.find("group", json::value::kind::array, true);
    for (const auto& r : g->items)
      e.group.push_back(static_cast<int>(detail::dump_fields::integer_in(r, 0, max_rank, f, "group")));
    f.integer("seq", e.seq, false, 0, detail::max_flight_counter);
    std::string kind, type, op;
    f.string("kind", kind, true);
    f.string("dtype", type);
    f.string("op", op);
    e.desc.kind = detail::enum_named(kind, call_kind::recv, "call kind", source, [](call_kind k) { return name_of(k); });
    if (x.get("dtype")) e.desc.type = detail::enum_named(type, last_dtype, "dtype", source, [](dtype t) { return short_name(t); });
    if (x.get("op")) e.desc.op = detail::enum_named(op, reduce_op::min, "reduce op", source, [](reduce_op o) { return name_of(o); });
    f.integer("count", e.desc.count, false, 0, detail::max_flight_counter);
    f.integer("peer", e.desc.peer, false, -1, max_rank);
    f.integer("tag", e.desc.tag);
    f.string("state", e.state);
    f.string("error", e.error);
    f.integer("enqueue_us", e.enqueue_us);
    f.integer("start_us", e.start_us);
    f.integer("end_us", e.end_us);
    f.string("file", e.file);
    f.integer("line", e.line);
    f.string("function", e.function);
    d.entries.push_back(std::move(e));
  }
  return d;
}

/// Writes a dump as the recorder does (parse_flight_dump reads it back equal).
inline std::string to_json(const flight_dump& d) {
  std::string s = flight_dump_json_head(d.rank, d.world_size, d.backend, d.capacity, d.recorded);
  for (std::size_t i = 0; i < d.entries.size(); ++i) {
    if (i) s += ",\n";
    s += flight_entry_json(d.entries[i]);
  }
  return s + "]}\n";
}

inline flight_dump load_flight_dump(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw tessera::error(path + ": cannot open this flight-recorder dump");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_flight_dump(ss.str(), path);
}

struct flight_report {
  std::vector<std::string> problems;  // earliest first: problems[0] is the first mismatch
  std::vector<std::string> notes;     // calls left unfinished, missing dumps, dropped entries
  bool ok() const noexcept { return problems.empty(); }
};

namespace detail {
inline std::string ranks_string(const std::vector<int>& r) {
  std::string s;
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(r[i]);
  }
  return s;
}
inline std::string at(const flight_entry& e) { return e.file + ":" + std::to_string(e.line); }
inline bool same_call(const flight_entry& a, const flight_entry& b) {
  return a.desc.kind == b.desc.kind && a.desc.count == b.desc.count && a.desc.type == b.desc.type &&
         a.desc.op == b.desc.op && a.desc.peer == b.desc.peer;
}
}  // namespace detail

/// Compares the dumps of all ranks; see flight_report.
inline flight_report analyze_flight(const std::vector<flight_dump>& dumps) {
  using detail::at;
  using detail::ranks_string;
  flight_report rep;
  std::map<int, const flight_dump*> by_rank;
  for (const auto& d : dumps) {
    if (by_rank.count(d.rank))
      throw tessera::error(d.source + ": a second dump of rank " + std::to_string(d.rank) + " (first: " +
                           by_rank[d.rank]->source + "); give one dump per rank");
    by_rank[d.rank] = &d;
    if (d.dropped())
      rep.notes.push_back("rank " + std::to_string(d.rank) + " dropped its " +
                          std::to_string(d.recorded - d.capacity) +
                          " oldest entries (ring of " + std::to_string(d.capacity) + ")");
  }
  std::vector<std::pair<std::int64_t, std::string>> found;

  // ---- collectives, per group, aligned by their sequence number in the group ----
  std::map<std::vector<int>, std::map<int, std::map<std::uint64_t, const flight_entry*>>> coll;
  for (const auto& d : dumps)
    for (const auto& e : d.entries)
      if (!is_p2p(e.desc.kind)) coll[e.group][d.rank][e.seq] = &e;
  for (auto& [group, per_rank] : coll) {
    const std::string gs = "group [" + ranks_string(group) + "]";
    std::vector<int> members;
    for (int r : group) {
      if (by_rank.count(r)) members.push_back(r);
      else rep.notes.push_back("no dump from rank " + std::to_string(r) + " (a member of " + gs + ")");
    }
    // Visit the sequence numbers some member recorded (not every number between the lowest
    // and the highest: a dump may jump from #0 to #10^15), from the first that every rank
    // that dropped old entries still holds.
    std::uint64_t lo = 0;
    std::set<std::uint64_t> seqs;
    for (int r : members) {
      auto& m = per_rank[r];
      if (m.empty()) continue;
      if (by_rank[r]->dropped()) lo = std::max(lo, m.begin()->first);
      for (const auto& kv : m) seqs.insert(kv.first);
    }
    for (auto ks = seqs.lower_bound(lo); ks != seqs.end(); ++ks) {
      const std::uint64_t k = *ks;
      std::vector<int> have, miss;
      std::int64_t t = INT64_MAX;
      for (int r : members) {
        auto it = per_rank[r].find(k);
        if (it == per_rank[r].end()) {
          miss.push_back(r);
        } else {
          have.push_back(r);
          t = std::min(t, it->second->enqueue_us);
        }
      }
      const flight_entry& e0 = *per_rank[have.front()][k];
      if (!miss.empty()) {
        found.push_back({t, "rank(s) " + ranks_string(miss) + " did not join collective #" +
                                std::to_string(k) + " of " + gs + ": " + e0.desc.str() +
                                ", called by rank(s) " + ranks_string(have) + " at " + at(e0)});
        break;
      }
      // group the members by what they called
      std::vector<std::pair<const flight_entry*, std::vector<int>>> kinds;
      for (int r : have) {
        const auto* e = per_rank[r][k];
        auto it = std::find_if(kinds.begin(), kinds.end(),
                               [&](auto& p) { return detail::same_call(*p.first, *e); });
        if (it == kinds.end()) kinds.push_back({e, {r}});
        else it->second.push_back(r);
      }
      if (kinds.size() == 1) continue;
      std::sort(kinds.begin(), kinds.end(),
                [](auto& a, auto& b) { return a.second.size() > b.second.size(); });
      // one rank that skipped the majority's call k and is already at its call k + 1
      if (kinds.size() == 2 && kinds[1].second.size() == 1 && kinds[0].second.size() > 1) {
        const int r = kinds[1].second[0];
        const int m = kinds[0].second[0];
        auto next = per_rank[m].find(k + 1);
        if (next != per_rank[m].end() && detail::same_call(*next->second, *kinds[1].first)) {
          found.push_back({t, "rank " + std::to_string(r) + " did not join collective #" +
                                  std::to_string(k) + " of " + gs + ": " + kinds[0].first->desc.str() +
                                  ", called by rank(s) " + ranks_string(kinds[0].second) + " at " +
                                  at(*kinds[0].first) + "; rank " + std::to_string(r) +
                                  " went on to " + kinds[1].first->desc.str() + " at " +
                                  at(*kinds[1].first)});
          break;
        }
        found.push_back({t, "rank " + std::to_string(r) + " disagrees with rank(s) " +
                                ranks_string(kinds[0].second) + " on collective #" + std::to_string(k) +
                                " of " + gs + ": it called " + kinds[1].first->desc.str() + " at " +
                                at(*kinds[1].first) + " where they called " + kinds[0].first->desc.str() +
                                " at " + at(*kinds[0].first) + " (did rank " + std::to_string(r) +
                                " skip that " + std::string(name_of(kinds[0].first->desc.kind)) + "?)"});
        break;
      }
      std::string msg = "ranks disagree on collective #" + std::to_string(k) + " of " + gs + ":";
      for (std::size_t i = 0; i < kinds.size(); ++i)
        msg += std::string(i ? ";" : "") + " rank(s) " + ranks_string(kinds[i].second) +
               " called " + kinds[i].first->desc.str() + " at " + at(*kinds[i].first);
      found.push_back({t, msg});
      break;
    }
  }

  // ---- point to point: the k-th send a->b (tag) pairs with the k-th recv on b from a ----
  using pkey = std::tuple<std::vector<int>, int, int, int>;  // group, from, to, tag
  std::map<pkey, std::pair<std::map<std::uint64_t, const flight_entry*>,
                           std::map<std::uint64_t, const flight_entry*>>> p2p;
  for (const auto& d : dumps)
    for (const auto& e : d.entries) {
      if (e.desc.kind == call_kind::send) p2p[{e.group, d.rank, e.desc.peer, e.desc.tag}].first[e.seq] = &e;
      if (e.desc.kind == call_kind::recv) p2p[{e.group, e.desc.peer, d.rank, e.desc.tag}].second[e.seq] = &e;
    }
  for (auto& [key, sr] : p2p) {
    const auto& [group, from, to, tag] = key;
    if (!by_rank.count(from) || !by_rank.count(to)) {
      rep.notes.push_back("point-to-point " + std::to_string(from) + "->" + std::to_string(to) +
                          " not checked: no dump from rank " +
                          std::to_string(by_rank.count(from) ? to : from));
      continue;
    }
    auto& [sends, recvs] = sr;
    std::uint64_t lo = 0;
    if (by_rank[from]->dropped() && !sends.empty()) lo = std::max(lo, sends.begin()->first);
    if (by_rank[to]->dropped() && !recvs.empty()) lo = std::max(lo, recvs.begin()->first);
    std::set<std::uint64_t> seqs;  // the numbers either side recorded, as for collectives
    for (const auto& kv : sends) seqs.insert(kv.first);
    for (const auto& kv : recvs) seqs.insert(kv.first);
    const std::string where_g = " (tag " + std::to_string(tag) + ", group [" + ranks_string(group) + "])";
    for (auto ks = seqs.lower_bound(lo); ks != seqs.end(); ++ks) {
      const std::uint64_t k = *ks;
      auto s = sends.find(k);
      auto r = recvs.find(k);
      if (s != sends.end() && r == recvs.end()) {
        found.push_back({s->second->enqueue_us,
                         "send #" + std::to_string(k) + " from rank " + std::to_string(from) + " to rank " +
                             std::to_string(to) + where_g + ", " + s->second->desc.str() + " at " +
                             at(*s->second) + ", has no matching recv on rank " + std::to_string(to)});
        break;
      }
      if (s == sends.end() && r != recvs.end()) {
        found.push_back({r->second->enqueue_us,
                         "recv #" + std::to_string(k) + " on rank " + std::to_string(to) + " from rank " +
                             std::to_string(from) + where_g + ", " + r->second->desc.str() + " at " +
                             at(*r->second) + ", has no matching send on rank " + std::to_string(from)});
        break;
      }
      if (s != sends.end() && (s->second->desc.count != r->second->desc.count ||
                               s->second->desc.type != r->second->desc.type)) {
        found.push_back({std::min(s->second->enqueue_us, r->second->enqueue_us),
                         "send #" + std::to_string(k) + " from rank " + std::to_string(from) + " (" +
                             s->second->desc.str() + " at " + at(*s->second) + ") and its recv on rank " +
                             std::to_string(to) + " (" + r->second->desc.str() + " at " + at(*r->second) +
                             ") disagree on size" + where_g});
        break;
      }
    }
  }

  std::stable_sort(found.begin(), found.end(), [](auto& a, auto& b) { return a.first < b.first; });
  for (auto& f : found) rep.problems.push_back(std::move(f.second));

  for (const auto& d : dumps)
    for (const auto& e : d.entries)
      if (e.state != "completed") {
        rep.notes.push_back("rank " + std::to_string(d.rank) + ": " + e.desc.str() + " #" +
                            std::to_string(e.seq) + " of group [" + ranks_string(e.group) + "] at " +
                            at(e) + " is " + e.state + (e.error.empty() ? "" : " (" + e.error + ")"));
        break;  // the first unfinished call of each rank
      }
  return rep;
}

}  // namespace tessera::comm
