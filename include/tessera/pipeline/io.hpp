// tessera/pipeline/io.hpp: schedules as text, at run time.
//
//   to_csv(s)          PyTorch's CSV: one row per rank, one action per cell (`0F1,0B0`)
//   read_csv(text)     the reverse (a blank line is an idle rank); also reads PyTorch's own dumps (idle steps as empty
//                      cells, `(0F3;7B1)OVERLAP_F_B` pairs, WAIT_* actions)
//   format_grid(s)     the step-by-rank grid in the layout of PyTorch's
//                      `_format_pipeline_order`, so the two can be compared by eye
//   write_file_atomic  writes to a temporary name in the same folder, then renames
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <tessera/core/atomic_file.hpp>
#include <tessera/pipeline/detail/check.hpp>
#include <tessera/pipeline/schedule.hpp>
#include <vector>

namespace tessera::pipeline {

/// One CSV row per rank, cells in PyTorch's spelling, rows ended by '\n'.
inline std::string to_csv(const schedule& s) {
  std::string out;
  for (const auto& rank : s.actions) {
    for (std::size_t i = 0; i < rank.size(); ++i) {
      if (i) out += ',';
      out += format(rank[i]).view();
    }
    out += '\n';
  }
  return out;
}

/// The most (stage, microbatch) pairs read_csv accepts from one table.
inline constexpr std::int64_t max_csv_pairs = 4'000'000;

/// Parses PyTorch's CSV format (one row per rank). Throws schedule_error naming the line
/// and cell of the first thing that is not an action.
inline schedule read_csv(std::string_view text) {
  std::vector<std::string_view> rows;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    rows.push_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  // Every line is a rank, blank ones too (an idle rank, as to_csv writes it and PyTorch's
  // _load_csv reads it); the text after the last '\n' is a rank only when not empty.
  const table_result r = from_table(rows);
  if (!r.ok) {
    const std::string_view row = rows[static_cast<std::size_t>(r.rank)];
    throw schedule_error("schedule CSV, line " + std::to_string(r.rank + 1) + " (rank " + std::to_string(r.rank) +
                         "), cell " + std::to_string(r.cell + 1) + ": not an action in PyTorch's spelling "
                         "({stage}{F|B|I|W|SEND_F|RECV_F|SEND_B|RECV_B|UNSHARD|RESHARD|REDUCE_GRAD}{microbatch}, "
                         "e.g. 2F0); the line reads: " + std::string(row.substr(0, 120)));
  }
  if (r.value.size() == 0)
    throw schedule_error("schedule CSV has no actions: expected one row of actions per rank, e.g. 0F0,0B0");
  // What verify and simulate allocate grows with stages x microbatches; a table can name
  // stage 99 and microbatch 999999 in a few bytes. A complete schedule holds an F action for
  // every (stage, microbatch) pair, so allow at most 64 pairs per action (room for tables
  // that miss some, which verify then names) and 4,000,000 in all (tessera-schedule's bound).
  const std::int64_t pairs = std::int64_t{r.value.stages} * std::max(r.value.microbatches, 1);
  const std::int64_t limit = std::min<std::int64_t>(max_csv_pairs, 64 * static_cast<std::int64_t>(r.value.size()) + 4096);
  if (pairs > limit)
    throw schedule_error("schedule CSV names " + std::to_string(r.value.stages) + " stages and " +
                         std::to_string(r.value.microbatches) + " microbatches (" + std::to_string(pairs) +
                         " pairs) but holds only " + std::to_string(r.value.size()) +
                         " actions; a schedule has an F action for every stage and microbatch, so at most " +
                         std::to_string(limit) + " pairs are accepted from this table; check the numbers in its cells");
  return r.value;
}

/// The grid of PyTorch's `_format_pipeline_order`: a header of rank labels, then one
/// line per step, `Step 03: 0F3  1F2 ...`, each rank's column as wide as its widest
/// action or the step label.
inline std::string format_grid(const schedule& s) {
  std::size_t steps = 0;
  for (const auto& r : s.actions) steps = std::max(steps, r.size());
  if (steps == 0) steps = 1;
  const std::size_t digits = std::to_string(steps - 1).size();
  auto step_label = [&](std::size_t i) {
    std::string n = std::to_string(i);
    return "Step " + std::string(digits - n.size(), '0') + n;
  };
  const std::size_t label_width = step_label(0).size();
  std::vector<std::size_t> width(s.actions.size(), label_width);
  for (std::size_t r = 0; r < s.actions.size(); ++r)
    for (const action& a : s.actions[r]) width[r] = std::max(width[r], static_cast<std::size_t>(format(a).size));
  auto pad = [](std::string t, std::size_t w) {
    if (t.size() < w) t.append(w - t.size(), ' ');
    return t;
  };
  std::string out(label_width + 2, ' ');
  for (std::size_t r = 0; r < s.actions.size(); ++r) {
    if (r) out += ' ';
    out += pad("Rank " + std::to_string(r), width[r]);
  }
  for (std::size_t i = 0; i < steps; ++i) {
    out += '\n';
    out += step_label(i) + ": ";
    for (std::size_t r = 0; r < s.actions.size(); ++r) {
      if (r) out += ' ';
      const auto& list = s.actions[r];
      out += pad(i < list.size() ? std::string(format(list[i]).view()) : std::string(), width[r]);
    }
  }
  out += '\n';
  return out;
}

/// Writes `content` to `path` through a temporary file in the same folder and a rename,
/// so a reader never sees a half-written file. Throws schedule_error with the path and
/// the reason on failure.
inline void write_file_atomic(const std::string& path, std::string_view content) {
  try {
    write_text_atomically(path, content, "writing " + path);  // (a tool adds its own name)
  } catch (const schedule_error&) {
    throw;
  } catch (const error& e) {
    throw schedule_error(e.what());
  }
}

/// Reads a whole file; throws schedule_error naming the path when it cannot.
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw schedule_error("cannot open " + path + " (does it exist and is it readable?)");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace tessera::pipeline
