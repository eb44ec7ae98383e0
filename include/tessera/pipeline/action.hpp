// tessera/pipeline/action.hpp: the pipeline action IR, printed and parsed as PyTorch does.
//
// An action is (kind, stage, microbatch): `0F1` is the forward of stage 0 on microbatch 1,
// `4SEND_B2` the send of stage 4's input gradient for microbatch 2, `1UNSHARD` (no
// microbatch) the FSDP all-gather of stage 1's parameters. Everything here is constexpr.
#pragma once

#include <cstdint>
#include <string_view>

namespace tessera::pipeline {

/// What an action does. F, B (full backward), I (backward for the input), W (backward
/// for the weights) compute; SEND_*/RECV_* move activations (F) or gradients (B) between
/// ranks; UNSHARD/RESHARD/REDUCE_GRAD are FSDP's parameter and gradient collectives;
// WAIT_* (PyTorch's runtime spelling) wait for an earlier asynchronous send or reduce.
enum class op : std::uint8_t {
  F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD, REDUCE_GRAD,
  WAIT_SEND_F, WAIT_SEND_B, WAIT_REDUCE_GRAD  ///< completion of an earlier async op
};

inline constexpr int op_count = 14;

/// PyTorch's spelling of each kind, as in `_ComputationType`.
constexpr std::string_view op_name(op k) noexcept {
  constexpr std::string_view names[op_count] = {"F",      "B",      "I",      "W",
                                                "SEND_F", "RECV_F", "SEND_B", "RECV_B",
                                                "UNSHARD", "RESHARD", "REDUCE_GRAD",
                                                "WAIT_SEND_F", "WAIT_SEND_B", "WAIT_REDUCE_GRAD"};
  return names[static_cast<int>(k)];
}

constexpr bool is_compute(op k) noexcept { return k == op::F || k == op::B || k == op::I || k == op::W; }
constexpr bool is_comm(op k) noexcept {
  return k == op::SEND_F || k == op::RECV_F || k == op::SEND_B || k == op::RECV_B;
}
constexpr bool is_fsdp(op k) noexcept {
  return k == op::UNSHARD || k == op::RESHARD || k == op::REDUCE_GRAD || k == op::WAIT_REDUCE_GRAD;
}
/// True for kinds printed with a microbatch index.
constexpr bool has_microbatch(op k) noexcept { return !is_fsdp(k); }

/// One action of one rank. `mb` is -1 for the FSDP kinds, which act on a whole stage.
struct action {
  op kind = op::F;
  int stage = 0;
  int mb = 0;
  friend constexpr bool operator==(const action&, const action&) = default;
};

/// A short fixed buffer holding an action's text (`12SEND_B345`); usable in constexpr.
struct action_text {
  char text[32]{};
  int size = 0;
  constexpr std::string_view view() const noexcept { return {text, static_cast<std::size_t>(size)}; }
};

namespace detail {
constexpr void append_int(char* out, int& n, int value) noexcept {
  if (value < 0) {
    out[n++] = '-';
    value = -value;
  }
  char digits[12]{};
  int d = 0;
  do {
    digits[d++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  while (d > 0) out[n++] = digits[--d];
}
}  // namespace detail

/// `{stage}{KIND}{microbatch}` as PyTorch's `_Action.__repr__` prints it.
constexpr action_text format(const action& a) noexcept {
  action_text t;
  detail::append_int(t.text, t.size, a.stage);
  for (char c : op_name(a.kind)) t.text[t.size++] = c;
  if (has_microbatch(a.kind)) detail::append_int(t.text, t.size, a.mb);
  return t;
}

/// Result of parsing one cell of a schedule table. PyTorch's DualPipeV cells hold an
/// overlapped pair `(0F3;7B1)OVERLAP_F_B`; it parses as its sub-actions in order.
struct parsed_cell {
  bool ok = false;     ///< false: the text is not an action
  int count = 0;       ///< 0 for an empty cell (an idle step), 1, or more for OVERLAP_F_B
  action actions[4]{};
};

namespace detail {
constexpr bool parse_single(std::string_view s, action& out) noexcept {
  std::size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (i >= s.size() || s[i] < '0' || s[i] > '9') return false;
  int stage = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    stage = stage * 10 + (s[i] - '0');
    if (stage > 1'000'000) return false;
    ++i;
  }
  // Longest kind name that matches (SEND_F before S..., REDUCE_GRAD before R...).
  int best = -1;
  std::size_t best_len = 0;
  for (int k = 0; k < op_count; ++k) {
    std::string_view name = op_name(static_cast<op>(k));
    if (s.substr(i, name.size()) == name && name.size() > best_len) {
      best = k;
      best_len = name.size();
    }
  }
  if (best < 0) return false;
  i += best_len;
  const op kind = static_cast<op>(best);
  int mb = -1;
  if (has_microbatch(kind)) {
    if (i >= s.size()) return false;
    mb = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      mb = mb * 10 + (s[i] - '0');
      if (mb > 1'000'000) return false;
      ++i;
    }
  }
  if (i != s.size()) return false;
  out = action{kind, stage, mb};
  return true;
}
}  // namespace detail

/// Parses one table cell: `2F0`, `1UNSHARD`, `3SEND_F1`, `(0F3;7B1)OVERLAP_F_B`, or an
/// empty cell (an idle step, count 0).
constexpr parsed_cell parse_cell(std::string_view s) noexcept {
  parsed_cell r;
  while (!s.empty() && (s.front() == ' ' || s.front() == '"')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '"' || s.back() == '\r')) s.remove_suffix(1);
  if (s.empty()) {
    r.ok = true;
    return r;
  }
  if (s.front() == '(') {
    const std::size_t close = s.find(')');
    if (close == std::string_view::npos || s.substr(close + 1) != "OVERLAP_F_B") return r;
    std::string_view inner = s.substr(1, close - 1);
    while (!inner.empty()) {
      const std::size_t semi = inner.find(';');
      const std::string_view part = inner.substr(0, semi);
      if (r.count == 4 || !detail::parse_single(part, r.actions[r.count])) return r;
      ++r.count;
      if (semi == std::string_view::npos) break;
      inner.remove_prefix(semi + 1);
    }
    r.ok = r.count > 0;
    return r;
  }
  if (!detail::parse_single(s, r.actions[0])) return r;
  r.count = 1;
  r.ok = true;
  return r;
}

}  // namespace tessera::pipeline
