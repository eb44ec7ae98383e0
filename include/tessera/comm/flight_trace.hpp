// tessera/comm/flight_trace.hpp: a flight recorder's calls as events of a trace
// (core/trace.hpp), so that a Chrome / Perfetto trace shows each collective of a rank next
// to its compute.
//
//   comm::flight_recorder rec(world, {.capacity = 1 << 14});
//   ... run a step on rec ...
//   comm::add_to_trace(trace, rec.entries(), /*pid=*/rank, /*tid=*/1, since);
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <tessera/comm/flight_recorder.hpp>
#include <tessera/core/trace.hpp>

namespace tessera::comm {

/// Adds every entry of `entries` with id >= `since` to `out` as one event on track (pid,
/// tid): named after its kind (all_gather, reduce_scatter, send, ...), category
/// "collective" or "p2p", from the call's issue to its completion as the rank observed it
/// (an asynchronous call spans the compute it overlaps; a call never completed ends at its
/// start). Arguments: count, bytes (the buffer), bus_bytes (nccl-tests' convention),
/// seq, group_size, wait_us (from the first wait or test to completion); text: dtype, op
/// (reductions), group (world ranks), state, and where it was called (file:line).
inline void add_to_trace(trace::recorder& out, std::span<const flight_entry> entries, int pid, int tid,
                         std::uint64_t since = 0) {
  for (const flight_entry& e : entries) {
    if (e.id < since) continue;
    trace::event ev;
    ev.name = std::string(name_of(e.desc.kind));
    ev.cat = is_p2p(e.desc.kind) ? "p2p" : "collective";
    ev.pid = pid, ev.tid = tid;
    ev.ts_us = e.enqueue_us;
    const std::int64_t end = e.end_us >= 0 ? e.end_us : (e.start_us >= 0 ? e.start_us : e.enqueue_us);
    ev.dur_us = end - e.enqueue_us;
    ev.args = {{"count", static_cast<std::int64_t>(e.desc.count)},
               {"bytes", static_cast<std::int64_t>(e.desc.count * size_of(e.desc.type))},
               {"bus_bytes", bus_bytes(e)},
               {"seq", static_cast<std::int64_t>(e.seq)},
               {"group_size", static_cast<std::int64_t>(e.group.size())},
               {"wait_us", e.start_us >= 0 && e.end_us >= 0 ? e.end_us - e.start_us : 0}};
    std::string group = "[";
    for (std::size_t i = 0; i < e.group.size(); ++i) {
      if (i) group += ',';
      group += std::to_string(e.group[i]);
    }
    ev.text = {{"dtype", std::string(name_of(e.desc.type))}, {"group", group + "]"}, {"state", e.state}};
    if (e.desc.kind == call_kind::all_reduce || e.desc.kind == call_kind::reduce_scatter)
      ev.text.emplace_back("op", std::string(name_of(e.desc.op)));
    if (is_p2p(e.desc.kind) || e.desc.kind == call_kind::broadcast)
      ev.args.emplace_back("peer", e.desc.peer);
    std::string where = e.file;
    where += ':';
    where += std::to_string(e.line);
    ev.text.emplace_back("where", std::move(where));
    out.add(std::move(ev));
  }
}

}  // namespace tessera::comm
