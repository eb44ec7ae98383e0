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
#include <tessera/comm/detail/json.hpp>
#include <tessera/comm/flight_recorder.hpp>
#include <tessera/comm/types.hpp>
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
template <class E>
E enum_named(std::string_view name, E last, std::string_view what, const std::string& source) {
  for (int i = 0; i <= static_cast<int>(last); ++i)
    if (name_of(static_cast<E>(i)) == name) return static_cast<E>(i);
  throw tessera::error(source + ": unknown " + std::string(what) + " \"" + std::string(name) + "\"");
}
}  // namespace detail

/// Parses one rank's dump; throws tessera::error naming the source on bad input.
inline flight_dump parse_flight_dump(std::string_view text, const std::string& source) {
  const auto v = detail::json_parser(text, source).parse();
  auto need = [&](const detail::json_value& x, detail::json_value::type t, const char* key) {
    if (x.t != t)
      throw tessera::error(source + ": field \"" + key + "\" is missing or has the wrong type; "
                           "is this a tessera flight-recorder dump?");
  };
  using jt = detail::json_value::type;
  need(v["rank"], jt::number, "rank");
  need(v["entries"], jt::array, "entries");
  flight_dump d;
  d.source = source;
  d.rank = static_cast<int>(v["rank"].integer());
  d.world_size = static_cast<int>(v["world_size"].integer());
  d.backend = v["backend"].str;
  d.recorded = static_cast<std::uint64_t>(v["recorded"].integer());
  d.capacity = static_cast<std::size_t>(v["capacity"].integer());
  for (const auto& x : v["entries"].arr) {
    flight_entry e;
    need(x["kind"], jt::string, "kind");
    need(x["group"], jt::array, "group");
    e.id = static_cast<std::uint64_t>(x["id"].integer());
    for (const auto& g : x["group"].arr) e.group.push_back(static_cast<int>(g.integer()));
    e.seq = static_cast<std::uint64_t>(x["seq"].integer());
    e.desc.kind = detail::enum_named(x["kind"].str, call_kind::recv, "call kind", source);
    e.desc.count = static_cast<std::size_t>(x["count"].integer());
    e.desc.type = detail::enum_named(x["dtype"].str, dtype::f8e5m2, "dtype", source);
    e.desc.op = detail::enum_named(x["op"].str, reduce_op::min, "reduce op", source);
    e.desc.peer = static_cast<int>(x["peer"].integer());
    e.desc.tag = static_cast<int>(x["tag"].integer());
    e.state = x["state"].str;
    e.error = x["error"].str;
    e.enqueue_us = x["enqueue_us"].integer();
    e.start_us = x["start_us"].integer();
    e.end_us = x["end_us"].integer();
    e.file = x["file"].str;
    e.line = static_cast<std::uint32_t>(x["line"].integer());
    e.function = x["function"].str;
    d.entries.push_back(std::move(e));
  }
  return d;
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
    std::uint64_t lo = 0, hi = 0;
    bool any = false;
    for (int r : members) {
      auto& m = per_rank[r];
      if (m.empty()) continue;
      if (by_rank[r]->dropped()) lo = std::max(lo, m.begin()->first);
      hi = std::max(hi, m.rbegin()->first);
      any = true;
    }
    if (!any) continue;
    for (std::uint64_t k = lo; k <= hi; ++k) {
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
    std::uint64_t lo = 0, hi = 0;
    if (by_rank[from]->dropped() && !sends.empty()) lo = std::max(lo, sends.begin()->first);
    if (by_rank[to]->dropped() && !recvs.empty()) lo = std::max(lo, recvs.begin()->first);
    if (!sends.empty()) hi = std::max(hi, sends.rbegin()->first);
    if (!recvs.empty()) hi = std::max(hi, recvs.rbegin()->first);
    const std::string where_g = " (tag " + std::to_string(tag) + ", group [" + ranks_string(group) + "])";
    for (std::uint64_t k = lo; k <= hi; ++k) {
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
