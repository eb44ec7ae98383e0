// tessera/pipeline/schedule.hpp: a pipeline schedule as a plain constexpr value.
//
// A schedule is, for each rank, the ordered list of actions that rank runs, plus the
// stage-to-rank mapping. It uses std::vector, so it lives inside one constant evaluation
// (`static_assert(verify(interleaved_1f1b(4, 2, 8)).ok)`); what must outlive it is copied
// into fixed-size arrays (see checked.hpp).
#pragma once

#include <span>
#include <string_view>
#include <tessera/pipeline/action.hpp>
#include <vector>

namespace tessera::pipeline {

/// How stages map to ranks. loop: stage s on rank s mod p (GPipe, 1F1B, interleaved).
/// v_shape: 2p stages, 0..p-1 then p-1..0 (ZB-V, DualPipeV). custom: anything else
/// (a user table), as long as every stage runs on exactly one rank.
enum class placement : unsigned char { loop, v_shape, custom };

struct schedule {
  int ranks = 0;         ///< pipeline ranks p
  int stages = 0;        ///< stages in all, p * stages per rank
  int microbatches = 0;  ///< m
  placement place = placement::loop;
  std::vector<int> stage_rank;               ///< stage -> rank, size `stages`
  std::vector<std::vector<action>> actions;  ///< per rank, in program order

  constexpr int rank_of(int stage) const { return stage_rank[static_cast<std::size_t>(stage)]; }
  constexpr int stages_per_rank() const { return ranks > 0 ? stages / ranks : 0; }
  /// Actions of all ranks together.
  constexpr std::size_t size() const {
    std::size_t n = 0;
    for (const auto& r : actions) n += r.size();
    return n;
  }
};

/// stage -> rank for a loop placement of `stages` stages over `ranks` ranks.
constexpr std::vector<int> loop_stage_rank(int ranks, int stages) {
  std::vector<int> m(static_cast<std::size_t>(stages), 0);
  for (int s = 0; s < stages; ++s) m[static_cast<std::size_t>(s)] = s % ranks;
  return m;
}

/// stage -> rank for the V shape: 2p stages, rank r holds stages r and 2p-1-r.
constexpr std::vector<int> v_stage_rank(int ranks) {
  std::vector<int> m(static_cast<std::size_t>(2 * ranks), 0);
  for (int s = 0; s < 2 * ranks; ++s) m[static_cast<std::size_t>(s)] = s < ranks ? s : 2 * ranks - 1 - s;
  return m;
}

/// An empty schedule with the given shape (no actions yet).
constexpr schedule make_empty(int ranks, int stages, int microbatches, placement place) {
  schedule s;
  s.ranks = ranks;
  s.stages = stages;
  s.microbatches = microbatches;
  s.place = place;
  s.stage_rank.assign(static_cast<std::size_t>(stages), 0);
  for (int st = 0; st < stages; ++st)
    s.stage_rank[static_cast<std::size_t>(st)] =
        place == placement::v_shape ? (st < ranks ? st : 2 * ranks - 1 - st) : st % ranks;
  s.actions.assign(static_cast<std::size_t>(ranks), std::vector<action>{});
  return s;
}

/// The result of reading a table: a schedule, or the first cell that is not an action.
struct table_result {
  bool ok = false;
  int rank = -1;   ///< where the bad cell is
  int cell = -1;
  schedule value;
};

/// A user-defined schedule from a table: one string per rank, cells separated by commas
/// or spaces (`"0F0,0F1,0B0,0B1"`), in PyTorch's action spelling; empty cells are idle
/// steps and are dropped. Stages, microbatches and the stage-to-rank mapping are inferred:
/// a stage belongs to the first rank that names it (the verifier reports a stage named
/// on two ranks). The placement is `loop` or `v_shape` when the mapping is one of those.
constexpr table_result from_table(std::span<const std::string_view> rows) {
  table_result r;
  schedule& s = r.value;
  s.ranks = static_cast<int>(rows.size());
  s.actions.assign(rows.size(), std::vector<action>{});
  int max_stage = -1, max_mb = -1;
  for (std::size_t rank = 0; rank < rows.size(); ++rank) {
    std::string_view row = rows[rank];
    int cell = 0;
    while (!row.empty()) {
      std::size_t cut = row.find_first_of(", \t");
      // An OVERLAP_F_B cell holds no separators; a cell ends at the first separator.
      std::string_view text = row.substr(0, cut);
      const parsed_cell pc = parse_cell(text);
      if (!pc.ok) {
        r.rank = static_cast<int>(rank);
        r.cell = cell;
        return r;
      }
      for (int i = 0; i < pc.count; ++i) {
        s.actions[rank].push_back(pc.actions[i]);
        if (pc.actions[i].stage > max_stage) max_stage = pc.actions[i].stage;
        if (pc.actions[i].mb > max_mb) max_mb = pc.actions[i].mb;
      }
      if (cut == std::string_view::npos) break;
      row.remove_prefix(cut + 1);
      if (!text.empty() || row.empty() || row.front() == ',') ++cell;
    }
  }
  s.stages = max_stage + 1;
  s.microbatches = max_mb + 1;
  s.stage_rank.assign(static_cast<std::size_t>(s.stages), -1);
  for (std::size_t rank = 0; rank < s.actions.size(); ++rank)
    for (const action& a : s.actions[rank])
      if (s.stage_rank[static_cast<std::size_t>(a.stage)] < 0)
        s.stage_rank[static_cast<std::size_t>(a.stage)] = static_cast<int>(rank);
  s.place = placement::custom;
  if (s.ranks > 0 && s.stages % s.ranks == 0 && s.stage_rank == loop_stage_rank(s.ranks, s.stages))
    s.place = placement::loop;
  else if (s.ranks > 0 && s.stages == 2 * s.ranks && s.stage_rank == v_stage_rank(s.ranks))
    s.place = placement::v_shape;
  r.ok = true;
  return r;
}

}  // namespace tessera::pipeline
